package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// Reconciler folds the fragments of one Gateway, the request's key, and
// writes the difference: the Gateway's listeners, the fragments' statuses
// and the ReferenceGrants the folded listeners need.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Recorder records events on fragments and Gateways.
	Recorder events.EventRecorder
	// ManageReferenceGrants keeps a ReferenceGrant per fragment that lets
	// the Gateway read the fragment's certificate Secrets.
	ManageReferenceGrants bool
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=patch
// +kubebuilder:rbac:groups=gatefold.dev,resources=listenerfragments/status,verbs=patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	in, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := Fold(in)
	foldsTotal.Inc()
	recordListeners(req.NamespacedName, in.Gateway, res)

	if in.Gateway != nil && in.Gateway.DeletionTimestamp.IsZero() {
		if err := r.applyListeners(ctx, in.Gateway, in.Managed, res.Listeners); err != nil {
			return ctrl.Result{}, err
		}
	}
	var errs []error
	for i := range in.Fragments {
		lf := &in.Fragments[i]
		if err := r.applyStatus(ctx, lf, res.Statuses[keyOf(lf)]); err != nil {
			errs = append(errs, err)
		}
		if r.ManageReferenceGrants {
			if err := r.applyGrant(ctx, lf, in.Gateway, res.Outcomes); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// read gathers the fold's input from the cache.
func (r *Reconciler) read(ctx context.Context, key types.NamespacedName) (Input, error) {
	in := Input{NamespaceLabels: map[string]map[string]string{}}
	gw := &gwv1.Gateway{}
	switch err := r.Client.Get(ctx, key, gw); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, fmt.Errorf("reading Gateway %s: %w", key, err)
	default:
		in.Gateway = gw
		in.Managed = rules.ManagedListeners(gw)
	}
	list := &v1alpha1.ListenerFragmentList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{rules.ParentIndex: key.String()}); err != nil {
		return in, fmt.Errorf("listing fragments of Gateway %s: %w", key, err)
	}
	for _, lf := range list.Items {
		if !lf.DeletionTimestamp.IsZero() {
			continue
		}
		in.Fragments = append(in.Fragments, lf)
		if _, done := in.NamespaceLabels[lf.Namespace]; done {
			continue
		}
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: lf.Namespace}, ns); err != nil {
			return in, fmt.Errorf("reading namespace %s: %w", lf.Namespace, err)
		}
		in.NamespaceLabels[lf.Namespace] = ns.Labels
	}
	return in, nil
}

// listenersChanged reports whether applying `desired` would change the
// Gateway: a steady state makes no request at all.
func listenersChanged(gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], desired []gwv1.Listener) bool {
	if len(desired) != managed.Len() {
		return true
	}
	current := map[gwv1.SectionName]*gwv1.Listener{}
	for i := range gw.Spec.Listeners {
		current[gw.Spec.Listeners[i].Name] = &gw.Spec.Listeners[i]
	}
	for i := range desired {
		c, ok := current[desired[i].Name]
		if !ok || !managed.Has(desired[i].Name) || !equality.Semantic.DeepEqual(*c, desired[i]) {
			return true
		}
	}
	return false
}

// applyListeners server-side applies exactly gatefold's listeners: entries
// rules.FieldManager applied before and no longer sends are removed, listeners of
// other managers are neither sent nor touched.
func (r *Reconciler) applyListeners(ctx context.Context, gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], desired []gwv1.Listener) error {
	if !listenersChanged(gw, managed, desired) {
		gatewayApplies.WithLabelValues(resultUnchanged).Inc()
		return nil
	}
	spec := gwapply.GatewaySpec()
	for _, l := range desired {
		ac := &gwapply.ListenerApplyConfiguration{}
		if err := convert(l, ac); err != nil {
			return err
		}
		spec.WithListeners(ac)
	}
	before := gw.ResourceVersion
	applied := gwapply.Gateway(gw.Name, gw.Namespace).WithSpec(spec)
	if err := r.Client.Apply(ctx, applied, client.FieldOwner(rules.FieldManager), client.ForceOwnership); err != nil {
		gatewayApplies.WithLabelValues(resultError).Inc()
		// The Gateway's owner sees why its fragments' listeners are not landing.
		r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "ApplyFailed", "Fold", "Applying %d gatefold listeners failed: %v", len(desired), err)
		return fmt.Errorf("applying %d listeners to Gateway %s: %w", len(desired), klog.KObj(gw), err)
	}
	result := resultWritten
	if applied.ResourceVersion != nil && *applied.ResourceVersion == before {
		result = resultNoop
	}
	gatewayApplies.WithLabelValues(result).Inc()
	log.FromContext(ctx).Info("Applied listeners", "gateway", klog.KObj(gw), "listeners", len(desired), "result", result)
	return nil
}

// convert copies a typed object into its apply configuration through JSON,
// which both share.
func convert(from, to any) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := json.Unmarshal(raw, to); err != nil {
		return fmt.Errorf("decoding %T: %w", to, err)
	}
	return nil
}
