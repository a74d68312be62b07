package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

const (
	haReplicas  = 3
	haFragments = 60
	haWriters   = 6
	haNamespace = "gatefold-system"
)

// replica is one `gatefold manager` process.
type replica struct {
	name   string
	cmd    *exec.Cmd
	log    string     // its stderr, where leader election is logged
	exited chan error // receives the process's exit
}

// ledSince returns when the replica logged that it took the lease, or the
// zero time.
func (r *replica) ledSince(t *testing.T) time.Time {
	b, err := os.ReadFile(r.log)
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
// and deletes, and checks the Gateway a new leader converges to and, from the
// API server's audit log, that only leaders wrote.
func TestLeaderFailoverLosesNothing(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.log")
	env, _ := startControlPlane(t, devenv.Options{AuditLog: audit})
	ctx := context.Background()
	for _, ns := range []string{haNamespace, "infra", "team-a", "team-b"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	if err := env.Client.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}

	bin := buildGatefold(t)
	// The replicas run as the ServiceAccount of config/ha; the test's own
	// client stays the administrator.
	asInstalled := installedKubeconfig(t, env, "ha")
	replicas := make([]*replica, haReplicas)
	for i := range replicas {
		r := &replica{name: fmt.Sprintf("replica-%d", i), log: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i))}
		logFile, err := os.Create(r.log)
		if err != nil {
			t.Fatal(err)
		}
		r.cmd = exec.Command(bin, "manager", "--kubeconfig", asInstalled,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--webhook-port", fmt.Sprint(testenv.MustFreePort(t)), "--webhook-cert-dir", env.WebhookCertDir(),
			"--leader-election-namespace", haNamespace, "--claims-namespace", haNamespace,
			"--zap-time-encoding", "rfc3339nano", "--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms")
		r.cmd.Env = append(os.Environ(), "POD_NAME="+r.name)
		r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.exited = make(chan error, 1)
		go func() { r.exited <- r.cmd.Wait() }()
		t.Cleanup(func() { _ = r.cmd.Process.Kill(); <-r.exited; logFile.Close(); testenv.CheckLogFile(t, r.log) })
		replicas[i] = r
	}
	first := waitLeader(t, replicas)
	t.Logf("First leader: %s", first.name)

	// The burst: writers create fragments; every third one is deleted again.
	// The leader is killed once a third of them exist and it has folded some.
	var mu sync.Mutex
	want := []string{"default 8080/HTTP"}
	var wg sync.WaitGroup
	next := make(chan int)
	var killedAt time.Time
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
	for i := range haFragments {
		if i == haFragments/3 {
			waitFolded(t, env.Client, gw) // so that the leader dies mid-work, not before it
			if err := first.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killedAt = time.Now()
		}
		next <- i
	}
	close(next)
	wg.Wait()

	var rest []*replica
	for _, r := range replicas {
		if r != first {
			rest = append(rest, r)
		}
	}
	second := waitLeader(t, rest)
	t.Logf("New leader: %s, %v after the kill", second.name, time.Since(killedAt).Round(time.Millisecond))

	waitListeners(t, env.Client, gw, want)
	t.Logf("Converged to %d listeners %v after the kill", len(want), time.Since(killedAt).Round(time.Millisecond))

	waitAllAccepted(t, env.Client, haFragments-haFragments/3)
	checkOnlyLeadersWrote(t, audit, first, second, rest)

	// The new leader freezes past its lease in the middle of a burst, so that
	// it holds folds it has not written: the last replica takes over and folds
	// what came while it was frozen, and the frozen one, once thawed, finds it
	// lost the lease and exits. Fenced by the resourceVersion it read, none of
	// its stale folds may land.
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
	if err := second.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	third := waitLeader(t, slices.DeleteFunc(rest, func(r *replica) bool { return r == second }))
	for range 5 {
		createFragment()
	}
	waitListeners(t, env.Client, gw, want)
	if err := second.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second.exited:
		second.exited <- err // for the cleanup
		if err == nil {
			t.Errorf("%s exited with status 0 after losing the lease, want a failure", second.name)
		}
		if b, _ := os.ReadFile(second.log); !strings.Contains(string(b), "gatefold: running manager: leader election lost") {
			t.Errorf("%s did not say why it exited:\n%s", second.name, b[max(0, len(b)-2000):])
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30s after it lost the lease to %s", second.name, third.name)
	}
	checkDeposedWroteNothing(t, audit, second, third.ledSince(t))
	lf := fixture.Fragment("team-a", "after-failover", gw, fixture.HTTPS("web", "after.example.com"))
	if err := env.Client.Create(ctx, lf); err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprintf("%s 443/HTTPS after.example.com", v1alpha1.ListenerName("team-a", lf.Name, "web")))
	waitListeners(t, env.Client, gw, want)
	waitAllAccepted(t, env.Client, haFragments-haFragments/3+created+1)
}

