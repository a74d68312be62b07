package merger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// For the GatewayClasses a user opts in, the merger folds upstream
// ListenerSets beside ListenerFragments, read as fragments of kind
// ListenerSet (rules.FromListenerSet): one precedence, one board, and the
// status written back in ListenerSet's own shape. It also keeps the
// Gateway's status.attachedListenerSets. A class whose implementation
// supports ListenerSets itself is left alone.

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=listenersets,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=listenersets/status,verbs=patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/status,verbs=patch

// getSource reads a fragment, or a ListenerSet as a fragment of its kind.
func (r *Reconciler) getSource(ctx context.Context, kind string, key types.NamespacedName) (*v1alpha1.ListenerFragment, error) {
	if kind != rules.KindListenerSet {
		lf := &v1alpha1.ListenerFragment{}
		return lf, r.Client.Get(ctx, key, lf)
	}
	ls := &gwv1.ListenerSet{}
	if err := r.Client.Get(ctx, key, ls); err != nil {
		return nil, err
	}
	lf := rules.FromListenerSet(ls)
	return &lf, nil
}

// foldsListenerSets says whether the merger folds gw's ListenerSets. When the
// user opted in the class's controller but its implementation supports
// ListenerSets itself, it says so once per class in the log and in an event
// on the GatewayClass.
func (r *Reconciler) foldsListenerSets(ctx context.Context, gw *gwv1.Gateway) (bool, error) {
	if gw == nil || r.ListenerSetControllers.Len() == 0 {
		return false, nil
	}
	gc := &gwv1.GatewayClass{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, gc); {
	case apierrors.IsNotFound(err):
		gc = nil
	case err != nil:
		return false, fmt.Errorf("reading GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	if gc != nil && r.ListenerSetControllers.Has(string(gc.Spec.ControllerName)) && rules.SupportsListenerSets(gc) && r.leftAlone.first(gc) {
		const why = "its implementation supports ListenerSets itself (status.supportedFeatures lists ListenerSet)"
		log.FromContext(ctx).Info("Leaving the ListenerSets of a GatewayClass alone", "gatewayClass", klog.KObj(gc), "reason", why)
		r.Recorder.Eventf(gc, nil, corev1.EventTypeNormal, "ListenerSetsLeftAlone", "Fold", "gatefold does not fold the ListenerSets of Gateways of this class: %s", why)
	}
	return rules.ListenerSetsFolded(gc, r.ListenerSetControllers), nil
}

// announced remembers the GatewayClasses, by UID and generation, whose
// ListenerSets the merger said it leaves alone.
type announced struct{ seen sync.Map }

func (a *announced) first(gc *gwv1.GatewayClass) bool {
	_, seen := a.seen.LoadOrStore(fmt.Sprintf("%s/%d", gc.UID, gc.Generation), true)
	return !seen
}

// readListenerSets adds gw's ListenerSets to the fold's input, as fragments
// of kind ListenerSet.
func (r *Reconciler) readListenerSets(ctx context.Context, key types.NamespacedName, in *Input) error {
	list := &gwv1.ListenerSetList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{rules.ParentIndex: key.String()}, client.DisableReadYourWritesConsistency); err != nil {
		return fmt.Errorf("listing ListenerSets of Gateway %s: %w", key, err)
	}
	for _, ls := range rules.FromListenerSets(list.Items) {
		if ls.DeletionTimestamp.IsZero() {
			in.Fragments = append(in.Fragments, ls)
		}
	}
	return nil
}

// finishListenerSets ends a fold of a Gateway, with folded saying whether it
// held the Gateway's ListenerSets. When it did, it keeps the Gateway's
// status.attachedListenerSets. When it did not (the Gateway is gone, its
// class is no longer opted in, or lists the ListenerSet feature now), it takes
// back what gatefold wrote for them: a ListenerSet of a Gateway that is gone
// is reported ParentNotAccepted, one of a Gateway gatefold no longer folds
// gets its status released, as does the Gateway's count, and the grants
// gatefold kept for them are deleted.
func (r *Reconciler) finishListenerSets(ctx context.Context, key types.NamespacedName, gw *gwv1.Gateway, folded bool, res Result) error {
	if folded {
		if !gw.DeletionTimestamp.IsZero() {
			return nil
		}
		return r.applyAttachedListenerSets(ctx, gw, attachedListenerSets(res))
	}
	list := &gwv1.ListenerSetList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{rules.ParentIndex: key.String()}, client.DisableReadYourWritesConsistency); err != nil {
		return fmt.Errorf("listing ListenerSets of Gateway %s: %w", key, err)
	}
	var errs []error
	for _, ls := range rules.FromListenerSets(list.Items) {
		if r.ManageReferenceGrants {
			if err := r.applyGrant(ctx, &ls, nil, nil, false); err != nil {
				errs = append(errs, err)
			}
		}
		switch {
		case !rules.StatusWritten(ls.ManagedFields):
		case gw == nil:
			r.setReports.publish(&ls, notAccepted(&ls, v1alpha1.FragmentReasonParentNotAccepted, fmt.Sprintf("Gateway %s does not exist", key)))
		default:
			errs = append(errs, r.releaseStatus(ctx, &ls))
		}
	}
	if gw != nil && rules.StatusWritten(gw.ManagedFields) {
		errs = append(errs, r.releaseAttachedListenerSets(ctx, gw))
	}
	return errors.Join(errs...)
}

// attachedListenerSets counts the ListenerSets the fold accepted, as the
// Gateway's status.attachedListenerSets counts them.
func attachedListenerSets(res Result) int32 {
	var n int32
	for src, st := range res.Statuses {
		if src.Kind == rules.KindListenerSet && meta.IsStatusConditionTrue(st.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
			n++
		}
	}
	return n
}

