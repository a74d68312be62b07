package folding

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// poolGrace is the --pool-sibling-grace of the tests' merger (main_test.go).
const poolGrace = 2 * time.Second

// shrinkMargin is how long past its grace an empty sibling may stay: the
// merger notes it empty on the fold its emptying triggers, a debounce
// later, and deletes it on a fold it schedules for the grace's end; two
// folds of a full pool on a loaded machine. It is shorter than the grace,
// so a deletion that waited out the grace twice still fails.
const shrinkMargin = 1500 * time.Millisecond

// poolHead creates Gateway ns/shared marked as a pool's head, with one own
// listener (a redirect, say) that its siblings carry too.
func poolHead(t *testing.T, ns string) *gwv1.Gateway {
	t.Helper()
	gw := fixture.PoolHead(ns, gwv1.NamespacesFromSame, fixture.Own("http", 80, gwv1.HTTPProtocolType, ""))
	create(t, gw)
	return gw
}

// route is a one-listener fragment: an HTTPS listener for its own hostname.
func route(ns string, gw *gwv1.Gateway, i int) *v1alpha1.ListenerFragment {
	return fixture.Fragment(ns, fmt.Sprintf("r%04d", i), gw, fixture.HTTPS("web", fmt.Sprintf("r%04d.example.com", i)))
}

// createRoutes creates routes [from, to) with 16 writers, as route
// controller workers would.
func createRoutes(t *testing.T, ns string, gw *gwv1.Gateway, from, to int) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for i := from; i < to; i++ {
		g.Go(func() error { return env.Client.Create(ctx, route(ns, gw, i)) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("Creating fragments: %v", err)
	}
}

// landings waits until every fragment of the namespace is Accepted at its
// generation, and returns the Gateway each one's status says it landed on.
// It lists every 500ms: a list holds 1,000 fragments and more.
func landings(t *testing.T, ns string, want int) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := testenv.Poll(3*time.Minute, 500*time.Millisecond, func() error {
		list := &v1alpha1.ListenerFragmentList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatalf("Listing fragments: %v", err)
		}
		clear(out)
		var waiting []string
		for _, lf := range list.Items {
			c := meta.FindStatusCondition(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != lf.Generation || len(lf.Status.Listeners) != 1 || lf.Status.Listeners[0].Gateway == nil {
				waiting = append(waiting, fmt.Sprintf("%s: %+v", lf.Name, c))
				continue
			}
			out[lf.Name] = string(lf.Status.Listeners[0].Gateway.Name)
		}
		if len(waiting) == 0 && len(list.Items) == want {
			return nil
		}
		return fmt.Errorf("%d of %d fragments are not Accepted with a Gateway, e.g. %v", len(waiting), want, waiting[:min(3, len(waiting))])
	})
	if err != nil {
		t.Fatalf("After 3m: %v", err)
	}
	return out
}

// pool returns the pool's Gateways by name: the head and its siblings.
func pool(t *testing.T, head *gwv1.Gateway) map[string]*gwv1.Gateway {
	t.Helper()
	list := &gwv1.GatewayList{}
	if err := env.Client.List(ctx, list, client.InNamespace(head.Namespace)); err != nil {
		t.Fatalf("Listing Gateways: %v", err)
	}
	out := map[string]*gwv1.Gateway{}
	for i := range list.Items {
		gw := &list.Items[i]
		if gw.Name == head.Name || gw.Labels[v1alpha1.PoolLabel] == head.Name {
			out[gw.Name] = gw
		}
	}
	return out
}

// moves follows the namespace's Gateways and records every folded listener
// that appears on a second Gateway, or leaves its Gateway and comes back
// (either would cut a route's traffic over behind its back), and every
// state in which a hostname is on two Gateways at once. It also notes when
// each Gateway last lost its last folded listener, and when it went.
type moves struct {
	mu      sync.Mutex
	on      map[gwv1.SectionName]string
	gone    sets.Set[gwv1.SectionName]
	present map[string]sets.Set[gwv1.SectionName]
	moved   []string
	twice   []string
	emptied map[string]time.Time
	deleted map[string]time.Time
	err     error
}

