package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/testenv"
)

// The routes phase times routes that name their ListenerFragment as
// parentRef (issue 23) on one Gateway heading a pool, through Traefik,
// beside the same number of routes that name the Gateway and the listener
// name gatefold generates, and of routes on a listener already there
// (Traefik alone); then it counts gatefold's writes in the steady state.
const (
	routesNamespace = "routes"
	// wayLabel on a route names the way it was attached, so that each way's
	// routes are deleted before the next way runs: Traefik then serves one
	// way's routes at a time.
	wayLabel     = "bench.gatefold.dev/way"
	aloneGateway = "alone"
	poolHead     = "pool"
	// routesSteady bounds the steady state counted after the last way.
	routesSteady = 30 * time.Second
	// traefikThrottle is how long Traefik waits between two configurations
	// (its default providersThrottleDuration).
	traefikThrottle = 2 * time.Second
)

// The ways a route is attached, in the order they run.
const (
	wayAlone    = "alone"
	wayByName   = "by-name"
	wayFragment = "by-fragment"
)

// RoutesResult is how long routes that name their fragment take to be
// Accepted and served on a pool, beside the generated-name way and Traefik
// alone, with everyone's writes per route, and gatefold's writes once all
// are served.
type RoutesResult struct {
	Traefik     string  `json:"traefik"`
	Routes      int     `json:"routes"`
	Writers     int     `json:"writers"`
	ProbeMillis float64 `json:"probeMillis"`
	// Alone, ByName and ByFragment are the ways, in the order they ran.
	Alone      RouteWay `json:"alone"`
	ByName     RouteWay `json:"byName"`
	ByFragment RouteWay `json:"byFragment"`
	// SteadySeconds is how long, after ByFragment converged and gatefold
	// sent nothing for 2 s, writes were counted in SteadyWrites
	// (gatefold's) and SteadyTraefikWrites.
	SteadySeconds       float64        `json:"steadySeconds"`
	SteadyWrites        writes         `json:"steadyWrites"`
	SteadyTraefikWrites map[string]int `json:"steadyTraefikWrites,omitempty"`
	Errors              []string       `json:"errors,omitempty"`
}

// RouteWay is one way of attaching Routes routes. Its latencies run from
// the create returning (the fragment's, where there is one) and their
// Requests are the samples that made it within the phase timeout.
type RouteWay struct {
	// Gateways are those of the way's routes at the end: made by hand, or
	// the pool's head and the siblings gatefold made.
	Gateways int `json:"gateways"`
	// Fold is until the fragment's listener is on a Gateway's spec (none
	// without fragments); Accepted until the route's status.parents entry
	// for its parentRef says Accepted=True; FirstRequest until Traefik first
	// answered for its hostname from the echo backend.
	Fold         Latency `json:"fold"`
	Accepted     Latency `json:"accepted"`
	FirstRequest Latency `json:"firstRequest"`
	// Seconds runs from the first create until every route was served and
	// Accepted.
	Seconds float64 `json:"seconds"`
	// Writes are the audited writes from the first create until gatefold
	// sent nothing for 2 s after the last route was served and Accepted;
	// TraefikWrites are Traefik's in the same window, by resource.
	Writes        writes         `json:"writes"`
	TraefikWrites map[string]int `json:"traefikWrites,omitempty"`
}

// complete says whether every route of the way was served and Accepted,
// and, with fragments, folded.
func (w RouteWay) complete(n int, fragments bool) bool {
	return w.Accepted.Requests == n && w.FirstRequest.Requests == n && (!fragments || w.Fold.Requests == n)
}

// Correct says whether every route of every way was served and Accepted,
// every fragment folded, without a writer error, and gatefold wrote nothing
// in the steady state.
func (r *RoutesResult) Correct() bool {
	return r.Alone.complete(r.Routes, false) && r.ByName.complete(r.Routes, true) && r.ByFragment.complete(r.Routes, true) &&
		len(r.Errors) == 0 && r.SteadyWrites.Gatefold == 0
}

// routeWay is how a way creates its objects for route i.
type routeWay struct {
	name string
	// fragment, when set, is created before the route, and the route's
	// times run from its create.
	fragment func(i int, host string) *v1alpha1.ListenerFragment
	route    func(i int, host string) *gwv1.HTTPRoute
}

