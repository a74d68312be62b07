package routing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// Kind is a route kind, of group gateway.networking.k8s.io, and the
// versions of it a routing controller may serve, the preferred first.
type Kind struct {
	Name string
	// Versions are tried in order; Setup serves the first the API server
	// serves.
	Versions []string
}

// Kinds are the route kinds whose parentRefs may name a ListenerFragment or
// a ListenerSet; Setup serves those the API server serves. Another kind needs
// only an entry here, and RBAC. TLSRoutes, TCPRoutes and UDPRoutes are read at
// v1alpha2 where it is served (experimental channel): implementations such as
// Traefik v3.6 read them there, and its schema accepts what v1's refuses
// (more than one rule; a TLSRoute without hostnames). The standard channel
// serves v1 alone.
var Kinds = []Kind{
	{Name: rules.KindHTTPRoute, Versions: []string{gwv1.GroupVersion.Version}},
	{Name: rules.KindGRPCRoute, Versions: []string{gwv1.GroupVersion.Version}},
	{Name: rules.KindTLSRoute, Versions: []string{gwv1alpha2.GroupVersion.Version, gwv1.GroupVersion.Version}},
	{Name: rules.KindTCPRoute, Versions: []string{gwv1alpha2.GroupVersion.Version, gwv1.GroupVersion.Version}},
	{Name: rules.KindUDPRoute, Versions: []string{gwv1alpha2.GroupVersion.Version, gwv1.GroupVersion.Version}},
}

// Options configure the routing controllers.
type Options struct {
	// Workers is how many routes of each kind are reconciled at once.
	Workers int
	// Resync is how often every route is reconciled again without an
	// event, which repairs what someone else changed, and bounds the
	// backoff of a status entry another writer keeps replacing. 0 turns it
	// off.
	Resync time.Duration
	// Fence, when set, fails while this replica may no longer lead: the
	// controllers then write nothing.
	Fence func() error
	// ListenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets gatefold folds; when empty, ListenerSets are neither
	// watched nor read. manager.IndexListenerSetParents must have been
	// registered otherwise.
	ListenerSetControllers sets.Set[string]
}

// parentSourceIndex indexes routes by the sources their parentRefs name,
// sourceKey of each.
const parentSourceIndex = "gatefold.dev/route-parent-source"

func sourceKey(ref rules.SourceRef) string {
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// derivedOwnerIndex indexes derived routes by the name of the user route,
// of their kind and namespace, that controls them.
const derivedOwnerIndex = "gatefold.dev/derived-owner"

// derivedOwner is the derivedOwnerIndex of a route.
func derivedOwner(o client.Object) []string {
	if owner := derivedFrom(o); owner != "" {
		return []string{owner}
	}
	return nil
}

// anySource is the parentSourceIndex key of every route that names a
// source.
const anySource = "*"

// manySources is how many sources a parent has before its routes are looked
// up from the routes' side, and routeCost how many sources' index lookups a
// route's decoding and reads cost.
const manySources, routeCost = 256, 10

// parentSources is the parentSourceIndex of a route: sourceKey of each
// source it names, and anySource.
func parentSources(o client.Object) []string {
	keys := sets.New[string]()
	for _, src := range namedSources(o.(*unstructured.Unstructured)) {
		keys.Insert(sourceKey(src), anySource)
	}
	return sets.List(keys)
}

// namedSources returns the sources route's parentRefs name, in their order;
// none when its spec cannot be read.
func namedSources(route *unstructured.Unstructured) []rules.SourceRef {
	spec, err := specOf(route)
	if err != nil {
		return nil
	}
	var out []rules.SourceRef
	for _, ref := range spec.ParentRefs {
		if src, ok := rules.RouteParent(route.GetNamespace(), ref); ok {
			out = append(out, src)
		}
	}
	return out
}

// Setup registers a routing controller per kind of Kinds the API server
// serves. It runs on the elected leader only; manager.IndexFragments
// and manager.IndexPoolHeads must have been registered.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	for _, k := range Kinds {
		gk := schema.GroupKind{Group: gwv1.GroupName, Kind: k.Name}
		mapping, err := mgr.GetRESTMapper().RESTMapping(gk, k.Versions...)
		switch {
		case meta.IsNoMatchError(err):
			ctrl.Log.WithName("routing").Info("Not serving routes of a kind the API server does not serve", "kind", k.Name, "versions", k.Versions)
			continue
		case err != nil:
			return fmt.Errorf("looking up %s: %w", k.Name, err)
		}
		ctrl.Log.WithName("routing").Info("Serving routes", "kind", k.Name, "version", mapping.GroupVersionKind.Version)
		if err := setupKind(ctx, mgr, mapping.GroupVersionKind, opts); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", k.Name, err)
		}
	}
	return nil
}

