package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/testenv"
)

// ScaleResult is how gatefold copes with many fragments: installed after
// they exist, and restarted once they are all folded.
type ScaleResult struct {
	Fragments int `json:"fragments"`
	// Pool says the fragments all name one Gateway heading a pool
	// (Params.ScalePool); Gateways are those they were on after the first
	// install: the hand-made ones, or the pool's head and siblings.
	Pool     bool          `json:"pool,omitempty"`
	Gateways int           `json:"gateways"`
	Install  InstallResult `json:"firstInstall"`
	Restart  RestartResult `json:"warmRestart"`
}

// InstallResult is the first install: the fragments are created while
// gatefold is stopped (so none has a status or a claim), then a leader
// starts.
type InstallResult struct {
	CreateSeconds float64 `json:"createSeconds"`
	// ConvergeSeconds runs from the leader's process start until every
	// Gateway holds its listeners and every fragment reports Accepted;
	// ConvergeWrites are gatefold's writes in that time.
	Converged       bool    `json:"converged"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	ConvergeWrites  writes  `json:"convergeWrites"`
	// SettleSeconds runs until, besides, every fragment's claim is
	// backfilled and the leader then sent nothing for the quiet period; SettleWrites are
	// gatefold's writes until then.
	Settled       bool    `json:"settled"`
	SettleSeconds float64 `json:"settleSeconds"`
	SettleWrites  writes  `json:"settleWrites"`
	PeakRSSBytes  int64   `json:"peakRSSBytes"`
}

// RestartResult is a warm restart: the leader stopped, a new one started
// while every status is current, so nothing changes on the API server.
type RestartResult struct {
	// ConvergeSeconds runs from the new leader's process start until its
	// gatefold_merger_folds_total shows it folded every Gateway once.
	Converged       bool    `json:"converged"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// Writes are gatefold's writes from the start until Params.Settle after
	// that; the applies are what the leader's metrics say it sent.
	Writes         writes  `json:"writes"`
	GatewayApplies float64 `json:"gatewayApplies"`
	StatusApplies  float64 `json:"statusApplies"`
}

// SteadyResult is what the restarted leader, serving the webhooks, does
// while nothing changes.
type SteadyResult struct {
	Fragments      int     `json:"fragments"`
	Seconds        float64 `json:"seconds"`
	Reads          reads   `json:"reads"`
	ReadsPerSecond float64 `json:"readsPerSecond"`
	Writes         writes  `json:"writes"`
	GatewayApplies float64 `json:"gatewayApplies"`
	StatusApplies  float64 `json:"statusApplies"`
	PeakRSSBytes   int64   `json:"peakRSSBytes"`
}

// FailoverResult is how long a change made right after the leader dies
// takes to land.
type FailoverResult struct {
	LeaseSeconds    float64 `json:"leaseSeconds"`
	Converged       bool    `json:"converged"`
	TakeoverSeconds float64 `json:"takeoverSeconds"`
}

const scaleNamespace = "scale"

// quiet is how long the first leader must send nothing to have settled.
const quiet = 2 * time.Second

// scaleTimeout is how long each wait of the scale phase may take:
// Params.PhaseTimeout, or 30 ms per fragment where that is longer (25
// minutes at 50,000).
func (p Params) scaleTimeout() time.Duration {
	return max(p.PhaseTimeout, time.Duration(p.ScaleFragments)*30*time.Millisecond)
}

// readyTimeout is how long a replica may take to become ready: a minute,
// or 5 ms per scale fragment where that is longer (its informers list every
// fragment and claim first).
func (p Params) readyTimeout() time.Duration {
	return max(time.Minute, time.Duration(p.ScaleFragments)*5*time.Millisecond)
}

// scalePoll is how often the scale phase checks for convergence: every
// 200 ms, and less often above 10,000 fragments (1 s at 50,000), so that
// the checks take little of the CPU measured.
func (p Params) scalePoll() time.Duration {
	return max(200*time.Millisecond, time.Duration(p.ScaleFragments)*20*time.Microsecond)
}

