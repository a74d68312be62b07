package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	apischeme "github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

func scheme() *runtime.Scheme { return apischeme.New() }

// The faults. The first round freezes the leader, the fault that tests the
// fence; the others take the kinds in an order drawn from the seed, all of
// them before any again.
const (
	freezeLeader    = "SIGSTOP leader"
	partitionLeader = "partition leader"
	killLeader      = "SIGKILL leader"
	apiRestart      = "restart kube-apiserver"
	cutWebhook      = "cut webhook"
	etcdRestart     = "restart etcd"
	freezeFollower  = "SIGSTOP follower"
	killFollower    = "SIGKILL follower"
	slowLeader      = "slow leader"
)

var faultKinds = []string{freezeLeader, partitionLeader, killLeader, apiRestart, cutWebhook, etcdRestart, freezeFollower, killFollower, slowLeader}

// harness runs the replicas, each through its own proxy to the API server,
// with a balancer in front of their webhook servers, restarts a replica
// whose process ends (as kubelet restarts a container), and injects faults.
type harness struct {
	t         *testing.T
	env       *devenv.Env
	c         client.Client
	dir       string
	binary    string
	installed *testenv.Installed
	balancer  *balancer
	slots     []*slot

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// apiRestarts are when kube-apiserver was restarted.
	apiRestarts []time.Time
	// order is the order of faultKinds the current cycle of rounds takes.
	order []int
}

// rbacWarmUp is how long after a restart kube-apiserver may refuse a
// request for want of its RBAC informers: a request refused then is its
// fault, not the installed RBAC's.
const rbacWarmUp = 15 * time.Second

// logTime reads the time a log line starts with: zap's RFC 3339, or klog's
// "E1201 23:27:31.063598", of this year, in local time.
func logTime(line string) (time.Time, bool) {
	if ts, _, _ := strings.Cut(line, " "); ts != "" {
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return at, true
		}
	}
	if len(line) < 21 {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return at.AddDate(time.Now().Year(), 0, 0), true
}

// checkLog fails the test for every request a replica's log says the API
// server refused, as testenv.CheckLogFile does, but those within
// rbacWarmUp of a restart of kube-apiserver.
func (h *harness) checkLog(path string) {
	lines, err := testenv.ForbiddenInFile(path)
	if err != nil {
		h.t.Error(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, line := range lines {
		at, ok := logTime(line)
		if ok && slices.ContainsFunc(h.apiRestarts, func(r time.Time) bool { return !at.Before(r) && at.Sub(r) < rbacWarmUp }) {
			continue
		}
		h.t.Errorf("%s, run as installed, was refused a request: %s", filepath.Base(path), line)
	}
}

// slot is one replica of the Deployment: its name, ports and proxy stay
// while its process is restarted.
type slot struct {
	name        string
	proxy       *proxy
	webhookPort int
	probePort   int

	mu          sync.Mutex
	current     *testenv.Replica
	logs        []string
	incarnation int
	exits       int
}

// replicaArgs are the flags of every replica: the installed self-signed
// certificates served on loopback, a short lease as test/e2e's HA tests,
// the shortest claim grace, and the soak class's ListenerSets folded.
var replicaArgs = []string{
	"--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1",
	"--listenerset-controllers=" + foldedClassCtrl,
	"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
	"--claim-grace=" + claimGrace.String(), "--claim-collect-period=2s",
	"--zap-time-encoding=rfc3339nano",
}

func startHarness(t *testing.T, env *devenv.Env, c client.Client, dir string, s settings) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, env: env, c: c, dir: dir, binary: testenv.MustBuildGatefold(t), ctx: ctx, cancel: cancel}
	t.Cleanup(h.stop)
	api := apiServerAddr(t, env.Config)
	var backends []string
	for i := range s.replicas {
		p, err := startProxy(api)
		if err != nil {
			t.Fatal(err)
		}
		sl := &slot{name: fmt.Sprintf("replica-%d", i), proxy: p, webhookPort: testenv.MustFreePort(t), probePort: testenv.MustFreePort(t)}
		h.slots = append(h.slots, sl)
		backends = append(backends, "127.0.0.1:"+strconv.Itoa(sl.webhookPort))
	}
	b, err := startBalancer(backends)
	if err != nil {
		t.Fatal(err)
	}
	h.balancer = b
	for i, sl := range h.slots {
		// The first start applies the overlay as a user does; the others
		// find it installed.
		if err := h.start(sl, i == 0); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			testenv.PointWebhooksAt(t, env.Client, "https://"+b.Addr())
		}
	}
	for _, sl := range h.slots {
		if err := sl.current.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		h.wg.Go(func() { h.supervise(sl) })
	}
	if err := waitGarbageCollector(ctx, c); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitGarbageCollector waits until kube-controller-manager's garbage