// routes runs Traefik as the implementation of the Gateways' class, with
// the replica serving gatefold's webhooks as installed, and times
// p.RouteParents routes each way, one way after the other. Without a
// Traefik binary it skips, and returns nil.
func (h *harness) routes(ctx context.Context, p Params) (*RoutesResult, error) {
	binary, err := findTraefik("Routes")
	if err != nil || binary == "" {
		return nil, err
	}
	n := p.RouteParents
	if n < 1 {
		return nil, fmt.Errorf("--route-parents is %d, it needs at least 1", n)
	}
	res := &RoutesResult{Traefik: traefikVersion(binary), Routes: n, Writers: dataplaneWriters}
	progress("Routes: Traefik %s serving %d routes each way (alone, by generated name, by fragment parentRef on a pool), by %d writers", res.Traefik, n, dataplaneWriters)
	t, err := h.startTraefikPhase(ctx, routesNamespace, binary, n)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	m, setup, writer, dp, pr := t.m, t.setup, t.writer, t.dp, t.pr
	res.ProbeMillis = float64(pr.interval.Microseconds()) / 1000

	byName := make([]string, (n+fragmentsPerGateway-1)/fragmentsPerGateway)
	head := dataplaneGateway(routesNamespace, poolHead, dp)
	head.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
	gateways := []*gwv1.Gateway{dataplaneGateway(routesNamespace, aloneGateway, dp), head}
	for g := range byName {
		byName[g] = fmt.Sprintf("by-name-%d", g)
		gateways = append(gateways, dataplaneGateway(routesNamespace, byName[g], dp))
	}
	for _, gw := range gateways {
		if err := setup.Create(ctx, gw); err != nil {
			return nil, err
		}
	}
	if err := setup.Create(ctx, dataplaneRoute(routesNamespace, "warm-up", "warm-up.example.com", gatewayParent(aloneGateway, ownListener))); err != nil {
		return nil, err
	}
	if pr.firstServed("warm-up.example.com", time.Now().Add(p.PhaseTimeout)).IsZero() {
		return nil, fmt.Errorf("traefik did not serve a route on Gateway %s within %s; its log ends:\n%s", aloneGateway, p.PhaseTimeout, dp.LogTail(40))
	}

	port := gwv1.PortNumber(pr.port)
	ways := []struct {
		way routeWay
		out *RouteWay
	}{
		{routeWay{name: wayAlone, route: func(i int, host string) *gwv1.HTTPRoute {
			return routesRoute(routeName(wayAlone, i), host, wayAlone, gatewayParent(aloneGateway, ownListener))
		}}, &res.Alone},
		{routeWay{name: wayByName,
			fragment: func(i int, host string) *v1alpha1.ListenerFragment {
				return dataplaneFragment(routesNamespace, routeName(wayByName, i), byName[i%len(byName)], host, port)
			},
			route: func(i int, host string) *gwv1.HTTPRoute {
				name := routeName(wayByName, i)
				return routesRoute(name, host, wayByName, gatewayParent(byName[i%len(byName)], v1alpha1.ListenerName(routesNamespace, name, fragmentListener)))
			}}, &res.ByName},
		{routeWay{name: wayFragment,
			fragment: func(i int, host string) *v1alpha1.ListenerFragment {
				return dataplaneFragment(routesNamespace, routeName(wayFragment, i), poolHead, host, port)
			},
			route: func(i int, host string) *gwv1.HTTPRoute {
				name := routeName(wayFragment, i)
				return routesRoute(name, host, wayFragment, fragmentParent(name))
			}}, &res.ByFragment},
	}
	for k, w := range ways {
		if k > 0 {
			if err := writer.DeleteAllOf(ctx, &gwv1.HTTPRoute{}, client.InNamespace(routesNamespace), client.MatchingLabels{wayLabel: ways[k-1].way.name}); err != nil {
				return nil, fmt.Errorf("deleting the routes of %s: %w", ways[k-1].way.name, err)
			}
		}
		// Traefik applies the last change (the warm-up, or the deletes)
		// and pauses while the replica settles: each way starts with
		// nothing left for either to do.
		time.Sleep(traefikThrottle)
		if err := h.settle(m, p.PhaseTimeout); err != nil {
			return nil, err
		}
		if *w.out, err = h.routeWay(ctx, p, writer, pr, m, w.way, res); err != nil {
			return nil, err
		}
		progress("  %s: fold p50 %.0fms; Accepted p50 %.0fms p99 %.0fms; first request p50 %.0fms p99 %.0fms; %d/%d served, %d/%d Accepted; gatefold %d writes, Traefik %d",
			w.way.name, w.out.Fold.P50, w.out.Accepted.P50, w.out.Accepted.P99, w.out.FirstRequest.P50, w.out.FirstRequest.P99,
			w.out.FirstRequest.Requests, n, w.out.Accepted.Requests, n, w.out.Writes.Gatefold, sum(w.out.TraefikWrites))
	}
	res.ByName.Gateways = len(byName)
	if res.ByFragment.Gateways, err = h.poolSize(ctx); err != nil {
		return nil, err
	}

	steady := min(p.SteadyState, routesSteady)
	from := time.Now()
	time.Sleep(steady)
	to := time.Now()
	res.SteadySeconds = to.Sub(from).Seconds()
	if res.SteadyWrites, err = h.countWrites(from, to); err != nil {
		return nil, err
	}
	if res.SteadyTraefikWrites, err = h.countTraefikWrites(from, to); err != nil {
		return nil, err
	}
	progress("  steady state, %.0fs: gatefold %d writes%s, Traefik %d", res.SteadySeconds, res.SteadyWrites.Gatefold, byResource(res.SteadyWrites.ByResource), sum(res.SteadyTraefikWrites))
	return res, t.end(ctx, h)
}

