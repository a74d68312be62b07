package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// ScaleResult is how a fresh leader copes with many fragments.
type ScaleResult struct {
	Fragments     int     `json:"fragments"`
	Gateways      int     `json:"gateways"`
	CreateSeconds float64 `json:"createSeconds"`
	Converged     bool    `json:"converged"`
	// ConvergeSeconds runs from the leader's process start until every
	// Gateway holds its listeners and every fragment reports Accepted.
	ConvergeSeconds float64 `json:"convergeSeconds"`
	PeakRSSBytes    int64   `json:"peakRSSBytes"`
	// Steady-state writes: audited, and the leader's own count of Gateway
	// applies sent (written or no-op).
	SteadySeconds        float64 `json:"steadySeconds"`
	SteadyWrites         writes  `json:"steadyWrites"`
	SteadyGatewayApplies float64 `json:"steadyGatewayApplies"`
}

// FailoverResult is how long a change made right after the leader dies
// takes to land.
type FailoverResult struct {
	LeaseSeconds    float64 `json:"leaseSeconds"`
	Converged       bool    `json:"converged"`
	TakeoverSeconds float64 `json:"takeoverSeconds"`
}

const scaleNamespace = "scale"

func (h *harness) scaleAndFailover(ctx context.Context, p Params) (ScaleResult, FailoverResult, error) {
	res := ScaleResult{Fragments: p.ScaleFragments, Gateways: p.ScaleGateways}
	fo := FailoverResult{LeaseSeconds: p.LeaseDuration.Seconds()}
	for _, m := range h.managers {
		m.stop()
	}
	if err := h.setWebhooks(ctx, false); err != nil {
		return res, fo, err
	}
	progress("Scale: creating %d fragments on %d Gateways with no gatefold running", p.ScaleFragments, p.ScaleGateways)
	setup, err := h.client("bench-setup")
	if err != nil {
		return res, fo, err
	}
	if err := setup.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace}}); err != nil {
		return res, fo, err
	}
	start := time.Now()
	gateways := make([]int, p.ScaleGateways)
	for i := range gateways {
		gateways[i] = i
	}
	if err := parallel(p.Writers, gateways, func(g int) error {
		return setup.Create(ctx, &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: scaleNamespace, Name: fmt.Sprintf("scale-%d", g)},
			Spec: gwv1.GatewaySpec{
				GatewayClassName: "example",
				Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
				AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
			},
		})
	}); err != nil {
		return res, fo, err
	}
	items := make([]int, p.ScaleFragments)
	for i := range items {
		items[i] = i
	}
	if err := parallel(p.Writers, items, func(i int) error {
		return setup.Create(ctx, scaleFragment(i, fmt.Sprintf("scale-%d", i%p.ScaleGateways)))
	}); err != nil {
		return res, fo, err
	}
	res.CreateSeconds = time.Since(start).Seconds()

	leaseDuration = p.LeaseDuration
	progress("Scale: starting a fresh leader")
	leader, err := h.startManager("scale-leader", mustFreePort())
	if err != nil {
		return res, fo, err
	}
	perGateway := 1 + p.ScaleFragments/p.ScaleGateways
	res.Converged = h.waitScaleConverged(ctx, p, perGateway)
	res.ConvergeSeconds = time.Since(leader.started).Seconds()
	if res.PeakRSSBytes, err = leader.peakRSS(); err != nil {
		return res, fo, err
	}
	progress("  converged=%v in %.1fs, peak RSS %d MiB; counting writes for %s", res.Converged, res.ConvergeSeconds, res.PeakRSSBytes>>20, p.SteadyState)

	applies := func() float64 {
		w, _ := leader.counter("gatefold_merger_gateway_applies_total", map[string]string{"result": "written"})
		n, _ := leader.counter("gatefold_merger_gateway_applies_total", map[string]string{"result": "noop"})
		return w + n
	}
	before, steadyStart := applies(), time.Now()
	time.Sleep(p.SteadyState)
	res.SteadyGatewayApplies = applies() - before
	res.SteadySeconds = time.Since(steadyStart).Seconds()
	if res.SteadyWrites, err = h.countWrites(steadyStart, time.Now()); err != nil {
		return res, fo, err
	}

	progress("Failover: a follower joins, the leader is killed, a fragment is created")
	follower, err := h.startManager("scale-follower", mustFreePort())
	if err != nil {
		return res, fo, err
	}
	time.Sleep(3 * time.Second) // the follower's cache syncs
	if err := leader.cmd.Process.Kill(); err != nil {
		return res, fo, err
	}
	killed := time.Now()
	lf := scaleFragment(p.ScaleFragments, "scale-0")
	if err := setup.Create(ctx, lf); err != nil {
		return res, fo, err
	}
	host := string(*lf.Spec.Listeners[0].Hostname)
	for deadline := killed.Add(p.PhaseTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		gw := &gwv1.Gateway{}
		if err := h.observer.Get(ctx, client.ObjectKey{Namespace: scaleNamespace, Name: "scale-0"}, gw); err != nil {
			continue
		}
		for _, l := range gw.Spec.Listeners {
			if string(ptr.Deref(l.Hostname, "")) == host {
				fo.Converged = true
			}
		}
		if fo.Converged {
			break
		}
	}
	fo.TakeoverSeconds = time.Since(killed).Seconds()
	progress("  converged=%v %.1fs after the kill (lease %s)", fo.Converged, fo.TakeoverSeconds, p.LeaseDuration)
	follower.stop()
	return res, fo, nil
}

func mustFreePort() int {
	p, err := freePort()
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

// waitScaleConverged waits until every Gateway holds perGateway listeners
// and every fragment reports Accepted=True.
func (h *harness) waitScaleConverged(ctx context.Context, p Params, perGateway int) bool {
	deadline := time.Now().Add(p.PhaseTimeout)
	for ; time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		gws := &gwv1.GatewayList{}
		if h.observer.List(ctx, gws, client.InNamespace(scaleNamespace)) != nil {
			continue
		}
		done := len(gws.Items) == p.ScaleGateways
		for _, gw := range gws.Items {
			done = done && len(gw.Spec.Listeners) == perGateway
		}
		if done {
			break
		}
	}
	for ; time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		list := &v1alpha1.ListenerFragmentList{}
		if h.observer.List(ctx, list, client.InNamespace(scaleNamespace)) != nil {
			continue
		}
		accepted := 0
		for _, lf := range list.Items {
			if meta.IsStatusConditionTrue(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
				accepted++
			}
		}
		if accepted == p.ScaleFragments {
			return true
		}
	}
	return false
}