func setupKind(ctx context.Context, mgr ctrl.Manager, gvk schema.GroupVersionKind, opts Options) error {
	r := &Reconciler{
		Client:                 mgr.GetClient(),
		Recorder:               mgr.GetEventRecorder("gatefold-routing"),
		GVK:                    gvk,
		Resync:                 opts.Resync,
		Fence:                  opts.Fence,
		ListenerSetControllers: opts.ListenerSetControllers,
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.newRoute(), parentSourceIndex, parentSources); err != nil {
		return fmt.Errorf("indexing %ss by parent source: %w", gvk.Kind, err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.newRoute(), derivedOwnerIndex, derivedOwner); err != nil {
		return fmt.Errorf("indexing derived %ss by the route that controls them: %w", gvk.Kind, err)
	}
	// Only spec changes of sources and Gateways move listeners, and the
	// fold judging a source ends its routes' wait; a route's status changes
	// matter, since another writer may replace an entry.
	sourceChanged := builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, foldJudged))
	b := ctrl.NewControllerManagedBy(mgr).
		Named("routing-"+strings.ToLower(gvk.Kind)).
		Watches(r.newRoute(), handler.EnqueueRequestsFromMapFunc(userRouteOf), builder.WithPredicates(routeChanged)).
		Watches(&v1alpha1.ListenerFragment{}, handler.EnqueueRequestsFromMapFunc(r.routesOfSource), sourceChanged).
		Watches(&gwv1.Gateway{}, r.gatewayHandler()).
		// A class created, deleted or opted in or out changes which sources
		// are gatefold's, and the controllerName of their entries.
		Watches(&gwv1.GatewayClass{}, handler.EnqueueRequestsFromMapFunc(r.routesOfClass)).
		// Labels are all a route's judgement reads of its namespace
		// (allowedRoutes selectors).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.routesOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Workers, 1)})
	if opts.ListenerSetControllers.Len() > 0 {
		b = b.Watches(&gwv1.ListenerSet{}, handler.EnqueueRequestsFromMapFunc(r.routesOfSource), sourceChanged)
	}
	return b.Complete(r)
}

// routeChanged passes a route's creation and deletion, and an update of a
// route that matters to gatefold: a derived route, or a route that names a
// source or carries an entry of gatefold's, before or after. Other routes'
// updates, an implementation's status writes included, queue nothing.
var routeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool { return concerns(e.ObjectOld) || concerns(e.ObjectNew) },
}

// foldJudged passes a source's update that starts or ends its routes' wait
// for the fold (rules.Folding): a change of its status alone, when the fold
// refuses a new generation, which moves no listener.
var foldJudged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, src := sourceOf(e.ObjectOld), sourceOf(e.ObjectNew)
		return rules.Folding(&old) != rules.Folding(&src)
	},
}

// sourceOf returns a ListenerFragment or a ListenerSet as a source.
func sourceOf(o client.Object) rules.Source {
	if ls, ok := o.(*gwv1.ListenerSet); ok {
		return rules.FromListenerSet(ls)
	}
	return rules.FromFragment(o.(*v1alpha1.ListenerFragment))
}

// concerns says whether gatefold serves route o or made it.
func concerns(o client.Object) bool {
	u, ok := o.(*unstructured.Unstructured)
	return ok && (derivedFrom(u) != "" || len(parentSources(u)) > 0 || hasOwnEntry(u))
}

// userRouteOf maps a user route to itself, and a derived route to the user
// route that controls it.
func userRouteOf(_ context.Context, o client.Object) []reconcile.Request {
	if owner := derivedFrom(o); owner != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner}}}
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// derivedFrom is the name of the user route o was derived from: the route
// of o's kind that controls o, when o's name is a derived route's; else "".
// Labels do not make a derived route: a user's copy keeps them.
func derivedFrom(o client.Object) string {
	if !strings.HasPrefix(o.GetName(), derivedPrefix) {
		return ""
	}
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.Kind == kind {
		return ref.Name
	}
	return ""
}

