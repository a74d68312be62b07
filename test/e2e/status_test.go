package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/testenv"
)

// waitListenerNames waits until the fragment's status says which Gateway
// listener each of its listeners was folded into, and returns those names.
func waitListenerNames(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, listeners ...gwv1.SectionName) map[gwv1.SectionName]gwv1.SectionName {
	t.Helper()
	names := map[gwv1.SectionName]gwv1.SectionName{}
	for l, landed := range waitLanded(t, c, lf, listeners...) {
		names[l] = landed.ListenerName
	}
	return names
}

// waitLanded waits until the fragment's status says where each of its
// listeners was folded (which Gateway, under which name), and returns that.
func waitLanded(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, listeners ...gwv1.SectionName) map[gwv1.SectionName]v1alpha1.GatewayListenerReference {
	t.Helper()
	landed := map[gwv1.SectionName]v1alpha1.GatewayListenerReference{}
	testenv.Eventually(t, servedWithin, func() error {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, client.ObjectKeyFromObject(lf), current)
		for _, l := range current.Status.Listeners {
			if l.Gateway != nil && slices.Contains(listeners, l.Name) {
				landed[l.Name] = *l.Gateway
			}
		}
		if len(landed) == len(listeners) {
			return nil
		}
		return fmt.Errorf("waiting for fragment %s/%s to report where %v were folded; last: %+v", lf.Namespace, lf.Name, listeners, current.Status.Listeners)
	})
	for _, l := range listeners {
		if want := v1alpha1.ListenerName(lf.Namespace, lf.Name, l); landed[l].ListenerName != want {
			t.Errorf("Fragment %s/%s listener %s was folded as %s, want %s (ListenerName)", lf.Namespace, lf.Name, l, landed[l].ListenerName, want)
		}
	}
	return landed
}

