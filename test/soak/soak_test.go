package soak

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
)

// The knobs of a run, from the environment (make soak sets them).
const (
	durationEnv = "GATEFOLD_SOAK_DURATION"
	seedEnv     = "GATEFOLD_SOAK_SEED"
	replicasEnv = "GATEFOLD_SOAK_REPLICAS"
	reportEnv   = "GATEFOLD_SOAK_REPORT"
	// keepEnv keeps the audit log and the replicas' logs of a run that
	// passed, as one that failed keeps them.
	keepEnv = "GATEFOLD_SOAK_KEEP"
)

// Defaults: the run make test makes.
const (
	defaultDuration = 60 * time.Second
	defaultReplicas = 3
	writers         = 6
	// opsPhase is how long the writers run in a round; a fault starts
	// within its first seconds and heals before it ends.
	opsPhase = 8 * time.Second
	// settleLimit is how long quiescence may take after a round: the claim
	// grace and a collect period, a failover, and slack for a loaded machine.
	settleLimit = 90 * time.Second
	// stuckFor ends a settle early whose findings have not changed for that
	// long: past the claim grace, two collect periods and the garbage
	// collector's delay after a kube-apiserver restart (up to 44s seen),
	// nothing pending would change them.
	stuckFor = 60 * time.Second
	// margin is the monitor's slack around a change that makes two
	// observations of different kinds ambiguous in order.
	margin = 3 * time.Second
	// claimGrace is the replicas' --claim-grace, the least gatefold takes.
	claimGrace = 10 * time.Second
)

// settings is a run's configuration.
type settings struct {
	duration time.Duration
	seed     uint64
	replicas int
}

func readSettings(t *testing.T) settings {
	s := settings{duration: defaultDuration, replicas: defaultReplicas, seed: uint64(time.Now().UnixNano() % 1e6)}
	if v := os.Getenv(durationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v: set a Go duration such as 10m (DURATION=10m for make soak)", durationEnv, v, err)
		}
		s.duration = d
	}
	if v := os.Getenv(seedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v: set the seed a run printed, a whole number (SEED=n for make soak)", seedEnv, v, err)
		}
		s.seed = n
	}
	if v := os.Getenv(replicasEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("%s=%q: set a number of replicas of at least 2 (REPLICAS=3 for make soak)", replicasEnv, v)
		}
		s.replicas = n
	}
	return s
}

