package soak

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
)

// monitor checks the promises that hold at every moment, from the watch
// events of fragments, ListenerSets, Gateways, Namespaces and ReferenceGrants:
//
//   - no two stored fragments that both passed admission hold clashing
//     tuples of one Gateway (or pool): a fragment passed admission with a
//     tuple when it was created or updated to it while its Gateway existed
//     and admitted its namespace, which had not opted out, and it has wanted
//     it since without a break in admission longer than the claim grace;
//   - a folded listener of such a fragment never passes to another source
//     while the fragment is stored, admitted, unchanged and its grant is
//     there, and no own listener took the tuple.
//
// Events of different kinds reach the test in slightly different orders, so
// a tuple is exempt when, within margin of taking it, admitted(namespace,
// Gateway) changed for its fragment; a holder change is exempt too when
// the fragment or a grant it reads changed, or an own listener clashing
// with the tuple came or went, within margin. A finding is reported only
// once margin has passed without such a change.
type monitor struct {
	margin, grace time.Duration
	gateways      map[types.NamespacedName]*gatewaySeen
	namespaces    map[string]*namespaceSeen
	fragments     map[types.NamespacedName]*fragmentSeen
	// flipped is when admitted(namespace, Gateway) last changed.
	flipped map[admission]time.Time
	// grants are the stored ReferenceGrants by namespace and name, and
	// granted when one there that lets a namespace in last changed.
	grants  map[string]map[string]*gwv1beta1.ReferenceGrant
	granted map[grantee]time.Time
	// names maps each listener name gatefold gives a stored source's
	// listener to the source ("ListenerFragment ns/name").
	names map[gwv1.SectionName]string
	// holders is, per parent Gateway (a pool's head), the Gateway listener
	// that last held each tuple on it, its siblings or its Gateway of the ListenerSets.
	holders map[types.NamespacedName]map[entry]gwv1.SectionName
	due     []finding
	cover   coverage
}

// coverage counts what the monitor judged and what it let pass as exempt.
type coverage struct {
	// tuples taken by fragments: judged against the others, exempt, or
	// taken without passing admission.
	judged, exempt, unadmitted int
	// changes of a tuple's holder away from a stored fragment: judged
	// (kept or freed by the rules) or exempt.
	movesJudged, movesExempt int
}

// grantee is a namespace of ReferenceGrants and a namespace they may let in.
type grantee struct{ ns, from string }

// admission is a namespace and a Gateway sources of it may name.
type admission struct {
	ns string
	gw types.NamespacedName
}

type gatewaySeen struct {
	gw *gwv1.Gateway // nil once deleted
	// own is when each own listener (by entry) last came or went.
	own map[entry]time.Time
}

type namespaceSeen struct {
	labels map[string]string
	known  bool
}

type fragmentSeen struct {
	lf     *v1alpha1.ListenerFragment
	parent types.NamespacedName
	tuples map[entry]*acquired // by listener entry; none while being deleted
	// changed is when its generation last changed.
	changed time.Time
	// broke is when its Gateway stopped admitting it; zero while admitted.
	broke time.Time
}

// acquired is when a fragment took a tuple, and whether admission checked it then.
type acquired struct {
	at     time.Time
	passed bool // admitted with a live claim, and wanted since without a break past the grace
	exempt bool // a change within margin of at could explain a duplicate
}

// finding is a violation to report at due unless check, run then, says it is explained.
type finding struct {
	due   time.Time
	check func() string
}

// newMonitor is a monitor with slack margin around changes, for gatefold
// run with claim grace grace.
func newMonitor(margin, grace time.Duration) *monitor {
	return &monitor{margin: margin, grace: grace, gateways: map[types.NamespacedName]*gatewaySeen{}, namespaces: map[string]*namespaceSeen{},
		fragments: map[types.NamespacedName]*fragmentSeen{}, flipped: map[admission]time.Time{},
		grants: map[string]map[string]*gwv1beta1.ReferenceGrant{}, granted: map[grantee]time.Time{},
		names: map[gwv1.SectionName]string{}, holders: map[types.NamespacedName]map[entry]gwv1.SectionName{}}
}

// observe takes one watch event seen at at (deleted: a delete event) and
// returns the violations that became certain by then.
func (m *monitor) observe(at time.Time, obj client.Object, deleted bool) []string {
	m.lapse(at)
	switch o := obj.(type) {
	case *v1alpha1.ListenerFragment:
		m.fragment(at, o, deleted)
	case *gwv1.ListenerSet:
		m.name(setSource(o), deleted)
	case *gwv1.Gateway:
		m.gateway(at, o, deleted)
	case *corev1.Namespace:
		m.namespace(at, o, deleted)
	case *gwv1beta1.ReferenceGrant:
		m.grant(at, o, deleted)
	case *gwv1.ReferenceGrant:
		m.grant(at, (*gwv1beta1.ReferenceGrant)(o), deleted)
	}
	return m.flush(at, false)
}