// routeWay creates, by the writers, each route of the way (after its
// fragment, without waiting for it), and times each until its fragment is
// folded, it is Accepted and its hostname is served.
func (h *harness) routeWay(ctx context.Context, p Params, c client.Client, pr *prober, m *manager, way routeWay, res *RoutesResult) (RouteWay, error) {
	var out RouteWay
	n := res.Routes
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	folds, err := h.watchFolds(watchCtx, routesNamespace)
	if err != nil {
		return out, err
	}
	accepted, err := h.watchAccepted(watchCtx, routesNamespace)
	if err != nil {
		return out, err
	}
	created, served := make([]time.Time, n), make([]time.Time, n)
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	var mu sync.Mutex
	var probes sync.WaitGroup
	prof := h.profile("routes-" + way.name)
	start := time.Now()
	deadline := start.Add(p.PhaseTimeout)
	_ = parallel(dataplaneWriters, items, func(i int) error {
		host := routeName(way.name, i) + ".example.com"
		at, err := createWay(ctx, c, way, i, host)
		if err != nil {
			mu.Lock()
			if len(res.Errors) < 5 {
				res.Errors = append(res.Errors, fmt.Sprintf("%s %d: %v", way.name, i, err))
			}
			mu.Unlock()
			return nil
		}
		created[i] = at
		probes.Go(func() { served[i] = pr.firstServed(host, deadline) })
		return nil
	})
	probes.Wait()
	names, listeners := make([]string, n), make([]gwv1.SectionName, n)
	for i := range names {
		names[i] = routeName(way.name, i)
		listeners[i] = v1alpha1.ListenerName(routesNamespace, names[i], fragmentListener)
	}
	_ = testenv.Poll(time.Until(deadline), 50*time.Millisecond, func() error {
		return pending(accepted.all(names) && (way.fragment == nil || folds.all(listeners)))
	})
	out.Seconds = time.Since(start).Seconds()
	prof.end()

	var fold, acc, first []time.Duration
	foldAt, accAt := folds.seen(listeners), accepted.seen(names)
	for i := range n {
		if created[i].IsZero() {
			continue
		}
		// A watch may deliver what it saw before the create's answer is
		// read: that took no time after it.
		if way.fragment != nil && !foldAt[i].IsZero() {
			fold = append(fold, max(0, foldAt[i].Sub(created[i])))
		}
		if !accAt[i].IsZero() {
			acc = append(acc, max(0, accAt[i].Sub(created[i])))
		}
		if !served[i].IsZero() {
			first = append(first, served[i].Sub(created[i]))
		}
	}
	out.Fold, out.Accepted, out.FirstRequest = latency(fold), latency(acc), latency(first)
	// The statuses written after the last answer belong to the way too:
	// until gatefold has sent nothing for quiet.
	time.Sleep(p.Settle)
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return out, err
	}
	end := time.Now()
	if out.Writes, err = h.countWrites(start, end); err != nil {
		return out, err
	}
	out.TraefikWrites, err = h.countTraefikWrites(start, end)
	return out, err
}