// collector deletes what a deleted ListenerFragment owned. The overlay
// installs the CRD after the collector started, and it finds new kinds only
// every 30 seconds: until then the grants of a deleted fragment stay, which
// would count against the first round's convergence.
func waitGarbageCollector(ctx context.Context, c client.Client) error {
	lf := &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: gatefoldNS, Name: "gc-probe"},
		Spec: v1alpha1.ListenerFragmentSpec{ParentRef: gwv1.ParentGatewayReference{Name: "gc-probe"},
			Listeners: []gwv1.ListenerEntry{{Name: "probe", Port: 80, Protocol: gwv1.HTTPProtocolType}}},
	}
	if err := c.Create(ctx, lf); err != nil {
		return fmt.Errorf("creating the garbage collector's probe: %w", err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gatefoldNS, Name: "gc-probe",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ListenerFragment", Name: lf.Name, UID: lf.UID}}}}
	if err := c.Create(ctx, owned); err != nil {
		return fmt.Errorf("creating the garbage collector's probe: %w", err)
	}
	if err := c.Delete(ctx, lf); err != nil {
		return fmt.Errorf("deleting the garbage collector's probe: %w", err)
	}
	return testenv.Poll(time.Minute, 500*time.Millisecond, func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the garbage collector has not deleted ConfigMap %s/%s, owned by a deleted ListenerFragment: %v", owned.Namespace, owned.Name, err)
	})
}