func (m *monitor) flush(at time.Time, all bool) []string {
	var out []string
	kept := m.due[:0]
	for _, f := range m.due {
		if !all && at.Before(f.due) {
			kept = append(kept, f)
			continue
		}
		if msg := f.check(); msg != "" {
			out = append(out, msg)
		}
	}
	m.due = kept
	return out
}

// coverage is a one-line summary of what the monitor judged and exempted.
func (m *monitor) coverage() string {
	c := m.cover
	return fmt.Sprintf("monitor: tuples %d judged, %d exempt, %d not admitted; holder changes %d judged, %d exempt",
		c.judged, c.exempt, c.unadmitted, c.movesJudged, c.movesExempt)
}

// late says whether the test saw lf's last write more than margin after it
// was made (a relist after a broken watch): what admitted it then is not
// known.
func (m *monitor) late(at time.Time, lf *v1alpha1.ListenerFragment) bool {
	w := lastWrite(lf)
	return !w.IsZero() && at.Sub(w) > m.margin+time.Second
}

// near says whether a change seen at change could have come within margin
// of a write made at written, by the API server's clock in whole seconds:
// a watch that lags can deliver the write after a later change.
func (m *monitor) near(written, change time.Time) bool {
	if written.IsZero() || change.IsZero() {
		return false
	}
	d := change.Sub(written)
	return d > -m.margin-time.Second && d < m.margin+time.Second
}

// lastWrite is when lf's spec or metadata was last written, as its
// creationTimestamp and managedFields say; zero when they say nothing.
func lastWrite(lf *v1alpha1.ListenerFragment) time.Time {
	w := lf.CreationTimestamp.Time
	for _, f := range lf.ManagedFields {
		if f.Subresource == "" && f.Time != nil && f.Time.After(w) {
			w = f.Time.Time
		}
	}
	return w
}

func (m *monitor) recent(at, change time.Time) bool {
	return !change.IsZero() && !change.Before(at.Add(-m.margin))
}

// admitted says whether fragments of namespace ns pass admission on Gateway gw now.
func (m *monitor) admitted(ns string, gw types.NamespacedName) bool {
	g := m.gateways[gw]
	if g == nil || g.gw == nil {
		return false
	}
	if _, made := madeBy(g.gw); made {
		return false
	}
	n := m.namespaces[ns]
	if n == nil || n.labels[optOutLabel] == optOutValue {
		return false
	}
	return allows(g.gw, ns, n.labels, n.known)
}

// name records (or forgets) the Gateway listener names of a source.
func (m *monitor) name(s *source, gone bool) {
	for _, l := range s.listeners {
		n := s.listenerName(l.Name)
		if gone {
			if m.names[n] == s.String() {
				delete(m.names, n)
			}
			continue
		}
		m.names[n] = s.String()
	}
}

// standing is admitted for every namespace and Gateway seen.
func (m *monitor) standing() map[admission]bool {
	out := map[admission]bool{}
	for gw := range m.gateways {
		for ns := range m.namespaces {
			out[admission{ns, gw}] = m.admitted(ns, gw)
		}
	}
	return out
}

// change applies a change of a namespace or Gateway and handles every
// admitted(namespace, Gateway) it flips.
func (m *monitor) change(at time.Time, apply func()) {
	was := m.standing()
	apply()
	for p, now := range m.standing() {
		if was[p] != now {
			m.flip(at, p, now)
		}
	}
}

// flip records that admitted(p) became now at at: the tuples its fragments
// took within margin before are exempt, and their break begins or ends.
func (m *monitor) flip(at time.Time, p admission, now bool) {
	m.flipped[p] = at
	for _, f := range m.fragments {
		if f.lf.Namespace != p.ns || f.parent != p.gw {
			continue
		}
		for _, a := range f.tuples {
			if !m.recent(at, a.at) || a.at.After(at) || a.exempt {
				continue
			}
			if a.passed {
				m.cover.judged--
				m.cover.exempt++
			}
			a.exempt = true
		}
		switch {
		case now:
			f.broke = time.Time{}
		case f.broke.IsZero():
			f.broke = at
		}
	}
}

