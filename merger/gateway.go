package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/rules"
)

// fold folds in and applies the listeners. When the API server refuses the
// apply, it finds the refused fragments (bisect), reports them and applies the
// rest, so one refused fragment never freezes the others. A refusal no
// fragment causes returns a *gatewayRefusedError, remembered while the
// Gateway's spec and fragments stay as they were.
func (r *Reconciler) fold(ctx context.Context, key types.NamespacedName, in *fold.Input) (fold.Result, error) {
	foldsTotal.Inc()
	in.Now = time.Now()
	in.Rejected = r.refusals.recall(key, in.Sources, in.Now)
	in.Withdrawn = r.withdrawals.recall(key, in.Sources, in.Now)
	var res fold.Result
	defer func() { recordListeners(key, in, res); r.withdrawals.remember(key, res.Withdrawn) }()
	gw := in.Gateway
	if gw != nil {
		if err := r.refusals.recallOwner(key, gw.Generation, in.Sources, time.Now()); err != nil {
			res = refusedByGateway(in, key, err)
			return res, &gatewayRefusedError{gateway: key, err: err}
		}
	}
	for {
		res = fold.Fold(*in)
		if gw == nil || !gw.DeletionTimestamp.IsZero() || in.Head != nil {
			return res, nil
		}
		t, err := r.applyHeld(ctx, in, res)
		if !refused(err) {
			return res, err
		}
		blamed, berr := r.bisect(ctx, t, res)
		if berr != nil {
			return res, berr
		}
		switch {
		case len(blamed) == 0 && t.gw == nil && t.listenerSets:
			// The Gateway of the ListenerSets, which the API server would not
			// create for no one ListenerSet's sake (a quota, a policy): no
			// ListenerSet folds for a while, and each says why.
			log.FromContext(ctx).Error(err, "The API server refused to create the Gateway of a Gateway's ListenerSets; they fold once the refusal expires",
				"gateway", klog.KObj(gw), "listenerSetGateway", t.key.Name)
			r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "ListenerSetGatewayRefused", "Fold",
				"The API server refused to create Gateway %s for this Gateway's ListenerSets: %v", t.key.Name, err)
			in.ListenerSetGatewayBlocked = fmt.Sprintf("The API server refused to create Gateway %s, which would carry this ListenerSet's listeners: %v; gatefold tries again within %s",
				t.key, err, refusalTTL)
			r.pools.refuse(t.key, in.ListenerSetGatewayBlocked, time.Now())
			continue
		case len(blamed) == 0 && t.gw == nil:
			// A sibling the API server would not create for no fragment's
			// sake (a quota, a policy): the pool stops growing for a while,
			// and the fragments that needed it say so.
			log.FromContext(ctx).Error(err, "The API server refused a new Gateway for a pool; the pool does not grow until the refusal expires", "gateway", klog.KObj(gw), "sibling", t.key.Name)
			r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "PoolGrowthRefused", "Fold", "The API server refused to create Gateway %s for the pool: %v", t.key.Name, err)
			in.Pool.NoGrowth = fmt.Sprintf("the API server refused to create Gateway %s (%v); gatefold tries again within %s", t.key, err, refusalTTL)
			r.pools.refuse(key, in.Pool.NoGrowth, time.Now())
			continue
		case len(blamed) == 0:
			r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "ApplyFailed", "Fold", "The API server refused gatefold's listeners on Gateway %s, and no ListenerFragment or ListenerSet is the cause: %v", t.key, err)
			log.FromContext(ctx).Error(err, "The API server refused the Gateway's folded listeners, and no fragment or ListenerSet is the cause", "gateway", klog.KObj(gw), "refusedBy", t.key)
			r.refusals.rememberOwner(key, gw.Generation, in.Sources, err, time.Now())
			res = refusedByGateway(in, t.key, err)
			return res, &gatewayRefusedError{gateway: t.key, err: err}
		}
		for source, msg := range blamed {
			log.FromContext(ctx).Info("The API server refused a source's listeners; folding the others", "gateway", klog.KObj(gw), "refusedBy", t.key, "source", source.String(), "message", msg)
		}
		if in.Rejected == nil {
			in.Rejected = map[rules.SourceRef]string{}
		}
		maps.Copy(in.Rejected, blamed)
		r.refusals.remember(key, in.Sources, blamed, time.Now())
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
func refusedByGateway(in *fold.Input, refusedBy types.NamespacedName, err error) fold.Result {
	msg := fmt.Sprintf("The API server refused gatefold's write to Gateway %s, which its owner must resolve: %v", refusedBy, err)
	switch parent := client.ObjectKeyFromObject(in.Gateway); {
	case refusedBy == listenerSetGatewayKey(parent):
		msg = fmt.Sprintf("The API server refused gatefold's write to Gateway %s, gatefold's for the ListenerSets of Gateway %s, which its owner must resolve: %v",
			refusedBy, parent, err)
	case refusedBy != parent:
		msg = fmt.Sprintf("The API server refused gatefold's write to Gateway %s of the pool of Gateway %s, which the head's owner must resolve: %v", refusedBy, parent, err)
	}
	if in.Rejected == nil {
		in.Rejected = map[rules.SourceRef]string{}
	}
	for {
		res := fold.Fold(*in)
		more := false
		for _, o := range res.Outcomes {
			if _, done := in.Rejected[o.Fragment]; !done && o.GatewayListener != nil && !fold.Carries(landedOn(in, o), o.GatewayListener) {
				in.Rejected[o.Fragment] = msg
				more = true
			}
		}
		if !more {
			return res
		}
	}
}