func watchMoves(t *testing.T, ns string) *moves {
	t.Helper()
	m := &moves{on: map[gwv1.SectionName]string{}, gone: sets.New[gwv1.SectionName](), present: map[string]sets.Set[gwv1.SectionName]{},
		emptied: map[string]time.Time{}, deleted: map[string]time.Time{}}
	watching, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := testenv.Follow(watching, watcher, testenv.Invariant{List: &gwv1.GatewayList{}, Namespace: ns, Check: func(gws map[string]client.Object) error {
			m.seen(ns, gws)
			return nil
		}})
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
	}()
	t.Cleanup(func() { stop(); <-done })
	return m
}

// seen records what changed in a state of the namespace's Gateways. A
// folded listener is one whose name has the namespace's prefix, unlike the
// head's own "http" that every Gateway of the pool carries.
func (m *moves) seen(ns string, gws map[string]client.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	hosts := map[gwv1.Hostname]string{}
	for name, o := range gws {
		folded := sets.New[gwv1.SectionName]()
		for _, l := range o.(*gwv1.Gateway).Spec.Listeners {
			if !strings.HasPrefix(string(l.Name), ns+"-") {
				continue
			}
			folded.Insert(l.Name)
			if l.Hostname == nil {
				continue
			}
			if other, dup := hosts[*l.Hostname]; dup {
				m.twice = append(m.twice, fmt.Sprintf("%s on %s and %s", *l.Hostname, min(name, other), max(name, other)))
			}
			hosts[*l.Hostname] = name
		}
		for l := range folded.Difference(m.present[name]) {
			switch at, seen := m.on[l]; {
			case seen && at != name:
				m.moved = append(m.moved, fmt.Sprintf("%s from %s to %s", l, at, name))
			case m.gone.Has(l):
				m.moved = append(m.moved, fmt.Sprintf("%s left %s and came back", l, name))
				m.gone.Delete(l)
			}
			m.on[l] = name
		}
		m.gone.Insert(m.present[name].Difference(folded).UnsortedList()...)
		if folded.Len() == 0 && m.present[name].Len() > 0 {
			m.emptied[name] = now
		}
		m.present[name] = folded
	}
	for name, folded := range m.present {
		if _, ok := gws[name]; !ok {
			m.gone.Insert(folded.UnsortedList()...)
			m.deleted[name] = now
			delete(m.present, name)
		}
	}
}

func (m *moves) check(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.moved) > 0 {
		t.Errorf("Folded listeners moved or flapped (%d), e.g. %v", len(m.moved), m.moved[:min(5, len(m.moved))])
	}
	if len(m.twice) > 0 {
		t.Errorf("A hostname was on two Gateways of the pool at once (%d times), e.g. %v", len(m.twice), m.twice[:min(5, len(m.twice))])
	}
	if m.err != nil {
		t.Errorf("Following the pool's Gateways: %v", m.err)
	}
}

// went waits until the Gateway is gone, and returns when it went and when
// it last lost its last folded listener (zero if it never did).
func (m *moves) went(t *testing.T, name string) (emptied, deleted time.Time) {
	t.Helper()
	testenv.Eventually(t, settle, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if deleted = m.deleted[name]; deleted.IsZero() {
			return fmt.Errorf("Gateway %s is still there", name)
		}
		emptied = m.emptied[name]
		return nil
	})
	return emptied, deleted
}