// routesOfSource maps a ListenerFragment or a ListenerSet to the routes of
// this kind that name it.
func (r *Reconciler) routesOfSource(ctx context.Context, o client.Object) []reconcile.Request {
	src := sourceOf(o)
	return r.routesNaming(ctx, src.Ref())
}

// gatewayHandler queues the routes a Gateway's change may move: for a
// Gateway created or deleted, or whose class, pool or deletion changed,
// those routesOfGateway gives (of a pool's sibling, the sources with a
// listener on it); for another update, those naming the sources whose
// generated listener names came or went on it.
func (r *Reconciler) gatewayHandler() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.routesOfGateway(ctx, e.Object))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.routesOfGateway(ctx, e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, gw := e.ObjectOld.(*gwv1.Gateway), e.ObjectNew.(*gwv1.Gateway)
			oldHead, _ := rules.HeadOf(old)
			head, _ := rules.HeadOf(gw)
			if old.Spec.GatewayClassName != gw.Spec.GatewayClassName || oldHead != head || old.DeletionTimestamp.IsZero() != gw.DeletionTimestamp.IsZero() {
				enqueue(q, r.routesOfGateway(ctx, gw))
				return
			}
			if moved := listenerNames(old).SymmetricDifference(listenerNames(gw)); moved.Len() > 0 {
				enqueue(q, r.routesOfListeners(ctx, gw, moved))
			}
		},
	}
}

func listenerNames(gw *gwv1.Gateway) sets.Set[gwv1.SectionName] {
	out := sets.New[gwv1.SectionName]()
	for _, l := range gw.Spec.Listeners {
		out.Insert(l.Name)
	}
	return out
}

// routesOfGateway maps a Gateway that came or went to the routes naming
// the sources whose listeners may have moved: of a parent, all its sources;
// of a Gateway gatefold created beside one (a pool's sibling), those with a
// listener on it, which a pool of thousands asks for at each of its
// Gateways.
func (r *Reconciler) routesOfGateway(ctx context.Context, o client.Object) []reconcile.Request {
	gw := o.(*gwv1.Gateway)
	if _, beside := rules.HeadOf(gw); beside {
		return r.routesOfListeners(ctx, o, listenerNames(gw))
	}
	return r.routesOfListeners(ctx, o, nil)
}

// routesOfListeners is routesOfGateway for the sources with a listener
// whose generated name is in moved, all when moved is nil. Like every
// mapper here, it only reads what it lists, so it lists it shared with the
// cache, not copied: a pool's fragments, copied at every event of each of
// its Gateways, would be a copy of the cache each time.
func (r *Reconciler) routesOfListeners(ctx context.Context, o client.Object, moved sets.Set[gwv1.SectionName]) []reconcile.Request {
	parent := client.ObjectKeyFromObject(o)
	if head, ok := rules.HeadOf(o.(*gwv1.Gateway)); ok {
		parent = head
	}
	fragments := &v1alpha1.ListenerFragmentList{}
	lists := []client.MatchingFields{{manager.ParentIndex: parent.String()}}
	if moved != nil {
		// The fragments with a listener of those names, not the pool's.
		lists = nil
		for name := range moved {
			lists = append(lists, client.MatchingFields{manager.AdmissionIndex: rules.NameKey(parent.String(), name)})
		}
	}
	found := sets.New[types.NamespacedName]()
	for _, fields := range lists {
		list := &v1alpha1.ListenerFragmentList{}
		if err := r.Client.List(ctx, list, fields, client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the fragments of a Gateway", "gateway", parent)
			return nil
		}
		for _, lf := range list.Items {
			// Found once per moved listener name it has.
			if key := client.ObjectKeyFromObject(&lf); !found.Has(key) {
				found.Insert(key)
				fragments.Items = append(fragments.Items, lf)
			}
		}
	}
	var sets []rules.Source
	if r.ListenerSetControllers.Len() > 0 {
		list := &gwv1.ListenerSetList{}
		if err := r.Client.List(ctx, list, client.MatchingFields{manager.ParentIndex: parent.String()}, client.DisableReadYourWritesConsistency); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the ListenerSets of a Gateway", "gateway", parent)
			return nil
		}
		sets = rules.FromListenerSets(list.Items)
	}
	if moved == nil && len(fragments.Items)+len(sets) > manySources {
		// A pool of thousands that few routes name: from the routes' side.
		routes := r.newRouteList()
		err := r.Client.List(ctx, routes, client.MatchingFields{parentSourceIndex: anySource}, client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy)
		if err == nil && routeCost*len(routes.Items) < len(fragments.Items)+len(sets) {
			if out, err := r.routesOfParent(ctx, routes, parent); err == nil {
				return out
			}
		}
	}
	var out []reconcile.Request
	add := func(src *rules.Source) {
		if moved == nil || slices.ContainsFunc(src.Listeners, func(l gwv1.ListenerEntry) bool {
			return moved.Has(rules.GatewayListenerName(src.Ref(), l.Name))
		}) {
			out = append(out, r.routesNaming(ctx, src.Ref())...)
		}
	}
	// One source at a time: a pool's fragments as sources at once would be
	// another copy of their metadata.
	for i := range fragments.Items {
		src := rules.FromFragment(&fragments.Items[i])
		add(&src)
	}
	for i := range sets {
		add(&sets[i])
	}
	return out
}