// waitListeners waits until the Gateway holds exactly want, in any order.
func waitListeners(t *testing.T, c client.Client, gw *gwv1.Gateway, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		current := &gwv1.Gateway{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gw), current); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, l := range current.Spec.Listeners {
			got = append(got, fixture.Summary(l))
		}
		slices.Sort(got)
		if slices.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("The Gateway did not converge within 60s (-want +got):\n%s", cmp.Diff(want, got))
		}
	}
}

// checkDeposedWroteNothing reads the audit log: after its successor took the
// lease, no write of the deposed leader landed (Gateways, statuses, grants):
// it asks itself whether it renewed its lease within the renew deadline
// before every write, and the API server refuses a stale fold with 409.
func checkDeposedWroteNothing(t *testing.T, audit string, deposed *replica, successorLeads time.Time) {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, e := range events {
		if !strings.Contains(e.UserAgent, "("+deposed.name+")") || e.ObjectRef.Resource == "leases" || e.StageTimestamp.Before(successorLeads) {
			continue
		}
		codes[fmt.Sprintf("%s %s/%s %d", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ResponseStatus.Code)]++
		if e.ResponseStatus.Code < 300 {
			t.Errorf("%s, deposed, wrote %s %s/%s (%s %d) after its successor took the lease", deposed.name, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.Verb, e.ResponseStatus.Code)
		}
	}
	t.Logf("Writes of the deposed leader %s after its successor took the lease, by request and response code: %v", deposed.name, codes)
}

// waitFolded waits until the Gateway has a listener besides its own.
func waitFolded(t *testing.T, c client.Client, gw *gwv1.Gateway) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		current := &gwv1.Gateway{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gw), current); err != nil {
			t.Fatal(err)
		}
		if len(current.Spec.Listeners) > 1 {
			return
		}
	}
	t.Fatal("The first leader folded nothing within 30s")
}

// waitAllAccepted waits until n fragments report Accepted=True.
func waitAllAccepted(t *testing.T, c client.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		list := &v1alpha1.ListenerFragmentList{}
		if err := c.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		accepted := 0
		for _, lf := range list.Items {
			if meta.IsStatusConditionTrue(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
				accepted++
			}
		}
		if accepted == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d fragments are accepted after 60s", accepted, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLeader waits until one of the replicas logs that it leads.
func waitLeader(t *testing.T, replicas []*replica) *replica {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range replicas {
			if !r.ledSince(t).IsZero() {
				return r
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("No replica became leader within 30s")
	return nil
}

// checkOnlyLeadersWrote reads the audit log: every merger write (Gateways,
// fragment statuses, ReferenceGrants) came from the first leader, or from the
// second after it took the lease; the replica that never led wrote nothing.
func checkOnlyLeadersWrote(t *testing.T, audit string, first, second *replica, rest []*replica) {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]int{}
	secondLeads := second.ledSince(t)
	for _, e := range events {
		agent := e.UserAgent
		if !strings.HasPrefix(agent, "gatefold/") {
			continue
		}
		from := agent[strings.Index(agent, "(")+1 : strings.Index(agent, ")")]
		if e.ObjectRef.Resource == "leases" || e.ResponseStatus.Code >= 300 {
			continue
		}
		writes[from]++
		if from == second.name && e.StageTimestamp.Before(secondLeads) {
			t.Errorf("%s wrote %s %s/%s before it took the lease", from, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
	}
	t.Logf("Writes by replica: %v", writes)
	for _, r := range rest {
		if r != second && writes[r.name] != 0 {
			t.Errorf("%s never led but made %d writes", r.name, writes[r.name])
		}
	}
	if writes[first.name] == 0 || writes[second.name] == 0 {
		t.Errorf("Both leaders should have written: %v", writes)
	}
}
