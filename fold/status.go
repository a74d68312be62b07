package fold

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
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

// NotAccepted is the status of a source none of whose listeners the fold
// considered.
func NotAccepted(src *rules.Source, reason v1alpha1.FragmentConditionReason, msg string) v1alpha1.ListenerFragmentStatus {
	return v1alpha1.ListenerFragmentStatus{Conditions: []metav1.Condition{
		condition(v1alpha1.FragmentConditionAccepted, metav1.ConditionFalse, reason, src.Generation, msg),
		condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionFalse, reason, src.Generation, "Not accepted: "+msg),
	}}
}

// NoGateway is the status of a source whose parent Gateway does not exist.
func NoGateway(src *rules.Source) v1alpha1.ListenerFragmentStatus {
	return NotAccepted(src, v1alpha1.FragmentReasonParentNotAccepted, fmt.Sprintf("Gateway %s does not exist", src.Parent()))
}

// deleting is the status of a source being deleted: gatefold withdrew its
// listeners, so no route controller follows it to a Gateway.
func deleting(src *rules.Source) v1alpha1.ListenerFragmentStatus {
	gw := src.Parent()
	if src.Kind == rules.KindListenerSet {
		gw.Name = rules.ListenerSetGatewayName(gw.Name)
	}
	msg := fmt.Sprintf("This %s is being deleted: gatefold withdrew its listeners from Gateway %s", src.Kind, gw)
	st := NotAccepted(src, v1alpha1.FragmentReasonDeleting, msg)
	st.Conditions[1].Message = msg
	for _, l := range src.Listeners {
		st.Listeners = append(st.Listeners, v1alpha1.ListenerStatus{Name: l.Name, Conditions: []metav1.Condition{
			condition(gwv1.ListenerEntryConditionAccepted, metav1.ConditionFalse, v1alpha1.FragmentReasonDeleting, src.Generation, msg),
			condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionFalse, gwv1.ListenerReasonNoConflicts, src.Generation, "No conflicts"),
			condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionFalse, v1alpha1.FragmentReasonDeleting, src.Generation, msg),
		}})
	}
	return st
}

// Carries says whether the Gateway's spec holds listener l exactly as folded.
func Carries(gw *gwv1.Gateway, l *gwv1.Listener) bool {
	return slices.ContainsFunc(gw.Spec.Listeners, func(c gwv1.Listener) bool { return equality.Semantic.DeepEqual(c, *l) })
}

// reportedFor returns what the Gateway implementation reports of listener l
// once it has seen it as folded: only if the Gateway's spec carries l as it
// is, and only conditions observed at or after `since`, the generation that
// first carried it; else nothing, and the listener stays Pending.
func reportedFor(gw *gwv1.Gateway, l *gwv1.Listener, since int64) (gwv1.ListenerStatus, bool) {
	if !Carries(gw, l) {
		return gwv1.ListenerStatus{}, false
	}
	for _, s := range gw.Status.Listeners {
		if s.Name != l.Name {
			continue
		}
		out := gwv1.ListenerStatus{Name: s.Name, AttachedRoutes: s.AttachedRoutes, SupportedKinds: s.SupportedKinds}
		for _, c := range s.Conditions {
			// A refusal without observedGeneration (Traefik's
			// UnsupportedProtocol, DuplicateListener) is taken as current:
			// the spec carries l.
			if c.ObservedGeneration >= since || (c.ObservedGeneration == 0 && implementationRefusal([]metav1.Condition{c}) != nil) {
				out.Conditions = append(out.Conditions, c)
			}
		}
		// Without a current Programmed condition, attachedRoutes may be
		// counted for an older listener of the same name; a refusal
		// counts all the same.
		if meta.FindStatusCondition(out.Conditions, string(gwv1.ListenerConditionProgrammed)) == nil {
			if implementationRefusal(out.Conditions) == nil {
				return gwv1.ListenerStatus{}, false
			}
			out.AttachedRoutes = 0
		}
		return out, true
	}
	return gwv1.ListenerStatus{}, false
}

