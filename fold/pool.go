package fold

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/rules"
)

// Pool is the rest of the pool a Gateway heads (v1alpha1.PoolAnnotation): the
// siblings gatefold created from it.
type Pool struct {
	// Siblings are the pool's other Gateways, in pool order (by the number
	// their names end with), none being deleted.
	Siblings []Sibling
	// NoGrowth says why the pool may not create another sibling, empty when
	// it may: the API server refused one.
	NoGrowth string
	// Draining is set when the head is no longer marked: what its siblings
	// carry stays there, nothing new lands on them, and they empty.
	Draining bool
	// Names are the names of every Gateway in the head's namespace: a new
	// sibling takes the first name free.
	Names sets.Set[string]
}

// Sibling is a Gateway gatefold created for a pool, as read.
type Sibling struct {
	Gateway *gwv1.Gateway
	// Managed are the listeners gatefold applied to it: the head's own ones
	// it carries too, and the folded ones.
	Managed sets.Set[gwv1.SectionName]
	// CarriedSince is Input.CarriedSince for this Gateway.
	CarriedSince map[gwv1.SectionName]int64
}

// SiblingListeners is what the fold decided for one sibling of a pool.
type SiblingListeners struct {
	Name string
	// Gateway and Managed are the sibling as read; Gateway is nil for one
	// to create.
	Gateway *gwv1.Gateway
	Managed sets.Set[gwv1.SectionName]
	// Listeners are the listeners folded into it, besides the head's own
	// listeners it carries; none for a sibling that is left empty.
	Listeners []gwv1.Listener
}

// pool is the Gateways one fold fills: the Gateway, its pool's siblings, and
// the Gateway of its ListenerSets. A tuple is taken once for all rooms (one
// unlimited board), each room's room is counted apart, and in a pool a folded
// fragment stays where it is. Fragments land on the Gateway or, in a pool, a
// sibling; ListenerSets only on their own Gateway (sets).
type pool struct {
	board  *rules.Board
	rooms  []*room
	sets   *room
	pooled bool
	// stays are the rooms that carry a source's listeners now.
	stays    map[rules.SourceRef]stay
	noGrowth string
	draining bool
	names    sets.Set[string]
	head     *gwv1.Gateway
	own      int
}

// room is one Gateway of a pool as the fold fills it.
type room struct {
	gw      *gwv1.Gateway // a placeholder for a sibling to create
	exists  bool
	managed sets.Set[gwv1.SectionName]
	since   map[gwv1.SectionName]int64
	// taken counts the listeners it holds; reserved those of the sources
	// that stay on it and are not placed yet; added those someone else
	// added to a Gateway gatefold created (rules.TakeAdded).
	taken, reserved, added int
	listeners              []gwv1.Listener
}

func (r *room) free() int { return rules.MaxListeners - r.taken - r.reserved }

// stay is where a source's listeners are now: the room that carries most of
// them, and which ones.
type stay struct {
	room    int
	carried sets.Set[gwv1.SectionName]
}

// newPool makes the pool of one fold: sources are all the Gateway's sources
// (their listener names are not a sibling's own), placeable those the fold
// places, in precedence order.
func newPool(in *Input, own []gwv1.Listener, sources, placeable []rules.Source) *pool {
	head := &room{gw: in.Gateway, exists: true, managed: in.Managed, since: in.CarriedSince, taken: len(own)}
	p := &pool{board: rules.OwnBoard(own), rooms: []*room{head}, head: in.Gateway, own: len(own)}
	if s := in.ListenerSetGateway; s != nil {
		added := rules.TakeAdded(p.board, s.Gateway, s.Managed, sources)
		p.sets = &room{gw: s.Gateway, exists: true, managed: s.Managed, since: s.CarriedSince, taken: added, added: added}
	}
	if in.Pool == nil {
		return p
	}
	p.pooled, p.noGrowth, p.draining, p.names = true, in.Pool.NoGrowth, in.Pool.Draining, in.Pool.Names
	for _, s := range in.Pool.Siblings {
		p.rooms = append(p.rooms, &room{gw: s.Gateway, exists: true, managed: s.Managed, since: s.CarriedSince, taken: len(own) + rules.TakeAdded(p.board, s.Gateway, s.Managed, sources)})
	}
	fragments := slices.DeleteFunc(slices.Clone(placeable), func(src rules.Source) bool { return src.Kind == rules.KindListenerSet })
	p.stays = stays(p.rooms, fragments)
	// Room is reserved oldest first: where a Gateway no longer holds what
	// its sources carry (the head's own listeners grew), its youngest ones
	// lose their place, and move as new ones would.
	for i := range fragments {
		key := fragments[i].Ref()
		if s, ok := p.stays[key]; ok {
			if r := p.rooms[s.room]; r.taken+r.reserved+s.carried.Len() > rules.MaxListeners {
				delete(p.stays, key)
				continue
			}
			p.rooms[s.room].reserved += s.carried.Len()
		}
	}
	return p
}