// checkPool checks the pool's invariants (testenv.CheckPool) and that each
// fragment's listener is exactly where its status says.
func checkPool(t *testing.T, head *gwv1.Gateway, landed map[string]string) map[string]*gwv1.Gateway {
	t.Helper()
	gws := pool(t, head)
	var read []gwv1.Gateway
	where := map[gwv1.SectionName]string{}
	for name, gw := range gws {
		read = append(read, *gw)
		for _, l := range gw.Spec.Listeners {
			if !testenv.OwnListener(head, l) {
				where[l.Name] = name
			}
		}
	}
	testenv.CheckPool(t, head, read)
	for f, gw := range landed {
		name := v1alpha1.ListenerName(head.Namespace, f, "web")
		if where[name] != gw {
			t.Errorf("Fragment %s's status says Gateway %s, its listener is on %q", f, gw, where[name])
		}
		delete(where, name)
	}
	if len(where) > 0 {
		t.Errorf("%d listeners on the pool belong to no current fragment", len(where))
	}
	return gws
}

// TestPoolSpreadsAThousandFragments: 1,000 one-listener fragments of one
// pool land on ⌈1000/63⌉ Gateways, none stuck; deleting fragments frees room
// that new ones take, with no new Gateway; no folded listener moves; and the
// pool is quiet once settled.
func TestPoolSpreadsAThousandFragments(t *testing.T) {
	ns := newNamespace(t, nil)
	head := poolHead(t, ns)
	m := watchMoves(t, ns)
	start := time.Now()
	createRoutes(t, ns, head, 0, 1000)
	landed := landings(t, ns, 1000)
	t.Logf("1000 fragments folded into the pool in %s", time.Since(start).Round(time.Millisecond))
	gws := checkPool(t, head, landed)
	if len(gws) != 16 {
		t.Fatalf("The pool has %d Gateways, want ⌈1000/63⌉ = 16", len(gws))
	}
	for n := 2; n <= 16; n++ {
		if gws[rules.SiblingName(head.Name, n)] == nil {
			t.Errorf("No sibling %s", rules.SiblingName(head.Name, n))
		}
	}

	// Every tenth fragment goes; as many new ones take the room it freed.
	for i := 0; i < 1000; i += 10 {
		if err := env.Client.Delete(ctx, route(ns, head, i)); err != nil {
			t.Fatalf("Deleting fragment %d: %v", i, err)
		}
	}
	createRoutes(t, ns, head, 1000, 1100)
	after := landings(t, ns, 1000)
	for f, gw := range landed {
		if now, ok := after[f]; ok && now != gw {
			t.Errorf("Fragment %s moved from %s to %s", f, gw, now)
		}
	}
	gws = checkPool(t, head, after)
	if len(gws) != 16 {
		t.Errorf("After freeing 100 places and taking 100, the pool has %d Gateways, want 16", len(gws))
	}
	m.check(t)

	// Settled: no Gateway of the pool is written, made or deleted again.
	versions := map[string]string{}
	for name, gw := range gws {
		versions[name] = gw.ResourceVersion
	}
	testenv.Holds(t, env, 3*time.Second, unchanged(&gwv1.GatewayList{}, ns, versions))
}

// overflowed creates a pool's head and 64 fragments for it: the 64th lands
// on the head's first sibling, whose name it returns with where each landed.
func overflowed(t *testing.T) (ns string, head *gwv1.Gateway, sibling string, landed map[string]string) {
	t.Helper()
	ns = newNamespace(t, nil)
	head = poolHead(t, ns)
	createRoutes(t, ns, head, 0, 64)
	landed = landings(t, ns, 64)
	sibling = rules.SiblingName(head.Name, 2)
	if landed["r0063"] != sibling {
		t.Fatalf("The 64th fragment landed on %q, want %s", landed["r0063"], sibling)
	}
	return ns, head, sibling, landed
}

