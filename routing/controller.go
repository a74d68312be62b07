package routing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// Reconciler serves the user routes of one kind, the request's key, whose
// parentRefs name a ListenerFragment or a ListenerSet: it keeps their
// derived routes and writes their status entries for those parentRefs.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Recorder records events on user routes.
	Recorder events.EventRecorder
	// GVK is the kind of route served.
	GVK schema.GroupVersionKind
	// Resync is how often a route is reconciled again with no event.
	Resync time.Duration
	// Fence, when set, is asked before every write and fails while this
	// replica may no longer lead.
	Fence func() error
	// ListenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets gatefold folds.
	ListenerSetControllers sets.Set[string]

	written writtenMemo
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes;tlsroutes;tcproutes;udproutes,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes/status;grpcroutes/status;tlsroutes/status;tcproutes/status;udproutes/status,verbs=update
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;gatewayclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=gatefold.dev,resources=listenerfragments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	route := r.newRoute()
	switch err := r.Client.Get(ctx, req.NamespacedName, route); {
	case apierrors.IsNotFound(err):
		r.written.Forget(req.NamespacedName)
		if _, err := r.syncDerived(ctx, req.NamespacedName, nil, nil); err != nil {
			return r.result(err)
		}
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading %s %s: %w", r.GVK.Kind, req.NamespacedName, err)
	case derivedFrom(route) != "" || !route.GetDeletionTimestamp().IsZero():
		return ctrl.Result{}, nil // no user's route; a deleted route's derived routes go with it
	}
	if idle, err := r.idle(ctx, route); err != nil || idle {
		return ctrl.Result{}, err
	}
	verdicts, err := r.judge(ctx, route)
	if err != nil {
		return ctrl.Result{}, err
	}
	derived, err := r.syncDerived(ctx, req.NamespacedName, route, verdicts)
	if err != nil {
		return r.result(err)
	}
	wait, err := r.writeStatus(ctx, route, verdicts, derived)
	if err != nil {
		return r.result(err)
	}
	if len(derived.taken) > 0 {
		// No event comes when the holder of a name goes.
		wait = manager.Soonest(takenRetry, wait)
	}
	return ctrl.Result{RequeueAfter: manager.Soonest(r.Resync, wait)}, nil
}

// takenRetry is how often, at the most, a route whose derived route's name
// another object holds is looked at again, until the name is free.
const takenRetry = 30 * time.Second

// idle says whether gatefold has nothing to do for route, now or on a
// resync: it names no source, carries no entry of gatefold's and has no
// derived route. An event brings it back when one of those changes.
func (r *Reconciler) idle(ctx context.Context, route *unstructured.Unstructured) (bool, error) {
	if len(parentSources(route)) > 0 || hasOwnEntry(route) {
		return false, nil
	}
	derived, err := r.listDerived(ctx, client.ObjectKeyFromObject(route), route.GetUID())
	if err != nil || len(derived) > 0 {
		return false, err
	}
	r.written.Forget(client.ObjectKeyFromObject(route))
	return true, nil
}

// result turns a write's error into a result: a fenced write or a
// conflict is looked at again soon; other errors with the error backoff.
func (r *Reconciler) result(err error) (ctrl.Result, error) {
	switch {
	case errors.Is(err, manager.ErrFenced):
		return ctrl.Result{RequeueAfter: manager.FenceRetry}, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

func (r *Reconciler) fenced() error { return manager.Fenced(r.Fence) }

func (r *Reconciler) newRoute() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.GVK)
	return u
}

func (r *Reconciler) newRouteList() *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.GVK.GroupVersion().WithKind(r.GVK.Kind + "List"))
	return list
}

// routeSpec is what every route kind's spec has that gatefold reads.
type routeSpec struct {
	ParentRefs []gwv1.ParentReference `json:"parentRefs,omitempty"`
	Hostnames  []gwv1.Hostname        `json:"hostnames,omitempty"`
}

func specOf(u *unstructured.Unstructured) (routeSpec, error) {
	var spec routeSpec
	err := decode(u, "spec", &spec)
	return spec, err
}

// decode converts u's field into out.
func decode(u *unstructured.Unstructured, field string, out any) error {
	m, _, err := unstructured.NestedMap(u.Object, field)
	if err == nil {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, out)
	}
	if err != nil {
		return fmt.Errorf("reading the %s of %s %s: %w", field, u.GetKind(), client.ObjectKeyFromObject(u), err)
	}
	return nil
}

// verdict is gatefold's judgement of one parentRef that names a source
// gatefold folds.
type verdict struct {
	ref gwv1.ParentReference
	// controller is the controllerName of the class of the source's
	// Gateway: the status entry carries it.
	controller gwv1.GatewayController
	att        rules.Attachment
}