// scaleHeads are the Gateways the scale fragments name: one heading a pool
// with Params.ScalePool, else Params.ScaleGateways.
func (p Params) scaleHeads() int {
	if p.ScalePool {
		return 1
	}
	return p.ScaleGateways
}

// scaleGatewaysWanted is how many Gateways the scale fragments end on: the
// pool's ⌈N/63⌉, or the hand-made ones.
func (p Params) scaleGatewaysWanted() int {
	if p.ScalePool {
		return poolGateways(p.ScaleFragments)
	}
	return p.ScaleGateways
}

func scaleGateway(g int) string { return fmt.Sprintf("scale-%d", g) }

// scale runs the first install and the warm restart, then, as only asks,
// the steady state and the failover, each on the state the one before
// left.
func (h *harness) scale(ctx context.Context, p Params, only selection) (*ScaleResult, *SteadyResult, *FailoverResult, error) {
	res := &ScaleResult{Fragments: p.ScaleFragments, Pool: p.ScalePool, Gateways: p.scaleHeads()}
	if err := h.fresh(ctx); err != nil {
		return res, nil, nil, err
	}
	if err := h.createScale(ctx, p, res); err != nil {
		return res, nil, nil, err
	}
	watch, err := h.watchScale(ctx, p)
	if err != nil {
		return res, nil, nil, err
	}
	leader, err := h.firstInstall(ctx, p, watch, &res.Install)
	if err != nil {
		return res, nil, nil, err
	}
	if res.Gateways, err = watch.gateways(ctx); err != nil {
		return res, nil, nil, err
	}
	if leader, err = h.warmRestart(ctx, p, leader, res.Gateways, &res.Restart); err != nil {
		return res, nil, nil, err
	}
	var steady *SteadyResult
	if only.phase("steady") {
		if steady, err = h.steady(p, leader); err != nil {
			return res, nil, nil, err
		}
	}
	if !only.phase("failover") {
		return res, steady, nil, nil
	}
	fo, err := h.failover(ctx, p, watch, leader)
	return res, steady, fo, err
}

func (h *harness) createScale(ctx context.Context, p Params, res *ScaleResult) error {
	on := fmt.Sprintf("%d Gateways", p.ScaleGateways)
	if p.ScalePool {
		on = fmt.Sprintf("one Gateway heading a pool (⌈%d / %d⌉ = %d)", p.ScaleFragments, poolRoom, poolGateways(p.ScaleFragments))
	}
	progress("Scale: creating %d fragments on %s with no gatefold running", p.ScaleFragments, on)
	setup, err := h.client("bench-setup")
	if err != nil {
		return err
	}
	if err := h.namespace(ctx, scaleNamespace, nil); err != nil {
		return err
	}
	start := time.Now()
	gateways := make([]int, p.scaleHeads())
	for i := range gateways {
		gateways[i] = i
	}
	if err := parallel(p.Writers, gateways, func(g int) error {
		gw := exampleGateway(scaleNamespace, scaleGateway(g))
		if p.ScalePool {
			gw.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
		}
		return setup.Create(ctx, gw)
	}); err != nil {
		return err
	}
	items := make([]int, p.ScaleFragments)
	for i := range items {
		items[i] = i
	}
	if err := parallel(p.Writers, items, func(i int) error {
		return setup.Create(ctx, scaleFragment(i, scaleGateway(i%p.scaleHeads())))
	}); err != nil {
		return err
	}
	res.Install.CreateSeconds = time.Since(start).Seconds()
	return nil
}

// scaleWatch follows the scale namespace's Gateways, and counts its
// fragments reporting Accepted and the claims, from one watch of each:
// waiting for convergence costs the API server no list, and the harness no
// copy of every fragment per check. Its cache holds of a fragment only its
// conditions, and of a claim only its metadata.
type scaleWatch struct {
	cache cache.Cache
	// want are the hostnames wanted, by the Gateway their fragments name.
	want     map[string]map[string]bool
	accepted *census
	claims   *census
}