// landedOn returns the Gateway of the pool an outcome was folded into, as
// read; an empty one for a sibling to create.
func landedOn(in *fold.Input, o fold.Outcome) *gwv1.Gateway {
	if o.Gateway == rules.ListenerSetGatewayName(in.Gateway.Name) {
		if in.ListenerSetGateway == nil {
			return &gwv1.Gateway{}
		}
		return in.ListenerSetGateway.Gateway
	}
	if in.Pool != nil {
		for _, s := range in.Pool.Siblings {
			if s.Gateway.Name == o.Gateway {
				return s.Gateway
			}
		}
		if o.Gateway != in.Gateway.Name {
			return &gwv1.Gateway{}
		}
	}
	return in.Gateway
}

// refused says whether the API server refused a write for what it holds,
// not for a conflict or an outage.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// bisect finds the fragments whose listeners the API server refuses, with
// server-side dry runs: a group that applies with those accepted so far is
// accepted whole, one that does not is split in two. A single fragment is
// blamed only if the Gateway takes gatefold's listeners without it. About
// 2·r·log2(n) dry runs for r refused fragments of n.
func (r *Reconciler) bisect(ctx context.Context, t target, res fold.Result) (map[rules.SourceRef]string, error) {
	type group struct {
		key       rules.SourceRef
		listeners []gwv1.Listener
	}
	var groups []group
	for _, o := range res.Outcomes {
		if o.GatewayListener == nil || o.Gateway != t.key.Name {
			continue
		}
		if len(groups) == 0 || groups[len(groups)-1].key != o.Fragment {
			groups = append(groups, group{key: o.Fragment})
		}
		groups[len(groups)-1].listeners = append(groups[len(groups)-1].listeners, *o.GatewayListener)
	}
	var accepted []gwv1.Listener
	blamed := map[rules.SourceRef]string{}
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
			err := r.apply(ctx, t, try, true)
			switch {
			case err == nil:
				accepted = try
				return nil
			case !refused(err):
				return err
			case len(gs) == 1:
				if len(accepted) == 0 && !baselineTried {
					baseline, baselineTried = r.apply(ctx, t, nil, true), true
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

// applyHeld is applyPool with the status writers held (gate) meanwhile.
func (r *Reconciler) applyHeld(ctx context.Context, in *fold.Input, res fold.Result) (target, error) {
	defer r.folding.hold()()
	return r.applyPool(ctx, in, res)
}

// applyPool writes the fold to every Gateway of the pool whose listeners
// changed, poolApplies at a time, and returns the first Gateway, in pool order,
// a write failed on.
func (r *Reconciler) applyPool(ctx context.Context, in *fold.Input, res fold.Result) (target, error) {
	ts, err := r.targets(ctx, in, res)
	if err != nil {
		return target{}, err
	}
	var changed []target
	for _, t := range ts {
		if t.changed() {
			changed = append(changed, t)
		} else {
			gatewayApplies.WithLabelValues(resultUnchanged).Inc()
		}
	}
	if len(changed) == 0 {
		return target{}, nil
	}
	if r.ManageReferenceGrants {
		for i := range in.Sources {
			// A failure here is met again, and reported, after the apply.
			if err := r.applyGrant(ctx, &in.Sources[i], in.Gateway, res.Outcomes, true); errors.Is(err, errFenced) {
				return changed[0], err
			}
		}
	}
	for _, phase := range phases(changed) {
		if t, err := r.applyAll(ctx, phase); err != nil {
			return t, err
		}
	}
	return target{}, nil
}

// phases orders the writes of the changed targets so that a tuple moving
// from one Gateway of the fold to another is never on both: first those
// that give up a listener and gain no tuple another gives up, then those
// that give up one and gain such a tuple, then those that only add. Two
// Gateways that trade tuples in one fold may still carry one both for a
// moment.
func phases(changed []target) [][]target {
	given := sets.New[rules.Tuple]()
	for _, t := range changed {
		given = given.Union(t.gives())
	}
	var removing, trading, adding []target
	for _, t := range changed {
		switch {
		case !t.removes():
			adding = append(adding, t)
		case t.gains().HasAny(given.UnsortedList()...):
			trading = append(trading, t)
		default:
			removing = append(removing, t)
		}
	}
	return [][]target{removing, trading, adding}
}

// gives returns the tuples of the listeners gatefold wrote that writing the
// target takes off its Gateway.
func (t target) gives() sets.Set[rules.Tuple] {
	out := sets.New[rules.Tuple]()
	if t.gw == nil {
		return out
	}
	kept := tuples(t.desired())
	for _, l := range t.gw.Spec.Listeners {
		if tp := rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple(); t.managed.Has(l.Name) && !kept.Has(tp) {
			out.Insert(tp)
		}
	}
	return out
}

// gains returns the tuples writing the target puts on its Gateway.
func (t target) gains() sets.Set[rules.Tuple] {
	gained := tuples(t.desired())
	if t.gw != nil {
		gained = gained.Difference(tuples(t.gw.Spec.Listeners))
	}
	return gained
}

func tuples(ls []gwv1.Listener) sets.Set[rules.Tuple] {
	out := sets.New[rules.Tuple]()
	for _, l := range ls {
		out.Insert(rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple())
	}
	return out
}

// applyAll writes the targets, poolApplies at a time, and returns the first
// of them whose write failed.
func (r *Reconciler) applyAll(ctx context.Context, ts []target) (target, error) {
	errs := make([]error, len(ts))
	var g errgroup.Group
	g.SetLimit(poolApplies)
	for i, t := range ts {
		g.Go(func() error {
			errs[i] = r.apply(ctx, t, t.listeners, false)
			return nil
		})
	}
	_ = g.Wait()
	for i, err := range errs {
		switch {
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err):
			// Changed, created or deleted since the fold read it.
			gatewayApplies.WithLabelValues(resultConflict).Inc()
			return ts[i], err
		case err != nil:
			gatewayApplies.WithLabelValues(resultError).Inc()
			return ts[i], err
		}
	}
	return target{}, nil
}

// poolApplies is how many Gateways of a pool one fold writes at once.
const poolApplies = 4

// target is one Gateway of a pool as the merger writes it. Of the head,
// gatefold applies only its listeners; of a sibling, its whole spec, cloned
// from the head's as stored (headSpec), with the head's own listeners first.
// The Gateway of the head's ListenerSets is written as a sibling that carries
// none of the head's own listeners.
type target struct {
	key types.NamespacedName
	// gw is the Gateway as read, nil for a sibling to create.
	gw      *gwv1.Gateway
	managed sets.Set[gwv1.SectionName]
	// head and spec are set for a sibling.
	head      *gwv1.Gateway
	spec      *headSpec
	own       []gwv1.Listener
	listeners []gwv1.Listener
	// listenerSets is set for the Gateway of the head's ListenerSets.
	listenerSets bool
}

// targets are the Gateways of the fold: the head, its pool's siblings, then
// the Gateway of its ListenerSets.
func (r *Reconciler) targets(ctx context.Context, in *fold.Input, res fold.Result) ([]target, error) {
	ts := []target{{key: client.ObjectKeyFromObject(in.Gateway), gw: in.Gateway, managed: in.Managed, listeners: res.Listeners}}
	if len(res.Siblings) == 0 && res.ListenerSetGateway == nil {
		r.headSpecs.forget(ts[0].key)
		return ts, nil
	}
	spec, err := r.headSpecOf(ctx, in.Gateway)
	if err != nil {
		return nil, err
	}
	for _, s := range res.Siblings {
		ts = append(ts, target{key: types.NamespacedName{Namespace: in.Gateway.Namespace, Name: s.Name}, gw: s.Gateway, managed: s.Managed,
			head: in.Gateway, spec: spec, own: res.Own, listeners: s.Listeners})
	}
	if s := res.ListenerSetGateway; s != nil {
		ts = append(ts, target{key: types.NamespacedName{Namespace: in.Gateway.Namespace, Name: s.Name}, gw: s.Gateway, managed: s.Managed,
			head: in.Gateway, spec: spec, listeners: s.Listeners, listenerSets: true})
	}
	return ts, nil
}

// digest is what the target's head-spec annotation says once it is written
// from the head's current spec: a sibling copies the head's own listeners,
// the Gateway of its ListenerSets does not.
func (t target) digest() string {
	if t.listenerSets {
		return t.spec.restDigest
	}
	return t.spec.digest
}

// desired are the listeners gatefold writes to the target: a sibling
// carries the head's own first.
func (t target) desired() []gwv1.Listener {
	if t.head == nil {
		return t.listeners
	}
	return slices.Concat(t.own, t.listeners)
}

// removes says whether writing the target takes a listener gatefold wrote
// off its Gateway, or changes one.
func (t target) removes() bool {
	if t.gw == nil {
		return false
	}
	desired := t.desired()
	for _, l := range t.gw.Spec.Listeners {
		if t.managed.Has(l.Name) && !slices.ContainsFunc(desired, func(d gwv1.Listener) bool { return equality.Semantic.DeepEqual(d, l) }) {
			return true
		}
	}
	return false
}

// changed reports whether applying the target would change its Gateway: a
// steady state makes no request at all. A sibling written from another
// headSpec than the current one changes, whatever its fields; one without
// the annotation (written before gatefold kept one) only when the head has
// fields the Go types lack.
func (t target) changed() bool {
	if t.head == nil {
		return listenersChanged(t.gw, t.managed, t.listeners)
	}
	if t.gw == nil {
		return true
	}
	if got, ok := t.gw.Annotations[v1alpha1.HeadSpecAnnotation]; (ok || !t.spec.typed) && got != t.digest() {
		return true
	}
	want := siblingSpec(t.head, nil)
	got := t.gw.Spec
	got.Listeners = nil
	return !equality.Semantic.DeepEqual(want, got) || listenersChanged(t.gw, t.managed, t.desired())
}

// siblingSpec is the spec of a sibling of head with the given listeners:
// the head's class, infrastructure, allowedListeners, TLS and default scope,
// and of its addresses those a sibling copies.
func siblingSpec(head *gwv1.Gateway, listeners []gwv1.Listener) gwv1.GatewaySpec {
	spec := *head.Spec.DeepCopy()
	spec.Listeners = listeners
	spec.Addresses = slices.DeleteFunc(spec.Addresses, func(a gwv1.GatewaySpecAddress) bool { return !copiedAddress(a) })
	if len(spec.Addresses) == 0 {
		spec.Addresses = nil
	}
	return spec
}

// copiedAddress says whether a sibling copies the head's address a: only a
// request for a type with no value, since a given address cannot be every
// sibling's.
func copiedAddress(a gwv1.GatewaySpecAddress) bool { return a.Value == "" }

// listenersChanged reports whether applying `desired` would change the
// Gateway's listeners.
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

// Dry runs are sent without read-your-writes consistency: they write
// nothing to wait for (a dry-run create has no resourceVersion at all).

// apply writes the target's listeners, fenced by the resourceVersion the fold
// read (a 409 when the Gateway changed since): one server-side apply of
// gatefold's listeners on a head, a whole write of a sibling (writeSibling).
func (r *Reconciler) apply(ctx context.Context, t target, listeners []gwv1.Listener, dryRun bool) error {
	if t.head != nil {
		return r.writeSibling(ctx, t, listeners, dryRun)
	}
	spec := gwapply.GatewaySpec()
	for _, l := range listeners {
		ac := &gwapply.ListenerApplyConfiguration{}
		if err := convert(l, ac); err != nil {
			return err
		}
		spec.WithListeners(ac)
	}
	applied := gwapply.Gateway(t.key.Name, t.key.Namespace).WithResourceVersion(t.gw.ResourceVersion).WithSpec(spec)
	opts := []client.ApplyOption{client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll, client.DisableReadYourWritesConsistency)
	} else if err := r.fenced(); err != nil {
		return err
	}
	if err := r.Client.Apply(ctx, applied, opts...); err != nil || dryRun {
		return err
	}
	r.applied(ctx, t, applied.ResourceVersion != nil && *applied.ResourceVersion == t.gw.ResourceVersion, len(listeners))
	return nil
}

// writeSibling creates or replaces a sibling whole: the head's spec, its own
// listeners, the folded ones, and listeners other managers added, each as
// stored where gatefold's Go types may not know all its fields. A create, so
// that a Gateway of that name someone else created is never taken over
// (followed by a patch when the Go types cannot carry the head's fields); a
// patch fenced by resourceVersion, so that listeners gatefold no longer sends
// are removed.
func (r *Reconciler) writeSibling(ctx context.Context, t target, listeners []gwv1.Listener, dryRun bool) error {
	gw := &gwv1.Gateway{}
	var kept []gwv1.Listener
	var current *unstructured.Unstructured
	if t.gw != nil {
		gw = t.gw.DeepCopy()
		kept = slices.DeleteFunc(slices.Clone(gw.Spec.Listeners), func(l gwv1.Listener) bool { return t.managed.Has(l.Name) })
	}
	if len(kept) > 0 && !dryRun {
		var err error
		if current, err = r.readWhole(ctx, t.key); err != nil {
			return err
		}
	}
	if t.gw != nil && len(t.own)+len(listeners)+len(kept) == 0 {
		// A Gateway holds a listener at least: a sibling of a head without
		// its own goes as soon as it carries nothing.
		return r.deleteSibling(ctx, t, dryRun, "it carries no listener, and a Gateway must hold one")
	}
	gw.Namespace, gw.Name = t.key.Namespace, t.key.Name
	if gw.Labels == nil {
		gw.Labels = map[string]string{}
	}
	gw.Labels[v1alpha1.PoolLabel] = rules.PoolLabelValue(t.head.Name)
	if gw.Annotations == nil {
		gw.Annotations = map[string]string{}
	}
	gw.Annotations[v1alpha1.HeadSpecAnnotation] = t.digest()
	gw.OwnerReferences = slices.DeleteFunc(gw.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == t.head.UID })
	gw.OwnerReferences = append(gw.OwnerReferences, metav1.OwnerReference{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: t.head.Name, UID: t.head.UID, Controller: ptr.To(true)})
	gw.Spec = siblingSpec(t.head, slices.Concat(t.own, listeners, kept))
	stored, err := storedSpec(t.spec, t.own, listeners, kept, current)
	if err != nil {
		return err
	}
	if t.gw == nil {
		if err := r.createSibling(ctx, gw, stored, dryRun); err != nil || dryRun {
			return err
		}
		if t.listenerSets {
			log.FromContext(ctx).Info("Created the Gateway of a Gateway's ListenerSets", "gateway", klog.KObj(t.head), "listenerSetGateway", t.key.Name)
			r.Recorder.Eventf(t.head, nil, corev1.EventTypeNormal, "ListenerSetGatewayCreated", "Fold",
				"Created Gateway %s for the listeners of this Gateway's ListenerSets: a route that names this Gateway does not reach them", t.key.Name)
		} else {
			log.FromContext(ctx).Info("Created a Gateway for a pool", "gateway", klog.KObj(t.head), "sibling", t.key.Name)
			r.Recorder.Eventf(t.head, nil, corev1.EventTypeNormal, "PoolGrew", "Fold", "Created Gateway %s for the pool: its Gateways had no room for the listeners folded into it", t.key.Name)
		}
		r.applied(ctx, t, false, len(listeners))
		return nil
	}
	if !dryRun {
		if err := r.fenced(); err != nil {
			return err
		}
	}
	if err := r.patchSibling(ctx, gw, t.gw.ResourceVersion, stored, dryRun); err != nil || dryRun {
		return err
	}
	r.applied(ctx, t, gw.ResourceVersion == t.gw.ResourceVersion, len(listeners))
	return nil
}