// TestPoolShrinksAfterGrace: a sibling left with no fragment's listener is
// deleted once the grace has passed, and the head's event says so; a
// fragment that names a sibling is told to name the head.
func TestPoolShrinksAfterGrace(t *testing.T) {
	ns, head, sibling, _ := overflowed(t)

	// kubectl says where each fragment landed.
	out, stderr, err := testenv.Kubectl(t, env, "", "get", "listenerfragments", "-n", ns, "r0000", "r0063")
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME GATEWAY LANDED ACCEPTED PROGRAMMED") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "r0000 shared shared True") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "r0063 shared shared-2 True") {
		t.Errorf("kubectl get listenerfragments printed:\n%s", out)
	}
	// -o wide adds the Gateway's namespace, the reasons and where the
	// listeners were folded.
	out, stderr, err = testenv.Kubectl(t, env, "", "get", "listenerfragments", "-n", ns, "r0063", "-o", "wide")
	if err != nil {
		t.Fatalf("kubectl get -o wide: %v\n%s", err, stderr)
	}
	wide := []*regexp.Regexp{
		regexp.MustCompile(`^NAME +GATEWAY +LANDED +ACCEPTED +PROGRAMMED +AGE +GATEWAY NAMESPACE +ACCEPTED REASON +PROGRAMMED REASON +MESSAGE$`),
		regexp.MustCompile(`^r0063 +shared +shared-2 +True +\S+ +\S+ +` + ns + ` +Accepted +\S+ +Folded 1 listeners into Gateway ` + ns + `/shared-2$`),
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != len(wide) || !wide[0].MatchString(lines[0]) || !wide[1].MatchString(lines[1]) {
		t.Errorf("kubectl get listenerfragments -o wide printed:\n%s\nwant lines matching:\n%s\n%s", out, wide[0], wide[1])
	}

	named := fixture.Fragment(ns, "names-sibling", &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sibling}}, fixture.HTTPS("web", "sibling.example.com"))
	create(t, named)
	st := testenv.WaitAccepted(t, env.Client, settle, named, metav1.ConditionFalse, string(v1alpha1.FragmentReasonNotAllowed))
	if c := meta.FindStatusCondition(st.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "set spec.parentRef.name to shared") {
		t.Errorf("Accepted message = %q, want it to say to name the head", c.Message)
	}
	if err := env.Client.Delete(ctx, named); err != nil {
		t.Fatalf("Deleting: %v", err)
	}

	m := watchMoves(t, ns)
	if err := env.Client.Delete(ctx, route(ns, head, 63)); err != nil {
		t.Fatalf("Deleting: %v", err)
	}
	emptied, deleted := m.went(t, sibling)
	switch waited := deleted.Sub(emptied); {
	case emptied.IsZero():
		t.Errorf("The sibling was deleted while it still carried a folded listener")
	case waited < poolGrace || waited > poolGrace+shrinkMargin:
		t.Errorf("The empty sibling was deleted %s after it emptied, want its grace of %s, and at most %s more", waited.Round(time.Millisecond), poolGrace, shrinkMargin)
	default:
		t.Logf("The empty sibling was deleted %s after it emptied", waited.Round(time.Millisecond))
	}
	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == head.Name && e.Reason == "PoolShrank" && strings.Contains(e.Note, sibling) {
				return nil
			}
		}
		return fmt.Errorf("no PoolShrank event on the head naming %s", sibling)
	})
	checkPool(t, head, landings(t, ns, 63))
	m.check(t)
}

