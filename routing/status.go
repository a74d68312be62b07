package routing

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// Reasons of gatefold's own route conditions.
const (
	// reasonPending: the implementation has not judged the derived routes
	// at the user route's generation yet.
	reasonPending = string(gwv1.RouteReasonPending)
	// reasonWaiting, of ResolvedRefs Unknown, says the same: upstream
	// defines Pending for Accepted alone.
	reasonWaiting = "WaitingForImplementation"
	// reasonNameTaken: an object gatefold did not make for the route holds
	// the name of a derived route it needs.
	reasonNameTaken = "DerivedRouteNameTaken"
)

// maxParents is how many status.parents entries a route may have.
const maxParents = 32

// routeStatus is what every route kind's status has.
type routeStatus struct {
	Parents []gwv1.RouteParentStatus `json:"parents"`
}

func statusOf(u *unstructured.Unstructured) ([]gwv1.RouteParentStatus, error) {
	var st routeStatus
	err := decode(u, "status", &st)
	return st.Parents, err
}

// hasOwnEntry says whether route's status.parents has an entry gatefold
// wrote.
func hasOwnEntry(route *unstructured.Unstructured) bool {
	parents, err := statusOf(route)
	return err == nil && slices.ContainsFunc(parents, own)
}

// own says whether entry p is gatefold's: it carries the marker
// RouteConditionDerived, which a restart does not forget. Entries without
// it are another writer's, whatever parentRef, controllerName or
// conditions they have.
func own(p gwv1.RouteParentStatus) bool {
	return meta.FindStatusCondition(p.Conditions, v1alpha1.RouteConditionDerived) != nil
}

// maxConditions is how many conditions a status.parents entry may have.
const maxConditions = 8

// conditions returns the conditions of the user route's entry for v, at
// generation gen: judged's, and the marker RouteConditionDerived.
func conditions(v verdict, gen int64, derived derived) []metav1.Condition {
	return append(judged(v, gen, derived), metav1.Condition{Type: v1alpha1.RouteConditionDerived, Status: metav1.ConditionTrue,
		Reason: v1alpha1.RouteReasonDerived, ObservedGeneration: gen,
		Message: "Written by gatefold, which serves this parentRef through derived routes (gf-) in this namespace"})
}

// judged returns the conditions of the user route for v, at generation
// gen: gatefold's refusal, else what the implementation said of the
// derived routes' sections of v: Accepted when any section is,
// ResolvedRefs the worst, other types as the first section reporting them,
// as many as fit beside the marker.
func judged(v verdict, gen int64, derived derived) []metav1.Condition {
	accepted := metav1.Condition{Type: string(gwv1.RouteConditionAccepted), ObservedGeneration: gen}
	if v.att.Reason == gwv1.RouteReasonPending {
		return waiting(gen)
	}
	if !v.att.Accepted() {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(v.att.Reason), v.att.Message
		return []metav1.Condition{accepted}
	}
	var acc, refs, others []metav1.Condition
	for _, l := range v.att.Landings {
		if name, ok := derived.taken[sectionOf(l)]; ok {
			acc = append(acc, metav1.Condition{Status: metav1.ConditionFalse, Reason: reasonNameTaken,
				Message: fmt.Sprintf("Route %s in this namespace is not gatefold's: delete or rename it, and gatefold serves this route", name)})
			refs = append(refs, metav1.Condition{Status: metav1.ConditionUnknown, Reason: reasonWaiting, Message: "Not judged: the route is not served yet"})
			continue
		}
		conds, ok := reported(derived.routes[sectionOf(l)], l, v.controller, gen)
		if !ok {
			return waiting(gen)
		}
		for _, c := range conds {
			switch c.Type {
			case string(gwv1.RouteConditionAccepted):
				acc = append(acc, c)
			case string(gwv1.RouteConditionResolvedRefs):
				refs = append(refs, c)
			default:
				if meta.FindStatusCondition(others, c.Type) == nil && len(others) < maxConditions-3 {
					others = append(others, c)
				}
			}
		}
	}
	best := acc[0]
	for _, c := range acc {
		if c.Status == metav1.ConditionTrue {
			best = c
			break
		}
	}
	worst := refs[0]
	for _, c := range refs {
		if rank(c.Status) < rank(worst.Status) {
			worst = c
		}
	}
	accepted.Status, accepted.Reason, accepted.Message = best.Status, best.Reason, best.Message
	resolved := metav1.Condition{Type: string(gwv1.RouteConditionResolvedRefs), Status: worst.Status, Reason: worst.Reason, Message: worst.Message, ObservedGeneration: gen}
	out := []metav1.Condition{accepted, resolved}
	for _, c := range others {
		out = append(out, metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, ObservedGeneration: gen})
	}
	return out
}

