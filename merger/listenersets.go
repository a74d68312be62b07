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
	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// For the GatewayClasses a user opts in, the merger folds ListenerSets beside
// fragments (docs/architecture.md, "ListenerSets").

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=listenersets,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=listenersets/status,verbs=patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/status,verbs=patch

// getSource reads the source of kind named key.
func (r *Reconciler) getSource(ctx context.Context, kind string, key types.NamespacedName) (*rules.Source, error) {
	if kind != rules.KindListenerSet {
		lf := &v1alpha1.ListenerFragment{}
		if err := r.Client.Get(ctx, key, lf); err != nil {
			return nil, err
		}
		src := rules.FromFragment(lf)
		return &src, nil
	}
	ls := &gwv1.ListenerSet{}
	if err := r.Client.Get(ctx, key, ls); err != nil {
		return nil, err
	}
	src := rules.FromListenerSet(ls)
	return &src, nil
}

// listenerSetMode is what the merger does with a Gateway's ListenerSets.
type listenerSetMode int

const (
	// setsNotFolded: no class, a class not opted in, or no flag; what gatefold
	// wrote for them is taken back.
	setsNotFolded listenerSetMode = iota
	setsFolded
	// setsNative: opted in, but the implementation supports ListenerSets itself
	// and writes their status: gatefold only stops writing.
	setsNative
)

// listenerSetMode says what the merger does with gw's ListenerSets. When the
// user opted in the class's controller but its implementation supports
// ListenerSets itself, it says so once per class in the log and in an event
// on the GatewayClass.
func (r *Reconciler) listenerSetMode(ctx context.Context, gw *gwv1.Gateway) (listenerSetMode, error) {
	if gw == nil || r.ListenerSetControllers.Len() == 0 {
		return setsNotFolded, nil
	}
	gc := &gwv1.GatewayClass{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, gc); {
	case apierrors.IsNotFound(err):
		return setsNotFolded, nil
	case err != nil:
		return setsNotFolded, fmt.Errorf("reading GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	switch {
	case rules.ListenerSetsFolded(gc, r.ListenerSetControllers):
		return setsFolded, nil
	case !r.ListenerSetControllers.Has(string(gc.Spec.ControllerName)):
		return setsNotFolded, nil
	}
	if r.leftAlone.first(gc) {
		const why = "its implementation supports ListenerSets itself (status.supportedFeatures lists ListenerSet)"
		log.FromContext(ctx).Info("Leaving the ListenerSets of a GatewayClass alone", "gatewayClass", klog.KObj(gc), "reason", why)
		r.Recorder.Eventf(gc, nil, corev1.EventTypeNormal, "ListenerSetsLeftAlone", "Fold", "gatefold does not fold the ListenerSets of Gateways of this class: %s", why)
	}
	return setsNative, nil
}

// reportable says whether a report of ListenerSet ls may still be written:
// its Gateway's ListenerSets are folded, or its Gateway is gone (the report
// says ParentNotAccepted). A report decided just before the class stopped
// being folded must not land after gatefold took its status back.
func (r *Reconciler) reportable(ctx context.Context, ls *rules.Source) (bool, error) {
	if !rules.SelectsGateway(ls.ParentRef) {
		return false, nil
	}
	key := ls.Parent()
	gw := &gwv1.Gateway{}
	switch err := r.Client.Get(ctx, key, gw); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading Gateway %s: %w", key, err)
	}
	mode, err := r.listenerSetMode(ctx, gw)
	return mode == setsFolded, err
}

// announced remembers the GatewayClasses, by UID and generation, whose
// ListenerSets the merger said it leaves alone.
type announced struct{ seen sync.Map }

func (a *announced) first(gc *gwv1.GatewayClass) bool {
	_, seen := a.seen.LoadOrStore(fmt.Sprintf("%s/%d", gc.UID, gc.Generation), true)
	return !seen
}

