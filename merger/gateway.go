package merger

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/rules"
)

// fold folds in and applies the listeners. When the API server refuses the
// apply (the Gateway CRD's rules, an admission policy), it finds the
// fragments it refuses, reports them, and applies the rest: one refused
// fragment never freezes the others.
func (r *Reconciler) fold(ctx context.Context, key types.NamespacedName, in *Input) (Result, error) {
	res := Fold(*in)
	foldsTotal.Inc()
	defer func() { recordListeners(key, in.Gateway, res) }()
	gw := in.Gateway
	if gw == nil || !gw.DeletionTimestamp.IsZero() {
		return res, nil
	}
	err := r.applyListeners(ctx, gw, in.Managed, res.Listeners)
	if !refused(err) {
		return res, err
	}
	rejected, berr := r.bisect(ctx, in, res)
	if berr != nil || len(rejected) == 0 {
		// Nothing a fragment did: the Gateway's owner must act.
		r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "ApplyFailed", "Fold", "Applying %d gatefold listeners failed: %v", len(res.Listeners), err)
		return res, fmt.Errorf("applying %d listeners to Gateway %s: %w", len(res.Listeners), klog.KObj(gw), err)
	}
	for key, msg := range rejected {
		log.FromContext(ctx).Info("The API server refused a fragment's listeners; folding the others", "gateway", klog.KObj(gw), "fragment", key, "message", msg)
	}
	in.Rejected = rejected
	res = Fold(*in)
	return res, r.applyListeners(ctx, gw, in.Managed, res.Listeners)
}

// refused says whether the API server refused a write for what it holds,
// not for a conflict or an outage.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// bisect finds the fragments whose listeners the API server refuses, with
// server-side dry-run applies: a group of fragments that applies with those
// accepted so far is accepted whole, one that does not is split in two, and
// a single fragment that does not is refused with the API server's message.
// It costs about 2·r·log2(n) dry runs for r refused fragments of n.
func (r *Reconciler) bisect(ctx context.Context, in *Input, res Result) (map[types.NamespacedName]string, error) {
	type group struct {
		key       types.NamespacedName
		listeners []gwv1.Listener
	}
	var groups []group
	for _, o := range res.Outcomes {
		if o.GatewayListener == nil {
			continue
		}
		if len(groups) == 0 || groups[len(groups)-1].key != o.Fragment {
			groups = append(groups, group{key: o.Fragment})
		}
		groups[len(groups)-1].listeners = append(groups[len(groups)-1].listeners, *o.GatewayListener)
	}
	var accepted []gwv1.Listener
	rejected := map[types.NamespacedName]string{}
	var walk func([]group) error
	walk = func(gs []group) error {
		if len(gs) == 0 {
			return nil
		}
		try := accepted
		for _, g := range gs {
			try = append(try[:len(try):len(try)], g.listeners...)
		}
		err := r.apply(ctx, in.Gateway, try, true)
		switch {
		case err == nil:
			accepted = try
			return nil
		case !refused(err):
			return err
		case len(gs) == 1:
			rejected[gs[0].key] = err.Error()
			return nil
		}
		if err := walk(gs[:len(gs)/2]); err != nil {
			return err
		}
		return walk(gs[len(gs)/2:])
	}
	if err := walk(groups); err != nil {
		return nil, err
	}
	if len(rejected) == len(groups) && len(groups) > 1 {
		return nil, nil // every fragment refused: the cause is not theirs
	}
	return rejected, nil
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
// rules.FieldManager applied before and no longer sends are removed, listeners
// of other managers are neither sent nor touched.
func (r *Reconciler) applyListeners(ctx context.Context, gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], desired []gwv1.Listener) error {
	if !listenersChanged(gw, managed, desired) {
		gatewayApplies.WithLabelValues(resultUnchanged).Inc()
		return nil
	}
	err := r.apply(ctx, gw, desired, false)
	switch {
	case apierrors.IsConflict(err):
		gatewayApplies.WithLabelValues(resultConflict).Inc()
		return err
	case err != nil:
		gatewayApplies.WithLabelValues(resultError).Inc()
		return err
	}
	return nil
}

// apply sends one server-side apply of the listeners, fenced by the
// resourceVersion the fold read: if the Gateway changed since (a newer
// leader folded it), the API server answers 409 and nothing is written.
func (r *Reconciler) apply(ctx context.Context, gw *gwv1.Gateway, listeners []gwv1.Listener, dryRun bool) error {
	spec := gwapply.GatewaySpec()
	for _, l := range listeners {
		ac := &gwapply.ListenerApplyConfiguration{}
		if err := convert(l, ac); err != nil {
			return err
		}
		spec.WithListeners(ac)
	}
	before := gw.ResourceVersion
	applied := gwapply.Gateway(gw.Name, gw.Namespace).WithResourceVersion(before).WithSpec(spec)
	opts := []client.ApplyOption{client.FieldOwner(rules.FieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := r.Client.Apply(ctx, applied, opts...); err != nil || dryRun {
		return err
	}
	result := resultWritten
	if applied.ResourceVersion != nil && *applied.ResourceVersion == before {
		result = resultNoop
	}
	gatewayApplies.WithLabelValues(result).Inc()
	log.FromContext(ctx).Info("Applied listeners", "gateway", klog.KObj(gw), "listeners", len(listeners), "result", result)
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