// lapse ends the claims of fragments not admitted for grace less margin by
// at: gatefold may have released them.
func (m *monitor) lapse(at time.Time) {
	for _, f := range m.fragments {
		if !f.broke.IsZero() && at.Sub(f.broke) >= m.grace-m.margin {
			for _, a := range f.tuples {
				a.passed = false
			}
		}
	}
}

func (m *monitor) namespace(at time.Time, ns *corev1.Namespace, deleted bool) {
	n := m.namespaces[ns.Name]
	if n == nil {
		n = &namespaceSeen{}
		m.namespaces[ns.Name] = n
	}
	if !deleted && n.known && reflect.DeepEqual(n.labels, ns.Labels) {
		return
	}
	m.change(at, func() {
		if deleted {
			n.labels, n.known = nil, false
		} else {
			n.labels, n.known = ns.Labels, true
		}
	})
}

func (m *monitor) gateway(at time.Time, gw *gwv1.Gateway, deleted bool) {
	k := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
	g := m.gateways[k]
	if g == nil {
		g = &gatewaySeen{own: map[entry]time.Time{}}
		m.gateways[k] = g
	}
	now := gw
	if deleted {
		now = nil
	}
	was := ownEntries(g.gw)
	for e := range ownEntries(now) {
		if !was[e] {
			g.own[e] = at
		}
		delete(was, e)
	}
	for e := range was {
		g.own[e] = at
	}
	m.change(at, func() { g.gw = now })
	if deleted {
		return
	}
	head := k
	if h, made := madeBy(gw); made {
		head.Name = h
	}
	m.carried(at, head, gw)
}

// ownEntries are the entries of gw's own listeners (none for nil).
func ownEntries(gw *gwv1.Gateway) map[entry]bool {
	out := map[entry]bool{}
	if gw == nil {
		return out
	}
	for _, l := range gw.Spec.Listeners {
		if strings.HasPrefix(string(l.Name), ownPrefix) {
			out[entryOf(l.Port, l.Protocol, l.Hostname)] = true
		}
	}
	return out
}

func (m *monitor) fragment(at time.Time, lf *v1alpha1.ListenerFragment, deleted bool) {
	k := types.NamespacedName{Namespace: lf.Namespace, Name: lf.Name}
	prev := m.fragments[k]
	s := fragmentSource(lf)
	if prev != nil && (deleted || prev.lf.UID != lf.UID) {
		m.name(fragmentSource(prev.lf), true)
	}
	if deleted || lf.DeletionTimestamp != nil {
		// An informer may deliver one object's change after another's made
		// later: a duplicate found within margin before its holder's
		// deletion arrives is not reported.
		if prev != nil {
			for _, a := range prev.tuples {
				a.exempt = true
			}
		}
		if deleted {
			delete(m.fragments, k)
		} else {
			m.fragments[k] = &fragmentSeen{lf: lf, parent: s.parent, tuples: map[entry]*acquired{}}
		}
		return
	}
	m.name(s, false)
	same := prev != nil && prev.lf.UID == lf.UID && prev.parent == s.parent
	admitted := s.gatewayRef && m.admitted(lf.Namespace, s.parent)
	f := &fragmentSeen{lf: lf, parent: s.parent, tuples: map[entry]*acquired{}, changed: at}
	switch {
	case same:
		f.broke = prev.broke
	case !admitted:
		f.broke = at
	}
	if same && prev.lf.Generation == lf.Generation {
		f.changed = prev.changed
	}
	var fresh []entry
	for _, l := range lf.Spec.Listeners {
		e := entryOf(l.Port, l.Protocol, l.Hostname)
		if a := prev.tuple(e); same && a != nil {
			f.tuples[e] = a
			continue
		}
		flipped := m.flipped[admission{lf.Namespace, s.parent}]
		a := &acquired{at: at, passed: admitted, exempt: m.recent(at, flipped) || m.late(at, lf) || m.near(lastWrite(lf), flipped)}
		f.tuples[e] = a
		switch {
		case !a.passed:
			m.cover.unadmitted++
		case a.exempt:
			m.cover.exempt++
		default:
			m.cover.judged++
			fresh = append(fresh, e)
		}
	}
	m.fragments[k] = f
	for _, e := range fresh {
		m.duplicates(at, f, e)
	}
}

func (f *fragmentSeen) tuple(e entry) *acquired {
	if f == nil {
		return nil
	}
	return f.tuples[e]
}