// TestUnmarkedHeadDrainsItsSiblings: a head its owner unmarks takes what
// is new alone, and says TooManyListeners as any Gateway, but what its
// siblings carry stays until it goes; then they are deleted.
func TestUnmarkedHeadDrainsItsSiblings(t *testing.T) {
	ns, head, sibling, landed := overflowed(t)
	current := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(head), current)
	delete(current.Annotations, v1alpha1.PoolAnnotation)
	if err := env.Client.Update(ctx, current); err != nil {
		t.Fatalf("Unmarking the head: %v", err)
	}
	// The sibling has room, but nothing new lands there any more.
	overflow := route(ns, head, 64)
	create(t, overflow)
	st := testenv.WaitAccepted(t, env.Client, settle, overflow, metav1.ConditionFalse, string(v1alpha1.FragmentReasonTooManyListeners))
	if c := listenerCondition(st, "web", "Accepted"); c == nil || !strings.Contains(c.Message, "Gateway "+ns+"/shared has 64 of its 64 listeners taken") {
		t.Errorf("Listener Accepted = %+v, want the head's TooManyListeners", c)
	}
	// Past the grace, the sibling still carries r0063, whose status says so.
	kept := route(ns, head, 63)
	keptListener := v1alpha1.ListenerName(ns, kept.Name, "web")
	testenv.Holds(t, env, poolGrace+time.Second, testenv.Invariant{List: &gwv1.GatewayList{}, Namespace: ns, Check: func(gws map[string]client.Object) error {
		gw, ok := gws[sibling]
		if !ok {
			return fmt.Errorf("sibling %s was deleted while it carried r0063", sibling)
		}
		if !slices.ContainsFunc(gw.(*gwv1.Gateway).Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == keptListener }) {
			return fmt.Errorf("sibling %s no longer carries r0063: %v", sibling, listeners(gw.(*gwv1.Gateway)))
		}
		return nil
	}}, testenv.Invariant{List: &v1alpha1.ListenerFragmentList{}, Namespace: ns, Check: func(lfs map[string]client.Object) error {
		lf, ok := lfs[kept.Name].(*v1alpha1.ListenerFragment)
		if !ok {
			return fmt.Errorf("fragment %s is gone", kept.Name)
		}
		if len(lf.Status.Listeners) != 1 || lf.Status.Listeners[0].Gateway == nil || string(lf.Status.Listeners[0].Gateway.Name) != landed[kept.Name] {
			return fmt.Errorf("r0063's status says %+v, it was on %s", lf.Status.Listeners, landed[kept.Name])
		}
		return nil
	}})

	if err := env.Client.Delete(ctx, kept); err != nil {
		t.Fatalf("Deleting: %v", err)
	}
	wantGone(t, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sibling}})
}

// TestPoolLeavesOthersGatewaysAlone: a Gateway someone else made under a
// sibling's name is skipped, never written; a label alone makes no sibling.
func TestPoolLeavesOthersGatewaysAlone(t *testing.T) {
	ns := newNamespace(t, nil)
	taken := fixture.Gateway(ns, gwv1.NamespacesFromSame, fixture.Own("mine", 9000, gwv1.HTTPProtocolType, ""))
	taken.Name, taken.Labels = rules.SiblingName("shared", 2), map[string]string{v1alpha1.PoolLabel: "shared"}
	create(t, taken)
	head := poolHead(t, ns)
	createRoutes(t, ns, head, 0, 64)
	landed := landings(t, ns, 64)
	if landed["r0063"] != rules.SiblingName(head.Name, 3) {
		t.Errorf("The 64th fragment landed on %q, want %s", landed["r0063"], rules.SiblingName(head.Name, 3))
	}
	got := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(taken), got)
	if diff := listeners(got); len(diff) != 1 || diff[0] != "mine 9000/HTTP" || len(got.OwnerReferences) != 0 || got.Generation != 1 {
		t.Errorf("The Gateway gatefold did not create was written: listeners %v, owners %+v, generation %d", diff, got.OwnerReferences, got.Generation)
	}
}