func (h *harness) watchScale(ctx context.Context, p Params) (*scaleWatch, error) {
	c, err := cache.New(h.config("bench-observer"), cache.Options{Scheme: scheme.New(),
		DefaultNamespaces: map[string]cache.Config{scaleNamespace: {}, systemNamespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject:          map[client.Object]cache.ByObject{&v1alpha1.ListenerFragment{}: {Transform: fragmentConditions}}})
	if err != nil {
		return nil, err
	}
	w := &scaleWatch{cache: c, want: map[string]map[string]bool{}}
	for i := range p.ScaleFragments {
		gw := scaleGateway(i % p.scaleHeads())
		if w.want[gw] == nil {
			w.want[gw] = map[string]bool{}
		}
		w.want[gw][scaleHostname(i)] = true
	}
	go func() { _ = c.Start(ctx) }()
	fragments, err := c.GetInformer(ctx, &v1alpha1.ListenerFragment{})
	if err != nil {
		return nil, err
	}
	if w.accepted, err = newCensus(fragments, func(o client.Object) bool {
		lf, ok := o.(*v1alpha1.ListenerFragment)
		return ok && lf.Namespace == scaleNamespace && meta.IsStatusConditionTrue(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
	}); err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &gwv1.Gateway{}); err != nil {
		return nil, err
	}
	lease := &metav1.PartialObjectMetadata{}
	lease.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	leases, err := c.GetInformer(ctx, lease)
	if err != nil {
		return nil, err
	}
	if w.claims, err = newCensus(leases, func(o client.Object) bool {
		_, claim := o.GetLabels()[claimLabel]
		return claim && o.GetNamespace() == systemNamespace
	}); err != nil {
		return nil, err
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the observer's cache did not sync")
	}
	return w, nil
}

// fragmentConditions keeps of a fragment what scaleWatch reads: its name
// and its conditions.
func fragmentConditions(obj any) (any, error) {
	if lf, ok := obj.(*v1alpha1.ListenerFragment); ok {
		lf.ManagedFields, lf.Annotations, lf.Spec = nil, nil, v1alpha1.ListenerFragmentSpec{}
		lf.Status = v1alpha1.ListenerFragmentStatus{Conditions: lf.Status.Conditions}
	}
	return obj, nil
}

// census counts the objects of an informer that match, kept current by its
// events.
type census struct {
	mu sync.Mutex
	in map[client.ObjectKey]bool
}

func newCensus(inf cache.Informer, match func(client.Object) bool) (*census, error) {
	c := &census{in: map[client.ObjectKey]bool{}}
	set := func(obj any, deleted bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if key := client.ObjectKeyFromObject(o); !deleted && match(o) {
			c.in[key] = true
		} else {
			delete(c.in, key)
		}
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj, false) },
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: func(obj any) { set(obj, true) },
	})
	return c, err
}

func (c *census) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.in)
}

// folded says whether every scale fragment reports Accepted=True and its
// listener is on the Gateway it names or, on a pool, once on one of the
// pool's Gateways, which are as many as wanted.
func (w *scaleWatch) folded(ctx context.Context, p Params) bool {
	if w.accepted.count() != p.ScaleFragments {
		return false
	}
	gws := &gwv1.GatewayList{}
	if w.cache.List(ctx, gws, client.InNamespace(scaleNamespace), client.UnsafeDisableDeepCopy) != nil || len(gws.Items) != p.scaleGatewaysWanted() {
		return false
	}
	missing, extra := placement(gws.Items, w.want)
	return missing == 0 && extra == 0
}

