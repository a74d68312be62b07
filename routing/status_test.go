package routing

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

const impl gwv1.GatewayController = "example.com/gateway"

var (
	// marker is the condition that makes an entry gatefold's.
	marker   = metav1.Condition{Type: v1alpha1.RouteConditionDerived, Status: metav1.ConditionTrue, Reason: v1alpha1.RouteReasonDerived, ObservedGeneration: 1}
	gw       = types.NamespacedName{Namespace: "infra", Name: "shared"}
	fragment = gwv1.ParentReference{Group: ptr.To(gwv1.Group("gatefold.dev")), Kind: ptr.To(gwv1.Kind("ListenerFragment")), Name: "lf", SectionName: ptr.To(gwv1.SectionName("web"))}
	landing  = rules.Landing{Gateway: gw, Listener: gwv1.Listener{Name: "shop-lf-web-hash"}}
)

// derivedWith is a derived route at generation gen, copied from the user
// route's generation from, whose implementation entry says accepted at
// generation at; no entry when accepted is "".
func derivedWith(gen, from, at int64, accepted metav1.ConditionStatus) *unstructured.Unstructured {
	d := &unstructured.Unstructured{Object: map[string]any{}}
	d.SetGeneration(gen)
	d.SetAnnotations(map[string]string{v1alpha1.SourceGenerationAnnotation: strconv.FormatInt(from, 10)})
	if accepted == "" {
		return d
	}
	st := routeStatus{Parents: []gwv1.RouteParentStatus{{
		ParentRef:      gwv1.ParentReference{Name: gwv1.ObjectName(gw.Name), Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), SectionName: ptr.To(landing.Listener.Name)},
		ControllerName: impl,
		Conditions: []metav1.Condition{
			{Type: string(gwv1.RouteConditionAccepted), Status: accepted, Reason: "Impl", ObservedGeneration: at},
			{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionFalse, Reason: string(gwv1.RouteReasonBackendNotFound), ObservedGeneration: at},
		},
	}}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		panic(err)
	}
	d.Object["status"] = m
	return d
}

func TestConditionsOfAParentRef(t *testing.T) {
	accepted := rules.Attachment{Reason: gwv1.RouteReasonAccepted, Landings: []rules.Landing{landing}}
	tests := map[string]struct {
		att      rules.Attachment
		derived  *unstructured.Unstructured
		accepted metav1.ConditionStatus
		reason   string
		resolved metav1.ConditionStatus // "" when there is none
	}{
		"refused by gatefold": {att: rules.Attachment{Reason: gwv1.RouteReasonNoMatchingParent, Message: "no listener"},
			accepted: metav1.ConditionFalse, reason: string(gwv1.RouteReasonNoMatchingParent)},
		"parent not folded yet": {att: rules.Attachment{Reason: gwv1.RouteReasonPending, Message: "waiting"},
			accepted: metav1.ConditionUnknown, reason: string(gwv1.RouteReasonPending), resolved: metav1.ConditionUnknown},
		"no derived route yet":        {att: accepted, accepted: metav1.ConditionUnknown, reason: reasonPending, resolved: metav1.ConditionUnknown},
		"not judged yet":              {att: accepted, derived: derivedWith(1, 2, 0, ""), accepted: metav1.ConditionUnknown, reason: reasonPending, resolved: metav1.ConditionUnknown},
		"judged an older derived gen": {att: accepted, derived: derivedWith(2, 2, 1, metav1.ConditionTrue), accepted: metav1.ConditionUnknown, reason: reasonPending, resolved: metav1.ConditionUnknown},
		"copied from an older route":  {att: accepted, derived: derivedWith(1, 1, 1, metav1.ConditionTrue), accepted: metav1.ConditionUnknown, reason: reasonPending, resolved: metav1.ConditionUnknown},
		"judged":                      {att: accepted, derived: derivedWith(1, 2, 1, metav1.ConditionTrue), accepted: metav1.ConditionTrue, reason: "Impl", resolved: metav1.ConditionFalse},
		"refused by the implementation": {att: accepted, derived: derivedWith(1, 2, 1, metav1.ConditionFalse), accepted: metav1.ConditionFalse, reason: "Impl",
			resolved: metav1.ConditionFalse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			derived := derived{routes: map[section]*unstructured.Unstructured{}}
			if tc.derived != nil {
				derived.routes[sectionOf(landing)] = tc.derived
			}
			got := conditions(verdict{ref: fragment, controller: impl, att: tc.att}, 2, derived)
			a := meta.FindStatusCondition(got, string(gwv1.RouteConditionAccepted))
			if a == nil || a.Status != tc.accepted || a.Reason != tc.reason || a.ObservedGeneration != 2 {
				t.Errorf("Accepted = %+v, want %s/%s at generation 2", a, tc.accepted, tc.reason)
			}
			r := meta.FindStatusCondition(got, string(gwv1.RouteConditionResolvedRefs))
			switch {
			case tc.resolved == "" && r != nil:
				t.Errorf("ResolvedRefs = %+v, want none", r)
			case tc.resolved != "" && (r == nil || r.Status != tc.resolved || r.ObservedGeneration != 2):
				t.Errorf("ResolvedRefs = %+v, want %s at generation 2", r, tc.resolved)
			}
		})
	}
}

