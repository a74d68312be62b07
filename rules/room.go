package rules

import (
	"math"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TakeAdded puts on b the listeners someone else added to gw, a Gateway
// gatefold created beside a parent (a pool sibling, the Gateway of the
// ListenerSets): like the parent's own, they hold their tuples on every
// Gateway of the parent. managed are gatefold's listeners on gw, sources
// the parent's. It returns how many there are.
func TakeAdded(b *Board, gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], sources []Source) int {
	added := OwnListeners(gw, managed, sources)
	for _, l := range added {
		b.Take(Holder{Gateway: gw.Namespace + "/" + gw.Name, Listener: l.Name, Entry: EntryOf(l.Port, l.Protocol, l.Hostname)})
	}
	return len(added)
}

// Room is how many listeners the sources of kind may take, together, on
// the Gateways a fold of gw fills before any is placed: for fragments, gw's
// MaxListeners but its own listeners (own), unlimited on a pool's head,
// which grows; for ListenerSets, the MaxListeners of the Gateway of the
// ListenerSets but the listeners someone else added there (added). The
// fold and admission both count by it; how a pool's head spreads fragments
// over its Gateways is the fold's alone.
func Room(kind string, gw *gwv1.Gateway, own, added int) int {
	switch {
	case kind == KindListenerSet:
		return MaxListeners - added
	case PoolHead(gw):
		return math.MaxInt
	}
	return MaxListeners - own
}

// Stored is what admission reads of a Gateway to check a fragment against,
// besides claims (StoredBoard).
type Stored struct {
	Gateway *gwv1.Gateway
	// Sources are the Gateway's stored fragments and folded ListenerSets
	// that the fold places: not being deleted, of namespaces it admits.
	Sources []Source
	// Claims are the claimed tuples and their holders (ReserveClaimed).
	Claims map[Tuple]types.NamespacedName
	// Grants are the ReferenceGrants of the namespaces the sources'
	// certificateRefs point into, by namespace.
	Grants map[string][]gwv1.ReferenceGrant
	// ListenerSets is the Gateway of its ListenerSets, as read; nil when
	// there is none.
	ListenerSets *gwv1.Gateway
	// Skip is the source being checked, whose stored spec is not on the
	// board.
	Skip SourceRef
}

// StoredBoard returns the board admission checks a fragment against, and
// the Gateway's own listeners: those own listeners, the listeners someone
// added to the Gateway of its ListenerSets, the tuples claims reserve, then,
// in precedence order, what the fold places of the stored sources, room
// counted per kind (Room). ListenerSets the fold does not fold
// (ListenerSetGatewayBlocked) are left out, as is what no room is left for:
// what the fold does not place blocks no one.
func StoredBoard(s Stored) (*Board, []gwv1.Listener) {
	own := OwnListeners(s.Gateway, ManagedListeners(s.Gateway), s.Sources)
	b := OwnBoard(own)
	sources := s.Sources
	added := 0
	if ListenerSetGatewayBlocked(s.Gateway, s.ListenerSets) != "" {
		var fragments []Source
		for _, src := range sources {
			if src.Kind != KindListenerSet {
				fragments = append(fragments, src)
			}
		}
		sources = fragments
	} else if s.ListenerSets != nil {
		added = TakeAdded(b, s.ListenerSets, ManagedListeners(s.ListenerSets), s.Sources)
	}
	room := map[string]int{}
	for _, kind := range []string{KindListenerFragment, KindListenerSet} {
		room[kind] = Room(kind, s.Gateway, len(own), added)
	}
	sources = append([]Source(nil), sources...)
	SortByPrecedence(sources)
	ReserveClaimed(b, sources, s.Claims)
	gateway := s.Gateway.Namespace + "/" + s.Gateway.Name
	for i := range sources {
		if sources[i].Ref() == s.Skip {
			continue
		}
		_, room[sources[i].Kind] = b.Place(&sources[i], s.Grants, gateway, room[sources[i].Kind])
	}
	return b, own
}