// TestSoak runs gatefold as installed, three replicas behind a balancer for
// the webhooks and each through a proxy to the API server, under random
// operations of six writers and one fault a round, and checks every
// promise: at every moment (the monitor), at quiescence after each round
// (quiescent), and in the API server's audit log at the end (only the
// lease holder of the moment wrote).
func TestSoak(t *testing.T) {
	s := readSettings(t)
	ctrl.SetLogger(logr.Discard())
	t.Logf("Soak: %v, %d replicas, seed %d (replay: %s=%d)", s.duration, s.replicas, s.seed, seedEnv, s.seed)
	dir, err := os.MkdirTemp("", "gatefold-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(keepEnv) != "" {
			t.Logf("Logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	audit := filepath.Join(dir, "audit.log")
	env, err := devenv.Start(devenv.Options{AuditLog: audit, CRDDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	c := fastClient(t, env.Config)

	h := startHarness(t, env, c, dir, s)
	if err := seedWorld(ctx, c); err != nil {
		t.Fatal(err)
	}
	mon := startMonitor(t, env.Config)
	writes := &auditCheck{path: audit, claims: map[string]int{}, byResource: map[string]int{}}

	rnd := rand.New(rand.NewPCG(s.seed, 0))
	log := &opLog{}
	conv := map[string][]time.Duration{}
	faults := map[string]int{}
	ops, failedOps, violations := 0, 0, 0
	start := time.Now()
	var kept []*writer
	for round := 0; round == 0 || time.Since(start) < s.duration; round++ {
		kind := h.kindFor(round, rnd)
		roundCtx, cancel := context.WithTimeout(ctx, opsPhase)
		var wg sync.WaitGroup
		ws := make([]*writer, writers)
		for i := range ws {
			ws[i] = &writer{id: i, c: c, rnd: rand.New(rand.NewPCG(s.seed, uint64(round*100+i+1))), log: log}
			if round > 0 {
				ws[i].released = kept[i].released
			}
			wg.Go(func() { ws[i].run(roundCtx) })
		}
		f := h.inject(roundCtx, kind, rnd)
		wg.Wait()
		cancel()
		healed := h.heal(f)
		kept = ws
		if !f.at.IsZero() {
			faults[kind]++
		}

		took, problems, first, last := settle(ctx, c)
		roundOps := log.take()
		ops += len(roundOps)
		for _, o := range roundOps {
			if o.Err != "" {
				failedOps++
			}
		}
		t.Logf("Round %d: %s (%s); %d operations; quiescent %v after healing; %s", round, kind, f, len(roundOps), took.Round(time.Millisecond), mon.coverage())
		if len(first) > 0 {
			t.Logf("Not quiescent at first (%d findings): %s", len(first), strings.Join(first[:min(len(first), 5)], "; "))
			t.Logf("Last not quiescent (%d findings): %s", len(last), strings.Join(last[:min(len(last), 5)], "; "))
		}
		if len(problems) > 0 {
			violations += len(problems)
			t.Errorf("Round %d (seed %d, fault %s: %s, healed at %s) is not quiescent %v after healing:\n  %s\nOperations of the round:\n%s",
				round, s.seed, kind, f, healed.Format("15:04:05.000"), took.Round(time.Second), strings.Join(problems, "\n  "), render(roundOps))
			break
		}
		conv[kind] = append(conv[kind], took)
		if v := append(mon.violations(false), writes.check(t, false)...); len(v) > 0 {
			violations += len(v)
			t.Errorf("Round %d (seed %d, fault %s: %s): promises broken while it ran:\n  %s\nOperations of the round:\n%s",
				round, s.seed, kind, f, strings.Join(v, "\n  "), render(roundOps))
			break
		}
	}
	h.stop()
	if v := mon.violations(true); len(v) > 0 {
		violations += len(v)
		t.Errorf("Promises broken (seed %d):\n  %s", s.seed, strings.Join(v, "\n  "))
	}
	for _, v := range append(writes.check(t, true), writes.seen(t, h)...) {
		violations++
		t.Errorf("Seed %d: %s", s.seed, v)
	}
	report := summary(s, time.Since(start), ops, failedOps, violations, faults, conv, h.exits())
	t.Log(report)
	if path := os.Getenv(reportEnv); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// fastClient is an administrator's client without client-side throttling:
// six writers and the oracle's lists.
func fastClient(t *testing.T, cfg *rest.Config) client.Client {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// settle polls the oracle until the world is quiescent and stays so, and
// returns how long that took until it first was, or what is still wrong
// after settleLimit (or stuckFor without a change), and what was wrong at
// the first and the last look that found something. Staying is quiescent again steadyFor later with no
// Gateway written in between: a fold that flaps is not quiescent.
func settle(ctx context.Context, c client.Client) (took time.Duration, problems, atFirst, atLast []string) {
	const steadyFor = 2 * time.Second
	start := time.Now()
	var first time.Duration
	var gateways map[string]string
	// stuck is since when the findings have been the same.
	var stuck time.Time
	for time.Since(start) < settleLimit {
		w, err := readWorld(ctx, c)
		if err != nil {
			problems = []string{err.Error()}
		} else {
			problems = quiescent(w)
		}
		if atFirst == nil {
			atFirst = append([]string{}, problems...)
		}
		if len(problems) > 0 && !slices.Equal(problems, atLast) {
			stuck = time.Now()
		}
		if len(problems) > 0 {
			atLast = problems
			if time.Since(stuck) > stuckFor {
				return time.Since(start), problems, atFirst, atLast
			}
		}
		switch {
		case len(problems) > 0:
			gateways = nil
		case gateways == nil:
			first, gateways = time.Since(start), versions(w.Gateways)
		default:
			now := versions(w.Gateways)
			if maps.Equal(gateways, now) {
				return first, nil, atFirst, atLast
			}
			problems = []string{fmt.Sprintf("quiescent, but a Gateway was written %v later: %v, then %v", steadyFor, gateways, now)}
			first, gateways = time.Since(start), now
		}
		wait := 500 * time.Millisecond
		if gateways != nil {
			wait = steadyFor
		}
		time.Sleep(wait)
	}
	return time.Since(start), problems, atFirst, atLast
}

// versions maps each Gateway to its resourceVersion.
func versions(gws []gwv1.Gateway) map[string]string {
	out := map[string]string{}
	for _, g := range gws {
		out[g.Name] = g.ResourceVersion
	}
	return out
}

// readWorld lists everything the oracle reads.
func readWorld(ctx context.Context, c client.Client) (world, error) {
	var w world
	gws := &gwv1.GatewayList{}
	lfs := &v1alpha1.ListenerFragmentList{}
	lss := &gwv1.ListenerSetList{}
	nss := &corev1.NamespaceList{}
	grants := &gwv1beta1.ReferenceGrantList{}
	claims := &coordinationv1.LeaseList{}
	routes := &gwv1.HTTPRouteList{}
	classes := &gwv1.GatewayClassList{}
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{gws, nil}, {lfs, nil}, {lss, nil}, {nss, nil}, {grants, nil}, {routes, nil}, {classes, nil},
		{claims, []client.ListOption{client.InNamespace(gatefoldNS), client.HasLabels{"gatefold.dev/claim"}}},
	} {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			return w, fmt.Errorf("listing %T: %w", l.list, err)
		}
	}
	w = world{Gateways: gws.Items, Fragments: lfs.Items, ListenerSets: lss.Items, Namespaces: nss.Items, Grants: grants.Items,
		Claims: claims.Items, Routes: routes.Items, FoldedClasses: []string{foldedClassCtrl}, Classes: map[string]string{}}
	for _, gc := range classes.Items {
		w.Classes[gc.Name] = string(gc.Spec.ControllerName)
	}
	return w, nil
}

func render(ops []op) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString("  " + o.String() + "\n")
	}
	return b.String()
}

// monitorFeed runs informers on every kind the monitor watches and feeds
// it their events, as the test sees them.
type monitorFeed struct {
	mu   sync.Mutex
	m    *monitor
	seen []string
}

func startMonitor(t *testing.T, cfg *rest.Config) *monitorFeed {
	feed := &monitorFeed{m: newMonitor(margin, claimGrace)}
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, obj := range []client.Object{&v1alpha1.ListenerFragment{}, &gwv1.ListenerSet{}, &gwv1.Gateway{}, &corev1.Namespace{}, &gwv1beta1.ReferenceGrant{}} {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { feed.observe(o, false) },
			UpdateFunc: func(_, o any) { feed.observe(o, false) },
			DeleteFunc: func(o any) { feed.observe(o, true) },
		}); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("The monitor's informers did not sync")
	}
	return feed
}