// createSibling creates sibling gw, whose spec as stored is stored. When the
// Go types cannot carry all of it, a fenced patch follows that writes it
// whole; the create leaves out the head-spec annotation, which the patch
// adds, so a sibling whose patch failed is written again by the next fold.
// A dry run sends the whole object at once.
func (r *Reconciler) createSibling(ctx context.Context, gw *gwv1.Gateway, stored map[string]any, dryRun bool) error {
	typed, err := typedOnly(gw.Spec, stored)
	if err != nil {
		return err
	}
	opts := []client.CreateOption{client.FieldOwner(v1alpha1.FieldManager)}
	if dryRun {
		// An unstructured write, which read-your-writes must not follow: it
		// would start an informer of every Gateway as unstructured.
		opts = append(opts, client.DryRunAll, client.DisableReadYourWritesConsistency)
		if typed {
			return r.Client.Create(ctx, gw, opts...)
		}
		whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gw)
		if err != nil {
			return fmt.Errorf("encoding Gateway %s: %w", gw.Name, err)
		}
		whole["spec"] = stored
		u := &unstructured.Unstructured{Object: whole}
		u.SetAPIVersion(gwv1.GroupVersion.String())
		u.SetKind("Gateway")
		return r.Client.Create(ctx, u, opts...)
	}
	if err := r.fenced(); err != nil {
		return err
	}
	digest := gw.Annotations[v1alpha1.HeadSpecAnnotation]
	if !typed {
		delete(gw.Annotations, v1alpha1.HeadSpecAnnotation)
	}
	if err := r.Client.Create(ctx, gw, opts...); err != nil || typed {
		return err
	}
	if err := r.fenced(); err != nil {
		return err
	}
	metav1.SetMetaDataAnnotation(&gw.ObjectMeta, v1alpha1.HeadSpecAnnotation, digest)
	return r.patchSibling(ctx, gw, gw.ResourceVersion, stored, false)
}