// waiting are the conditions of an entry gatefold cannot judge yet: the
// listeners are not folded, or the implementation has not judged the
// derived routes. One wording for both, so that a route made with its
// fragment gets one Pending write, not two.
func waiting(gen int64) []metav1.Condition {
	const msg = "Waiting for the listeners to be folded and the implementation to judge the route"
	return []metav1.Condition{
		{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionUnknown, Reason: reasonPending, Message: msg, ObservedGeneration: gen},
		{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionUnknown, Reason: reasonWaiting, Message: msg, ObservedGeneration: gen},
	}
}

// rank orders condition statuses from worst to best.
func rank(s metav1.ConditionStatus) int {
	switch s {
	case metav1.ConditionFalse:
		return 0
	case metav1.ConditionUnknown:
		return 1
	}
	return 2
}

// reported returns the implementation controller's conditions of the
// derived route d on landing l, Accepted and ResolvedRefs always, and false
// until it judged d at its generation, copied from the user route's
// generation gen.
func reported(d *unstructured.Unstructured, l rules.Landing, controller gwv1.GatewayController, gen int64) ([]metav1.Condition, bool) {
	if d == nil || d.GetAnnotations()[v1alpha1.SourceGenerationAnnotation] != strconv.FormatInt(gen, 10) {
		return nil, false
	}
	parents, err := statusOf(d)
	if err != nil {
		return nil, false
	}
	for _, p := range parents {
		if p.ControllerName != controller || string(p.ParentRef.Name) != l.Gateway.Name ||
			(p.ParentRef.Namespace != nil && string(*p.ParentRef.Namespace) != l.Gateway.Namespace) ||
			(p.ParentRef.SectionName != nil && *p.ParentRef.SectionName != l.Listener.Name) {
			continue
		}
		if a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); a == nil || a.ObservedGeneration != d.GetGeneration() {
			continue
		}
		conds := slices.DeleteFunc(slices.Clone(p.Conditions), func(c metav1.Condition) bool { return c.ObservedGeneration != d.GetGeneration() })
		if meta.FindStatusCondition(conds, string(gwv1.RouteConditionResolvedRefs)) == nil {
			conds = append(conds, metav1.Condition{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs)})
		}
		return conds, true
	}
	return nil, false
}

// sameParent says whether two parentRefs are the same, defaults applied
// as the route's namespace sees them.
func sameParent(ns string, a, b gwv1.ParentReference) bool {
	norm := func(r gwv1.ParentReference) string {
		group, kind, refNS, section, port := gwv1.GroupName, "Gateway", ns, "", ""
		if r.Group != nil {
			group = string(*r.Group)
		}
		if r.Kind != nil {
			kind = string(*r.Kind)
		}
		if r.Namespace != nil && *r.Namespace != "" {
			refNS = string(*r.Namespace)
		}
		if r.SectionName != nil {
			section = string(*r.SectionName)
		}
		if r.Port != nil {
			port = strconv.Itoa(int(*r.Port))
		}
		return group + "/" + kind + "/" + refNS + "/" + string(r.Name) + "/" + section + "/" + port
	}
	return norm(a) == norm(b)
}

// matches says whether stored entry p is v's.
func (v verdict) matches(ns string, p gwv1.RouteParentStatus) bool {
	return v.controller == p.ControllerName && sameParent(ns, p.ParentRef, v.ref)
}

// parents returns the route's status.parents with gatefold's entries as
// the verdicts say, and those entries alone: an entry per verdict, in place
// of the stored one, whose conditions keep their lastTransitionTime while
// their status stands; gatefold's own entries that no verdict matches go;
// the entries of other parentRefs and other writers are kept.
func parents(route *unstructured.Unstructured, stored []gwv1.RouteParentStatus, verdicts []verdict, derived derived) (all, ours []gwv1.RouteParentStatus) {
	ns := route.GetNamespace()
	entry := func(v verdict) gwv1.RouteParentStatus {
		e := gwv1.RouteParentStatus{ParentRef: v.ref, ControllerName: v.controller}
		for _, p := range stored {
			if v.matches(ns, p) {
				e.Conditions = slices.Clone(p.Conditions)
			}
		}
		want := conditions(v, route.GetGeneration(), derived)
		e.Conditions = slices.DeleteFunc(e.Conditions, func(c metav1.Condition) bool { return meta.FindStatusCondition(want, c.Type) == nil })
		for _, c := range want {
			meta.SetStatusCondition(&e.Conditions, c)
		}
		return e
	}
	done := make([]bool, len(verdicts))
	for _, p := range stored {
		i := slices.IndexFunc(verdicts, func(v verdict) bool { return v.matches(ns, p) })
		switch {
		case i >= 0 && !done[i]:
			e := entry(verdicts[i])
			all, ours, done[i] = append(all, e), append(ours, e), true
		case i < 0 && !own(p):
			all = append(all, p)
		}
	}
	for i, v := range verdicts {
		if !done[i] {
			e := entry(v)
			all, ours = append(all, e), append(ours, e)
		}
	}
	return trim(ns, all, ours)
}