// routesOfNamespace maps a namespace whose labels changed to the routes of
// this kind in it that name a source.
func (r *Reconciler) routesOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := r.newRouteList()
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetName()), client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the routes of a relabelled namespace", "kind", r.GVK.Kind, "namespace", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if len(parentSources(&list.Items[i])) > 0 {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// routesOfClass maps a GatewayClass to the routes naming the sources of its
// Gateways.
func (r *Reconciler) routesOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	gateways, err := manager.GatewaysOfClass(ctx, r.Client, o.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Mapping a GatewayClass to its routes", "gatewayClass", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for _, gw := range gateways {
		out = append(out, r.routesOfGateway(ctx, gw)...)
	}
	return out
}

// routesNaming lists the routes of this kind whose parentRefs name src.
func (r *Reconciler) routesNaming(ctx context.Context, src rules.SourceRef) []reconcile.Request {
	list := r.newRouteList()
	if err := r.Client.List(ctx, list, client.MatchingFields{parentSourceIndex: sourceKey(src)}, client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the routes naming a source", "kind", r.GVK.Kind, "source", src.String())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// routesOfParent returns, of routes (those naming a source), the ones
// naming a source whose parent is Gateway parent; an error when a source
// could not be read.
func (r *Reconciler) routesOfParent(ctx context.Context, routes *unstructured.UnstructuredList, parent types.NamespacedName) ([]reconcile.Request, error) {
	var out []reconcile.Request
	for i := range routes.Items {
		route := &routes.Items[i]
		for _, src := range namedSources(route) {
			of, err := r.parentOf(ctx, src)
			if err != nil {
				return nil, err
			}
			if of == parent {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(route)})
				break
			}
		}
	}
	return out, nil
}

// parentOf returns the Gateway source ref names as parent, read from the
// cache without a copy; empty when it is gone or names no Gateway.
func (r *Reconciler) parentOf(ctx context.Context, ref rules.SourceRef) (types.NamespacedName, error) {
	opts := []client.GetOption{client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy}
	switch ref.Kind {
	case rules.KindListenerFragment:
		lf := &v1alpha1.ListenerFragment{}
		if err := r.Client.Get(ctx, ref.NamespacedName, lf, opts...); err != nil {
			return types.NamespacedName{}, client.IgnoreNotFound(err)
		}
		return rules.ParentOf(lf), nil
	case rules.KindListenerSet:
		ls := &gwv1.ListenerSet{}
		if r.ListenerSetControllers.Len() == 0 {
			return types.NamespacedName{}, nil
		}
		if err := r.Client.Get(ctx, ref.NamespacedName, ls, opts...); err != nil {
			return types.NamespacedName{}, client.IgnoreNotFound(err)
		}
		if parent, ok := rules.ListenerSetParent(ls); ok {
			return parent, nil
		}
	}
	return types.NamespacedName{}, nil
}