func TestParentsKeepOthersAndDropStaleEntries(t *testing.T) {
	route := &unstructured.Unstructured{Object: map[string]any{}}
	route.SetNamespace("shop")
	route.SetGeneration(2)
	cond := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: string(gwv1.RouteConditionAccepted), Status: status, Reason: "R", ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
	}
	gatewayRef := gwv1.ParentReference{Name: "shared"}
	otherSet := gwv1.ParentReference{Kind: ptr.To(gwv1.Kind("ListenerSet")), Name: "native"}
	staleFragment := gwv1.ParentReference{Group: ptr.To(gwv1.Group("gatefold.dev")), Kind: ptr.To(gwv1.Kind("ListenerFragment")), Name: "gone"}
	stored := []gwv1.RouteParentStatus{
		{ParentRef: gatewayRef, ControllerName: impl, Conditions: cond(metav1.ConditionTrue)},
		{ParentRef: staleFragment, ControllerName: impl, Conditions: append(cond(metav1.ConditionTrue), marker)},
		{ParentRef: otherSet, ControllerName: "example.com/native", Conditions: cond(metav1.ConditionTrue)},
		{ParentRef: fragment, ControllerName: impl, Conditions: cond(metav1.ConditionFalse)},
	}
	refusal := verdict{ref: fragment, controller: impl, att: rules.Attachment{Reason: gwv1.RouteReasonNotAllowedByListeners, Message: "m"}}
	all, ours := parents(route, stored, []verdict{refusal}, derived{})
	if len(all) != 3 || all[0].ParentRef.Name != "shared" || all[1].ParentRef.Name != "native" || all[2].ParentRef.Name != "lf" {
		t.Fatalf("parents = %+v, want the Gateway's and the native ListenerSet's entries kept in place, the stale fragment's dropped, and gatefold's", all)
	}
	if len(ours) != 1 || !equalParents(ours, all[2:]) {
		t.Errorf("ours = %+v, want gatefold's entry alone", ours)
	}
	c := all[2].Conditions[0]
	if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonNotAllowedByListeners) || c.ObservedGeneration != 2 || c.LastTransitionTime != stored[3].Conditions[0].LastTransitionTime {
		t.Errorf("gatefold's Accepted = %+v, want False/NotAllowedByListeners at generation 2, keeping the stored lastTransitionTime", c)
	}
	if again, _ := parents(route, all, []verdict{refusal}, derived{}); !equalParents(again, all) {
		t.Errorf("parents of what they returned = %+v, want the same: nothing to write", again)
	}
}

func TestReplacedEntriesAreWrittenAgainWithABackoff(t *testing.T) {
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	entries := []gwv1.RouteParentStatus{{ParentRef: fragment, ControllerName: impl}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var m writtenMemo
	if due, _, over := m.due(key, "uid", 1, entries, now, time.Minute); !due || over {
		t.Fatalf("never written: due %v, overwritten %v, want due and not overwritten", due, over)
	}
	m.wrote(key, "uid", 1, entries, now)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		due, wait, over := m.due(key, "uid", 1, entries, now, time.Minute)
		if due || wait != want || over != true {
			t.Fatalf("replaced %d times in a row: due %v, wait %v, overwritten %v; want a wait of %v, reported overwritten", i+1, due, wait, over, want)
		}
		if _, _, over := m.due(key, "uid", 1, entries, now, time.Minute); over {
			t.Fatalf("the same replacement was reported twice")
		}
		now = now.Add(wait)
		if due, _, _ := m.due(key, "uid", 1, entries, now, time.Minute); !due {
			t.Fatalf("not due after the backoff of %v", wait)
		}
		m.wrote(key, "uid", 1, entries, now)
	}
	if due, _, over := m.due(key, "uid", 2, entries, now, time.Minute); !due || over {
		t.Errorf("a new generation: due %v, overwritten %v, want due at once", due, over)
	}
}

