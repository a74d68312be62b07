package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

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
// fragment never freezes the others. Each round leaves out at least one more
// fragment, so it ends. A refusal no fragment causes returns a
// *gatewayRefusedError with statuses that say so, and is remembered while
// the Gateway's spec and its fragments stay as they were.
func (r *Reconciler) fold(ctx context.Context, key types.NamespacedName, in *Input) (Result, error) {
	foldsTotal.Inc()
	in.Rejected = r.refusals.recall(key, in.Fragments, time.Now())
	var res Result
	defer func() { recordListeners(key, in.Gateway, res) }()
	gw := in.Gateway
	if gw != nil {
		if err := r.refusals.recallOwner(key, gw.Generation, in.Fragments, time.Now()); err != nil {
			res = refusedByGateway(in, err)
			return res, &gatewayRefusedError{gateway: key, err: err}
		}
	}
	for {
		res = Fold(*in)
		if gw == nil || !gw.DeletionTimestamp.IsZero() {
			return res, nil
		}
		err := r.applyListeners(ctx, in, res)
		if !refused(err) {
			return res, err
		}
		blamed, berr := r.bisect(ctx, gw, res)
		if berr != nil {
			return res, berr
		}
		if len(blamed) == 0 {
			r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "ApplyFailed", "Fold", "The API server refused gatefold's listeners, and no ListenerFragment or ListenerSet is the cause: %v", err)
			log.FromContext(ctx).Error(err, "The API server refused the Gateway's folded listeners, and no fragment or ListenerSet is the cause", "gateway", klog.KObj(gw))
			r.refusals.rememberOwner(key, gw.Generation, in.Fragments, err, time.Now())
			res = refusedByGateway(in, err)
			return res, &gatewayRefusedError{gateway: key, err: err}
		}
		for source, msg := range blamed {
			log.FromContext(ctx).Info("The API server refused a source's listeners; folding the others", "gateway", klog.KObj(gw), "source", source.String(), "message", msg)
		}
		if in.Rejected == nil {
			in.Rejected = map[rules.Source]string{}
		}
		maps.Copy(in.Rejected, blamed)
		r.refusals.remember(key, in.Fragments, blamed, time.Now())
	}
}

// gatewayRefusedError is a refused apply that no fragment causes: the
// Gateway's owner must act (a policy against its own listeners, or no
// listener left for MinItems).
type gatewayRefusedError struct {
	gateway types.NamespacedName
	err     error
}

func (e *gatewayRefusedError) Error() string {
	return fmt.Sprintf("applying listeners to Gateway %s: %v", e.gateway, e.err)
}

func (e *gatewayRefusedError) Unwrap() error { return e.err }

// refusedByGateway refolds after a refusal no fragment causes, with every
// fragment whose listeners the Gateway does not already carry as folded left
// out with the API server's message, so that no status claims a listener
// that did not land.
func refusedByGateway(in *Input, err error) Result {
	gw := in.Gateway
	msg := fmt.Sprintf("The API server refused gatefold's write to Gateway %s, which its owner must resolve: %v", gatewayKey(gw), err)
	if in.Rejected == nil {
		in.Rejected = map[rules.Source]string{}
	}
	for {
		res := Fold(*in)
		more := false
		for _, o := range res.Outcomes {
			if _, done := in.Rejected[o.Fragment]; !done && o.GatewayListener != nil && !carries(gw, o.GatewayListener) {
				in.Rejected[o.Fragment] = msg
				more = true
			}
		}
		if !more {
			return res
		}
	}
}

// refused says whether the API server refused a write for what it holds,
// not for a conflict or an outage.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// bisect finds the fragments whose listeners the API server refuses, with
// server-side dry-run applies: a group of fragments that applies with those
// accepted so far is accepted whole, one that does not is split in two, and
// a single fragment that does not is blamed with the API server's message —
// but only if the Gateway takes some set of gatefold's listeners without it
// (those accepted so far, or none): else the cause is not the fragment's. It
// costs about 2·r·log2(n) dry runs for r refused fragments of n.
func (r *Reconciler) bisect(ctx context.Context, gw *gwv1.Gateway, res Result) (map[rules.Source]string, error) {
	type group struct {
		key       rules.Source
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
	blamed := map[rules.Source]string{}
	var baseline error // whether the Gateway takes none of gatefold's listeners
	baselineTried := false
	// Refused alone while nothing was accepted and the Gateway refuses none of
	// gatefold's listeners either (MinItems): tried again once others are.
	var undecided []group
	var walk func(gs []group, knownRefused bool) error
	walk = func(gs []group, knownRefused bool) error {
		if len(gs) == 0 {
			return nil
		}
		if !knownRefused {
			try := slices.Clone(accepted)
			for _, g := range gs {
				try = append(try, g.listeners...)
			}
			err := r.apply(ctx, gw, try, true)
			switch {
			case err == nil:
				accepted = try
				return nil
			case !refused(err):
				return err
			case len(gs) == 1:
				if len(accepted) == 0 && !baselineTried {
					baseline, baselineTried = r.apply(ctx, gw, nil, true), true
					if baseline != nil && !refused(baseline) {
						return baseline
					}
				}
				if len(accepted) > 0 || baseline == nil {
					blamed[gs[0].key] = err.Error()
				} else {
					undecided = append(undecided, gs[0])
				}
				return nil
			}
		}
		if err := walk(gs[:len(gs)/2], false); err != nil {
			return err
		}
		return walk(gs[len(gs)/2:], false)
	}
	// The whole set was just refused: start by splitting it.
	if err := walk(groups, len(groups) > 1); err != nil {
		return nil, err
	}
	if len(accepted) > 0 {
		for _, g := range undecided {
			if err := walk([]group{g}, false); err != nil {
				return nil, err
			}
		}
	}
	return blamed, nil
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
func (r *Reconciler) applyListeners(ctx context.Context, in *Input, res Result) error {
	gw, desired := in.Gateway, res.Listeners
	if !listenersChanged(gw, in.Managed, desired) {
		gatewayApplies.WithLabelValues(resultUnchanged).Inc()
		return nil
	}
	if r.ManageReferenceGrants {
		for i := range in.Fragments {
			// A failure here is met again, and reported, after the apply.
			if err := r.applyGrant(ctx, &in.Fragments[i], gw, res.Outcomes, true); errors.Is(err, errFenced) {
				return err
			}
		}
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
	} else if err := r.fenced(); err != nil {
		return err
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