func (f *monitorFeed) observe(o any, deleted bool) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, f.m.observe(time.Now(), obj, deleted)...)
}

// coverage says how much the monitor judged and excused.
func (f *monitorFeed) coverage() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.coverage()
}

// violations returns what the monitor found since the last call; with
// all, also what is not due yet.
func (f *monitorFeed) violations(all bool) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := append(f.seen, f.m.flush(time.Now(), all)...)
	f.seen = nil
	return v
}

// summary renders a run's results as docs/soak.md shows them.
func summary(s settings, took time.Duration, ops, failedOps, violations int, faults map[string]int, conv map[string][]time.Duration, exits int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d replicas, %v: %d operations (%d refused or failed), %d replica exits, %d violations\n\n",
		s.seed, s.replicas, took.Round(time.Second), ops, failedOps, exits, violations)
	b.WriteString("| fault | injected | converged p50 | converged p99 |\n|---|---|---|---|\n")
	for _, kind := range faultKinds {
		d := slices.Sorted(slices.Values(conv[kind]))
		if faults[kind] == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %v | %v |\n", kind, faults[kind], quantile(d, 0.5), quantile(d, 0.99))
	}
	return b.String()
}

func quantile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return sorted[i].Round(100 * time.Millisecond).String()
}

// apiServerAddr is the host:port of the API server cfg talks to.
func apiServerAddr(t *testing.T, cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
