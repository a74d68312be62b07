package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/testenv"
)

// The dataplane phase times what a route controller waits for: from its
// fragment's create until Traefik serves the fragment's hostname, beside
// the fold alone (until the listener is on the Gateway's spec) and beside
// Traefik alone (a route on a listener that is already there).
const (
	dataplaneNamespace = "dataplane"
	// dataplaneWriters create the fragments and their routes, as a route
	// controller's workers.
	dataplaneWriters = 4
	// Each hostname is requested every probeInterval until it is served,
	// or less often, so that the probes of all hostnames send at most
	// probeRate requests a second, with at most probeInFlight in flight:
	// they must not take the CPU that the API server, gatefold and Traefik
	// share.
	probeInterval = 25 * time.Millisecond
	probeRate     = 1000
	probeInFlight = 8
	// fragmentsPerGateway fit on a Gateway beside its own listener.
	fragmentsPerGateway = rules.MaxListeners - 1
	echoBackend         = "echo"
	ownListener         = "own"
	fragmentListener    = "http"
)

// DataplaneResult is how long a fragment takes to be served by a real
// Gateway implementation, Traefik. Its Latencies' requests are their
// samples.
type DataplaneResult struct {
	Traefik   string `json:"traefik"`
	Fragments int    `json:"fragments"`
	Gateways  int    `json:"gateways"`
	Writers   int    `json:"writers"`
	// ProbeMillis is how often each hostname was requested until served.
	ProbeMillis float64 `json:"probeMillis"`
	// Fold runs from a fragment's create returning until its listener is on
	// its Gateway's spec; FirstRequest from the same moment until Traefik
	// first answered a request for its hostname from the echo backend.
	Fold         Latency `json:"fold"`
	FirstRequest Latency `json:"firstRequest"`
	// TraefikAlone runs from an HTTPRoute's create, with a hostname of its
	// own on a listener already on the Gateway, until its first answer:
	// Traefik's own reaction to a route, the floor of FirstRequest.
	TraefikAlone Latency `json:"traefikAlone"`
	// Folded, Served and AloneServed are the samples that made it within
	// the phase timeout, of Fragments each.
	Folded      int `json:"folded"`
	Served      int `json:"served"`
	AloneServed int `json:"aloneServed"`
	// GatewaySpecWrites are the Gateways' generation changes from the first
	// create until the last hostname was served; Writes are the audited
	// writes from then until Params.Settle after.
	GatewaySpecWrites int    `json:"gatewaySpecWrites"`
	Writes            writes `json:"writes"`
	// TraefikWrites are Traefik's audited writes in the same window, by
	// resource: the statuses it writes one by one, through client-go's
	// default limit of 5 requests a second, while it builds the
	// configuration that serves them.
	TraefikWrites map[string]int `json:"traefikWrites,omitempty"`
	Errors        []string       `json:"errors,omitempty"`
}

// Correct says whether every fragment was folded and served, and every
// route of Traefik alone served, without a writer error.
func (d *DataplaneResult) Correct() bool {
	return d.Folded == d.Fragments && d.Served == d.Fragments && d.AloneServed == d.Fragments && len(d.Errors) == 0
}