// gateways counts the scale namespace's Gateways.
func (w *scaleWatch) gateways(ctx context.Context) (int, error) {
	list := &gwv1.GatewayList{}
	if err := w.cache.List(ctx, list, client.InNamespace(scaleNamespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// errPending is what a bench poll's check returns while it waits.
var errPending = errors.New("pending")

// pending is errPending while done is false.
func pending(done bool) error {
	if done {
		return nil
	}
	return errPending
}

// firstInstall starts a leader, as installed (serving the webhooks), on
// fragments it never saw, and times it until they are folded and reported,
// then until it settled.
func (h *harness) firstInstall(ctx context.Context, p Params, watch *scaleWatch, res *InstallResult) (*manager, error) {
	progress("Scale: first install, a leader starts on %d fragments with no status", p.ScaleFragments)
	converged := make(chan time.Time, 1)
	go func() {
		var at time.Time
		if testenv.Poll(p.scaleTimeout(), p.scalePoll(), func() error { return pending(watch.folded(ctx, p)) }) == nil {
			at = time.Now()
		}
		converged <- at
	}()
	prof := h.profile("scale-install")
	leader, err := h.serve(ctx, "install-leader")
	if err != nil {
		prof.end()
		return nil, err
	}
	at := <-converged
	prof.end()
	res.Converged = !at.IsZero()
	if !res.Converged {
		at = time.Now()
	}
	res.ConvergeSeconds = at.Sub(leader.Started).Seconds()
	if res.ConvergeWrites, err = h.countWrites(leader.Started, at); err != nil {
		return nil, err
	}
	progress("  converged=%v in %.1fs (%.2f× the creates); waiting for the claims", res.Converged, res.ConvergeSeconds, res.ConvergeSeconds/res.CreateSeconds)

	// Settled: folded, every claim backfilled, and nothing sent for quiet.
	changed, settled := leader.quiesce(p.scaleTimeout(),
		func() float64 { return float64(watch.claims.count()) },
		func(n float64) bool { return int(n) == p.ScaleFragments && watch.folded(ctx, p) })
	res.Settled = settled
	if !res.Settled {
		changed = time.Now()
	}
	res.SettleSeconds = changed.Sub(leader.Started).Seconds()
	if res.SettleWrites, err = h.countWrites(leader.Started, changed.Add(quiet)); err != nil {
		return nil, err
	}
	if res.PeakRSSBytes, err = leader.peakRSS(); err != nil {
		return nil, err
	}
	progress("  settled=%v in %.1fs, %d writes; peak RSS %d MiB", res.Settled, res.SettleSeconds, res.SettleWrites.Gatefold, res.PeakRSSBytes>>20)
	return leader, nil
}

// warmRestart stops the leader and starts a new one, serving the webhooks,
// where every status is current: converged once it folded each of the
// gateways once.
func (h *harness) warmRestart(ctx context.Context, p Params, old *manager, gateways int, res *RestartResult) (*manager, error) {
	progress("Scale: warm restart, a new leader where every status is current")
	_ = old.Stop()
	prof := h.profile("scale-restart")
	leader, err := h.launch("restart-leader", h.env.WebhookPort())
	if err != nil {
		prof.end()
		return nil, err
	}
	h.serving = leader
	res.Converged = testenv.Poll(p.scaleTimeout(), 50*time.Millisecond, func() error {
		folds, err := leader.counter("gatefold_merger_folds_total", nil)
		return pending(err == nil && folds >= float64(gateways))
	}) == nil
	at := time.Now()
	prof.end()
	res.ConvergeSeconds = at.Sub(leader.Started).Seconds()
	if err := leader.WaitReadyWithin(ctx, p.readyTimeout()); err != nil {
		return nil, err
	}
	time.Sleep(time.Until(at.Add(p.Settle)))
	if res.Writes, err = h.countWrites(leader.Started, time.Now()); err != nil {
		return nil, err
	}
	if res.GatewayApplies, res.StatusApplies, _, err = leader.applies(); err != nil {
		return nil, err
	}
	progress("  converged=%v in %.1fs, %d writes", res.Converged, res.ConvergeSeconds, res.Writes.Gatefold)
	return leader, nil
}

// steady counts what the leader reads and writes for p.SteadyState while
// nothing changes.
func (h *harness) steady(p Params, leader *manager) (*SteadyResult, error) {
	progress("Steady state: counting reads and writes for %s", p.SteadyState)
	res := &SteadyResult{Fragments: p.ScaleFragments}
	g0, s0, _, err := leader.applies()
	if err != nil {
		return nil, err
	}
	prof := h.profile("steady")
	start := time.Now()
	time.Sleep(p.SteadyState)
	end := time.Now()
	prof.end()
	res.Seconds = end.Sub(start).Seconds()
	g1, s1, _, err := leader.applies()
	if err != nil {
		return nil, err
	}
	res.GatewayApplies, res.StatusApplies = g1-g0, s1-s0
	if res.Writes, err = h.countWrites(start, end); err != nil {
		return nil, err
	}
	if res.Reads, err = h.countReads(start, end); err != nil {
		return nil, err
	}
	res.ReadsPerSecond = float64(res.Reads.Gatefold) / res.Seconds
	if res.PeakRSSBytes, err = leader.peakRSS(); err != nil {
		return nil, err
	}
	progress("  %d reads (%.2f/s), %d writes; peak RSS %d MiB", res.Reads.Gatefold, res.ReadsPerSecond, res.Writes.Gatefold, res.PeakRSSBytes>>20)
	return res, nil
}

// failover kills the leader while a follower waits, and times a fragment
// created at once until it is folded. The webhooks are removed first: the
// leader served them.
func (h *harness) failover(ctx context.Context, p Params, watch *scaleWatch, leader *manager) (*FailoverResult, error) {
	fo := &FailoverResult{LeaseSeconds: p.LeaseDuration.Seconds()}
	progress("Failover: a follower joins, the leader is killed, a fragment is created")
	if err := h.setWebhooks(ctx, false); err != nil {
		return nil, err
	}
	setup, err := h.client("bench-setup")
	if err != nil {
		return nil, err
	}
	follower, err := h.startManager("scale-follower", mustFreePort())
	if err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second) // the follower's cache syncs
	if err := leader.Cmd.Process.Kill(); err != nil {
		return nil, err
	}
	h.serving = nil
	killed := time.Now()
	lf := scaleFragment(p.ScaleFragments, scaleGateway(0))
	if err := setup.Create(ctx, lf); err != nil {
		return nil, err
	}
	want := map[string]map[string]bool{scaleGateway(0): {scaleHostname(p.ScaleFragments): true}}
	fo.Converged = testenv.Poll(p.PhaseTimeout, 100*time.Millisecond, func() error {
		gws := &gwv1.GatewayList{}
		if err := watch.cache.List(ctx, gws, client.InNamespace(scaleNamespace), client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		missing, _ := placement(gws.Items, want)
		return pending(missing == 0)
	}) == nil
	landed := time.Now()
	fo.TakeoverSeconds = landed.Sub(killed).Seconds()
	progress("  converged=%v %.1fs after the kill (lease %s)", fo.Converged, fo.TakeoverSeconds, p.LeaseDuration)
	_ = follower.Stop()
	return fo, nil
}

func mustFreePort() int {
	p, err := testenv.FreePort()
	if err != nil {
		panic(err)
	}
	return p
}

func scaleHostname(i int) string { return fmt.Sprintf("route-%d.example.com", i) }

func scaleFragment(i int, gateway string) *v1alpha1.ListenerFragment {
	return &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: scaleNamespace, Name: fmt.Sprintf("route-%d", i)},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gateway)},
			Listeners: []gwv1.ListenerEntry{{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
				Hostname: ptr.To(gwv1.Hostname(scaleHostname(i))),
				TLS:      &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}},
		},
	}
}
