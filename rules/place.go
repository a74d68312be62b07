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
	// Message explains a Reason other than Accepted without naming other
	// tenants' objects; the fold says where an accepted listener landed.
	Message string
}

// Placed says whether the listener took its place.
func (p Placement) Placed() bool { return p.Reason == gwv1.ListenerEntryReasonAccepted }

// Trial is what placing a source on a board found before room is counted:
// each listener left out and why, and the listeners that may take a place.
type Trial struct {
	Placements []Placement
	// Fits are the indexes of the listeners that neither conflict nor lack
	// a grant.
	Fits []int
}

// Place places the listeners of src on the board of Gateway gateway, which
// has room for room more listeners, as the fold does, and returns what
// became of each and the room left. A listener without a granted
// certificate (grants by namespace), or conflicting with the board or an
// earlier listener of src, is left out; the others are placed together or,
// past room, not at all, since a route needs them all. A board is one for
// all the Gateways its listeners may land on (a pool's, and the Gateway of
// the ListenerSets): room is counted per Gateway by the caller.
func (b *Board) Place(src *Source, grants map[string][]gwv1.ReferenceGrant, gateway string, room int) ([]Placement, int) {
	t := b.Try(src, grants, gateway, nil)
	if len(t.Fits) > room {
		return t.NoRoom(TooManyListenersMessage(gateway, MaxListeners-room, src.Kind, len(t.Fits))), room
	}
	return b.Commit(src, t, t.Fits), room - len(t.Fits)
}

// Try decides every listener of src but room, and changes nothing: see Place.
// The listeners of withheld, by index, are left out as it says.
func (b *Board) Try(src *Source, grants map[string][]gwv1.ReferenceGrant, gateway string, withheld map[int]Placement) Trial {
	ref := src.Ref()
	t := Trial{Placements: make([]Placement, len(src.Listeners))}
	mine := NewBoard()
	for i, l := range src.Listeners {
		if w, ok := withheld[i]; ok {
			t.Placements[i] = w
			continue
		}
		// Checked on every fold, not only at admission: a revoked grant
		// withdraws the listener.
		if refs := UngrantedRefs(ref.Kind, ref.Namespace, i, l, grants); len(refs) > 0 {
			t.Placements[i] = Placement{Reason: gwv1.ListenerEntryReasonRefNotPermitted, Message: RefNotPermittedMessage(ref.Kind, ref.Namespace, refs[0])}
			continue
		}
		e := EntryOf(l.Port, l.Protocol, l.Hostname)
		c := b.reservedConflict(e, HolderOf(ref, l))
		if c == nil {
			c = conflictOf(e, b, mine)
		}
		if c != nil {
			t.Placements[i] = Placement{Reason: gwv1.ListenerEntryConditionReason(c.Reason), Message: c.Message(e, gateway, ref.Namespace)}
			continue
		}
		mine.Take(HolderOf(ref, l))
		t.Fits = append(t.Fits, i)
	}
	return t
}

// Commit puts the listeners of t with the given indexes (t.Fits, or the part
// that has room after NoRoom) on the board, and returns t's placements. A
// placed listener's Message is left to the fold, which names where it landed.
func (b *Board) Commit(src *Source, t Trial, fits []int) []Placement {
	ref := src.Ref()
	for _, i := range fits {
		b.Take(HolderOf(ref, src.Listeners[i]))
		t.Placements[i] = Placement{Reason: gwv1.ListenerEntryReasonAccepted}
	}
	return t.Placements
}

// NoRoom leaves out every listener of t.Fits with TooManyListeners and msg.
func (t Trial) NoRoom(msg string) []Placement {
	for _, i := range t.Fits {
		t.Placements[i] = Placement{Reason: gwv1.ListenerEntryReasonTooManyListeners, Message: msg}
	}
	return t.Placements
}

// TooManyListenersMessage says that Gateway gateway, with taken of its
// MaxListeners taken, has no room for a source of kind that needs need.
func TooManyListenersMessage(gateway string, taken int, kind string, need int) string {
	fix := "use another Gateway, or remove listeners"
	if kind == KindListenerFragment {
		// A pool spreads fragments; a ListenerSet stays on its Gateway.
		fix = fmt.Sprintf("use another Gateway, remove listeners, or ask its owner for a pool (annotation %s: \"true\")", v1alpha1.PoolAnnotation)
	}
	return fmt.Sprintf("Gateway %s has %d of its %d listeners taken and this %s needs %d: %s", gateway, taken, MaxListeners, kind, need, fix)
}

// NeverFits says why a source of kind with need listeners can never be
// placed on Gateway gateway, whose own listeners are own (every Gateway of
// a pool carries them too), or "" when it may fit.
func NeverFits(kind string, need, own int, gateway string, pooled bool) string {
	if need <= MaxListeners-own {
		return ""
	}
	where := fmt.Sprintf("Gateway %s holds at most %d besides its %d own", gateway, MaxListeners-own, own)
	if pooled {
		where = fmt.Sprintf("a Gateway of the pool of %s holds at most %d besides the head's %d own", gateway, MaxListeners-own, own)
	}
	return fmt.Sprintf("This %s needs %d listeners, and %s: split it into %ss of at most %d", kind, need, where, kind, MaxListeners-own)
}
