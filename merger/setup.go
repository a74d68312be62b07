package merger

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// Options configure the merger.
type Options struct {
	// ManageReferenceGrants keeps the ReferenceGrants folded listeners need
	// to read certificate Secrets in their fragments' namespaces.
	ManageReferenceGrants bool
	// Workers is how many Gateways are folded at once.
	Workers int
	// StatusWorkers is how many fragment statuses are written at once.
	StatusWorkers int
	// Debounce is the quiet period a Gateway's events must leave before it
	// is folded, and DebounceMax the longest a burst of events delays it,
	// and a status write waits behind folds.
	Debounce, DebounceMax time.Duration
	// Resync is how often every Gateway is folded again without an event.
	Resync time.Duration
	// PoolGrace is how long a sibling of a pool stays with no folded
	// listener before it is deleted.
	PoolGrace time.Duration
	// Fence, when set, fails while this replica may no longer lead: the
	// merger then writes nothing.
	Fence func() error
	// ListenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets the merger folds; when empty, it neither watches nor
	// reads ListenerSets, and their CRD need not be installed.
	// manager.IndexListenerSetParents must have been registered otherwise.
	ListenerSetControllers sets.Set[string]
	// Claims, when set, returns by tuple the holders of admission's claims on a
	// Gateway, read from the API server (claims.Store.HoldersNow).
	Claims func(ctx context.Context, gateway types.NamespacedName) (map[rules.Tuple]types.NamespacedName, error)
}

// certificateNamespaceIndex indexes fragments by the namespaces their
// certificateRefs point into, other than their own: a ReferenceGrant there
// decides whether they fold.
const certificateNamespaceIndex = "gatefold.dev/certificate-namespaces"

func certificateNamespaces(o client.Object) []string {
	var listeners []gwv1.ListenerEntry
	switch o := o.(type) {
	case *v1alpha1.ListenerFragment:
		listeners = o.Spec.Listeners
	case *gwv1.ListenerSet:
		listeners = o.Spec.Listeners
	}
	ns := sets.New[string]()
	for i, l := range listeners {
		for _, ref := range rules.ForeignCertificateRefs(o.GetNamespace(), i, l) {
			ns.Insert(ref.Namespace)
		}
	}
	return sets.List(ns)
}