// duplicates looks for stored fragments that passed admission with a tuple
// that clashes with e, which f just took, and reports each once margin has
// passed with neither exempt.
func (m *monitor) duplicates(at time.Time, f *fragmentSeen, e entry) {
	mine := f.tuples[e]
	for _, o := range m.fragments {
		if o == f || o.parent != f.parent {
			continue
		}
		for oe, theirs := range o.tuples {
			if clash(e, oe) == "" || !theirs.passed || theirs.exempt {
				continue
			}
			msg := fmt.Sprintf("ListenerFragments %s (%s, admitted %s) and %s (%s, admitted %s) both passed admission with clashing listeners on Gateway %s",
				key(o.lf), oe, theirs.at.Format(time.RFC3339Nano), key(f.lf), e, at.Format(time.RFC3339Nano), f.parent)
			m.due = append(m.due, finding{due: at.Add(m.margin), check: func() string {
				if mine.exempt || theirs.exempt {
					return ""
				}
				return msg
			}})
		}
	}
}

// hold is what the rules say of a fragment that held a tuple which passed
// to another source.
type hold int

const (
	freed   hold = iota // it no longer keeps the tuple: the move is allowed
	keeps               // it keeps the tuple: the move is a violation
	excused             // a change within margin could explain the move
)

// carried follows the tuples of gatefold's listeners on gw, of the pool of
// head, and reports a tuple that passed from a fragment that should have
// kept it to another source.
func (m *monitor) carried(at time.Time, head types.NamespacedName, gw *gwv1.Gateway) {
	held := m.holders[head]
	if held == nil {
		held = map[entry]gwv1.SectionName{}
		m.holders[head] = held
	}
	for _, l := range gw.Spec.Listeners {
		t := entryOf(l.Port, l.Protocol, l.Hostname).tuple()
		was, ok := held[t]
		held[t] = l.Name
		if !ok || was == l.Name || strings.HasPrefix(string(l.Name), ownPrefix) {
			continue
		}
		x, h := m.keeper(at, head, t, was)
		switch h {
		case freed:
			if x != nil {
				m.cover.movesJudged++
			}
			continue
		case excused:
			m.cover.movesExempt++
			continue
		}
		name, to := l.Name, m.names[l.Name]
		m.due = append(m.due, finding{due: at.Add(m.margin), check: func() string {
			y := cmp.Or(m.names[name], to)
			if y == x.String() || m.optedOut(y) {
				m.cover.movesJudged++
				return ""
			}
			switch _, h := m.keeper(at, head, t, was); h {
			case excused:
				m.cover.movesExempt++
				return ""
			case freed:
				m.cover.movesJudged++
				return ""
			}
			m.cover.movesJudged++
			return fmt.Sprintf("tuple %s of Gateway %s passed from %s, stored, admitted and unchanged, to %s (listener %s on Gateway %s) at %s",
				t, head, x, cmp.Or(y, "an unknown source"), name, key(gw), at.Format(time.RFC3339Nano))
		}})
	}
}

// optedOut says whether source y ("Kind ns/name") is in a namespace that opted out of admission.
func (m *monitor) optedOut(y string) bool {
	_, nn, ok := strings.Cut(y, " ")
	ns, _, _ := strings.Cut(nn, "/")
	n := m.namespaces[ns]
	return ok && n != nil && n.labels[optOutLabel] == optOutValue
}

// keeper returns the stored fragment whose Gateway listener was held tuple
// t of head's pool (nil: none), and whether it keeps t at at: not being
// deleted, passed admission with t and admitted still, granted, no own
// listener clashing with it; excused when, within margin of at, its
// generation or admitted(namespace, head) changed, a grant it reads
// changed, or an own listener clashing with it came or went.
func (m *monitor) keeper(at time.Time, head types.NamespacedName, t entry, was gwv1.SectionName) (*source, hold) {
	holder, ok := m.names[was]
	kind, nn, _ := strings.Cut(holder, " ")
	ns, name, _ := strings.Cut(nn, "/")
	if !ok || kind != kindFragment {
		return nil, freed
	}
	f := m.fragments[types.NamespacedName{Namespace: ns, Name: name}]
	if f == nil {
		return nil, freed
	}
	s := fragmentSource(f.lf)
	if f.lf.DeletionTimestamp != nil || f.parent != head {
		return s, freed
	}
	if m.recent(at, f.changed) || m.recent(at, m.flipped[admission{ns, head}]) {
		return s, excused
	}
	if !m.admitted(ns, head) {
		return s, freed
	}
	for _, l := range f.lf.Spec.Listeners {
		e := entryOf(l.Port, l.Protocol, l.Hostname)
		if e.tuple() != t {
			continue
		}
		a := f.tuples[e]
		switch {
		case a == nil || !a.passed:
			return s, freed
		case a.exempt:
			return s, excused
		}
		if h := m.shadowed(at, head, e); h != keeps {
			return s, h
		}
		return s, m.grantHold(at, s, l)
	}
	return s, freed
}

