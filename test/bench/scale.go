package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	Fragments int           `json:"fragments"`
	Gateways  int           `json:"gateways"`
	Install   InstallResult `json:"firstInstall"`
	Restart   RestartResult `json:"warmRestart"`
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

// scale runs the first install and the warm restart, then, as only asks,
// the steady state and the failover, each on the state the one before
// left.
func (h *harness) scale(ctx context.Context, p Params, only selection) (*ScaleResult, *SteadyResult, *FailoverResult, error) {
	res := &ScaleResult{Fragments: p.ScaleFragments, Gateways: p.ScaleGateways}
	if err := h.fresh(ctx); err != nil {
		return res, nil, nil, err
	}
	if err := h.createScale(ctx, p, res); err != nil {
		return res, nil, nil, err
	}
	watch, err := h.watchScale(ctx)
	if err != nil {
		return res, nil, nil, err
	}
	leader, err := h.firstInstall(ctx, p, watch, &res.Install)
	if err != nil {
		return res, nil, nil, err
	}
	if leader, err = h.warmRestart(ctx, p, leader, &res.Restart); err != nil {
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
	fo, err := h.failover(ctx, p, leader)
	return res, steady, fo, err
}

func (h *harness) createScale(ctx context.Context, p Params, res *ScaleResult) error {
	progress("Scale: creating %d fragments on %d Gateways with no gatefold running", p.ScaleFragments, p.ScaleGateways)
	setup, err := h.client("bench-setup")
	if err != nil {
		return err
	}
	if err := h.namespace(ctx, scaleNamespace, nil); err != nil {
		return err
	}
	start := time.Now()
	gateways := make([]int, p.ScaleGateways)
	for i := range gateways {
		gateways[i] = i
	}
	if err := parallel(p.Writers, gateways, func(g int) error {
		return setup.Create(ctx, exampleGateway(scaleNamespace, fmt.Sprintf("scale-%d", g)))
	}); err != nil {
		return err
	}
	items := make([]int, p.ScaleFragments)
	for i := range items {
		items[i] = i
	}
	if err := parallel(p.Writers, items, func(i int) error {
		return setup.Create(ctx, scaleFragment(i, fmt.Sprintf("scale-%d", i%p.ScaleGateways)))
	}); err != nil {
		return err
	}
	res.Install.CreateSeconds = time.Since(start).Seconds()
	return nil
}

// watchScale starts an informer cache of the scale namespace's Gateways
// and fragments and of the claims, so that waiting for convergence costs
// the API server one watch instead of a list of every fragment each time.
func (h *harness) watchScale(ctx context.Context) (cache.Cache, error) {
	c, err := cache.New(h.config("bench-observer"), cache.Options{Scheme: scheme.New(),
		DefaultNamespaces: map[string]cache.Config{scaleNamespace: {}, systemNamespace: {}}})
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if _, err := c.GetInformer(ctx, &v1alpha1.ListenerFragment{}); err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &gwv1.Gateway{}); err != nil {
		return nil, err
	}
	lease := &metav1.PartialObjectMetadata{}
	lease.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	if _, err := c.GetInformer(ctx, lease); err != nil {
		return nil, err
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the observer's cache did not sync")
	}
	return c, nil
}

func claimList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"))
	return l
}

// scaleFolded says whether every scale Gateway holds perGateway listeners
// and every scale fragment reports Accepted=True. It reads the cache
// without copies: the harness must not take the CPU it measures.
func scaleFolded(ctx context.Context, c client.Reader, p Params) bool {
	perGateway := 1 + p.ScaleFragments/p.ScaleGateways
	gws := &gwv1.GatewayList{}
	if c.List(ctx, gws, client.InNamespace(scaleNamespace), client.UnsafeDisableDeepCopy) != nil || len(gws.Items) != p.ScaleGateways {
		return false
	}
	for _, gw := range gws.Items {
		if len(gw.Spec.Listeners) != perGateway {
			return false
		}
	}
	list := &v1alpha1.ListenerFragmentList{}
	if c.List(ctx, list, client.InNamespace(scaleNamespace), client.UnsafeDisableDeepCopy) != nil {
		return false
	}
	accepted := 0
	for _, lf := range list.Items {
		if meta.IsStatusConditionTrue(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
			accepted++
		}
	}
	return accepted == p.ScaleFragments
}

func claims(ctx context.Context, c client.Reader) int {
	l := claimList()
	if c.List(ctx, l, client.InNamespace(systemNamespace), client.HasLabels{claimLabel}, client.UnsafeDisableDeepCopy) != nil {
		return -1
	}
	return len(l.Items)
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
func (h *harness) firstInstall(ctx context.Context, p Params, watch cache.Cache, res *InstallResult) (*manager, error) {
	progress("Scale: first install, a leader starts on %d fragments with no status", p.ScaleFragments)
	converged := make(chan time.Time, 1)
	go func() {
		var at time.Time
		if testenv.Poll(p.PhaseTimeout, 200*time.Millisecond, func() error { return pending(scaleFolded(ctx, watch, p)) }) == nil {
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
	changed, settled := leader.quiesce(p.PhaseTimeout,
		func() float64 { return float64(claims(ctx, watch)) },
		func(n float64) bool { return int(n) == p.ScaleFragments && scaleFolded(ctx, watch, p) })
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
// where every status is current.
func (h *harness) warmRestart(ctx context.Context, p Params, old *manager, res *RestartResult) (*manager, error) {
	progress("Scale: warm restart, a new leader where every status is current")
	_ = old.Stop()
	prof := h.profile("scale-restart")
	leader, err := h.launch("restart-leader", h.env.WebhookPort())
	if err != nil {
		prof.end()
		return nil, err
	}
	h.serving = leader
	res.Converged = testenv.Poll(p.PhaseTimeout, 50*time.Millisecond, func() error {
		folds, err := leader.counter("gatefold_merger_folds_total", nil)
		return pending(err == nil && folds >= float64(p.ScaleGateways))
	}) == nil
	at := time.Now()
	prof.end()
	res.ConvergeSeconds = at.Sub(leader.Started).Seconds()
	if err := leader.WaitReady(ctx); err != nil {
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
func (h *harness) failover(ctx context.Context, p Params, leader *manager) (*FailoverResult, error) {
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
	lf := scaleFragment(p.ScaleFragments, "scale-0")
	if err := setup.Create(ctx, lf); err != nil {
		return nil, err
	}
	host := string(*lf.Spec.Listeners[0].Hostname)
	fo.Converged = testenv.Poll(p.PhaseTimeout, 100*time.Millisecond, func() error {
		gw := &gwv1.Gateway{}
		if err := h.observer.Get(ctx, client.ObjectKey{Namespace: scaleNamespace, Name: "scale-0"}, gw); err != nil {
			return err
		}
		return pending(slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool { return string(ptr.Deref(l.Hostname, "")) == host }))
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

func scaleFragment(i int, gateway string) *v1alpha1.ListenerFragment {
	return &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: scaleNamespace, Name: fmt.Sprintf("route-%d", i)},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gateway)},
			Listeners: []gwv1.ListenerEntry{{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
				Hostname: ptr.To(gwv1.Hostname(fmt.Sprintf("route-%d.example.com", i))),
				TLS:      &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}},
		},
	}
}