// Setup registers the merger with the manager. It runs on the elected
// leader only, like every controller; manager.IndexFragments and
// manager.IndexPoolHeads must have been registered.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:                 mgr.GetClient(),
		APIReader:              mgr.GetAPIReader(),
		Recorder:               mgr.GetEventRecorder("gatefold-merger"),
		ManageReferenceGrants:  opts.ManageReferenceGrants,
		Resync:                 opts.Resync,
		PoolGrace:              opts.PoolGrace,
		Fence:                  opts.Fence,
		ListenerSetControllers: opts.ListenerSetControllers,
		Claims:                 opts.Claims,
		debounce:               newDebouncer(opts.Debounce, opts.DebounceMax),
		folding:                gate{limit: statusWaitLimit},
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ListenerFragment{}, certificateNamespaceIndex, certificateNamespaces); err != nil {
		return fmt.Errorf("indexing fragments by certificate namespace: %w", err)
	}
	listenerSets := opts.ListenerSetControllers.Len() > 0
	if listenerSets {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &gwv1.ListenerSet{}, certificateNamespaceIndex, certificateNamespaces); err != nil {
			return fmt.Errorf("indexing ListenerSets by certificate namespace: %w", err)
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("merger").
		Watches(&gwv1.Gateway{}, debounced(r.debounce, handler.EnqueueRequestsFromMapFunc(siblingsToHead))).
		// Only spec changes matter: the merger's own status writes must not
		// fold the Gateway again.
		Watches(&v1alpha1.ListenerFragment{}, debounced(r.debounce, handler.EnqueueRequestsFromMapFunc(parentOfFragment)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Labels are all the merger reads of a namespace.
		WatchesMetadata(&corev1.Namespace{}, debounced(r.debounce, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfNamespace)),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&gwv1.ReferenceGrant{}, debounced(r.debounce, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfGrant))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers})
	if listenerSets {
		b = b.Watches(&gwv1.ListenerSet{}, debounced(r.debounce, handler.EnqueueRequestsFromMapFunc(parentOfListenerSet)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			// A class opted in or out, or one that starts or stops listing
			// the ListenerSet feature, changes what its Gateways fold.
			Watches(&gwv1.GatewayClass{}, debounced(r.debounce, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfClass)))
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	if err := statusWriters(mgr, r, rules.KindListenerFragment, &v1alpha1.ListenerFragment{}, opts.StatusWorkers); err != nil || !listenerSets {
		return err
	}
	return statusWriters(mgr, r, rules.KindListenerSet, &gwv1.ListenerSet{}, opts.StatusWorkers)
}

// statusWriters registers the status writers of one kind of source. Every
// change of a source, its status included, brings its pending report back:
// a status someone else wrote meanwhile is stamped afresh.
func statusWriters(mgr ctrl.Manager, r *Reconciler, kind string, obj client.Object, workers int) error {
	name := "merger-status"
	if kind == rules.KindListenerSet {
		name = "merger-listenerset-status"
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(obj).
		WatchesRawSource(source.Func(func(_ context.Context, q queue) error {
			r.reportsOf(kind).queue.Store(&q)
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(statusWriter{r: r, kind: kind})
}

func parentOfFragment(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: rules.ParentOf(o.(*v1alpha1.ListenerFragment))}}
}

func parentOfListenerSet(_ context.Context, o client.Object) []reconcile.Request {
	if gw, ok := rules.ListenerSetParent(o.(*gwv1.ListenerSet)); ok {
		return []reconcile.Request{{NamespacedName: gw}}
	}
	return nil
}

// gatewaysOfClass maps a GatewayClass to its Gateways.
func (r *Reconciler) gatewaysOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	gateways, err := manager.GatewaysOfClass(ctx, r.Client, o.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Mapping a GatewayClass to its Gateways", "gatewayClass", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, len(gateways))
	for i, gw := range gateways {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(gw)}
	}
	return out
}

// gatewaysOfNamespace maps a namespace whose labels changed to the Gateways
// its fragments attach to: a selector in allowedListeners may now match. Like
// the fold, the event handlers read only fragments' specs, and never wait
// for status writes to reach the cache. They only read what they list, so
// they list it shared with the cache, not copied: a copy of a pool's
// fragments at every event is as large as the cache's.
func (r *Reconciler) gatewaysOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.ListenerFragmentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetName()), client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing fragments of a relabelled namespace", "namespace", o.GetName())
		return nil
	}
	if r.ListenerSetControllers.Len() > 0 {
		sets := &gwv1.ListenerSetList{}
		if err := r.Client.List(ctx, sets, client.InNamespace(o.GetName()), client.DisableReadYourWritesConsistency); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing ListenerSets of a relabelled namespace", "namespace", o.GetName())
			return nil
		}
		return parentsOf(append(rules.FromFragments(list.Items), rules.FromListenerSets(sets.Items)...))
	}
	return parentsOf(rules.FromFragments(list.Items))
}

// gatewaysOfGrant maps a ReferenceGrant to the Gateways it matters to: those
// of fragments whose certificates it may grant (a revoked grant withdraws
// their listeners), and, for a grant the merger keeps, its fragment's, so that
// a grant someone changed or deleted is restored.
func (r *Reconciler) gatewaysOfGrant(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.ListenerFragmentList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{certificateNamespaceIndex: o.GetNamespace()}, client.DisableReadYourWritesConsistency, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing fragments with certificates in a namespace", "namespace", o.GetNamespace())
		return nil
	}
	sets, err := r.listenerSetsWithCertificatesIn(ctx, o.GetNamespace())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ListenerSets with certificates in a namespace", "namespace", o.GetNamespace())
		return nil
	}
	sources := append(rules.FromFragments(list.Items), sets...)
	if owner := r.ownerOfGrant(ctx, o); owner != nil {
		sources = append(sources, *owner)
	}
	return parentsOf(sources)
}

// parentsOf returns each distinct parent Gateway of the sources once.
func parentsOf(sources []rules.Source) []reconcile.Request {
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range sources {
		req := reconcile.Request{NamespacedName: sources[i].Parent()}
		if !seen[req] {
			seen[req] = true
			out = append(out, req)
		}
	}
	return out
}