// dataplane runs Traefik as the implementation of the Gateways' class, with
// the replica serving gatefold's webhooks as installed, and times
// p.DataplaneRoutes fragments, each with an HTTPRoute, from their creates
// to their first requests, and as many routes on a listener already there.
// Without a Traefik binary it skips, and returns nil.
func (h *harness) dataplane(ctx context.Context, p Params) (*DataplaneResult, error) {
	binary, err := findTraefik("Data plane")
	if err != nil || binary == "" {
		return nil, err
	}
	n := p.DataplaneRoutes
	if n < 1 {
		return nil, fmt.Errorf("--dataplane-routes is %d, it needs at least 1", n)
	}
	res := &DataplaneResult{Traefik: traefikVersion(binary), Fragments: n, Gateways: (n + fragmentsPerGateway - 1) / fragmentsPerGateway,
		Writers: dataplaneWriters}
	progress("Data plane: Traefik %s serving %d fragments on %s, created with their routes by %d writers", res.Traefik, n, plural(res.Gateways, "Gateway"), dataplaneWriters)
	t, err := h.startTraefikPhase(ctx, dataplaneNamespace, binary, n)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	m, setup, writer, dp, pr := t.m, t.setup, t.writer, t.dp, t.pr
	res.ProbeMillis = float64(pr.interval.Microseconds()) / 1000
	gateways := make([]string, res.Gateways)
	for g := range gateways {
		gateways[g] = fmt.Sprintf("dataplane-%d", g)
		if err := setup.Create(ctx, dataplaneGateway(dataplaneNamespace, gateways[g], dp)); err != nil {
			return nil, err
		}
	}
	// Once Traefik serves a route on the first Gateway, it has loaded them
	// all. The replica then settles, which takes at least quiet, as long as
	// Traefik pauses after it applies a configuration (its default
	// providersThrottleDuration, 2 s): each timed run starts with nothing
	// left for gatefold to write and a Traefik that applies the next
	// change at once.
	if err := setup.Create(ctx, dataplaneRoute(dataplaneNamespace, "warm-up", "warm-up.example.com", gatewayParent(gateways[0], ownListener))); err != nil {
		return nil, err
	}
	if pr.firstServed("warm-up.example.com", time.Now().Add(p.PhaseTimeout)).IsZero() {
		return nil, fmt.Errorf("traefik did not serve a route on Gateway %s within %s; its log ends:\n%s", gateways[0], p.PhaseTimeout, dp.LogTail(40))
	}
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return nil, err
	}

	alone, err := h.traefikAlone(ctx, p, writer, pr, gateways[0], res)
	if err != nil {
		return nil, err
	}
	res.TraefikAlone, res.AloneServed = alone, alone.Requests
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return nil, err
	}

	if err := h.fragmentsServed(ctx, p, writer, pr, gateways, res); err != nil {
		return nil, err
	}
	progress("  fold p50 %.0fms p99 %.0fms; first request p50 %.0fms p99 %.0fms; Traefik alone p50 %.0fms p99 %.0fms; served %d/%d, %d Gateway spec writes",
		res.Fold.P50, res.Fold.P99, res.FirstRequest.P50, res.FirstRequest.P99, res.TraefikAlone.P50, res.TraefikAlone.P99,
		res.Served, n, res.GatewaySpecWrites)
	return res, t.end(ctx, h)
}

// traefikPhase is what a phase with Traefik runs on: the replica serving
// gatefold's webhooks, a client to set up and one to write as a route
// controller does, Traefik and a prober of its HTTP entryPoint.
type traefikPhase struct {
	m             *manager
	setup, writer client.Client
	dp            *dataplane.DataPlane
	pr            *prober
	// stop stops the prober and Traefik, once.
	stop func()
}

// startTraefikPhase empties the control plane, makes the phase's namespace
// ns, has a replica serve the webhooks as installed, and starts Traefik
// with a prober that requests each of n hostnames at most probeRate
// requests a second in all.
func (h *harness) startTraefikPhase(ctx context.Context, ns, binary string, n int) (*traefikPhase, error) {
	if err := h.fresh(ctx); err != nil {
		return nil, err
	}
	if err := h.namespace(ctx, ns, nil); err != nil {
		return nil, err
	}
	t := &traefikPhase{}
	var err error
	if t.m, err = h.serve(ctx, ns+"-replica"); err != nil {
		return nil, err
	}
	if t.setup, err = h.client("bench-setup"); err != nil {
		return nil, err
	}
	if t.writer, err = h.client("bench-writer/" + ns); err != nil {
		return nil, err
	}
	if t.dp, t.pr, err = h.startTraefik(ctx, t.setup, binary, max(probeInterval, time.Second*time.Duration(n)/probeRate)); err != nil {
		return nil, err
	}
	t.stop = sync.OnceFunc(func() {
		t.pr.close()
		if err := t.dp.Stop(); err != nil {
			progress("  stopping Traefik: %v", err)
		}
	})
	return t, nil
}

// end stops Traefik, which takes seconds, while the API server is cleaned
// up.
func (t *traefikPhase) end(ctx context.Context, h *harness) error {
	stopped := make(chan struct{})
	go func() { t.stop(); close(stopped) }()
	err := h.fresh(ctx)
	<-stopped
	return err
}

// startTraefik starts Traefik on free loopback ports, with the echo backend,
// reading the control plane as the administrator, and a prober of its HTTP
// entryPoint that requests each hostname every interval.
func (h *harness) startTraefik(ctx context.Context, c client.Client, binary string, interval time.Duration) (*dataplane.DataPlane, *prober, error) {
	dir := filepath.Join(h.dir, "traefik")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	kubeconfig, err := h.env.WriteKubeconfig(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil, nil, err
	}
	httpPort, err := testenv.FreePort()
	if err != nil {
		return nil, nil, err
	}
	httpsPort, err := testenv.FreePort()
	if err != nil {
		return nil, nil, err
	}
	dp, err := dataplane.Start(ctx, c, dataplane.Options{Binary: binary, Kubeconfig: kubeconfig, Dir: dir,
		HTTPPort: httpPort, HTTPSPort: httpsPort, Backends: []string{echoBackend}})
	if err != nil {
		return nil, nil, err
	}
	return dp, newProber(dp.HTTPPort, interval), nil
}