// shadowed says whether an own listener of head clashing with e is there
// (freed), came or went within margin of at (excused), or neither (keeps).
func (m *monitor) shadowed(at time.Time, head types.NamespacedName, e entry) hold {
	g := m.gateways[head]
	if g == nil {
		return keeps
	}
	for o, when := range g.own {
		if clash(o, e) != "" && m.recent(at, when) {
			return excused
		}
	}
	for o := range ownEntries(g.gw) {
		if clash(o, e) != "" {
			return freed
		}
	}
	return keeps
}

func (m *monitor) grant(at time.Time, g *gwv1beta1.ReferenceGrant, deleted bool) {
	in := m.grants[g.Namespace]
	if in == nil {
		in = map[string]*gwv1beta1.ReferenceGrant{}
		m.grants[g.Namespace] = in
	}
	if prev := in[g.Name]; !deleted && prev != nil && reflect.DeepEqual(prev.Spec, g.Spec) {
		return
	}
	for _, v := range []*gwv1beta1.ReferenceGrant{in[g.Name], g} {
		if v == nil {
			continue
		}
		for _, f := range v.Spec.From {
			m.granted[grantee{g.Namespace, string(f.Namespace)}] = at
		}
	}
	if deleted {
		delete(in, g.Name)
	} else {
		in[g.Name] = g
	}
}

// grantHold says whether listener l of s has the grants it needs now
// (keeps), lacks one (freed), or reads a namespace where a grant that lets
// s's namespace in changed within margin of at (excused).
func (m *monitor) grantHold(at time.Time, s *source, l gwv1.ListenerEntry) hold {
	if l.TLS == nil {
		return keeps
	}
	x := &index{grants: map[string][]*gwv1beta1.ReferenceGrant{}}
	for _, ref := range l.TLS.CertificateRefs {
		ns := string(ptr.Deref(ref.Namespace, gwv1.Namespace(s.namespace)))
		if ns == s.namespace {
			continue
		}
		for _, g := range m.grants[ns] {
			x.grants[ns] = append(x.grants[ns], g)
		}
		if m.recent(at, m.granted[grantee{ns, s.namespace}]) {
			return excused
		}
		if !x.granted(s, ref) {
			return freed
		}
	}
	return keeps
}

// event is one watch event of a monitor table test, at seconds after epoch.
type event struct {
	at      float64
	obj     client.Object
	deleted bool
}

// deleting is lf being deleted.
func deleting(lf *v1alpha1.ListenerFragment) *v1alpha1.ListenerFragment {
	lf = lf.DeepCopy()
	lf.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	return lf
}

// written is lf as the API server shows it when it was last written at
// second at of the test's day.
func written(lf *v1alpha1.ListenerFragment, at int) *v1alpha1.ListenerFragment {
	lf = lf.DeepCopy()
	when := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, at, 0, time.UTC))
	lf.CreationTimestamp = when
	lf.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &when}}
	return lf
}

func tenantNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// fragmentAt is fragment ns/name of Gateway infra/shared at generation gen.
func fragmentAt(ns, name string, gen int64, listeners ...gwv1.ListenerEntry) *v1alpha1.ListenerFragment {
	gw := soakGateway("shared")
	lf := fixture.Fragment(ns, name, &gw, listeners...)
	lf.UID, lf.Generation = types.UID(ns+"/"+name), gen
	return lf
}

// gatewayCarrying is Gateway infra/name (admitting from) carrying own, and
// the listeners of the given fragments as gatefold names them.
func gatewayCarrying(name string, allowed *gwv1.AllowedListeners, own []gwv1.Listener, carried ...*v1alpha1.ListenerFragment) *gwv1.Gateway {
	gw := soakGateway(name, own...)
	gw.Spec.AllowedListeners = allowed
	if name != "shared" {
		gw.Labels = map[string]string{v1alpha1.PoolLabel: "shared"}
		gw.OwnerReferences = []metav1.OwnerReference{{Kind: kindGateway, Name: "shared", Controller: ptr.To(true)}}
	}
	for _, lf := range carried {
		for _, l := range lf.Spec.Listeners {
			gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: v1alpha1.ListenerName(lf.Namespace, lf.Name, l.Name), Port: l.Port, Protocol: l.Protocol, Hostname: l.Hostname, TLS: l.TLS})
		}
	}
	return &gw
}