// judge returns a verdict for each of the route's parentRefs that names a
// source gatefold folds, in the route's order. Other parentRefs are not
// gatefold's.
func (r *Reconciler) judge(ctx context.Context, route *unstructured.Unstructured) ([]verdict, error) {
	spec, err := specOf(route)
	if err != nil {
		return nil, err
	}
	var out []verdict
	var nsLabels map[string]string
	for _, ref := range spec.ParentRefs {
		srcRef, ok := rules.RouteParent(route.GetNamespace(), ref)
		if !ok {
			continue
		}
		src, controller, err := r.source(ctx, srcRef)
		if err != nil {
			return nil, err
		}
		if src == nil {
			continue
		}
		landed, err := r.landings(ctx, src)
		if err != nil {
			return nil, err
		}
		if nsLabels == nil {
			if nsLabels, err = r.namespaceLabels(ctx, route.GetNamespace()); err != nil {
				return nil, err
			}
		}
		in := rules.Route{Kind: r.GVK.Kind, Namespace: route.GetNamespace(), NamespaceLabels: nsLabels, Hostnames: spec.Hostnames}
		out = append(out, verdict{ref: ref, controller: controller, att: rules.Attach(in, ref, src, landed)})
	}
	return out, nil
}

// source reads the source ref names, with the controllerName of its
// Gateway's class; nil when it is not one gatefold folds: gone, its Gateway
// or class gone, or a ListenerSet of a class not opted in.
func (r *Reconciler) source(ctx context.Context, ref rules.SourceRef) (*rules.Source, gwv1.GatewayController, error) {
	var src rules.Source
	switch ref.Kind {
	case rules.KindListenerFragment:
		lf := &v1alpha1.ListenerFragment{}
		if err := r.Client.Get(ctx, ref.NamespacedName, lf); err != nil {
			return nil, "", client.IgnoreNotFound(err)
		}
		src = rules.FromFragment(lf)
	case rules.KindListenerSet:
		if r.ListenerSetControllers.Len() == 0 {
			return nil, "", nil
		}
		ls := &gwv1.ListenerSet{}
		if err := r.Client.Get(ctx, ref.NamespacedName, ls); err != nil {
			return nil, "", client.IgnoreNotFound(err)
		}
		if !rules.SelectsGateway(ls.Spec.ParentRef) {
			return nil, "", nil
		}
		src = rules.FromListenerSet(ls)
	default:
		return nil, "", nil
	}
	gw := &gwv1.Gateway{}
	if err := r.Client.Get(ctx, src.Parent(), gw); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	gc := &gwv1.GatewayClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, gc); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	if ref.Kind == rules.KindListenerSet && !rules.ListenerSetsFolded(gc, r.ListenerSetControllers) {
		return nil, "", nil
	}
	return &src, gc.Spec.ControllerName, nil
}

// landings finds where src's listeners landed: on its parent P or a Gateway
// P heads (a pool's sibling, P's listener-set Gateway), as the Gateway
// listener named rules.GatewayListenerName. While a listener moves and two
// Gateways carry it, the one src's status names wins, else the first in
// pool order (landedFirst).
func (r *Reconciler) landings(ctx context.Context, src *rules.Source) (map[gwv1.SectionName]rules.Landing, error) {
	parent := src.Parent()
	list := &gwv1.GatewayList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{manager.PoolIndex: parent.String()}, client.DisableReadYourWritesConsistency); err != nil {
		return nil, fmt.Errorf("listing the Gateways Gateway %s heads: %w", parent, err)
	}
	head := &gwv1.Gateway{}
	switch err := r.Client.Get(ctx, parent, head); {
	case err == nil:
		list.Items = append(list.Items, *head)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading Gateway %s: %w", parent, err)
	}
	byName := map[gwv1.SectionName][]rules.Landing{}
	for i := range list.Items {
		gw := &list.Items[i]
		key := client.ObjectKeyFromObject(gw)
		if !gw.DeletionTimestamp.IsZero() {
			continue
		}
		for _, l := range gw.Spec.Listeners {
			byName[l.Name] = append(byName[l.Name], rules.Landing{Gateway: key, Listener: l})
		}
	}
	reported := map[gwv1.SectionName]types.NamespacedName{}
	for _, l := range src.Status.Listeners {
		if l.Gateway != nil {
			reported[l.Name] = types.NamespacedName{Namespace: string(l.Gateway.Namespace), Name: string(l.Gateway.Name)}
		}
	}
	landed := map[gwv1.SectionName]rules.Landing{}
	for _, l := range src.Listeners {
		if at := byName[rules.GatewayListenerName(src.Ref(), l.Name)]; len(at) > 0 {
			landed[l.Name] = landedFirst(parent.Name, at, reported[l.Name])
		}
	}
	return landed, nil
}

// landedFirst picks one of the landings of a listener: on Gateway
// reported, else on the head, else the lowest pool index, else by name.
func landedFirst(head string, at []rules.Landing, reported types.NamespacedName) rules.Landing {
	if i := slices.IndexFunc(at, func(l rules.Landing) bool { return l.Gateway == reported }); i >= 0 {
		return at[i]
	}
	order := func(name string) int {
		if name == head {
			return 0
		}
		if n := rules.SiblingIndex(head, name); n > 0 {
			return n
		}
		return math.MaxInt
	}
	return slices.MinFunc(at, func(a, b rules.Landing) int {
		return cmp.Or(cmp.Compare(order(a.Gateway.Name), order(b.Gateway.Name)), cmp.Compare(a.Gateway.Name, b.Gateway.Name))
	})
}

// namespaceLabels reads a namespace's labels, metadata only.
func (r *Reconciler) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if ns.Labels == nil {
		return map[string]string{}, nil
	}
	return ns.Labels, nil
}