// readListenerSets adds gw's ListenerSets to the fold's input.
func (r *Reconciler) readListenerSets(ctx context.Context, key types.NamespacedName, in *fold.Input) error {
	list := &gwv1.ListenerSetList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{manager.ParentIndex: key.String()}, client.DisableReadYourWritesConsistency); err != nil {
		return fmt.Errorf("listing ListenerSets of Gateway %s: %w", key, err)
	}
	for _, ls := range rules.FromListenerSets(list.Items) {
		if ls.DeletionTimestamp.IsZero() {
			in.Sources = append(in.Sources, ls)
		} else {
			in.Deleting = append(in.Deleting, ls)
		}
	}
	return nil
}

// finishListenerSets ends a fold of Gateway key: it keeps the Gateway's
// status.attachedListenerSets when it folded its ListenerSets, and otherwise
// takes back what gatefold wrote for them. ListenerSets whose parentRef names
// no Gateway are taken back on every fold. It returns when the count, dropped
// by another writer, is due again.
func (r *Reconciler) finishListenerSets(ctx context.Context, key types.NamespacedName, gw *gwv1.Gateway, mode listenerSetMode, res fold.Result) (time.Duration, error) {
	errs := []error{r.takeBack(ctx, manager.NoGatewayParent, nil, setsNotFolded)}
	var again time.Duration
	switch {
	case mode == setsFolded && gw.DeletionTimestamp.IsZero():
		wait, err := r.applyAttachedListenerSets(ctx, gw, attachedListenerSets(res))
		again = wait
		errs = append(errs, err)
	case mode == setsFolded:
	default:
		errs = append(errs, r.takeBack(ctx, key.String(), gw, mode))
		if gw != nil && mode == setsNotFolded && rules.StatusWritten(gw.ManagedFields) {
			errs = append(errs, r.releaseAttachedListenerSets(ctx, gw))
		}
	}
	return again, errors.Join(errs...)
}

// takeBack takes back what gatefold wrote for the ListenerSets indexed under
// parent, whose Gateway gw (nil when gone) does not fold them: their grants
// and pending reports go, those of a Gateway gone are reported
// ParentNotAccepted, and with setsNotFolded the status gatefold alone wrote is
// released.
func (r *Reconciler) takeBack(ctx context.Context, parent string, gw *gwv1.Gateway, mode listenerSetMode) error {
	list := &gwv1.ListenerSetList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{manager.ParentIndex: parent}, client.DisableReadYourWritesConsistency); err != nil {
		return fmt.Errorf("listing the ListenerSets of %s: %w", parent, err)
	}
	var errs []error
	for _, ls := range rules.FromListenerSets(list.Items) {
		pending := r.setReports.forget(ls.Ref().NamespacedName)
		if r.ManageReferenceGrants {
			errs = append(errs, r.applyGrant(ctx, &ls, nil, nil, false))
		}
		switch {
		case gw == nil && parent != manager.NoGatewayParent && (pending || rules.StatusWritten(ls.ManagedFields)):
			r.setReports.publish(&ls, fold.NoGateway(&ls))
		case mode == setsNotFolded && rules.StatusWritten(ls.ManagedFields) && rules.SoleStatusWriter(ls.ManagedFields):
			errs = append(errs, r.releaseStatus(ctx, &ls))
		}
	}
	return errors.Join(errs...)
}

// attachedListenerSets counts the ListenerSets the fold accepted, as the
// Gateway's status.attachedListenerSets counts them.
func attachedListenerSets(res fold.Result) int32 {
	var n int32
	for src, st := range res.Statuses {
		if src.Kind == rules.KindListenerSet && meta.IsStatusConditionTrue(st.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
			n++
		}
	}
	return n
}

// attachedMemo remembers, by Gateway, the count gatefold last applied
// (manager.Rewrites): a count another writer dropped is applied again after a
// backoff, so an implementation that writes its whole status after each of
// gatefold's applies costs a few applies, not a loop.
type attachedMemo struct {
	manager.Rewrites[types.NamespacedName, attachedCount]
}

// attachedCount is a count of attached ListenerSets as applied.
type attachedCount int32

func (a attachedCount) Same(b attachedCount) bool { return a == b }