// patchSibling replaces the sibling's labels, annotations, ownerReferences
// and spec with gw's, its spec as stored: a JSON patch, fenced by
// resourceVersion rv, that carries fields gatefold's Go types lack, and
// whose answer the cache's read-your-writes waits for like any typed write.
func (r *Reconciler) patchSibling(ctx context.Context, gw *gwv1.Gateway, rv string, stored map[string]any, dryRun bool) error {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	patch, err := json.Marshal([]op{
		{"replace", "/metadata/resourceVersion", rv},
		{"add", "/metadata/labels", gw.Labels},
		{"add", "/metadata/annotations", gw.Annotations},
		{"add", "/metadata/ownerReferences", gw.OwnerReferences},
		{"add", "/spec", stored},
	})
	if err != nil {
		return fmt.Errorf("encoding the patch of Gateway %s: %w", gw.Name, err)
	}
	opts := []client.PatchOption{client.FieldOwner(v1alpha1.FieldManager)}
	if dryRun {
		opts = append(opts, client.DryRunAll, client.DisableReadYourWritesConsistency)
	}
	return r.Client.Patch(ctx, gw, client.RawPatch(types.JSONPatchType, patch), opts...)
}

// applied counts and logs a write of the target's listeners.
func (r *Reconciler) applied(ctx context.Context, t target, noop bool, listeners int) {
	result := resultWritten
	if noop {
		result = resultNoop
	}
	gatewayApplies.WithLabelValues(result).Inc()
	log.FromContext(ctx).Info("Applied listeners", "gateway", t.key, "listeners", listeners, "result", result)
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