// traefikAlone creates, by the writers, as many routes as there are
// fragments on the Gateway's own listener, each with a hostname of its own,
// and times each from its create to its first answer.
func (h *harness) traefikAlone(ctx context.Context, p Params, c client.Client, pr *prober, gateway string, res *DataplaneResult) (Latency, error) {
	items := make([]int, res.Fragments)
	for i := range items {
		items[i] = i
	}
	deadline := time.Now().Add(p.PhaseTimeout)
	var mu sync.Mutex
	var samples []time.Duration
	var probes sync.WaitGroup
	err := parallel(dataplaneWriters, items, func(i int) error {
		host := fmt.Sprintf("alone-%d.example.com", i)
		if err := c.Create(ctx, dataplaneRoute(dataplaneNamespace, fmt.Sprintf("alone-%d", i), host, gatewayParent(gateway, ownListener))); err != nil {
			return fmt.Errorf("creating route alone-%d: %w", i, err)
		}
		created := time.Now()
		probes.Go(func() {
			if at := pr.firstServed(host, deadline); !at.IsZero() {
				mu.Lock()
				samples = append(samples, at.Sub(created))
				mu.Unlock()
			}
		})
		return nil
	})
	probes.Wait()
	return latency(samples), err
}

// fragmentsServed creates, by the writers, each fragment and then its
// HTTPRoute, attached by the listener name gatefold will give it, and
// times each fragment until its listener is on its Gateway and until its
// hostname is served.
func (h *harness) fragmentsServed(ctx context.Context, p Params, c client.Client, pr *prober, gateways []string, res *DataplaneResult) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	folds, err := h.watchFolds(watchCtx, dataplaneNamespace)
	if err != nil {
		return err
	}
	created, served := make([]time.Time, res.Fragments), make([]time.Time, res.Fragments)
	items := make([]int, res.Fragments)
	for i := range items {
		items[i] = i
	}
	var mu sync.Mutex
	var probes sync.WaitGroup
	prof := h.profile("dataplane")
	start := time.Now()
	deadline := start.Add(p.PhaseTimeout)
	_ = parallel(dataplaneWriters, items, func(i int) error {
		name, host, gateway := fmt.Sprintf("route-%d", i), fmt.Sprintf("route-%d.example.com", i), gateways[i%len(gateways)]
		err := c.Create(ctx, dataplaneFragment(dataplaneNamespace, name, gateway, host, gwv1.PortNumber(pr.port)))
		if err == nil {
			created[i] = time.Now()
			err = c.Create(ctx, dataplaneRoute(dataplaneNamespace, name, host, gatewayParent(gateway, v1alpha1.ListenerName(dataplaneNamespace, name, fragmentListener))))
		}
		if err != nil {
			mu.Lock()
			if len(res.Errors) < 5 {
				res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			}
			mu.Unlock()
			return nil
		}
		probes.Go(func() { served[i] = pr.firstServed(host, deadline) })
		return nil
	})
	probes.Wait()
	// Every listener served was folded before; wait for those that were not.
	names := make([]gwv1.SectionName, res.Fragments)
	for i := range names {
		names[i] = v1alpha1.ListenerName(dataplaneNamespace, fmt.Sprintf("route-%d", i), fragmentListener)
	}
	_ = testenv.Poll(time.Until(deadline), 50*time.Millisecond, func() error { return pending(folds.all(names)) })
	prof.end()

	var fold, first []time.Duration
	for i, at := range folds.seen(names) {
		if created[i].IsZero() {
			continue
		}
		if !at.IsZero() {
			// The watch may deliver the fold before the create's answer
			// is read: that fold took no time after it.
			fold = append(fold, max(0, at.Sub(created[i])))
		}
		if !served[i].IsZero() {
			first = append(first, served[i].Sub(created[i]))
		}
	}
	res.Fold, res.Folded = latency(fold), len(fold)
	res.FirstRequest, res.Served = latency(first), len(first)
	res.GatewaySpecWrites = folds.specWrites()
	// Statuses written after the last answer belong to the phase too.
	time.Sleep(p.Settle)
	end := time.Now()
	if res.Writes, err = h.countWrites(start, end); err != nil {
		return err
	}
	res.TraefikWrites, err = h.countTraefikWrites(start, end)
	return err
}

// countTraefikWrites counts Traefik's audited writes between from and to,
// by resource.
func (h *harness) countTraefikWrites(from, to time.Time) (map[string]int, error) {
	events, err := h.audited(from, to)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, e := range events {
		if writeVerbs[e.Verb] && strings.HasPrefix(e.UserAgent, "traefik/") {
			counts[resourceOf(e)]++
		}
	}
	return counts, nil
}

func dataplaneGateway(ns, name string, dp *dataplane.DataPlane) *gwv1.Gateway {
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(dp.GatewayClass),
			// No hostname: the routes of Traefik alone bring their own.
			Listeners:        []gwv1.Listener{{Name: ownListener, Port: gwv1.PortNumber(dp.HTTPPort), Protocol: gwv1.HTTPProtocolType}},
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}},
		},
	}
}

