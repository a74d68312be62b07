package rules

import (
	"cmp"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Board is a Gateway's listeners as they are taken, first come first served:
// the Gateway's own listeners, then fragments in precedence order. Admission
// checks a fragment against the board of the Gateway's own listeners; the
// fold fills it in precedence order. Both ask the same question of it.
type Board struct {
	tuples map[Tuple]Holder
	// ports holds, per port, the first holder of each group there.
	ports map[gwv1.PortNumber][]Holder
	count int
	// reservedTuples and reservedGroups hold the listeners whose tuples
	// are reserved for their sources (see Reserve), in the order reserved:
	// by tuple, and by port and group for the groups that exclude others
	// from their port (a pool's head reserves thousands on one port).
	reservedTuples map[Tuple][]reservation
	reservedGroups map[portGroup][]reservation
	reservations   int
}

// reservation is a reserved listener and when it was reserved.
type reservation struct {
	Holder
	seq int
}

type portGroup struct {
	port  gwv1.PortNumber
	group Group
}

// NewBoard returns an empty board.
func NewBoard() *Board {
	return &Board{tuples: map[Tuple]Holder{}, ports: map[gwv1.PortNumber][]Holder{}}
}

// Clone returns a board that can be filled without changing b.
func (b *Board) Clone() *Board {
	ports := make(map[gwv1.PortNumber][]Holder, len(b.ports))
	for p, hs := range b.ports {
		ports[p] = slices.Clone(hs)
	}
	return &Board{tuples: maps.Clone(b.tuples), ports: ports, count: b.count,
		reservedTuples: cloneLists(b.reservedTuples), reservedGroups: cloneLists(b.reservedGroups), reservations: b.reservations}
}

func cloneLists[K comparable](m map[K][]reservation) map[K][]reservation {
	if m == nil {
		return nil
	}
	out := make(map[K][]reservation, len(m))
	for k, rs := range m {
		out[k] = slices.Clone(rs)
	}
	return out
}

// Reserve keeps h's tuple for h's source: until h is taken, a listener of
// another source that conflicts with h cannot join the board, whatever its
// precedence. The fold reserves the tuples admission's claims hold. Of two
// reservations that cannot share a port, the first keeps it.
func (b *Board) Reserve(h Holder) {
	if b.reservedConflict(h.Entry, h) != nil {
		return
	}
	if b.reservedTuples == nil {
		b.reservedTuples, b.reservedGroups = map[Tuple][]reservation{}, map[portGroup][]reservation{}
	}
	r := reservation{Holder: h, seq: b.reservations}
	b.reservations++
	b.reservedTuples[h.Entry.Tuple()] = append(b.reservedTuples[h.Entry.Tuple()], r)
	if g := GroupOf(h.Entry.Protocol); excludes(g) {
		key := portGroup{port: h.Entry.Port, group: g}
		b.reservedGroups[key] = append(b.reservedGroups[key], r)
	}
}

// reservedConflict returns the conflict of e, a listener of source src, with
// the first listener reserved for another source that e conflicts with (its
// tuple, or a group that cannot share e's port); nil when there is none.
func (b *Board) reservedConflict(e Entry, src Holder) *Conflict {
	var first *reservation
	// Each scan skips only src's own listeners.
	earliest := func(rs []reservation) {
		for i := range rs {
			if rs[i].sameSource(src) {
				continue
			}
			if first == nil || rs[i].seq < first.seq {
				first = &rs[i]
			}
			return
		}
	}
	earliest(b.reservedTuples[e.Tuple()])
	if g := GroupOf(e.Protocol); excludes(g) {
		for _, other := range []Group{GroupHTTP, GroupTLS, GroupTCP} {
			if other != g {
				earliest(b.reservedGroups[portGroup{port: e.Port, group: other}])
			}
		}
	}
	if first == nil {
		return nil
	}
	return ConflictOf(e, first.Holder)
}

// Len is how many listeners the board holds.
func (b *Board) Len() int { return b.count }

// Take puts a listener on the board, whether or not it conflicts: a
// Gateway's own listeners are there regardless.
func (b *Board) Take(h Holder) {
	t := h.Entry.Tuple()
	if _, taken := b.tuples[t]; !taken {
		b.tuples[t] = h
	}
	g := GroupOf(h.Entry.Protocol)
	if !slices.ContainsFunc(b.ports[h.Entry.Port], func(o Holder) bool { return GroupOf(o.Entry.Protocol) == g }) {
		b.ports[h.Entry.Port] = append(b.ports[h.Entry.Port], h)
	}
	b.count++
}

// Conflict returns why e cannot join the board, or nil. A port conflict is
// reported before a duplicate tuple: it is the one the user must fix first.
func (b *Board) Conflict(e Entry) *Conflict { return conflictOf(e, b) }

// conflictOf is Conflict on the union of the boards, read in order.
func conflictOf(e Entry, boards ...*Board) *Conflict {
	for _, b := range boards {
		for _, h := range b.ports[e.Port] {
			if !CanSharePort(GroupOf(e.Protocol), GroupOf(h.Entry.Protocol)) {
				return ConflictOf(e, h)
			}
		}
	}
	for _, b := range boards {
		if h, taken := b.tuples[e.Tuple()]; taken {
			return ConflictOf(e, h)
		}
	}
	return nil
}

// sameSource says whether h and o are listeners of one source.
func (h Holder) sameSource(o Holder) bool {
	return cmp.Or(h.Kind, KindListenerFragment) == cmp.Or(o.Kind, KindListenerFragment) && h.Namespace == o.Namespace && h.Fragment == o.Fragment
}

// ReserveClaimed reserves on b each listener of a source of sources (those
// the fold places, in precedence order) whose tuple that source's claim
// holds: claims maps each claimed tuple to the fragment holding it.
func ReserveClaimed(b *Board, sources []Source, claims map[Tuple]types.NamespacedName) {
	if len(claims) == 0 {
		return
	}
	for i := range sources {
		src := &sources[i]
		if src.Kind != KindListenerFragment {
			continue
		}
		for _, l := range src.Listeners {
			if holder, ok := claims[EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()]; ok && holder.Namespace == src.Namespace && holder.Name == src.Name {
				b.Reserve(HolderOf(src.Ref(), l))
			}
		}
	}
}