func TestMonitor(t *testing.T) {
	all := &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	selected := &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"soak.gatefold.dev/access": "yes"}}}}
	yes, no := map[string]string{"soak.gatefold.dev/access": "yes"}, map[string]string{"soak.gatefold.dev/access": "no"}
	x := fixture.HTTPS("https", "x.example.com")
	a, b := fragmentAt("t0", "a", 1, x), fragmentAt("t1", "b", 1, x)
	bHTTP := fragmentAt("t1", "b", 1, fixture.Entry("http", 443, gwv1.HTTPProtocolType, "y.example.com"))
	granted := fragmentAt("t0", "a", 1, sharedCert("https", "x.example.com"))
	grant, other, narrowed := certsGrant("t0"), certsGrant("t2"), certsGrant("t0")
	narrowed.Spec.To[0].Name = ptr.To[gwv1.ObjectName]("shared-cert")
	start := []event{{0, tenantNamespace("t0", yes), false}, {0, tenantNamespace("t1", no), false}, {0, tenantNamespace("t5", map[string]string{optOutLabel: optOutValue}), false},
		{0, gatewayCarrying("shared", all, nil), false}}
	then := func(events ...event) []event { return append(slices.Clone(start), events...) }
	for name, tc := range map[string]struct {
		events   []event
		report   []string
		coverage string // when set, what coverage says at the end
	}{
		"one fragment": {events: then(event{10, a, false})},
		"two admitted duplicates": {
			events:   then(event{10, a, false}, event{20, b, false}),
			report:   []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b (443/HTTPS x.example.com, admitted 2026-12-01T00:00:20Z) both passed admission"},
			coverage: "monitor: tuples 2 judged, 0 exempt, 0 not admitted; holder changes 0 judged, 0 exempt",
		},
		"a duplicate just after another namespace was relabelled": {
			events: then(event{10, a, false}, event{19.5, tenantNamespace("t2", no), false}, event{19.8, tenantNamespace("t0", no), false}, event{20, b, false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b"},
		},
		"a duplicate just after its namespace was relabelled, still admitted": {
			events: then(event{10, a, false}, event{19.5, tenantNamespace("t1", yes), false}, event{20, b, false}, event{20.5, tenantNamespace("t1", no), false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b"},
		},
		"a duplicate just after its namespace was admitted": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false},
				event{19.5, tenantNamespace("t1", yes), false}, event{20, b, false}),
			coverage: "monitor: tuples 1 judged, 1 exempt, 0 not admitted; holder changes 0 judged, 0 exempt",
		},
		"a duplicate just before its namespace opted out": {
			events:   then(event{10, a, false}, event{20, b, false}, event{20.5, tenantNamespace("t1", map[string]string{optOutLabel: optOutValue}), false}),
			coverage: "monitor: tuples 1 judged, 1 exempt, 0 not admitted; holder changes 0 judged, 0 exempt",
		},
		"a duplicate just after an own listener over its tuple came and went": {
			events: then(event{10, a, false}, event{19.5, gatewayCarrying("shared", all, []gwv1.Listener{fixture.GatewayHTTPS("own-x", "x.example.com")}), false},
				event{20, b, false}, event{20.5, gatewayCarrying("shared", all, nil), false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b"},
		},
		"a duplicate during a short break in the holder's admission": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{20, tenantNamespace("t0", no), false},
				event{21, tenantNamespace("t1", yes), false}, event{25, b, false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b (443/HTTPS x.example.com, admitted 2026-12-01T00:00:25Z)"},
		},
		"a duplicate written while its Gateway was gone, seen late": {
			events: then(event{10, a, false}, event{20, gatewayCarrying("shared", all, nil), true}, event{20.3, gatewayCarrying("shared", all, nil), false},
				event{21.6, written(b, 20), false}),
		},
		"a duplicate whose holder's deletion arrives just after it": {
			events: then(event{10, a, false}, event{20, b, false}, event{20.5, deleting(a), false}),
		},
		"duplicates seen long after they were written (a relist)": {
			events: then(event{10, a, false}, event{30, written(b, 10), false}),
		},
		"a duplicate after a short break in the holder's admission": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{20, tenantNamespace("t0", no), false},
				event{23, tenantNamespace("t0", yes), false}, event{24, tenantNamespace("t1", yes), false}, event{30, b, false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b (443/HTTPS x.example.com, admitted 2026-12-01T00:00:30Z)"},
		},
		"a duplicate after the holder's Gateway left for a moment": {
			events: then(event{10, a, false}, event{20, gatewayCarrying("shared", all, nil), true},
				event{23, gatewayCarrying("shared", all, nil), false}, event{30, b, false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b (443/HTTPS x.example.com, admitted 2026-12-01T00:00:30Z)"},
		},
		"a duplicate long into a break in the holder's admission": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{20, tenantNamespace("t0", no), false},
				event{21, tenantNamespace("t1", yes), false}, event{29.5, b, false}),
		},
		"a duplicate after a long break in the holder's admission": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{20, tenantNamespace("t0", no), false},
				event{35, tenantNamespace("t0", yes), false}, event{36, tenantNamespace("t1", yes), false}, event{40, b, false}),
			coverage: "monitor: tuples 2 judged, 0 exempt, 0 not admitted; holder changes 0 judged, 0 exempt",
		},
		"two admitted listeners that cannot share a port": {
			events: then(event{10, a, false}, event{20, bHTTP, false}),
			report: []string{"ListenerFragments t0/a (443/HTTPS x.example.com, admitted 2026-12-01T00:00:10Z) and t1/b (443/HTTP y.example.com"},
		},
		"a duplicate stored before its Gateway": {
			events: []event{{0, tenantNamespace("t0", yes), false}, {0, tenantNamespace("t1", no), false}, {5, a, false},
				{10, gatewayCarrying("shared", all, nil), false}, {20, b, false}},
		},
		"a duplicate from an opted-out namespace": {
			events:   then(event{10, a, false}, event{20, fragmentAt("t5", "b", 1, x), false}),
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 0 judged, 0 exempt",
		},
		"a duplicate just after an allowedListeners change": {
			events: then(event{10, a, false}, event{20, gatewayCarrying("shared", selected, nil), false},
				event{20.5, gatewayCarrying("shared", all, nil), false}, event{21, b, false}),
		},
		"a duplicate seen just before the holder's Gateway went": {
			events: then(event{10, a, false}, event{20, b, false}, event{20.5, gatewayCarrying("shared", all, nil), true}),
		},
		"a duplicate after the holder's Gateway left and came back": {
			events: then(event{10, a, false}, event{20, gatewayCarrying("shared", all, nil), true},
				event{40, gatewayCarrying("shared", all, nil), false}, event{60, b, false}),
		},
		"a duplicate after the holder was deleted": {
			events: then(event{10, a, false}, event{15, a, true}, event{20, b, false}),
		},
		"a listener passing to another tenant": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false}, event{30, gatewayCarrying("shared", selected, nil, b), false}),
			report:   []string{"tuple 443/tls x.example.com of Gateway infra/shared passed from ListenerFragment t0/a, stored, admitted and unchanged, to ListenerFragment t1/b"},
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 1 judged, 0 exempt",
		},
		"a listener passing just after its holder's namespace was relabelled, still admitted": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false}, event{29.5, tenantNamespace("t0", map[string]string{"soak.gatefold.dev/access": "yes", "team": "x"}), false},
				event{30, gatewayCarrying("shared", selected, nil, b), false}),
			report: []string{"passed from ListenerFragment t0/a, stored, admitted and unchanged, to ListenerFragment t1/b"},
		},
		"a listener passing just after an own listener elsewhere came": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{29.5, gatewayCarrying("shared", selected, []gwv1.Listener{fixture.GatewayHTTPS("own-y", "y.example.com")}, a), false},
				event{30, gatewayCarrying("shared", selected, []gwv1.Listener{fixture.GatewayHTTPS("own-y", "y.example.com")}, b), false}),
			report: []string{"passed from ListenerFragment t0/a, stored, admitted and unchanged, to ListenerFragment t1/b"},
		},
		"a listener passing just after an own listener clashing with it went": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{26, gatewayCarrying("shared", selected, []gwv1.Listener{{Name: "own-tcp", Port: 443, Protocol: gwv1.TCPProtocolType}}), false},
				event{29.5, gatewayCarrying("shared", selected, nil), false}, event{30, gatewayCarrying("shared", selected, nil, b), false}),
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 0 judged, 1 exempt",
		},
		"a listener passing while an own listener clashing with it is there": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{26, gatewayCarrying("shared", selected, []gwv1.Listener{{Name: "own-tcp", Port: 443, Protocol: gwv1.TCPProtocolType}}), false},
				event{30, gatewayCarrying("shared", selected, []gwv1.Listener{{Name: "own-tcp", Port: 443, Protocol: gwv1.TCPProtocolType}}, b), false}),
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 1 judged, 0 exempt",
		},
		"a listener passing once its holder's namespace is no longer admitted": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false}, event{26, tenantNamespace("t0", no), false}, event{30, gatewayCarrying("shared", selected, nil, b), false}),
		},
		"a listener passing right after its holder changed": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{25, tenantNamespace("t1", yes), false}, event{30, gatewayCarrying("shared", selected, nil, b), false},
				event{30.5, fragmentAt("t0", "a", 2, x), false}),
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 0 judged, 1 exempt",
		},
		"a listener passing long after its holder changed": {
			events: then(event{0, gatewayCarrying("shared", selected, nil), false}, event{10, a, false}, event{11, gatewayCarrying("shared", selected, nil, a), false},
				event{12, b, false}, event{15, fragmentAt("t0", "a", 2, x), false}, event{25, tenantNamespace("t1", yes), false},
				event{30, gatewayCarrying("shared", selected, nil, b), false}),
			report: []string{"passed from ListenerFragment t0/a, stored, admitted and unchanged, to ListenerFragment t1/b"},
		},
		"a granted listener passing to another tenant": {
			events: then(event{0, &grant, false}, event{0, gatewayCarrying("shared", selected, nil), false}, event{10, granted, false},
				event{11, gatewayCarrying("shared", selected, nil, granted), false}, event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{50, gatewayCarrying("shared", selected, nil, b), false}),
			report: []string{"passed from ListenerFragment t0/a, stored, admitted and unchanged, to ListenerFragment t1/b"},
		},
		"a granted listener passing just after another tenant's grant was revoked and its own seen again": {
			events: then(event{0, &grant, false}, event{0, &other, false}, event{0, gatewayCarrying("shared", selected, nil), false}, event{10, granted, false},
				event{11, gatewayCarrying("shared", selected, nil, granted), false}, event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{49.2, &grant, false}, event{49.5, &other, true}, event{50, gatewayCarrying("shared", selected, nil, b), false}),
			report:   []string{"passed from ListenerFragment t0/a, stored, admitted and unchanged, to ListenerFragment t1/b"},
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 1 judged, 0 exempt",
		},
		"a granted listener passing just after its grant changed": {
			events: then(event{0, &grant, false}, event{0, gatewayCarrying("shared", selected, nil), false}, event{10, granted, false},
				event{11, gatewayCarrying("shared", selected, nil, granted), false}, event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{49, &grant, false}, event{49.5, &narrowed, false}, event{50, gatewayCarrying("shared", selected, nil, b), false}),
			coverage: "monitor: tuples 1 judged, 0 exempt, 1 not admitted; holder changes 0 judged, 1 exempt",
		},
		"a listener passing after its holder's grant was revoked": {
			events: then(event{0, &grant, false}, event{0, gatewayCarrying("shared", selected, nil), false}, event{10, granted, false},
				event{11, gatewayCarrying("shared", selected, nil, granted), false}, event{12, b, false}, event{25, tenantNamespace("t1", yes), false},
				event{40, &grant, true}, event{50, gatewayCarrying("shared", selected, nil, b), false}),
		},
		"a listener passing to an own listener": {
			events: then(event{10, a, false}, event{11, gatewayCarrying("shared", all, nil, a), false},
				event{30, gatewayCarrying("shared", all, []gwv1.Listener{fixture.GatewayHTTPS("own-x", "x.example.com")}), false}),
		},
		"a listener moving within a pool": {
			events: then(event{10, a, false}, event{11, gatewayCarrying("shared", all, nil, a), false},
				event{30, gatewayCarrying("shared-2", all, nil, a), false}, event{30.1, gatewayCarrying("shared", all, nil), false}),
		},
		"a listener passing after its holder was deleted": {
			events: then(event{10, a, false}, event{11, gatewayCarrying("shared", all, nil, a), false}, event{20, a, true},
				event{21, b, false}, event{22, gatewayCarrying("shared", all, nil, b), false}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMonitor(time.Second, 10*time.Second)
			var got []string
			for _, e := range tc.events {
				got = append(got, m.observe(epoch.Add(time.Duration(e.at*float64(time.Second))), e.obj, e.deleted)...)
			}
			got = append(got, m.flush(time.Time{}, true)...)
			if len(got) != len(tc.report) {
				t.Fatalf("monitor reported %d violations, want %d:\n%s", len(got), len(tc.report), strings.Join(got, "\n"))
			}
			for i, want := range tc.report {
				if !strings.Contains(got[i], want) {
					t.Errorf("violation %d is %q, want it to contain %q", i, got[i], want)
				}
			}
			if c := m.coverage(); tc.coverage != "" && c != tc.coverage {
				t.Errorf("coverage is %q, want %q", c, tc.coverage)
			}
		})
	}
}
