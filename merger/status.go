package merger

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// The status a fragment gets is part of the fold: pure, from the outcomes
// and the Gateway implementation's own listener status.

// mirrored are the Gateway listener conditions copied to a folded listener.
var mirrored = []gwv1.ListenerConditionType{
	gwv1.ListenerConditionAccepted,
	gwv1.ListenerConditionConflicted,
	gwv1.ListenerConditionResolvedRefs,
	gwv1.ListenerConditionProgrammed,
}

func condition[T, R ~string](t T, s metav1.ConditionStatus, r R, gen int64, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: s, Reason: string(r), ObservedGeneration: gen, Message: msg}
}

// replaceCondition replaces the condition of c's type, or appends it, without
// meta.SetStatusCondition's clock: the fold stays pure.
func replaceCondition(conds []metav1.Condition, c metav1.Condition) []metav1.Condition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

// notAccepted is the status of a fragment none of whose listeners the fold
// considered.
func notAccepted(lf *v1alpha1.ListenerFragment, reason v1alpha1.FragmentConditionReason, msg string) v1alpha1.ListenerFragmentStatus {
	return v1alpha1.ListenerFragmentStatus{Conditions: []metav1.Condition{
		condition(v1alpha1.FragmentConditionAccepted, metav1.ConditionFalse, reason, lf.Generation, msg),
		condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionFalse, reason, lf.Generation, "Not accepted: "+msg),
	}}
}

// fragmentStatus reports each listener's outcome and, for folded ones, what
// the Gateway implementation says of it.
func fragmentStatus(lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, outcomes []Outcome) v1alpha1.ListenerFragmentStatus {
	reported := map[gwv1.SectionName]gwv1.ListenerStatus{}
	for _, s := range gw.Status.Listeners {
		reported[s.Name] = s
	}
	st := v1alpha1.ListenerFragmentStatus{}
	folded, tooMany, programmed := 0, 0, 0
	var notProgrammed *metav1.Condition
	for _, o := range outcomes {
		ls := v1alpha1.ListenerStatus{Name: o.Listener}
		switch {
		case o.Folded():
			folded++
			name := v1alpha1.ListenerName(lf.Namespace, lf.Name, o.Listener)
			ls.Gateway = &v1alpha1.GatewayListenerReference{Namespace: gwv1.Namespace(gw.Namespace), Name: gwv1.ObjectName(gw.Name), ListenerName: name}
			ls.Conditions = []metav1.Condition{
				condition(gwv1.ListenerEntryConditionAccepted, metav1.ConditionTrue, gwv1.ListenerEntryReasonAccepted, lf.Generation, o.Message),
				condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionFalse, gwv1.ListenerReasonNoConflicts, lf.Generation, "No conflicts"),
				condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionUnknown, gwv1.ListenerEntryReasonPending, lf.Generation, "Waiting for the Gateway implementation"),
			}
			if r, ok := reported[name]; ok {
				ls.AttachedRoutes = r.AttachedRoutes
				for _, t := range mirrored {
					if c := meta.FindStatusCondition(r.Conditions, string(t)); c != nil {
						c := *c
						c.ObservedGeneration, c.LastTransitionTime = lf.Generation, metav1.Time{}
						ls.Conditions = replaceCondition(ls.Conditions, c)
					}
				}
			}
			switch p := meta.FindStatusCondition(ls.Conditions, string(gwv1.ListenerEntryConditionProgrammed)); p.Status {
			case metav1.ConditionTrue:
				programmed++
			case metav1.ConditionFalse:
				if notProgrammed == nil {
					c := condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionFalse, v1alpha1.FragmentReasonListenersNotValid, lf.Generation,
						fmt.Sprintf("Listener %q is not programmed: %s", o.Listener, p.Message))
					notProgrammed = &c
				}
			}
		default:
			if o.Reason == gwv1.ListenerEntryReasonTooManyListeners {
				tooMany++
			}
			conflicted := condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionFalse, gwv1.ListenerReasonNoConflicts, lf.Generation, "No conflicts")
			if o.Reason != gwv1.ListenerEntryReasonTooManyListeners {
				conflicted = condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionTrue, o.Reason, lf.Generation, o.Message)
			}
			ls.Conditions = []metav1.Condition{
				condition(gwv1.ListenerEntryConditionAccepted, metav1.ConditionFalse, o.Reason, lf.Generation, o.Message),
				conflicted,
				condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionFalse, gwv1.ListenerEntryReasonInvalid, lf.Generation, "Not folded into the Gateway"),
			}
		}
		st.Listeners = append(st.Listeners, ls)
	}

	gwKey := gatewayKey(gw)
	switch {
	case folded == 0 && tooMany == len(outcomes):
		st.Conditions = notAccepted(lf, v1alpha1.FragmentReasonTooManyListeners,
			fmt.Sprintf("Gateway %s has no room for the fragment's %d listeners", gwKey, len(outcomes))).Conditions
	case folded == 0:
		st.Conditions = notAccepted(lf, v1alpha1.FragmentReasonListenersNotValid,
			"No listener could be folded: see status.listeners").Conditions
	default:
		msg := fmt.Sprintf("Folded %d listeners into Gateway %s", folded, gwKey)
		if n := len(outcomes) - folded; n > 0 {
			msg += fmt.Sprintf("; %d not folded: see status.listeners", n)
		}
		st.Conditions = []metav1.Condition{condition(v1alpha1.FragmentConditionAccepted, metav1.ConditionTrue, v1alpha1.FragmentReasonAccepted, lf.Generation, msg)}
		switch {
		case notProgrammed != nil:
			st.Conditions = append(st.Conditions, *notProgrammed)
		case programmed == folded:
			st.Conditions = append(st.Conditions, condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionTrue, v1alpha1.FragmentReasonProgrammed, lf.Generation,
				fmt.Sprintf("The Gateway implementation programmed all %d folded listeners", folded)))
		default:
			st.Conditions = append(st.Conditions, condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionUnknown, v1alpha1.FragmentReasonPending, lf.Generation,
				fmt.Sprintf("Waiting for the Gateway implementation to program %d of %d folded listeners", folded-programmed, folded)))
		}
	}
	return st
}
