package rules

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// Placement is what became of one listener of a source placed on a board.
type Placement struct {
	// Reason is Accepted when the listener takes its place, else why not.
	Reason gwv1.ListenerEntryConditionReason
	// Message explains Reason without naming other tenants' objects.
	Message string
}

// Placed says whether the listener took its place.
func (p Placement) Placed() bool { return p.Reason == gwv1.ListenerEntryReasonAccepted }

// Place places the listeners of lf, a fragment or ListenerSet, on the board
// of Gateway gateway, as the fold does, and returns what became of each. A
// listener whose certificate no ReferenceGrant allows (grants are by
// namespace), or that conflicts with the board or with an earlier listener of
// lf, is left out. The others take their places together or, when they do
// not fit in MaxListeners, not at all: a route needs all of them, and a
// half-placed source could not later move to another Gateway whole.
//
// The fold places every source this way; admission places ListenerSets this
// way too, since a ListenerSet is stored whatever it conflicts with, and
// only what it places may deny a fragment.
func (b *Board) Place(lf *v1alpha1.ListenerFragment, grants map[string][]gwv1.ReferenceGrant, gateway string) []Placement {
	kind := KindOf(lf)
	out := make([]Placement, len(lf.Spec.Listeners))
	local := b.Clone()
	var fits []int
	for i, l := range lf.Spec.Listeners {
		// Checked on every fold, not only at admission: a revoked grant
		// withdraws the listener.
		if refs := UngrantedRefs(kind, lf.Namespace, i, l, grants); len(refs) > 0 {
			out[i] = Placement{Reason: gwv1.ListenerEntryReasonRefNotPermitted, Message: RefNotPermittedMessage(kind, lf.Namespace, refs[0])}
			continue
		}
		e := EntryOf(l.Port, l.Protocol, l.Hostname)
		if c := local.Conflict(e); c != nil {
			out[i] = Placement{Reason: gwv1.ListenerEntryConditionReason(c.Reason), Message: c.Message(e, gateway, lf.Namespace)}
			continue
		}
		local.Take(HolderOf(lf, l))
		fits = append(fits, i)
	}
	if b.Len()+len(fits) > MaxListeners {
		for _, i := range fits {
			out[i] = Placement{Reason: gwv1.ListenerEntryReasonTooManyListeners,
				Message: fmt.Sprintf("Gateway %s has %d of its %d listeners taken and this %s needs %d: move it to another Gateway or remove listeners",
					gateway, b.Len(), MaxListeners, kind, len(fits))}
		}
		return out
	}
	*b = *local
	for _, i := range fits {
		out[i] = Placement{Reason: gwv1.ListenerEntryReasonAccepted,
			Message: fmt.Sprintf("Folded into Gateway %s as listener %q", gateway, GatewayListenerName(lf, lf.Spec.Listeners[i].Name))}
	}
	return out
}
