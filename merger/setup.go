package merger

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// Options configure the merger.
type Options struct {
	// ManageReferenceGrants keeps the ReferenceGrants folded listeners need
	// to read certificate Secrets in their fragments' namespaces.
	ManageReferenceGrants bool
	// Workers is how many Gateways are folded at once.
	Workers int
}

// Setup registers the merger with the manager. It runs on the elected
// leader only, like every controller; rules.IndexFragmentParents must have
// been registered.
func Setup(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:                mgr.GetClient(),
		Recorder:              mgr.GetEventRecorder("gatefold-merger"),
		ManageReferenceGrants: opts.ManageReferenceGrants,
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("merger").
		For(&gwv1.Gateway{}).
		// Only spec changes matter: the merger's own status writes must not
		// fold the Gateway again.
		Watches(&v1alpha1.ListenerFragment{}, handler.EnqueueRequestsFromMapFunc(parentOfFragment),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers})
	if opts.ManageReferenceGrants {
		b = b.Watches(&gwv1.ReferenceGrant{}, handler.EnqueueRequestsFromMapFunc(r.gatewayOfGrant))
	}
	return b.Complete(r)
}

func parentOfFragment(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: rules.ParentOf(o.(*v1alpha1.ListenerFragment))}}
}

// gatewaysOfNamespace maps a namespace whose labels changed to the Gateways
// its fragments attach to: a selector in allowedListeners may now match.
func (r *Reconciler) gatewaysOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.ListenerFragmentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing fragments of a relabelled namespace", "namespace", o.GetName())
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range list.Items {
		req := reconcile.Request{NamespacedName: rules.ParentOf(&list.Items[i])}
		if !seen[req] {
			seen[req] = true
			out = append(out, req)
		}
	}
	return out
}

// gatewayOfGrant maps a ReferenceGrant the merger keeps back to its
// fragment's Gateway, so that a grant someone changed or deleted is restored.
func (r *Reconciler) gatewayOfGrant(ctx context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "ListenerFragment" || ref.APIVersion != v1alpha1.GroupVersion.String() {
		return nil
	}
	lf := &v1alpha1.ListenerFragment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, lf); err != nil {
		return nil
	}
	return parentOfFragment(ctx, lf)
}