// due says whether count n must be applied to gw now, and otherwise how long
// until a count another writer dropped must be applied again (0: not at
// all).
func (m *attachedMemo) due(gw *gwv1.Gateway, n int32, now time.Time, resync time.Duration) (bool, time.Duration) {
	if ptr.Deref(gw.Status.AttachedListenerSets, 0) == n {
		return false, 0 // upstream reads a missing count as 0
	}
	due, wait, _ := m.Due(client.ObjectKeyFromObject(gw), attachedCount(n), now, resync)
	return due, wait
}

// applied records that count n was applied to gw at now, and returns how
// many times in a row it was applied again after a drop.
func (m *attachedMemo) applied(gw *gwv1.Gateway, n int32, now time.Time) int {
	return m.Wrote(client.ObjectKeyFromObject(gw), attachedCount(n), now)
}

// applyAttachedListenerSets server-side applies the Gateway's
// status.attachedListenerSets under gatefold's field manager when it is due;
// the implementation's own status fields stay its own. It returns when a
// count another writer dropped is due again.
func (r *Reconciler) applyAttachedListenerSets(ctx context.Context, gw *gwv1.Gateway, n int32) (time.Duration, error) {
	now := time.Now()
	switch due, wait := r.attached.due(gw, n, now, r.Resync); {
	case wait > 0:
		gatewayStatusApplies.WithLabelValues(resultDeferred).Inc()
		log.FromContext(ctx).V(1).Info("Another writer dropped the Gateway's attached ListenerSets: applying them again after a backoff",
			"gateway", klog.KObj(gw), "attachedListenerSets", n, "delay", wait)
		return wait, nil
	case !due:
		gatewayStatusApplies.WithLabelValues(resultUnchanged).Inc()
		return 0, nil
	}
	if err := r.applyGatewayStatus(ctx, gw, gwapply.GatewayStatus().WithAttachedListenerSets(n)); err != nil {
		return 0, err
	}
	drops := r.attached.applied(gw, n, now)
	log.FromContext(ctx).V(1).Info("Applied the Gateway's attached ListenerSets", "gateway", klog.KObj(gw), "attachedListenerSets", n, "droppedInARow", drops)
	return 0, nil
}

// releaseAttachedListenerSets gives up the count on a Gateway whose
// ListenerSets gatefold no longer folds: an apply without a status removes
// the fields gatefold owns and no one else does.
func (r *Reconciler) releaseAttachedListenerSets(ctx context.Context, gw *gwv1.Gateway) error {
	if err := r.applyGatewayStatus(ctx, gw, nil); err != nil {
		return err
	}
	r.attached.Forget(client.ObjectKeyFromObject(gw))
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
	if err := r.Client.Status().Apply(ctx, applied, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
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
func (r *Reconciler) releaseStatus(ctx context.Context, ls *rules.Source) error {
	if err := r.fenced(); err != nil {
		return err
	}
	applied := gwapply.ListenerSet(ls.Name, ls.Namespace).WithResourceVersion(ls.ResourceVersion)
	if err := r.Client.Status().Apply(ctx, applied, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		if apierrors.IsConflict(err) {
			return err // a status write, which folds nothing: the reconcile retries
		}
		statusApplies.WithLabelValues(resultError).Inc()
		return fmt.Errorf("releasing the status of %s: %w", ls.Ref(), err)
	}
	statusApplies.WithLabelValues(resultWritten).Inc()
	log.FromContext(ctx).Info("Released the status of a ListenerSet gatefold no longer folds", "listenerSet", klog.KObj(ls))
	return nil
}

// listenerSetsWithCertificatesIn lists the ListenerSets whose certificateRefs
// point into namespace ns, other than their own.
func (r *Reconciler) listenerSetsWithCertificatesIn(ctx context.Context, ns string) ([]rules.Source, error) {
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
func (r *Reconciler) ownerOfGrant(ctx context.Context, o client.Object) *rules.Source {
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
	src, err := r.getSource(ctx, kind, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name})
	if err != nil {
		return nil
	}
	return src
}