// createWay creates route i of the way, after its fragment if it has one,
// and returns when the first create returned.
func createWay(ctx context.Context, c client.Client, way routeWay, i int, host string) (time.Time, error) {
	var at time.Time
	if way.fragment != nil {
		if err := c.Create(ctx, way.fragment(i, host)); err != nil {
			return at, err
		}
		at = time.Now()
	}
	if err := c.Create(ctx, way.route(i, host)); err != nil {
		return at, err
	}
	if at.IsZero() {
		at = time.Now()
	}
	return at, nil
}

// poolSize counts the pool's head and the siblings gatefold made for it.
func (h *harness) poolSize(ctx context.Context) (int, error) {
	siblings := &gwv1.GatewayList{}
	if err := h.observer.List(ctx, siblings, client.InNamespace(routesNamespace), client.MatchingLabels{v1alpha1.PoolLabel: rules.PoolLabelValue(poolHead)}); err != nil {
		return 0, err
	}
	return 1 + len(siblings.Items), nil
}

func routeName(way string, i int) string { return fmt.Sprintf("%s-%d", way, i) }

func sum(counts map[string]int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}

// acceptWatch records when each route of a namespace was first Accepted
// for its (first) parentRef, from a watch started before the creates.
type acceptWatch struct {
	mu    sync.Mutex
	first map[string]time.Time
}

func (h *harness) watchAccepted(ctx context.Context, ns string) (*acceptWatch, error) {
	a := &acceptWatch{first: map[string]time.Time{}}
	list := &gwv1.HTTPRouteList{}
	if err := h.observer.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		a.record(&list.Items[i], time.Now())
	}
	go func() {
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			w, err := h.observer.Watch(ctx, &gwv1.HTTPRouteList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for e := range w.ResultChan() {
				if r, ok := e.Object.(*gwv1.HTTPRoute); ok {
					rv = r.ResourceVersion
					if e.Type != watch.Deleted {
						a.record(r, time.Now())
					}
				}
			}
			w.Stop()
		}
	}()
	return a, nil
}

// record notes route r as Accepted at at, the first time a status.parents
// entry for the group and kind of its first parentRef says so.
func (a *acceptWatch) record(r *gwv1.HTTPRoute, at time.Time) {
	if len(r.Spec.ParentRefs) == 0 {
		return
	}
	want := r.Spec.ParentRefs[0]
	for _, s := range r.Status.Parents {
		if ptr.Deref(s.ParentRef.Group, gwv1.GroupName) != ptr.Deref(want.Group, gwv1.GroupName) ||
			ptr.Deref(s.ParentRef.Kind, "Gateway") != ptr.Deref(want.Kind, "Gateway") ||
			!apimeta.IsStatusConditionTrue(s.Conditions, string(gwv1.RouteConditionAccepted)) {
			continue
		}
		a.mu.Lock()
		if _, ok := a.first[r.Name]; !ok {
			a.first[r.Name] = at
		}
		a.mu.Unlock()
		return
	}
}

func (a *acceptWatch) seen(names []string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := make([]time.Time, len(names))
	for i, n := range names {
		at[i] = a.first[n]
	}
	return at
}

func (a *acceptWatch) all(names []string) bool {
	for _, at := range a.seen(names) {
		if at.IsZero() {
			return false
		}
	}
	return true
}

// fragmentParent names the fragment's own listener, as a user writes it.
func fragmentParent(fragment string) gwv1.ParentReference {
	return gwv1.ParentReference{Group: ptr.To(gwv1.Group(v1alpha1.GroupVersion.Group)), Kind: ptr.To(gwv1.Kind(rules.KindListenerFragment)),
		Name: gwv1.ObjectName(fragment), SectionName: ptr.To(gwv1.SectionName(fragmentListener))}
}

// routesRoute is an HTTPRoute for host on parent, to the echo backend,
// labelled with its way.
func routesRoute(name, host, way string, parent gwv1.ParentReference) *gwv1.HTTPRoute {
	r := dataplaneRoute(routesNamespace, name, host, parent)
	r.Labels = map[string]string{wayLabel: way}
	return r
}
