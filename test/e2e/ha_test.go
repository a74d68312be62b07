package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

const (
	haReplicas  = 3
	haWriters   = 6
	haNamespace = "gatefold-system"
	// haController is the controllerName of the Gateway's class, whose
	// ListenerSets the replicas fold (--listenerset-controllers).
	haController = "example.com/gateway-controller"
)

// replica is one `gatefold manager` process.
type replica = testenv.Replica

// ledSince returns when the replica logged that it took the lease, or the
// zero time.
func ledSince(t *testing.T, r *replica) time.Time {
	b, err := os.ReadFile(r.Log)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		var entry struct {
			TS   time.Time `json:"ts"`
			Msg  string    `json:"msg"`
			Lock string    `json:"lock"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "Successfully acquired lease" && entry.Lock == haNamespace+"/gatefold-leader" {
			return entry.TS
		}
	}
	return time.Time{}
}

// TestLeaderFailoverLosesNothing runs three replicas against one API server,
// kills the leader with SIGKILL in the middle of a burst of fragment creates
// and deletes, freezes its successor past its lease in the middle of another,
// and checks the Gateways the last leader converges to and, from the API
// server's audit log, that only leaders wrote. The replicas fold the
// ListenerSets of the Gateway's class: on a plain Gateway, a ListenerSet
// created just before the freeze makes the successor write the Gateway's
// status, which only the lease fences. The Gateway is a plain one, or
// the head of a pool that the burst makes grow to four Gateways: the leader
// is then killed while the pool's second Gateway fills, and frozen when the
// fragments that come next need a fourth.
func TestLeaderFailoverLosesNothing(t *testing.T) {
	tests := map[string]struct {
		pool bool
		// fragments are created in the burst, every third deleted again.
		fragments int
		// killAt is how many the burst has sent when the leader is killed.
		killAt int
	}{
		"one Gateway": {fragments: 60, killAt: 20},
		// 74 of the first 111 stay: two Gateways; 188 of the 282: three full
		// but one room, so the 5 created before the freeze need a fourth.
		"a pool of four Gateways": {pool: true, fragments: 282, killAt: 111},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { testLeaderFailover(t, tc.pool, tc.fragments, tc.killAt) })
	}
}

func testLeaderFailover(t *testing.T, pooled bool, fragments, killAt int) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.log")
	env, _ := startControlPlane(t, devenv.Options{AuditLog: audit})
	ctx := context.Background()
	for _, ns := range []string{haNamespace, "infra", "team-a", "team-b"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "example"}, Spec: gwv1.GatewayClassSpec{ControllerName: haController}}
	if err := env.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	if pooled {
		gw = fixture.PoolHead("infra", gwv1.NamespacesFromAll)
	}
	if err := env.Client.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}

	replicas := startReplicas(t, env, dir, haReplicas)
	first := waitLeader(t, replicas)
	t.Logf("First leader: %s", first.Name)

	// The burst: writers create fragments; every third one is deleted again.
	// The leader is killed at killAt, as soon as it has folded into the last
	// Gateway that those that stay of the first killAt need. For a pool that
	// is a sibling it writes beside the head, and the kill often lands
	// between the two writes: the new leader finds a fold half-written.
	var mu sync.Mutex
	var want []string
	var wg sync.WaitGroup
	next := make(chan int)
	var killedAt time.Time
	var before map[gwv1.SectionName]string
	for range haWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ns := []string{"team-a", "team-b"}[i%2]
				lf := fixture.Fragment(ns, fmt.Sprintf("route-%d", i), gw, fixture.HTTPS("web", fmt.Sprintf("route-%d.example.com", i)))
				if err := env.Client.Create(ctx, lf); err != nil {
					t.Errorf("Creating %s: %v", lf.Name, err)
					continue
				}
				if i%3 == 0 {
					if err := env.Client.Delete(ctx, lf); err != nil {
						t.Errorf("Deleting %s: %v", lf.Name, err)
					}
					continue
				}
				mu.Lock()
				want = append(want, fmt.Sprintf("%s 443/HTTPS route-%d.example.com", v1alpha1.ListenerName(ns, lf.Name, "web"), i))
				mu.Unlock()
			}
		}()
	}
	for i := range fragments {
		if i == killAt {
			// So that the leader dies mid-work, not before it.
			waitFolded(t, env.Client, gw, poolSize(gw, killAt-(killAt+2)/3))
			before = readPool(t, env.Client, gw).placement(gw)
			if err := first.Cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killedAt = time.Now()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	// The most fragments ever alive at once: those that stay, and one per
	// writer that it deletes again.
	peak := len(want) + haWriters

	var rest []*replica
	for _, r := range replicas {
		if r != first {
			rest = append(rest, r)
		}
	}
	second := waitLeader(t, rest)
	t.Logf("New leader: %s, %v after the kill", second.Name, time.Since(killedAt).Round(time.Millisecond))

	p := waitListeners(t, env.Client, gw, want)
	t.Logf("Converged to %d listeners on %d Gateways %v after the kill", len(want), len(p), time.Since(killedAt).Round(time.Millisecond))
	checkPool(t, p, gw, len(want), peak, before)
	waitAllAccepted(t, env.Client, gw, len(want), p)
	checkOnlyLeadersWrote(t, audit, first, second, rest)

	// The new leader freezes past its lease in the middle of a burst, so that
	// it holds folds it has not written (for a plain Gateway, a ListenerSet
	// to count in its status; for a pool, a Gateway to create): the last replica
	// takes over and folds them and what came while it was frozen, and the
	// frozen one, once thawed, finds it lost the lease and exits. Fenced by
	// the resourceVersion it read, or by its lease alone for a Gateway it
	// would create and for the Gateway's status, none of its stale writes
	// may land.
	before = p.placement(gw)
	fragmentCount := len(want)
	created := 0
	createFragment := func() {
		t.Helper()
		lf := fixture.Fragment("team-b", fmt.Sprintf("frozen-%d", created), gw, fixture.HTTPS("web", fmt.Sprintf("frozen-%d.example.com", created)))
		if err := env.Client.Create(ctx, lf); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s 443/HTTPS frozen-%d.example.com", v1alpha1.ListenerName("team-b", lf.Name, "web"), created))
		created++
	}
	for range 5 {
		createFragment()
	}
	// On a plain Gateway, a ListenerSet makes the successor write the
	// Gateway's status.attachedListenerSets, which only the lease fences.
	sets := 0
	if !pooled {
		set := fixture.ListenerSet("team-a", "frozen-set", gw, fixture.HTTPS("web", "frozen-set.example.com"))
		if err := env.Client.Create(ctx, set); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s 443/HTTPS frozen-set.example.com", v1alpha1.ListenerSetListenerName("team-a", set.Name, "web")))
		sets++
	}
	if err := second.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	checkPending(t, env.Client, gw, want[fragmentCount:])
	third := waitLeader(t, slices.DeleteFunc(rest, func(r *replica) bool { return r == second }))
	for range 5 {
		createFragment()
	}
	waitListeners(t, env.Client, gw, want)
	waitAttachedListenerSets(t, env.Client, gw, int32(sets))
	if err := second.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.Exited():
		if second.Err() == nil {
			t.Errorf("%s exited with status 0 after losing the lease, want a failure", second.Name)
		}
		if b, _ := os.ReadFile(second.Log); !strings.Contains(string(b), "gatefold: running manager: leader election lost") {
			t.Errorf("%s did not say why it exited:\n%s", second.Name, b[max(0, len(b)-2000):])
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30s after it lost the lease to %s", second.Name, third.Name)
	}
	checkDeposedWroteNothing(t, audit, second, ledSince(t, third))
	if sets > 0 {
		checkGatewayStatusWritten(t, audit, gw, third)
	}
	lf := fixture.Fragment("team-a", "after-failover", gw, fixture.HTTPS("web", "after.example.com"))
	if err := env.Client.Create(ctx, lf); err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprintf("%s 443/HTTPS after.example.com", v1alpha1.ListenerName("team-a", lf.Name, "web")))
	p = waitListeners(t, env.Client, gw, want)
	// No sibling is deleted within the test (--pool-sibling-grace is 5m), and
	// no more fragments were ever alive than now: the pool holds exactly as
	// many Gateways as they need.
	checkPool(t, p, gw, len(want), max(peak, len(want)), before)
	waitAllAccepted(t, env.Client, gw, len(want)-sets, p)
	checkSiblingsCreated(t, audit, p)
}

// startReplicas starts n `gatefold manager` processes as the
// ServiceAccount of config/ha (the test's own client stays the
// administrator), with a short lease, logging into dir.
func startReplicas(t *testing.T, env *devenv.Env, dir string, n int) []*replica {
	t.Helper()
	return testenv.MustStart(t, env, testenv.Gatefold{
		Overlay: "ha", Binary: testenv.MustBuildGatefold(t), Replicas: n, Name: "replica", Dir: dir,
		Args: []string{"--webhook-cert-dir", env.WebhookCertDir(),
			"--leader-election-namespace", haNamespace, "--claims-namespace", haNamespace,
			"--listenerset-controllers", haController,
			"--zap-time-encoding", "rfc3339nano", "--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms"},
	})
}

// pool is the Gateways of a pool as read: its head, then the siblings
// gatefold created, in pool order. A Gateway that heads none is a pool of
// one. Its methods take the head as the test created it, whose listeners
// are the head's own.
type pool []gwv1.Gateway

// readPool reads the pool head heads. Every other Gateway in its namespace
// must be a sibling of it: the tests create no other.
func readPool(t *testing.T, c client.Client, head *gwv1.Gateway) pool {
	t.Helper()
	list := &gwv1.GatewayList{}
	if err := c.List(context.Background(), list, client.InNamespace(head.Namespace)); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Items, func(g gwv1.Gateway) bool { return g.Name == head.Name })
	if i < 0 {
		t.Fatalf("Gateway %s is gone", client.ObjectKeyFromObject(head))
	}
	p := pool{list.Items[i]}
	var sets []gwv1.Gateway
	for _, g := range list.Items {
		switch {
		case g.Name == head.Name:
		case rules.SiblingOf(&g, &p[0]) && rules.ListenerSetGateway(&g):
			sets = append(sets, g)
		case rules.SiblingOf(&g, &p[0]):
			p = append(p, g)
		default:
			t.Fatalf("Gateway %s/%s is no sibling of %s: labels %v, owners %v", g.Namespace, g.Name, head.Name, g.Labels, g.OwnerReferences)
		}
	}
	slices.SortFunc(p[1:], func(a, b gwv1.Gateway) int {
		return rules.SiblingIndex(head.Name, a.Name) - rules.SiblingIndex(head.Name, b.Name)
	})
	return append(p, sets...)
}

// folded returns the summaries of the listeners folded into the pool: all
// but the head's own ones, which every Gateway of the pool carries.
func (p pool) folded(head *gwv1.Gateway) []string {
	var out []string
	for _, g := range p {
		for _, l := range g.Spec.Listeners {
			if !testenv.OwnListener(head, l) {
				out = append(out, fixture.Summary(l))
			}
		}
	}
	return out
}

// placement returns the Gateway each folded listener is on, by name.
func (p pool) placement(head *gwv1.Gateway) map[gwv1.SectionName]string {
	out := map[gwv1.SectionName]string{}
	for _, g := range p {
		for _, l := range g.Spec.Listeners {
			if !testenv.OwnListener(head, l) {
				out[l.Name] = g.Name
			}
		}
	}
	return out
}

// carriesOwn says whether every Gateway of the pool carries the head's own
// listeners, as created, but the Gateway of the head's ListenerSets.
func (p pool) carriesOwn(head *gwv1.Gateway) bool {
	for _, g := range p {
		if rules.ListenerSetGateway(&g) {
			continue
		}
		for _, own := range head.Spec.Listeners {
			if !slices.ContainsFunc(g.Spec.Listeners, func(l gwv1.Listener) bool { return fixture.Summary(l) == fixture.Summary(own) }) {
				return false
			}
		}
	}
	return true
}

// poolSize is how many Gateways the pool of head needs for n one-listener
// fragments: each holds the head's own listeners and MaxListeners in all.
func poolSize(head *gwv1.Gateway, n int) int {
	room := rules.MaxListeners - len(head.Spec.Listeners)
	return (n + room - 1) / room
}

// checkPool checks a converged pool that holds n fragments' listeners, each
// once (waitListeners): no Gateway holds more than MaxListeners or a tuple
// another holds; there are as many Gateways as n needs, or as the most
// fragments ever alive at once, peak, needed, since a pool grows only when
// all its Gateways are full and shrinks only after --pool-sibling-grace;
// and every listener in before is on the Gateway it was on then, unless its
// fragment was deleted since.
func checkPool(t *testing.T, p pool, head *gwv1.Gateway, n, peak int, before map[gwv1.SectionName]string) {
	t.Helper()
	testenv.CheckPool(t, head, p)
	var names []string
	for _, g := range p {
		if !rules.ListenerSetGateway(&g) {
			names = append(names, g.Name)
		}
	}
	if least, most := poolSize(head, n), poolSize(head, peak); len(names) < least || len(names) > most {
		t.Errorf("The pool has %d Gateways %v for %d fragments (at most %d alive at once), want %d to %d", len(names), names, n, peak, least, most)
	}
	moved := 0
	for name, now := range p.placement(head) {
		if was, ok := before[name]; ok && was != now {
			t.Errorf("Listener %s moved from Gateway %s to %s", name, was, now)
			moved++
		}
	}
	t.Logf("Pool %v: %d fragments; %d listeners were folded before the failover, %d moved", names, n, len(before), moved)
}

// waitListeners waits until the pool of gw holds exactly want besides the
// head's own listeners, which every Gateway of it carries, in any order,
// and returns it.
func waitListeners(t *testing.T, c client.Client, gw *gwv1.Gateway, want []string) pool {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	var p pool
	testenv.Eventually(t, 60*time.Second, func() error {
		p = readPool(t, c, gw)
		got := slices.Sorted(slices.Values(p.folded(gw)))
		if slices.Equal(want, got) && p.carriesOwn(gw) {
			return nil
		}
		return fmt.Errorf("waiting for the pool of %s to hold the %d listeners wanted; last: %d Gateways, the head's own listeners carried by each: %v (-want +got):\n%s", gw.Name, len(want), len(p), p.carriesOwn(gw), cmp.Diff(want, got))
	})
	return p
}

// checkDeposedWroteNothing reads the audit log: after its successor took the
// lease, no write of the deposed leader landed (Gateways, statuses, grants):
// it asks itself whether it renewed its lease within the renew deadline
// before every write, and the API server refuses a stale fold with 409.
func checkDeposedWroteNothing(t *testing.T, audit string, deposed *replica, successorLeads time.Time) {
	t.Helper()
	events := auditEvents(t, audit)
	codes := map[string]int{}
	for _, e := range events {
		if !strings.Contains(e.UserAgent, "("+deposed.Name+")") || e.ObjectRef.Resource == "leases" || e.StageTimestamp.Before(successorLeads) {
			continue
		}
		codes[fmt.Sprintf("%s %s/%s %d", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ResponseStatus.Code)]++
		if e.ResponseStatus.Code < 300 {
			t.Errorf("%s, deposed, wrote %s %s/%s (%s %d) after its successor took the lease", deposed.Name, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.Verb, e.ResponseStatus.Code)
		}
	}
	t.Logf("Writes of the deposed leader %s after its successor took the lease, by request and response code: %v", deposed.Name, codes)
}

// checkPending checks, with the leader frozen, that it holds folds it has
// not written, so that checkDeposedWroteNothing can fail: some listener of
// pending, those created just before the freeze (the last of them within
// the merger's debounce), is on no Gateway of the pool of gw.
func checkPending(t *testing.T, c client.Client, gw *gwv1.Gateway, pending []string) {
	t.Helper()
	p := readPool(t, c, gw)
	folded := p.folded(gw)
	unfolded := 0
	for _, l := range pending {
		if !slices.Contains(folded, l) {
			unfolded++
		}
	}
	if unfolded == 0 {
		t.Fatalf("The leader folded all %d listeners created before it froze: it holds nothing to write, and its writes after the freeze would prove nothing", len(pending))
	}
	t.Logf("Frozen with %d of the %d listeners created just before not folded; the head counts %s attached ListenerSets", unfolded, len(pending), ptrString(p[0].Status.AttachedListenerSets))
}

// waitAttachedListenerSets waits until the head of the pool of gw counts n
// attached ListenerSets in its status.
func waitAttachedListenerSets(t *testing.T, c client.Client, gw *gwv1.Gateway, n int32) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		current := &gwv1.Gateway{}
		get(t, c, client.ObjectKeyFromObject(gw), current)
		if ptr.Deref(current.Status.AttachedListenerSets, 0) == n {
			return nil
		}
		return fmt.Errorf("waiting for Gateway %s to count %d attached ListenerSets; last: %s", gw.Name, n, "attachedListenerSets "+ptrString(current.Status.AttachedListenerSets))
	})
}

// checkGatewayStatusWritten reads the audit log: it recorded a write of the
// status of Gateway gw by the successor after it took the lease, so that
// checkDeposedWroteNothing, which looks at every write, saw the Gateway's
// status too.
func checkGatewayStatusWritten(t *testing.T, audit string, gw *gwv1.Gateway, successor *replica) {
	t.Helper()
	leads := ledSince(t, successor)
	for _, e := range auditEvents(t, audit) {
		if e.ObjectRef.Resource == "gateways" && e.ObjectRef.Subresource == "status" && e.ObjectRef.Name == gw.Name && e.ResponseStatus.Code < 300 &&
			strings.Contains(e.UserAgent, "("+successor.Name+")") && !e.StageTimestamp.Before(leads) {
			return
		}
	}
	t.Errorf("The audit log has no write of Gateway %s/%s status by %s after it took the lease: the checks of who wrote did not see it", gw.Namespace, gw.Name, successor.Name)
}

// waitFolded waits until the pool of gw has the given number of Gateways
// and its last one a folded listener.
func waitFolded(t *testing.T, c client.Client, gw *gwv1.Gateway, gateways int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		p := readPool(t, c, gw)
		if len(p) >= gateways && len(p[gateways-1].Spec.Listeners) > len(gw.Spec.Listeners) {
			return nil
		}
		return fmt.Errorf("waiting for the first leader to fold into Gateway number %d of the pool; last: %d Gateways", gateways, len(p))
	})
}

// waitAllAccepted waits until n fragments report Accepted=True, each
// listener on the Gateway of the pool of gw that carries it.
func waitAllAccepted(t *testing.T, c client.Client, gw *gwv1.Gateway, n int, p pool) {
	t.Helper()
	on := p.placement(gw)
	testenv.Eventually(t, 60*time.Second, func() error {
		list := &v1alpha1.ListenerFragmentList{}
		if err := c.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		accepted := 0
		var wrong []string
		for _, lf := range list.Items {
			if meta.IsStatusConditionTrue(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
				accepted++
			}
			if len(lf.Status.Listeners) != len(lf.Spec.Listeners) {
				wrong = append(wrong, fmt.Sprintf("%s/%s reports %d listeners of %d", lf.Namespace, lf.Name, len(lf.Status.Listeners), len(lf.Spec.Listeners)))
			}
			for _, l := range lf.Status.Listeners {
				name := v1alpha1.ListenerName(lf.Namespace, lf.Name, l.Name)
				if want := (v1alpha1.GatewayListenerReference{Namespace: gwv1.Namespace(gw.Namespace), Name: gwv1.ObjectName(on[name]), ListenerName: name}); l.Gateway == nil || *l.Gateway != want {
					wrong = append(wrong, fmt.Sprintf("%s/%s %s on %+v, carried as %+v", lf.Namespace, lf.Name, l.Name, l.Gateway, want))
				}
			}
		}
		if accepted == n && len(list.Items) == n && len(wrong) == 0 {
			return nil
		}
		return fmt.Errorf("waiting for %d fragments to be accepted where the pool carries them; last: %d of %d fragments accepted; statuses that do not name where the pool carries the listener: %v",
			n, accepted, len(list.Items), wrong[:min(len(wrong), 10)])
	})
}

// waitLeader waits until one of the replicas logs that it leads.
func waitLeader(t *testing.T, replicas []*replica) *replica {
	t.Helper()
	var leader *replica
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, r := range replicas {
			if !ledSince(t, r).IsZero() {
				leader = r
				return nil
			}
		}
		return errors.New("no replica became leader")
	})
	return leader
}

func auditEvents(t *testing.T, audit string) []testenv.AuditEvent {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// checkSiblingsCreated reads the audit log: it recorded the create of every
// sibling of the pool, by a replica, so that checkOnlyLeadersWrote and
// checkDeposedWroteNothing, which look at every write, saw them: a create
// answered 201.
func checkSiblingsCreated(t *testing.T, audit string, p pool) {
	t.Helper()
	events := auditEvents(t, audit)
	created := map[string]string{}
	for _, e := range events {
		if e.ObjectRef.Resource == "gateways" && e.ObjectRef.Namespace == p[0].Namespace && e.ResponseStatus.Code == 201 && strings.HasPrefix(e.UserAgent, "gatefold/") {
			created[e.ObjectRef.Name] = e.UserAgent
		}
	}
	for _, g := range p[1:] {
		if created[g.Name] == "" {
			t.Errorf("The audit log has no create of Gateway %s, a sibling gatefold created: the checks of who wrote did not see it", g.Name)
		}
	}
	t.Logf("Gateways gatefold created, by user agent: %v", created)
}

// checkOnlyLeadersWrote reads the audit log: every merger write (Gateways,
// fragment statuses, ReferenceGrants) came from the first leader, or from the
// second after it took the lease; the replica that never led wrote nothing.
func checkOnlyLeadersWrote(t *testing.T, audit string, first, second *replica, rest []*replica) {
	t.Helper()
	events := auditEvents(t, audit)
	writes := map[string]int{}
	secondLeads := ledSince(t, second)
	for _, e := range events {
		from := e.Replica()
		if from == "" || e.ObjectRef.Resource == "leases" || e.ResponseStatus.Code >= 300 {
			continue
		}
		writes[from]++
		if from == second.Name && e.StageTimestamp.Before(secondLeads) {
			t.Errorf("%s wrote %s %s/%s before it took the lease", from, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
	}
	t.Logf("Writes by replica: %v", writes)
	for _, r := range rest {
		if r != second && writes[r.Name] != 0 {
			t.Errorf("%s never led but made %d writes", r.Name, writes[r.Name])
		}
	}
	if writes[first.Name] == 0 || writes[second.Name] == 0 {
		t.Errorf("Both leaders should have written: %v", writes)
	}
}