// start starts a new incarnation of the slot's replica.
func (h *harness) start(sl *slot, apply bool) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.incarnation++
	dir := filepath.Join(h.dir, fmt.Sprintf("%s.%d", sl.name, sl.incarnation))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := append([]string{fmt.Sprintf("--webhook-port=%d", sl.webhookPort), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", sl.probePort)}, replicaArgs...)
	g := testenv.Gatefold{Overlay: "self-signed", Apply: apply, Installed: h.installed, Binary: h.binary, Name: sl.name, Dir: dir,
		Server: sl.proxy.Addr(), Env: []string{"POD_NAMESPACE=" + gatefoldNS}, Args: args, NoWait: true, StopGrace: 5 * time.Second}
	if apply {
		installed, err := testenv.Install(h.ctx, h.env, "self-signed")
		if err != nil {
			return err
		}
		h.installed, g.Installed = installed, installed
	}
	rs, err := testenv.Start(h.ctx, h.env, g)
	if err != nil {
		return err
	}
	sl.current = rs[0]
	sl.logs = append(sl.logs, rs[0].Log)
	return nil
}

// supervise restarts the slot's replica a second after its process ends,
// until the harness stops.
func (h *harness) supervise(sl *slot) {
	for {
		sl.mu.Lock()
		r := sl.current
		sl.mu.Unlock()
		select {
		case <-h.ctx.Done():
			return
		case <-r.Exited():
		}
		_ = r.Stop() // removes its kubeconfig's folder
		sl.mu.Lock()
		sl.exits++
		sl.mu.Unlock()
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if err := h.start(sl, false); err != nil {
			h.t.Errorf("Restarting %s: %v", sl.name, err)
			return
		}
	}
}

// exits counts the replica processes that ended during the run.
func (h *harness) exits() int {
	n := 0
	for _, sl := range h.slots {
		sl.mu.Lock()
		n += sl.exits
		sl.mu.Unlock()
	}
	return n
}

// stop stops the supervisors and every replica.
func (h *harness) stop() {
	if h.ctx.Err() != nil {
		return
	}
	h.cancel()
	h.wg.Wait()
	for _, sl := range h.slots {
		if r := sl.current; r != nil && r.Cmd != nil {
			_ = r.Cmd.Process.Signal(syscall.SIGCONT)
			_ = r.Stop()
		}
		for _, log := range sl.logs {
			h.checkLog(log)
		}
		_ = sl.proxy.Close()
	}
	if h.balancer != nil {
		_ = h.balancer.Close()
	}
}

// kindFor is the fault of a round: see faultKinds.
func (h *harness) kindFor(round int, rnd *rand.Rand) string {
	if round == 0 {
		return freezeLeader
	}
	i := (round - 1) % len(faultKinds)
	if i == 0 {
		h.order = rnd.Perm(len(faultKinds))
	}
	return faultKinds[h.order[i]]
}

// fault is one injected fault: what it hit, and how to undo it.
type fault struct {
	target string
	at     time.Time
	lasted time.Duration
	undo   func()
}

func (f *fault) String() string {
	if f.at.IsZero() {
		return strings.TrimSuffix("not injected: "+f.target, ": ")
	}
	s := f.at.Format("15:04:05.000")
	if f.target != "" {
		s = f.target + " at " + s
	}
	if f.lasted > 0 {
		s += fmt.Sprintf(" for %v", f.lasted.Round(time.Millisecond))
	}
	return s
}

// inject starts a fault of kind within the first two seconds of the round
// and keeps it for 5 to 7 seconds or until ctx ends, whichever is first
// (the undo waits for heal). Restarts happen at once and take their time.
func (h *harness) inject(ctx context.Context, kind string, rnd *rand.Rand) *fault {
	f := &fault{}
	wait := time.Duration(500+rnd.IntN(1500)) * time.Millisecond
	hold := time.Duration(5000+rnd.IntN(2000)) * time.Millisecond
	follower := rnd.IntN(len(h.slots))
	select {
	case <-ctx.Done():
		return f
	case <-time.After(wait):
	}
	leader := h.leader(ctx)
	target := leader
	if kind == freezeFollower || kind == killFollower || kind == cutWebhook {
		for i := range h.slots {
			if sl := h.slots[(follower+i)%len(h.slots)]; sl != leader {
				target = sl
				break
			}
		}
	}
	if target == nil {
		f.target = "no replica leads"
		return f
	}
	f.target, f.at = target.name, time.Now()
	switch kind {
	case freezeLeader, freezeFollower:
		r := target.replica()
		_ = r.Cmd.Process.Signal(syscall.SIGSTOP)
		f.undo = func() { _ = r.Cmd.Process.Signal(syscall.SIGCONT) }
	case killLeader, killFollower:
		_ = target.replica().Cmd.Process.Kill()
		f.undo = func() {}
	case partitionLeader:
		mode := blackhole
		if rnd.IntN(2) == 0 {
			mode = reset
		}
		target.proxy.Set(proxyMode{Kind: mode})
		f.undo = func() { target.proxy.Set(proxyMode{Kind: pass}) }
	case slowLeader:
		target.proxy.Set(proxyMode{Kind: delay, Delay: time.Duration(200+rnd.IntN(800)) * time.Millisecond})
		f.undo = func() { target.proxy.Set(proxyMode{Kind: pass}) }
	case cutWebhook:
		backend := "127.0.0.1:" + strconv.Itoa(target.webhookPort)
		h.balancer.Cut(backend, true)
		f.undo = func() { h.balancer.Cut(backend, false) }
	case apiRestart, etcdRestart:
		f.target = ""
		restart := restartAPIServer
		if kind == etcdRestart {
			restart = restartEtcd
		} else {
			h.mu.Lock()
			h.apiRestarts = append(h.apiRestarts, f.at)
			h.mu.Unlock()
		}
		if err := restart(h.ctx, h.env); err != nil {
			h.t.Errorf("%s: %v", kind, err)
		}
		f.lasted = time.Since(f.at)
		return f
	}
	select {
	case <-ctx.Done():
	case <-time.After(hold):
	}
	f.lasted = time.Since(f.at)
	f.undo()
	f.undo = nil
	return f
}

// heal undoes what is left of a fault and returns when.
func (h *harness) heal(f *fault) time.Time {
	if f.undo != nil {
		f.undo()
		f.lasted = time.Since(f.at)
	}
	return time.Now()
}

// leader is the slot whose replica leads: it renewed the leader Lease within
// the last 2 seconds, its retry period being 500ms. It waits up to 10s for
// one, and returns nil when none does.
func (h *harness) leader(ctx context.Context) *slot {
	var found *slot
	_ = testenv.Poll(10*time.Second, 200*time.Millisecond, func() error {
		l := &coordinationv1.Lease{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: gatefoldNS, Name: "gatefold-leader"}, l); err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 2*time.Second {
			return errors.New("no replica renews the leader Lease")
		}
		holder, _, _ := strings.Cut(ptr.Deref(l.Spec.HolderIdentity, ""), "_")
		for _, sl := range h.slots {
			if sl.name == holder {
				found = sl
				return nil
			}
		}
		return fmt.Errorf("the leader Lease is held by %q, no replica", holder)
	})
	return found
}

func (sl *slot) replica() *testenv.Replica {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.current
}

func TestLogTime(t *testing.T) {
	year := time.Now().Year()
	tests := map[string]struct {
		line string
		want time.Time
		ok   bool
	}{
		"zap":   {line: `2026-12-01T23:23:15.893877684Z  "Reconciler error": forbidden`, want: time.Date(2026, 12, 1, 23, 23, 15, 893877684, time.UTC), ok: true},
		"klog":  {line: `E1201 23:27:31.063598   23701 reflector.go:227] "Failed to watch"`, want: time.Date(year, 12, 1, 23, 27, 31, 63598000, time.Local), ok: true},
		"other": {line: `panic: forbidden`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := logTime(tc.line)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("logTime(%q) = %v, %v; want %v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}