// waitProgrammed waits until Traefik's report on every listener of the
// fragment reached its status at its current generation: for each folded
// listener, exactly one entry in the status.listeners of the Gateway the
// fragment's status says it landed on (on a pool, perhaps a sibling),
// Accepted and Programmed True there at or after the Gateway generation that
// carried the listener; the fragment's listener Accepted, ResolvedRefs and
// Programmed True and not Conflicted at its generation, the same as the
// Gateway's entry says, with attachedRoutes as wanted and as the Gateway's;
// and the fragment Programmed.
func waitProgrammed(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, attached map[gwv1.SectionName]int32) {
	t.Helper()
	key := client.ObjectKeyFromObject(lf)
	// since is, by Gateway listener, the Gateway's generation when a poll
	// first found the listener in its spec: at least the generation that
	// first carried it, so Traefik's conditions observed at or after it are
	// about this listener, not an older one or none.
	since := map[v1alpha1.GatewayListenerReference]int64{}
	var summary string
	testenv.Eventually(t, servedWithin, func() error {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, key, current)
		// Each Gateway named is read once a poll, after the fragment.
		gateways := map[client.ObjectKey]*gwv1.Gateway{}
		var problems, lines []string
		gen := current.Generation
		if cond := meta.FindStatusCondition(current.Status.Conditions, string(v1alpha1.FragmentConditionProgrammed)); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != gen {
			problems = append(problems, fmt.Sprintf("fragment Programmed %s", testenv.ConditionString(cond)))
		}
		if len(current.Status.Listeners) != len(attached) {
			problems = append(problems, fmt.Sprintf("%d listeners in the status, want %d", len(current.Status.Listeners), len(attached)))
		}
		for _, l := range current.Status.Listeners {
			want, ok := attached[l.Name]
			if !ok || l.Gateway == nil {
				problems = append(problems, fmt.Sprintf("listener %s unexpected or not folded", l.Name))
				continue
			}
			gwName := l.Gateway.ListenerName
			if expected := v1alpha1.ListenerName(lf.Namespace, lf.Name, l.Name); gwName != expected {
				problems = append(problems, fmt.Sprintf("listener %s folded as %s, want %s", l.Name, gwName, expected))
				continue
			}
			gwKey := client.ObjectKey{Namespace: string(l.Gateway.Namespace), Name: string(l.Gateway.Name)}
			gw := gateways[gwKey]
			if gw == nil {
				gw = &gwv1.Gateway{}
				get(t, c, gwKey, gw)
				gateways[gwKey] = gw
			}
			if _, seen := since[*l.Gateway]; !seen && slices.ContainsFunc(gw.Spec.Listeners, func(gl gwv1.Listener) bool { return gl.Name == gwName }) {
				since[*l.Gateway] = gw.Generation
			}
			minGen, inSpec := since[*l.Gateway]
			if !inSpec {
				problems = append(problems, fmt.Sprintf("listener %s: %s not in the spec of Gateway %s (generation %d)", l.Name, gwName, gwKey, gw.Generation))
				continue
			}
			// The report is Traefik's: first, what the Gateway's status says
			// of this listener, as it is.
			var entries []gwv1.ListenerStatus
			for _, gl := range gw.Status.Listeners {
				if gl.Name == gwName {
					entries = append(entries, gl)
				}
			}
			if len(entries) != 1 {
				problems = append(problems, fmt.Sprintf("listener %s: %d entries named %s in the status.listeners of Gateway %s, want 1", l.Name, len(entries), gwName, gwKey))
				continue
			}
			theirs := entries[0]
			reported := true
			for _, typ := range []gwv1.ListenerConditionType{gwv1.ListenerConditionAccepted, gwv1.ListenerConditionProgrammed} {
				cond := meta.FindStatusCondition(theirs.Conditions, string(typ))
				if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration < minGen {
					problems = append(problems, fmt.Sprintf("Gateway %s's status of %s: %s %s, want True at generation %d or later", gwKey, gwName, typ, testenv.ConditionString(cond), minGen))
					reported = false
				}
			}
			if !reported {
				continue
			}
			// Then the fragment's, at its generation, and the same.
			for typ, status := range map[gwv1.ListenerConditionType]metav1.ConditionStatus{
				gwv1.ListenerConditionAccepted:     metav1.ConditionTrue,
				gwv1.ListenerConditionResolvedRefs: metav1.ConditionTrue,
				gwv1.ListenerConditionProgrammed:   metav1.ConditionTrue,
				gwv1.ListenerConditionConflicted:   metav1.ConditionFalse,
			} {
				cond := meta.FindStatusCondition(l.Conditions, string(typ))
				if cond == nil || cond.Status != status || cond.ObservedGeneration != gen {
					problems = append(problems, fmt.Sprintf("listener %s %s %s, want %s at generation %d", l.Name, typ, testenv.ConditionString(cond), status, gen))
					continue
				}
				gc := meta.FindStatusCondition(theirs.Conditions, string(typ))
				if gc == nil || gc.ObservedGeneration < minGen {
					continue // Traefik does not report it on this listener: gatefold's own.
				}
				if gc.Status != cond.Status || gc.Reason != cond.Reason || gc.Message != cond.Message {
					problems = append(problems, fmt.Sprintf("listener %s %s %s differs from Gateway %s's status of %s: %s", l.Name, typ, testenv.ConditionString(cond), gwKey, gwName, testenv.ConditionString(gc)))
				}
			}
			if l.AttachedRoutes != want || theirs.AttachedRoutes != want {
				problems = append(problems, fmt.Sprintf("listener %s attachedRoutes %d, Gateway %s's status of %s %d, want %d", l.Name, l.AttachedRoutes, gwKey, gwName, theirs.AttachedRoutes, want))
			}
			programmed := meta.FindStatusCondition(theirs.Conditions, string(gwv1.ListenerConditionProgrammed))
			lines = append(lines, fmt.Sprintf("%s as %s of Gateway %s (in its spec at generation %d): Programmed %s, attachedRoutes %d", l.Name, gwName, gwKey, minGen, testenv.ConditionString(programmed), l.AttachedRoutes))
		}
		summary = fmt.Sprintf("generation %d; %s", gen, strings.Join(lines, "; "))
		if len(problems) > 0 {
			return fmt.Errorf("waiting for Traefik's report on fragment %s to reach its status; last: %s", key, strings.Join(problems, "; "))
		}
		return nil
	})
	t.Logf("Fragment %s: %s", key, summary)
}

// waitConflicted waits until the merger reports each listener of the
// fragment conflicted with the reason given, and the fragment not accepted.
func waitConflicted(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, reasons map[gwv1.SectionName]string) {
	t.Helper()
	key := client.ObjectKeyFromObject(lf)
	testenv.Eventually(t, servedWithin, func() error {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, key, current)
		ok := meta.IsStatusConditionFalse(current.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) && len(current.Status.Listeners) == len(reasons)
		for _, l := range current.Status.Listeners {
			cond := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionConflicted))
			ok = ok && l.Gateway == nil && cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == reasons[l.Name]
		}
		if ok {
			return nil
		}
		return fmt.Errorf("waiting for fragment %s to be reported conflicted; last: %+v", key, current.Status)
	})
	gw := &gwv1.Gateway{}
	get(t, c, client.ObjectKey{Namespace: string(*lf.Spec.ParentRef.Namespace), Name: string(lf.Spec.ParentRef.Name)}, gw)
	for _, l := range gw.Spec.Listeners {
		for name := range reasons {
			if l.Name == v1alpha1.ListenerName(lf.Namespace, lf.Name, name) {
				t.Errorf("The Gateway carries %s, listener %s of conflicted fragment %s", l.Name, name, key)
			}
		}
	}
	t.Logf("Fragment %s is not accepted and not on the Gateway; its listeners are conflicted: %v", key, reasons)
}