// TestRefusedFragmentDoesNotStopAPoolGrowing: a fragment the API server
// refuses on a new sibling is blamed alone, as on any Gateway; the pool still
// grows for the others, and their status quotes no one else's refusal.
func TestRefusedFragmentDoesNotStopAPoolGrowing(t *testing.T) {
	ns := newNamespace(t, nil)
	forbidHostname(t, ns, "forbidden.example.com")
	head := poolHead(t, ns)
	createRoutes(t, ns, head, 0, 63)
	landings(t, ns, 63)
	bad := fixture.Fragment(ns, "bad", head, fixture.HTTPS("web", "forbidden.example.com"))
	create(t, bad)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has a resolution of one second
	good := route(ns, head, 100)
	create(t, good)

	st := testenv.WaitAccepted(t, env.Client, settle, good, metav1.ConditionTrue, "Accepted")
	if gw := st.Status.Listeners[0].Gateway; gw == nil || string(gw.Name) != rules.SiblingName(head.Name, 2) {
		t.Errorf("good landed on %+v, want %s", gw, rules.SiblingName(head.Name, 2))
	}
	st = testenv.WaitAccepted(t, env.Client, settle, bad, metav1.ConditionFalse, string(v1alpha1.FragmentReasonListenersNotValid))
	if c := meta.FindStatusCondition(st.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "listeners for forbidden.example.com are not allowed here") {
		t.Errorf("bad's Accepted message = %q, want the API server's", c.Message)
	}
}

// TestEmptiedSiblingOfAHeadWithoutOwnListenersGoes: a Gateway must hold a
// listener, so a sibling of a head with none of its own is deleted as soon as
// it carries nothing, and its hostname is never on two Gateways of the pool.
func TestEmptiedSiblingOfAHeadWithoutOwnListenersGoes(t *testing.T) {
	ns, head, sibling, _ := overflowed(t)
	m := watchMoves(t, ns)
	removeOwnListener(t, head, "http")
	// The head's own listener left every Gateway of the pool; r0000 takes
	// its place on the head, so that r0063 stays alone on the sibling.
	testenv.Eventually(t, settle, func() error {
		gw := &gwv1.Gateway{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sibling}, gw); err != nil {
			return err
		}
		if names := listeners(gw); len(names) != 1 {
			return fmt.Errorf("sibling listeners %v, want r0063's alone", names)
		}
		return nil
	})
	emptied := time.Now()
	if err := env.Client.Delete(ctx, route(ns, head, 63)); err != nil {
		t.Fatalf("Deleting: %v", err)
	}
	dup := fixture.Fragment(ns, "dup", head, fixture.HTTPS("web", "r0063.example.com"))
	create(t, dup)
	if _, deleted := m.went(t, sibling); deleted.Sub(emptied) >= poolGrace {
		t.Errorf("The sibling went %s after its last fragment was deleted, want at once, not after the grace of %s", deleted.Sub(emptied).Round(time.Millisecond), poolGrace)
	}
	st := testenv.WaitAccepted(t, env.Client, settle, dup, metav1.ConditionTrue, "Accepted")
	if gw := st.Status.Listeners[0].Gateway; gw == nil || gw.Name != "shared" {
		t.Errorf("dup landed on %+v, want the head", gw)
	}
	m.check(t)
}

// TestDeletingTheHeadDeletesThePool: the siblings are controlled by their
// head, so the garbage collector deletes them with it, as in any cluster;
// every fragment of the pool is then told its Gateway is gone.
func TestDeletingTheHeadDeletesThePool(t *testing.T) {
	ns, head, sibling, _ := overflowed(t)
	if err := env.Client.Delete(ctx, head); err != nil {
		t.Fatalf("Deleting the head: %v", err)
	}
	wantGone(t, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sibling}})
	if gws := pool(t, head); len(gws) != 0 {
		t.Errorf("The pool of a deleted head still has Gateways %v", slices.Collect(maps.Keys(gws)))
	}
	for _, i := range []int{0, 63} {
		st := testenv.WaitAccepted(t, env.Client, settle, route(ns, head, i), metav1.ConditionFalse, string(v1alpha1.FragmentReasonParentNotAccepted))
		if len(st.Status.Listeners) != 0 {
			t.Errorf("%s of a deleted pool still reports listeners %+v", st.Name, st.Status.Listeners)
		}
	}
}