// The entry carries the implementation's other condition types, as many
// as fit beside gatefold's marker, and says ResolvedRefs Unknown with a
// reason of its own while it waits: upstream defines Pending for Accepted
// alone.
func TestConditionsCarryOtherTypesAndWaitWithoutPending(t *testing.T) {
	accepted := verdict{ref: fragment, controller: impl, att: rules.Attachment{Reason: gwv1.RouteReasonAccepted, Landings: []rules.Landing{landing}}}
	d := derivedWith(1, 2, 1, metav1.ConditionTrue)
	st, err := statusOf(d)
	if err != nil {
		t.Fatal(err)
	}
	st[0].Conditions = append(st[0].Conditions, metav1.Condition{Type: string(gwv1.RouteConditionPartiallyInvalid), Status: metav1.ConditionTrue, Reason: "UnsupportedValue", ObservedGeneration: 1})
	for i := range maxConditions - len(st[0].Conditions) {
		st[0].Conditions = append(st[0].Conditions, metav1.Condition{Type: fmt.Sprint("example.com/Other", i), Status: metav1.ConditionTrue, Reason: "R", ObservedGeneration: 1})
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&routeStatus{Parents: st})
	if err != nil {
		t.Fatal(err)
	}
	d.Object["status"] = m
	got := conditions(accepted, 2, derived{routes: map[section]*unstructured.Unstructured{sectionOf(landing): d}})
	if c := meta.FindStatusCondition(got, string(gwv1.RouteConditionPartiallyInvalid)); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != 2 {
		t.Errorf("PartiallyInvalid = %+v, want the implementation's True at generation 2", c)
	}
	if c := meta.FindStatusCondition(got, v1alpha1.RouteConditionDerived); len(got) != maxConditions || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("%d conditions, %s = %+v; want %d, gatefold's marker True among them", len(got), v1alpha1.RouteConditionDerived, c, maxConditions)
	}
	waiting := conditions(accepted, 2, derived{})
	if c := meta.FindStatusCondition(waiting, string(gwv1.RouteConditionResolvedRefs)); c == nil || c.Status != metav1.ConditionUnknown || c.Reason == reasonPending {
		t.Errorf("ResolvedRefs while waiting = %+v, want Unknown, not Pending", c)
	}
}

// status.parents holds at most 32 entries: gatefold's last ones give way,
// never another controller's.
func TestParentsFitTheCap(t *testing.T) {
	route := &unstructured.Unstructured{Object: map[string]any{}}
	route.SetNamespace("shop")
	var stored []gwv1.RouteParentStatus
	for i := range maxParents - 1 {
		stored = append(stored, gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: gwv1.ObjectName(fmt.Sprint("gw", i))}, ControllerName: "example.com/other"})
	}
	var verdicts []verdict
	for _, name := range []string{"a", "b"} {
		verdicts = append(verdicts, verdict{ref: gwv1.ParentReference{Group: fragment.Group, Kind: fragment.Kind, Name: gwv1.ObjectName(name)}, controller: impl,
			att: rules.Attachment{Reason: gwv1.RouteReasonNoMatchingParent}})
	}
	all, ours := parents(route, stored, verdicts, derived{})
	if len(all) != maxParents || len(ours) != 1 || ours[0].ParentRef.Name != "a" || !equalParents(all[:maxParents-1], stored) {
		t.Errorf("%d entries, gatefold's %+v; want %d: the others' and gatefold's first", len(all), ours, maxParents)
	}
}

// A route made with its fragment waits first for the fold, then for the
// implementation: the same entry, so that the move costs no status write.
func TestWaitingForTheFoldAndTheImplementationLookAlike(t *testing.T) {
	fold := conditions(verdict{ref: fragment, controller: impl, att: rules.Attachment{Reason: gwv1.RouteReasonPending, Message: "folding"}}, 2, derived{})
	judge := conditions(verdict{ref: fragment, controller: impl, att: rules.Attachment{Reason: gwv1.RouteReasonAccepted, Landings: []rules.Landing{landing}}}, 2, derived{})
	if !reflect.DeepEqual(fold, judge) {
		t.Errorf("waiting for the fold: %+v\nwaiting for the implementation: %+v\nwant the same, or the move costs a write", fold, judge)
	}
}