// stays finds, for every source, the room that carries most of its
// listeners now (the first of equals).
func stays(rooms []*room, sources []rules.Source) map[rules.SourceRef]stay {
	on := map[gwv1.SectionName]int{}
	for i, r := range rooms {
		for _, l := range r.gw.Spec.Listeners {
			if r.managed.Has(l.Name) {
				on[l.Name] = i
			}
		}
	}
	out := map[rules.SourceRef]stay{}
	for i := range sources {
		src := &sources[i]
		carried := map[int]sets.Set[gwv1.SectionName]{}
		for _, l := range src.Listeners {
			if r, ok := on[rules.GatewayListenerName(src.Ref(), l.Name)]; ok {
				if carried[r] == nil {
					carried[r] = sets.New[gwv1.SectionName]()
				}
				carried[r].Insert(l.Name)
			}
		}
		best := -1
		for r := range rooms {
			if carried[r].Len() > 0 && (best < 0 || carried[r].Len() > carried[best].Len()) {
				best = r
			}
		}
		if best >= 0 {
			out[src.Ref()] = stay{room: best, carried: carried[best]}
		}
	}
	return out
}

// place places a source's listeners, but those withheld (by index), and
// returns what became of each, and the room it landed in (the head when
// none landed).
func (p *pool) place(src *rules.Source, grants map[string][]gwv1.ReferenceGrant, withheld map[int]rules.Placement) ([]rules.Placement, *room) {
	if src.Kind == rules.KindListenerSet {
		return p.placeSet(src, p.board.Try(src, grants, p.head.Namespace+"/"+rules.ListenerSetGatewayName(p.head.Name), withheld))
	}
	t := p.board.Try(src, grants, gatewayKey(p.head), withheld)
	switch {
	case !p.pooled:
		head := p.rooms[0]
		if len(t.Fits) > rules.Room(src.Kind, p.head, p.own, 0)-(head.taken-p.own) {
			return t.NoRoom(rules.TooManyListenersMessage(gatewayKey(p.head), head.taken, src.Kind, len(t.Fits))), head
		}
		return p.commit(src, t, t.Fits, head), head
	}
	s, stays := p.stays[src.Ref()]
	if stays {
		p.rooms[s.room].reserved -= s.carried.Len()
	}
	if len(t.Fits) == 0 {
		return t.Placements, p.rooms[0]
	}
	if stays {
		// Sticky: a folded source never moves while its Gateway has room for
		// what it carries there, so its traffic is never cut over.
		r := p.rooms[s.room]
		if len(t.Fits) <= r.free() {
			return p.commit(src, t, t.Fits, r), r
		}
		var kept []int
		for _, i := range t.Fits {
			if s.carried.Has(src.Listeners[i].Name) {
				kept = append(kept, i)
			}
		}
		if len(kept) > 0 && len(kept) <= r.free() {
			t.NoRoom(fmt.Sprintf("Gateway %s, which carries this %s's other listeners, has no room for %d more and a folded %s never moves: put them in a new %s, or free room there",
				gatewayKey(r.gw), src.Kind, len(t.Fits)-len(kept), src.Kind, src.Kind))
			return p.commit(src, t, kept, r), r
		}
		// None of what it carries is still wanted (its listeners were
		// renamed or now conflict): it is placed as a new source.
	}
	need := len(t.Fits)
	// Counted as admission and the claims count it: every listener.
	if msg := rules.NeverFits(src.Kind, len(src.Listeners), p.own, gatewayKey(p.head), true); msg != "" {
		return t.NoRoom(msg), p.rooms[0]
	}
	candidates := len(p.rooms)
	if p.draining {
		// Once the head is unmarked, what is new lands on it alone.
		candidates = 1
	}
	for i := range candidates {
		if need <= p.rooms[i].free() {
			return p.commit(src, t, t.Fits, p.rooms[i]), p.rooms[i]
		}
	}
	switch {
	case p.draining:
		return t.NoRoom(rules.TooManyListenersMessage(gatewayKey(p.head), p.rooms[0].taken+p.rooms[0].reserved, src.Kind, need)), p.rooms[0]
	case p.noGrowth != "":
		return t.NoRoom(fmt.Sprintf("The %d Gateways of the pool of %s have no room for this %s's %d listeners, and the pool does not grow: %s",
			len(p.rooms), gatewayKey(p.head), src.Kind, need, p.noGrowth)), p.rooms[0]
	}
	i := p.grow()
	return p.commit(src, t, t.Fits, p.rooms[i]), p.rooms[i]
}