// trim drops gatefold's last entries, ours, from all until all fits the
// maxParents a route may have, and returns what is left of both.
func trim(ns string, all, ours []gwv1.RouteParentStatus) ([]gwv1.RouteParentStatus, []gwv1.RouteParentStatus) {
	for len(all) > maxParents && len(ours) > 0 {
		last := ours[len(ours)-1]
		ours = ours[:len(ours)-1]
		if i := slices.IndexFunc(all, func(p gwv1.RouteParentStatus) bool {
			return p.ControllerName == last.ControllerName && sameParent(ns, p.ParentRef, last.ParentRef)
		}); i >= 0 {
			all = slices.Delete(all, i, i+1)
		}
	}
	return all, ours
}

// writeStatus writes the route's status.parents when gatefold's entries
// differ from the stored ones, fenced by the route's resourceVersion. It
// returns when to look again at entries another writer keeps replacing.
func (r *Reconciler) writeStatus(ctx context.Context, route *unstructured.Unstructured, verdicts []verdict, derived derived) (time.Duration, error) {
	stored, err := statusOf(route)
	if err != nil {
		return 0, err
	}
	want, ours := parents(route, stored, verdicts, derived)
	if dropped := len(verdicts) - len(ours); dropped > 0 {
		r.tooManyParents(ctx, route, dropped)
	}
	if equalParents(stored, want) {
		statusWrites.WithLabelValues(resultUnchanged).Inc()
		return 0, nil
	}
	now := time.Now()
	key := client.ObjectKeyFromObject(route)
	due, wait, overwritten := r.written.due(key, route.GetUID(), route.GetGeneration(), ours, now, r.Resync)
	if overwritten {
		statusOverwritten.Inc()
		log.FromContext(ctx).Info("Another writer replaced gatefold's status entries of a route", "route", klog.KObj(route), "delay", wait)
		if r.fenced() == nil {
			r.Recorder.Eventf(route, nil, corev1.EventTypeWarning, "ParentStatusOverwritten", "WriteStatus",
				"Another controller replaced gatefold's status.parents entries for the ListenerFragment or ListenerSet parentRefs; gatefold writes them again after %v", wait.Round(time.Second))
		}
	}
	if !due {
		statusWrites.WithLabelValues(resultDeferred).Inc()
		return wait, nil
	}
	if err := r.fenced(); err != nil {
		return 0, err
	}
	if want == nil {
		want = []gwv1.RouteParentStatus{} // status.parents is required, and may be empty
	}
	next := route.DeepCopy()
	list, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&routeStatus{Parents: want})
	if err != nil {
		return 0, fmt.Errorf("building the status of %s %s: %w", r.GVK.Kind, key, err)
	}
	if err := unstructured.SetNestedField(next.Object, list["parents"], "status", "parents"); err != nil {
		return 0, fmt.Errorf("building the status of %s %s: %w", r.GVK.Kind, key, err)
	}
	if err := r.Client.Status().Update(ctx, next); err != nil {
		statusWrites.WithLabelValues(resultOf(err)).Inc()
		return 0, fmt.Errorf("writing the status of %s %s: %w", r.GVK.Kind, key, err)
	}
	statusWrites.WithLabelValues(resultWritten).Inc()
	r.written.wrote(key, route.GetUID(), route.GetGeneration(), ours, now)
	log.FromContext(ctx).V(1).Info("Wrote a route's status entries", "route", klog.KObj(route), "entries", len(verdicts))
	return 0, nil
}

// tooManyParents reports that dropped of gatefold's entries of route do not
// fit in its status.parents.
func (r *Reconciler) tooManyParents(ctx context.Context, route *unstructured.Unstructured, dropped int) {
	parentsDropped.Add(float64(dropped))
	log.FromContext(ctx).Info("A route's status.parents has no room for all of gatefold's entries", "route", klog.KObj(route), "dropped", dropped)
	if r.fenced() == nil {
		r.Recorder.Eventf(route, nil, corev1.EventTypeWarning, "TooManyParents", "WriteStatus",
			"status.parents holds at most %d entries: %d parentRefs get none; name fewer parents in spec.parentRefs", maxParents, dropped)
	}
}

// equalParents compares entries as implementations do: lastTransitionTime
// aside.
func equalParents(a, b []gwv1.RouteParentStatus) bool {
	strip := func(ps []gwv1.RouteParentStatus) []gwv1.RouteParentStatus {
		out := make([]gwv1.RouteParentStatus, len(ps))
		for i, p := range ps {
			p.Conditions = slices.Clone(p.Conditions)
			for j := range p.Conditions {
				p.Conditions[j].LastTransitionTime = metav1.Time{}
			}
			out[i] = p
		}
		return out
	}
	return reflect.DeepEqual(strip(a), strip(b))
}