func dataplaneFragment(ns, name, gateway, host string, port gwv1.PortNumber) *v1alpha1.ListenerFragment {
	return inFull(&v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gateway)},
			Listeners: []gwv1.ListenerEntry{{Name: fragmentListener, Port: port, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname(host))}},
		},
	})
}

// dataplaneRoute is an HTTPRoute for host, on parent, to the echo backend.
func dataplaneRoute(ns, name, host string, parent gwv1.ParentReference) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{dataplane.BackendRef(echoBackend)}}},
		},
	}
}

// gatewayParent names a Gateway's listener.
func gatewayParent(gateway string, section gwv1.SectionName) gwv1.ParentReference {
	return gwv1.ParentReference{Name: gwv1.ObjectName(gateway), SectionName: ptr.To(section)}
}

// findTraefik is the Traefik binary, or "" after saying that phase is
// skipped when there is none.
func findTraefik(phase string) (string, error) {
	binary, err := dataplane.FindBinary("")
	if errors.Is(err, dataplane.ErrNoBinary) {
		progress("%s: skipped, no Traefik binary (run make traefik)", phase)
		return "", nil
	}
	return binary, err
}

// traefikVersion is the version the binary says it is.
func traefikVersion(binary string) string {
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		return "(version unknown)"
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "(version unknown)"
}

// prober requests hostnames through Traefik's HTTP entryPoint until the
// echo backend answers for them.
type prober struct {
	port      int
	interval  time.Duration
	url       string
	transport *http.Transport
	client    *http.Client
	inFlight  chan struct{}
}

func newProber(port int, interval time.Duration) *prober {
	// A Transport of its own: no proxy from the environment, connections
	// kept to Traefik.
	t := &http.Transport{MaxIdleConnsPerHost: probeInFlight, DisableCompression: true}
	return &prober{port: port, interval: interval, url: fmt.Sprintf("http://127.0.0.1:%d/", port), transport: t,
		client: &http.Client{Transport: t, Timeout: 2 * time.Second}, inFlight: make(chan struct{}, probeInFlight)}
}

// served says whether Traefik answers a request for host from the echo
// backend, which names the host it was asked for.
func (pr *prober) served(host string) bool {
	pr.inFlight <- struct{}{}
	defer func() { <-pr.inFlight }()
	req, err := http.NewRequest(http.MethodGet, pr.url, nil)
	if err != nil {
		return false
	}
	req.Host = host
	resp, err := pr.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return err == nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "backend="+echoBackend+" host="+host+" ")
}

// firstServed requests host every interval until it is served, and
// returns when it first was, or the zero time after deadline.
func (pr *prober) firstServed(host string, deadline time.Time) time.Time {
	var at time.Time
	if testenv.Poll(time.Until(deadline), pr.interval, func() error {
		ok := pr.served(host)
		at = time.Now()
		return pending(ok)
	}) != nil {
		return time.Time{}
	}
	return at
}

// close drops the connections kept to Traefik, which would otherwise hold
// up its stop.
func (pr *prober) close() { pr.transport.CloseIdleConnections() }

// foldWatch records when each listener name first appeared on the spec of
// a Gateway of a namespace, and counts the Gateways' spec writes
// (generation changes), from a watch started before the creates.
type foldWatch struct {
	mu     sync.Mutex
	first  map[gwv1.SectionName]time.Time
	writes int
}

func (h *harness) watchFolds(ctx context.Context, ns string) (*foldWatch, error) {
	f := &foldWatch{first: map[gwv1.SectionName]time.Time{}}
	generation := map[string]int64{}
	_, err := h.watchGateways(ctx, ns, func(gateways []gwv1.Gateway) {
		for _, gw := range gateways {
			generation[gw.Name] = gw.Generation
			for _, l := range gw.Spec.Listeners {
				f.first[l.Name] = time.Now()
			}
		}
	}, func(t watch.EventType, gw *gwv1.Gateway) {
		at := time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		if t == watch.Modified && gw.Generation > generation[gw.Name] {
			f.writes++
		}
		generation[gw.Name] = gw.Generation
		for _, l := range gw.Spec.Listeners {
			if _, ok := f.first[l.Name]; !ok {
				f.first[l.Name] = at
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// seen returns when each name first appeared, the zero time for those that
// have not.
func (f *foldWatch) seen(names []gwv1.SectionName) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := make([]time.Time, len(names))
	for i, n := range names {
		at[i] = f.first[n]
	}
	return at
}

func (f *foldWatch) all(names []gwv1.SectionName) bool {
	for _, at := range f.seen(names) {
		if at.IsZero() {
			return false
		}
	}
	return true
}

func (f *foldWatch) specWrites() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}