// placeSet places the listeners of a ListenerSet that fit (t), all or none,
// on the Gateway of the ListenerSets, created when one lands there first.
func (p *pool) placeSet(src *rules.Source, t rules.Trial) ([]rules.Placement, *room) {
	if len(t.Fits) == 0 {
		return t.Placements, p.rooms[0]
	}
	if p.sets == nil {
		gw := &gwv1.Gateway{}
		gw.Namespace, gw.Name = p.head.Namespace, rules.ListenerSetGatewayName(p.head.Name)
		p.sets = &room{gw: gw}
	}
	if r := p.sets; len(t.Fits) > rules.Room(src.Kind, p.head, p.own, r.added)-(r.taken-r.added) {
		return t.NoRoom(rules.TooManyListenersMessage(gatewayKey(r.gw), r.taken, src.Kind, len(t.Fits))), p.rooms[0]
	}
	return p.commit(src, t, t.Fits, p.sets), p.sets
}

// grow adds a room for a sibling to create, named by the first number free.
func (p *pool) grow() int {
	taken := p.names.Clone()
	for _, r := range p.rooms {
		taken.Insert(r.gw.Name)
	}
	n := 2
	for taken.Has(rules.SiblingName(p.head.Name, n)) {
		n++
	}
	gw := &gwv1.Gateway{}
	gw.Namespace, gw.Name = p.head.Namespace, rules.SiblingName(p.head.Name, n)
	p.rooms = append(p.rooms, &room{gw: gw, taken: p.own})
	return len(p.rooms) - 1
}

func (p *pool) commit(src *rules.Source, t rules.Trial, fits []int, r *room) []rules.Placement {
	r.taken += len(fits)
	return p.board.Commit(src, t, fits)
}

// siblings returns what the fold decided for every sibling, in pool order.
func (p *pool) siblings() []SiblingListeners {
	var out []SiblingListeners
	for _, r := range p.rooms[1:] {
		out = append(out, r.decided())
	}
	return out
}

// listenerSetGateway returns what the fold decided for the Gateway of the
// ListenerSets, nil when it neither exists nor is needed.
func (p *pool) listenerSetGateway() *SiblingListeners {
	if p.sets == nil {
		return nil
	}
	s := p.sets.decided()
	return &s
}

func (r *room) decided() SiblingListeners {
	s := SiblingListeners{Name: r.gw.Name, Managed: r.managed, Listeners: r.listeners}
	if r.exists {
		s.Gateway = r.gw
	}
	return s
}