// notFolded are the conditions of a listener the fold left out. A
// conflicted listener says the conflict in all three conditions, as
// upstream's ListenerSet does; one whose certificate is not granted, or
// whose route kinds its protocol cannot carry, says so in ResolvedRefs.
func notFolded(src *rules.Source, o Outcome) []metav1.Condition {
	conflicted := condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionFalse, gwv1.ListenerReasonNoConflicts, src.Generation, "No conflicts")
	programmed := condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionFalse, gwv1.ListenerEntryReasonInvalid, src.Generation, "Not folded into the Gateway: "+o.Message)
	conds := []metav1.Condition{condition(gwv1.ListenerEntryConditionAccepted, metav1.ConditionFalse, o.Reason, src.Generation, o.Message)}
	switch o.Reason {
	case gwv1.ListenerEntryReasonHostnameConflict, gwv1.ListenerEntryReasonProtocolConflict:
		conflicted = condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionTrue, o.Reason, src.Generation, o.Message)
		programmed = condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionFalse, o.Reason, src.Generation, o.Message)
	case gwv1.ListenerEntryReasonRefNotPermitted, gwv1.ListenerEntryConditionReason(gwv1.ListenerReasonInvalidRouteKinds):
		conds = append(conds, condition(gwv1.ListenerEntryConditionResolvedRefs, metav1.ConditionFalse, o.Reason, src.Generation, o.Message))
	}
	return append(conds, conflicted, programmed)
}

// fragmentStatus reports each of a source's listener's outcome and, for folded ones, what
// the Gateway implementation says of it. since is, by listener name, the
// Gateway generation that first carried each folded listener as it is.
func fragmentStatus(src *rules.Source, gw *gwv1.Gateway, since map[gwv1.SectionName]int64, outcomes []Outcome) v1alpha1.ListenerFragmentStatus {
	st := v1alpha1.ListenerFragmentStatus{}
	folded, tooMany, programmed := 0, 0, 0
	var notProgrammed *metav1.Condition
	for _, o := range outcomes {
		ls := v1alpha1.ListenerStatus{Name: o.Listener}
		switch {
		case o.Folded():
			folded++
			name := rules.GatewayListenerName(src.Ref(), o.Listener)
			ls.Gateway = &v1alpha1.GatewayListenerReference{Namespace: gwv1.Namespace(gw.Namespace), Name: gwv1.ObjectName(gw.Name), ListenerName: name}
			ls.Conditions = []metav1.Condition{
				condition(gwv1.ListenerEntryConditionAccepted, metav1.ConditionTrue, gwv1.ListenerEntryReasonAccepted, src.Generation, o.Message),
				condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionFalse, gwv1.ListenerReasonNoConflicts, src.Generation, "No conflicts"),
				condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionUnknown, gwv1.ListenerEntryReasonPending, src.Generation, "Waiting for the Gateway implementation"),
			}
			gen, known := since[name]
			if !known {
				gen = gw.Generation
			}
			if r, ok := reportedFor(gw, o.GatewayListener, gen); ok {
				ls.AttachedRoutes, ls.SupportedKinds = r.AttachedRoutes, r.SupportedKinds
				for _, t := range mirrored {
					if c := meta.FindStatusCondition(r.Conditions, string(t)); c != nil {
						c := *c
						c.ObservedGeneration, c.LastTransitionTime = src.Generation, metav1.Time{}
						ls.Conditions = replaceCondition(ls.Conditions, c)
					}
				}
			}
			switch p := meta.FindStatusCondition(ls.Conditions, string(gwv1.ListenerEntryConditionProgrammed)); p.Status {
			case metav1.ConditionTrue:
				programmed++
			case metav1.ConditionFalse:
				if notProgrammed == nil {
					c := condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionFalse, v1alpha1.FragmentReasonListenersNotValid, src.Generation,
						fmt.Sprintf("Listener %q is not programmed: %s", o.Listener, p.Message))
					notProgrammed = &c
				}
			}
		case o.Refusal != "":
			ls.Conditions = withdrawnConditions(src, o)
		default:
			if o.Reason == gwv1.ListenerEntryReasonTooManyListeners {
				tooMany++
			}
			ls.Conditions = notFolded(src, o)
		}
		st.Listeners = append(st.Listeners, ls)
	}

	gwKey := gatewayKey(gw)
	switch {
	case folded == 0 && tooMany == len(outcomes):
		// Upstream's ListenerSet has TooManyListeners per listener only.
		reason := v1alpha1.FragmentReasonTooManyListeners
		if src.Kind == rules.KindListenerSet {
			reason = v1alpha1.FragmentReasonListenersNotValid
		}
		st.Conditions = NotAccepted(src, reason,
			fmt.Sprintf("No room for the %s's %d listeners: %s", src.Kind, len(outcomes), outcomes[0].Message)).Conditions
	case folded == 0:
		st.Conditions = NotAccepted(src, v1alpha1.FragmentReasonListenersNotValid,
			"No listener could be folded: see status.listeners").Conditions
	default:
		msg := fmt.Sprintf("Folded %d listeners into Gateway %s", folded, gwKey)
		if n := len(outcomes) - folded; n > 0 {
			msg += fmt.Sprintf("; %d not folded: see status.listeners", n)
		}
		st.Conditions = []metav1.Condition{condition(v1alpha1.FragmentConditionAccepted, metav1.ConditionTrue, v1alpha1.FragmentReasonAccepted, src.Generation, msg)}
		switch {
		case notProgrammed != nil:
			st.Conditions = append(st.Conditions, *notProgrammed)
		case programmed == folded:
			st.Conditions = append(st.Conditions, condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionTrue, v1alpha1.FragmentReasonProgrammed, src.Generation,
				fmt.Sprintf("The Gateway implementation programmed all %d folded listeners", folded)))
		default:
			st.Conditions = append(st.Conditions, condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionUnknown, v1alpha1.FragmentReasonPending, src.Generation,
				fmt.Sprintf("Waiting for the Gateway implementation to program %d of %d folded listeners", folded-programmed, folded)))
		}
	}
	return st
}