// attachedMemo remembers, by Gateway UID, the count gatefold last applied
// and when. An implementation that writes the Gateway's whole status drops
// the field; applying it again on each of its writes would make two writes
// per round, forever, with one that compares whole statuses. The count is
// applied again when it changes, or after a resync period.
type attachedMemo struct {
	mu   sync.Mutex
	last map[types.UID]attached
}

type attached struct {
	n  int32
	at time.Time
}

// due says whether count n must be applied to gw now.
func (m *attachedMemo) due(gw *gwv1.Gateway, n int32, now time.Time, resync time.Duration) bool {
	if ptr.Deref(gw.Status.AttachedListenerSets, 0) == n {
		return false // upstream reads a missing count as 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[gw.UID]
	return !ok || last.n != n || (resync > 0 && now.Sub(last.at) >= resync)
}

func (m *attachedMemo) applied(gw *gwv1.Gateway, n int32, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.UID]attached{}
	}
	m.last[gw.UID] = attached{n: n, at: now}
}

// applyAttachedListenerSets server-side applies the Gateway's
// status.attachedListenerSets under gatefold's field manager when it is due;
// the implementation's own status fields stay its own.
func (r *Reconciler) applyAttachedListenerSets(ctx context.Context, gw *gwv1.Gateway, n int32) error {
	now := time.Now()
	if !r.attached.due(gw, n, now, r.Resync) {
		gatewayStatusApplies.WithLabelValues(resultUnchanged).Inc()
		return nil
	}
	if err := r.applyGatewayStatus(ctx, gw, gwapply.GatewayStatus().WithAttachedListenerSets(n)); err != nil {
		return err
	}
	r.attached.applied(gw, n, now)
	log.FromContext(ctx).V(1).Info("Applied the Gateway's attached ListenerSets", "gateway", klog.KObj(gw), "attachedListenerSets", n)
	return nil
}

// releaseAttachedListenerSets gives up the count on a Gateway whose
// ListenerSets gatefold no longer folds: an apply without a status removes
// the fields gatefold owns and no one else does.
func (r *Reconciler) releaseAttachedListenerSets(ctx context.Context, gw *gwv1.Gateway) error {
	if err := r.applyGatewayStatus(ctx, gw, nil); err != nil {
		return err
	}
	log.FromContext(ctx).Info("Released the Gateway's attached ListenerSets: gatefold no longer folds its ListenerSets", "gateway", klog.KObj(gw))
	return nil
}

func (r *Reconciler) applyGatewayStatus(ctx context.Context, gw *gwv1.Gateway, status *gwapply.GatewayStatusApplyConfiguration) error {
	if err := r.fenced(); err != nil {
		return err
	}
	// Not fenced by resourceVersion: the listeners' apply just changed it.
	// The lease fences a deposed leader, and every fold decides anew.
	applied := gwapply.Gateway(gw.Name, gw.Namespace)
	if status != nil {
		applied.WithStatus(status)
	}
	if err := r.Client.Status().Apply(ctx, applied, client.FieldOwner(rules.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		gatewayStatusApplies.WithLabelValues(resultError).Inc()
		return fmt.Errorf("applying status.attachedListenerSets of Gateway %s: %w", klog.KObj(gw), err)
	}
	gatewayStatusApplies.WithLabelValues(resultWritten).Inc()
	return nil
}

// releaseStatus gives up the status gatefold wrote on a ListenerSet it no
// longer folds, for the implementation or no one: an apply without a status
// removes the conditions and listeners gatefold owns.
func (r *Reconciler) releaseStatus(ctx context.Context, ls *v1alpha1.ListenerFragment) error {
	if err := r.fenced(); err != nil {
		return err
	}
	applied := gwapply.ListenerSet(ls.Name, ls.Namespace).WithResourceVersion(ls.ResourceVersion)
	if err := r.Client.Status().Apply(ctx, applied, client.FieldOwner(rules.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone, or changed: its update brings the Gateway back
		}
		statusApplies.WithLabelValues(resultError).Inc()
		return fmt.Errorf("releasing the status of %s: %w", keyOf(ls), err)
	}
	statusApplies.WithLabelValues(resultWritten).Inc()
	log.FromContext(ctx).Info("Released the status of a ListenerSet gatefold no longer folds", "listenerSet", klog.KObj(ls))
	return nil
}

// listenerSetsWithCertificatesIn lists the ListenerSets whose certificateRefs
// point into namespace ns, other than their own.
func (r *Reconciler) listenerSetsWithCertificatesIn(ctx context.Context, ns string) ([]v1alpha1.ListenerFragment, error) {
	if r.ListenerSetControllers.Len() == 0 {
		return nil, nil
	}
	list := &gwv1.ListenerSetList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{certificateNamespaceIndex: ns}, client.DisableReadYourWritesConsistency); err != nil {
		return nil, err
	}
	return rules.FromListenerSets(list.Items), nil
}

// ownerOfGrant returns the source that controls a ReferenceGrant the
// merger keeps, nil when it is none of gatefold's.
func (r *Reconciler) ownerOfGrant(ctx context.Context, o client.Object) *v1alpha1.ListenerFragment {
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return nil
	}
	var kind string
	switch {
	case ref.Kind == rules.KindListenerFragment && ref.APIVersion == rules.APIVersionOf(ref.Kind):
		kind = rules.KindListenerFragment
	case ref.Kind == rules.KindListenerSet && ref.APIVersion == rules.APIVersionOf(ref.Kind) && r.ListenerSetControllers.Len() > 0:
		kind = rules.KindListenerSet
	default:
		return nil
	}
	lf, err := r.getSource(ctx, kind, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name})
	if err != nil {
		return nil
	}
	return lf
}
