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
	"k8s.io/apimachinery/pkg/util/sets"
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
)

// routeStatus is what every route kind's status has.
type routeStatus struct {
	Parents []gwv1.RouteParentStatus `json:"parents"`
}

func statusOf(u *unstructured.Unstructured) ([]gwv1.RouteParentStatus, error) {
	var st routeStatus
	m, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		return nil, fmt.Errorf("reading the status of %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
	}
	return st.Parents, nil
}

// conditions returns the Accepted and ResolvedRefs conditions of the user
// route for v, at generation gen: gatefold's refusal, else what the
// implementation said of the derived routes' sections of v.
func conditions(v verdict, gen int64, derived map[section]*unstructured.Unstructured) []metav1.Condition {
	accepted := metav1.Condition{Type: string(gwv1.RouteConditionAccepted), ObservedGeneration: gen}
	if !v.att.Accepted() {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(v.att.Reason), v.att.Message
		if v.att.Reason == gwv1.RouteReasonPending {
			accepted.Status = metav1.ConditionUnknown
		}
		return []metav1.Condition{accepted}
	}
	var acc, refs []metav1.Condition
	for _, l := range v.att.Landings {
		a, rr, ok := reported(derived[sectionOf(l)], l, v.controller, gen)
		if !ok {
			pending := metav1.Condition{Status: metav1.ConditionUnknown, Reason: reasonPending, ObservedGeneration: gen,
				Message: "Waiting for the implementation to judge the route on the listeners it landed on"}
			accepted.Status, accepted.Reason, accepted.Message = pending.Status, pending.Reason, pending.Message
			pending.Type = string(gwv1.RouteConditionResolvedRefs)
			return []metav1.Condition{accepted, pending}
		}
		acc, refs = append(acc, a), append(refs, rr)
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
	return []metav1.Condition{accepted, resolved}
}

// rank orders condition statuses from worst to best.
func rank(s metav1.ConditionStatus) int {
	return map[metav1.ConditionStatus]int{metav1.ConditionFalse: 0, metav1.ConditionUnknown: 1, metav1.ConditionTrue: 2}[s]
}

// reported returns the implementation controller's Accepted and
// ResolvedRefs of the derived route d on landing l, and false until it
// judged d at its generation, copied from the user route's generation gen.
func reported(d *unstructured.Unstructured, l rules.Landing, controller gwv1.GatewayController, gen int64) (accepted, resolved metav1.Condition, ok bool) {
	if d == nil || d.GetAnnotations()[v1alpha1.SourceGenerationAnnotation] != strconv.FormatInt(gen, 10) {
		return accepted, resolved, false
	}
	parents, err := statusOf(d)
	if err != nil {
		return accepted, resolved, false
	}
	for _, p := range parents {
		if p.ControllerName != controller || string(p.ParentRef.Name) != l.Gateway.Name ||
			(p.ParentRef.Namespace != nil && string(*p.ParentRef.Namespace) != l.Gateway.Namespace) ||
			(p.ParentRef.SectionName != nil && *p.ParentRef.SectionName != l.Listener.Name) {
			continue
		}
		a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
		rr := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionResolvedRefs))
		if a == nil || a.ObservedGeneration != d.GetGeneration() {
			continue
		}
		if rr == nil || rr.ObservedGeneration != d.GetGeneration() {
			rr = &metav1.Condition{Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs)}
		}
		return *a, *rr, true
	}
	return accepted, resolved, false
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

// gatefolds says whether entry p is one gatefold writes: for a parentRef
// naming a ListenerFragment, or a ListenerSet with the controllerName of a
// class whose ListenerSets gatefold folds and none of whose classes, native,
// supports ListenerSets itself.
func (r *Reconciler) gatefolds(ns string, p gwv1.RouteParentStatus, native sets.Set[gwv1.GatewayController]) bool {
	src, ok := rules.RouteParent(ns, p.ParentRef)
	if !ok {
		return false
	}
	return src.Kind == rules.KindListenerFragment || r.ListenerSetControllers.Has(string(p.ControllerName)) && !native.Has(p.ControllerName)
}

// nativeControllers returns the controllerNames of the classes whose
// implementation supports ListenerSets itself: their entries for
// ListenerSet parentRefs are the implementation's.
func (r *Reconciler) nativeControllers(ctx context.Context) (sets.Set[gwv1.GatewayController], error) {
	native := sets.New[gwv1.GatewayController]()
	if r.ListenerSetControllers.Len() == 0 {
		return native, nil
	}
	list := &gwv1.GatewayClassList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing GatewayClasses: %w", err)
	}
	for i := range list.Items {
		if rules.SupportsListenerSets(&list.Items[i]) {
			native.Insert(list.Items[i].Spec.ControllerName)
		}
	}
	return native, nil
}

// parents returns the route's status.parents with gatefold's entries as
// the verdicts say, and those entries alone: an entry per verdict, in place
// of the stored one, whose conditions keep their lastTransitionTime while
// their status stands; the entries of other parentRefs and other
// controllers are kept.
func (r *Reconciler) parents(route *unstructured.Unstructured, stored []gwv1.RouteParentStatus, verdicts []verdict, derived map[section]*unstructured.Unstructured, native sets.Set[gwv1.GatewayController]) (all, ours []gwv1.RouteParentStatus) {
	ns := route.GetNamespace()
	entry := func(v verdict) gwv1.RouteParentStatus {
		e := gwv1.RouteParentStatus{ParentRef: v.ref, ControllerName: v.controller}
		for _, p := range stored {
			if p.ControllerName == v.controller && sameParent(ns, p.ParentRef, v.ref) {
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
		i := slices.IndexFunc(verdicts, func(v verdict) bool { return v.controller == p.ControllerName && sameParent(ns, p.ParentRef, v.ref) })
		switch {
		case i >= 0 && !done[i]:
			e := entry(verdicts[i])
			all, ours, done[i] = append(all, e), append(ours, e), true
		case i < 0 && !r.gatefolds(ns, p, native):
			all = append(all, p)
		}
	}
	for i, v := range verdicts {
		if !done[i] {
			e := entry(v)
			all, ours = append(all, e), append(ours, e)
		}
	}
	return all, ours
}

// writeStatus writes the route's status.parents when gatefold's entries
// differ from the stored ones, fenced by the route's resourceVersion. It
// returns when to look again at entries another writer keeps replacing.
func (r *Reconciler) writeStatus(ctx context.Context, route *unstructured.Unstructured, verdicts []verdict, derived map[section]*unstructured.Unstructured) (time.Duration, error) {
	stored, err := statusOf(route)
	if err != nil {
		return 0, err
	}
	native, err := r.nativeControllers(ctx)
	if err != nil {
		return 0, err
	}
	want, ours := r.parents(route, stored, verdicts, derived, native)
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
		r.Recorder.Eventf(route, nil, corev1.EventTypeWarning, "ParentStatusOverwritten", "WriteStatus",
			"Another controller replaced gatefold's status.parents entries for the ListenerFragment or ListenerSet parentRefs; gatefold writes them again after %v", wait.Round(time.Second))
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