// notServedBeside says why the Gateway of the ListenerSets, sets, as read,
// does not serve them as parent is served: its implementation reports it
// not programmed, or gives it other addresses than parent's (the class must
// serve one address for all). "" while neither is known.
func notServedBeside(parent, sets *gwv1.Gateway) (gwv1.GatewayConditionReason, string) {
	if c := meta.FindStatusCondition(sets.Status.Conditions, string(gwv1.GatewayConditionProgrammed)); c != nil &&
		c.Status == metav1.ConditionFalse && c.ObservedGeneration == sets.Generation {
		return gwv1.GatewayConditionReason(c.Reason), fmt.Sprintf("Gateway %s, which carries this ListenerSet, is not programmed: %s", gatewayKey(sets), c.Message)
	}
	at := func(gw *gwv1.Gateway) []string {
		var out []string
		for _, a := range gw.Status.Addresses {
			out = append(out, a.Value)
		}
		slices.Sort(out)
		return out
	}
	if p, s := at(parent), at(sets); len(p) > 0 && len(s) > 0 && !slices.Equal(p, s) {
		return gwv1.GatewayReasonAddressNotUsable, fmt.Sprintf("Gateway %s, which carries this ListenerSet, is at %s, Gateway %s at %s: its class must give both one address",
			gatewayKey(sets), strings.Join(s, ","), gatewayKey(parent), strings.Join(p, ","))
	}
	return "", ""
}

// servedBeside sets st's Programmed to False when the Gateway of the
// ListenerSets that carries the ListenerSet of st does not serve it as its
// parent is served (notServedBeside).
func servedBeside(st *v1alpha1.ListenerFragmentStatus, src *rules.Source, parent, sets *gwv1.Gateway) {
	if reason, msg := notServedBeside(parent, sets); msg != "" && meta.IsStatusConditionTrue(st.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
		st.Conditions = replaceCondition(st.Conditions, condition(v1alpha1.FragmentConditionProgrammed, metav1.ConditionFalse, reason, src.Generation, msg))
	}
}
