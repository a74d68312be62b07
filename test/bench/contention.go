package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// route is one route's need: an HTTPS listener for its hostname, serving its
// own certificate Secret, on one of the shared Gateways.
type route struct {
	index        int
	gatewayIndex int
	gateway      string
	hostname     string
}

func gatewayName(g int) string { return fmt.Sprintf("shared-%d", g) }

func (r route) name() string { return fmt.Sprintf("route-%d", r.index) }

// entry is the route's listener as a fragment or a ListenerSet holds it.
func (r route) entry() gwv1.ListenerEntry {
	l := r.listener()
	return gwv1.ListenerEntry{Name: "https", Port: l.Port, Protocol: l.Protocol, Hostname: l.Hostname, TLS: l.TLS}
}

func (r route) listener() gwv1.Listener {
	return gwv1.Listener{
		Name: gwv1.SectionName(r.name()), Port: 443, Protocol: gwv1.HTTPSProtocolType,
		Hostname: ptr.To(gwv1.Hostname(r.hostname)),
		TLS:      &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName(r.name() + "-tls")}}},
	}
}

// tally counts a writer's requests: every write sent, and of those the 409
// conflicts and the server timeouts, which a controller retries.
type tally struct{ writes, conflicts, timeouts int }

// send sends one write, retrying it as a controller's requeue would while
// the API server times out.
func (t *tally) send(write func() error) error {
	for {
		t.writes++
		err := write()
		switch {
		case apierrors.IsConflict(err):
			t.conflicts++
		case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err):
			t.timeouts++
			continue
		}
		return err
	}
}

// strategy is one way of getting the routes' listeners onto the Gateways,
// or, for the floor, what any design with one object per route writes.
type strategy interface{ name() string }

// routeStrategy writes route by route, as route controllers do. Writer w
// handles the routes whose index is w modulo the writers, in both phases,
// as a controller's worker owns its keys.
type routeStrategy interface {
	strategy
	// add and remove count their requests in t.
	add(ctx context.Context, c client.Client, ns string, r route, writer int, t *tally) error
	remove(ctx context.Context, c client.Client, ns string, r route, writer int, t *tally) error
}

// gatewayStrategy writes Gateway by Gateway, as one writer.
type gatewayStrategy interface {
	strategy
	// write makes each Gateway hold exactly the listeners of the routes
	// present on it, counting its requests in t.
	write(ctx context.Context, c client.Client, ns string, gateways int, present []route, t *tally) error
}

// objectStrategy writes objects of its own, no listeners: it needs no
// Gateways, and a phase is done when exactly the wanted objects exist.
type objectStrategy interface {
	routeStrategy
	// names lists the objects' names in ns.
	names(ctx context.Context, c client.Reader, ns string) ([]string, error)
}

// limit is the physical limit of any design that ends in Gateway
// listeners: one writer server-side applies each Gateway's full list once,
// G Gateway writes in all.
type limit struct{}

func (limit) name() string { return "limit" }

func (limit) write(ctx context.Context, c client.Client, ns string, gateways int, present []route, t *tally) error {
	byGateway := make([][]gwv1.Listener, gateways)
	for _, r := range present {
		byGateway[r.gatewayIndex] = append(byGateway[r.gatewayIndex], r.listener())
	}
	for g, ls := range byGateway {
		if err := applyListeners(ctx, c, ns, gatewayName(g), ls, "limit", t); err != nil {
			return err
		}
	}
	return nil
}

// floor is the floor of any design with one object per route: W writers
// create (and delete) N small plain objects, ConfigMaps, that no admission
// webhook and no controller sees.
type floor struct{}

func (floor) name() string { return "floor" }

func (floor) add(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	return t.send(func() error {
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name()}, Data: map[string]string{"hostname": r.hostname}})
	})
}

func (floor) remove(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	return t.send(func() error {
		return c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name()}})
	})
}

func (floor) names(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	return objectNames(ctx, c, ns, corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
}

// objectNames lists the names of the objects in ns, of the kind whose list
// kind is list, metadata only.
func objectNames(ctx context.Context, c client.Reader, ns string, list schema.GroupVersionKind) ([]string, error) {
	objs := &metav1.PartialObjectMetadataList{}
	objs.SetGroupVersionKind(list)
	if err := c.List(ctx, objs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range objs.Items {
		names = append(names, o.Name)
	}
	return names, nil
}

// crdFloor is the floor of gatefold's own objects: W writers create the
// same fragments as gatefold's rows, in a namespace labelled
// webhook.AdmissionLabel=webhook.AdmissionDisabled, so the API server calls
// no webhook, and before a gatefold row starts the manager, so nothing
// folds them: what the API server alone pays for a fragment create.
type crdFloor struct{ fragments }

func (crdFloor) name() string { return "crd-floor" }

func (crdFloor) names(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	return objectNames(ctx, c, ns, v1alpha1.GroupVersion.WithKind("ListenerFragmentList"))
}

// native is what an implementation with native ListenerSet support pays
// for the objects: W writers create one upstream ListenerSet per route,
// with its HTTPS listener, naming its Gateway. No controller folds them:
// it runs before a gatefold row starts the manager, which reads no
// ListenerSet of a class --listenerset-controllers does not name.
type native struct{}

func (native) name() string { return "native" }

func (native) add(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	ls := &gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name()},
		Spec: gwv1.ListenerSetSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(r.gateway)},
			Listeners: []gwv1.ListenerEntry{r.entry()},
		},
	}
	return t.send(func() error { return c.Create(ctx, ls) })
}

func (native) remove(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	return t.send(func() error {
		return c.Delete(ctx, &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name()}})
	})
}

func (native) names(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	return objectNames(ctx, c, ns, schema.GroupVersionKind{Group: gwv1.GroupName, Version: gwv1.GroupVersion.Version, Kind: "ListenerSetList"})
}

// update is what Knative-style controllers do today: read the Gateway,
// change the list, Update, retry on conflict.
type update struct{}

func (update) name() string { return "update" }

func (update) add(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	return readModifyWrite(ctx, c, ns, r.gateway, t, func(ls []gwv1.Listener) []gwv1.Listener {
		for _, l := range ls {
			if l.Name == gwv1.SectionName(r.name()) {
				return nil
			}
		}
		return append(ls, r.listener())
	})
}

func (update) remove(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	return readModifyWrite(ctx, c, ns, r.gateway, t, func(ls []gwv1.Listener) []gwv1.Listener {
		for i, l := range ls {
			if l.Name == gwv1.SectionName(r.name()) {
				return append(ls[:i:i], ls[i+1:]...)
			}
		}
		return nil
	})
}

// readModifyWrite applies change (nil: nothing to do) until an Update
// succeeds.
func readModifyWrite(ctx context.Context, c client.Client, ns, name string, t *tally, change func([]gwv1.Listener) []gwv1.Listener) error {
	for {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); err != nil {
			return err
		}
		ls := change(gw.Spec.Listeners)
		if ls == nil {
			return nil
		}
		gw.Spec.Listeners = ls
		if err := t.send(func() error { return c.Update(ctx, gw) }); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// ssaPerWriter server-side applies, as each writer, every listener that
// writer wants on the Gateway, under a field manager of the writer's own: no
// writer conflicts with another, and each apply states the writer's whole
// intent for that Gateway, as server-side apply requires.
type ssaPerWriter struct {
	// owned are the listeners each writer wants, by Gateway; writer w only
	// touches owned[w].
	owned []map[string][]gwv1.Listener
}

func newSSAPerWriter(writers int) *ssaPerWriter {
	s := &ssaPerWriter{owned: make([]map[string][]gwv1.Listener, writers)}
	for w := range s.owned {
		s.owned[w] = map[string][]gwv1.Listener{}
	}
	return s
}

func (*ssaPerWriter) name() string { return "ssa-per-writer" }

func (s *ssaPerWriter) add(ctx context.Context, c client.Client, ns string, r route, w int, t *tally) error {
	s.owned[w][r.gateway] = append(s.owned[w][r.gateway], r.listener())
	return s.apply(ctx, c, ns, r.gateway, w, t)
}

func (s *ssaPerWriter) remove(ctx context.Context, c client.Client, ns string, r route, w int, t *tally) error {
	ls := s.owned[w][r.gateway]
	for i, l := range ls {
		if l.Name == gwv1.SectionName(r.name()) {
			s.owned[w][r.gateway] = append(ls[:i:i], ls[i+1:]...)
		}
	}
	return s.apply(ctx, c, ns, r.gateway, w, t)
}

func (s *ssaPerWriter) apply(ctx context.Context, c client.Client, ns, gateway string, w int, t *tally) error {
	return applyListeners(ctx, c, ns, gateway, s.owned[w][gateway], fmt.Sprintf("writer-%d", w), t)
}

// applyListeners server-side applies ls as the whole intent of the field
// manager for the Gateway's listeners.
func applyListeners(ctx context.Context, c client.Client, ns, gateway string, ls []gwv1.Listener, manager string, t *tally) error {
	spec := gwapply.GatewaySpec()
	for _, l := range ls {
		ac := &gwapply.ListenerApplyConfiguration{}
		raw, err := json.Marshal(l)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, ac); err != nil {
			return err
		}
		spec.WithListeners(ac)
	}
	return t.send(func() error {
		return c.Apply(ctx, gwapply.Gateway(gateway, ns).WithSpec(spec), client.FieldOwner(manager))
	})
}

// fragments is gatefold: each route controller writes its own
// ListenerFragment; the merger folds them. With pool, the fragments all
// name one Gateway heading a pool (v1alpha1.PoolAnnotation) instead of G
// hand-made ones, and the merger creates the Gateways they need.
type fragments struct{ pool bool }

func (f fragments) name() string {
	if f.pool {
		return "gatefold-pool"
	}
	return "gatefold"
}

// pooled says whether the strategy starts from one Gateway heading a pool.
func pooled(s strategy) bool {
	f, ok := s.(fragments)
	return ok && f.pool
}

// gatewaysOf is how many Gateways the strategy starts from.
func gatewaysOf(s strategy, p Params) int {
	if pooled(s) {
		return 1
	}
	return p.Gateways
}

func (fragments) add(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	lf := inFull(&v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name()},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(r.gateway)},
			Listeners: []gwv1.ListenerEntry{r.entry()},
		},
	})
	return t.send(func() error { return c.Create(ctx, lf) })
}

func (fragments) remove(ctx context.Context, c client.Client, ns string, r route, _ int, t *tally) error {
	return t.send(func() error {
		return c.Delete(ctx, &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name()}})
	})
}

// StrategyResult is what one strategy did with the workload.
type StrategyResult struct {
	Strategy string `json:"strategy"`
	Writers  int    `json:"writers"`
	Add      Phase  `json:"add"`
	Remove   Phase  `json:"remove"`
	// Gateways the listeners were on after adding: the G hand-made ones,
	// or a pool's head and the siblings the merger created (none for the
	// floor).
	Gateways int `json:"gateways"`
	// Final Gateway size after adding, averaged over the Gateways (none
	// for the floor).
	ListenersPerGateway float64 `json:"listenersPerGateway"`
	GatewayBytes        int     `json:"gatewayBytes"`
	ManagedFieldsBytes  int     `json:"managedFieldsBytes"`
}

// Phase is one phase of the workload: every route added, or half removed.
type Phase struct {
	Converged bool `json:"converged"`
	// WriteSeconds runs until the last writer's last write returned;
	// Seconds until the Gateways held exactly the expected listeners (for
	// the floor, the objects were there).
	WriteSeconds float64 `json:"writeSeconds"`
	Seconds      float64 `json:"seconds"`
	// Writes are audited API writes; WriterRequests and WriterConflicts
	// are what the writers counted themselves.
	Writes          writes `json:"writes"`
	WriterRequests  int    `json:"writerRequests"`
	WriterConflicts int    `json:"writerConflicts"`
	WriterTimeouts  int    `json:"writerTimeouts"`
	// GatewayWrites are the Gateways' resourceVersion changes.
	GatewayWrites int `json:"gatewayWrites"`
	// Missing and Extra compare the Gateways' listeners with the expected
	// ones when the phase ended; WriterErrors count the writes that failed,
	// Errors are the first few.
	Missing      int      `json:"missing"`
	Extra        int      `json:"extra"`
	WriterErrors int      `json:"writerErrors"`
	Errors       []string `json:"errors,omitempty"`
}

// Correct says whether the phase ended with exactly the expected listeners
// and no writer error.
func (p Phase) Correct() bool { return len(p.problems()) == 0 }

// problems says what was wrong with the phase: it did not converge, or its
// writers got errors.
func (p Phase) problems() []string {
	var out []string
	if !p.Converged || p.Missing != 0 || p.Extra != 0 {
		out = append(out, fmt.Sprintf("not converged, %d missing and %d extra at the end", p.Missing, p.Extra))
	}
	if len(p.Errors) > 0 {
		out = append(out, fmt.Sprintf("%s, e.g. %s", plural(max(p.WriterErrors, len(p.Errors)), "writer error"), p.Errors[0]))
	}
	return out
}

// strategies are the contention strategies in the order they run: the
// references first, gatefold's last, so that only gatefold's runs have a
// manager and admission behind them.
func strategies(p Params) []strategy {
	return []strategy{limit{}, floor{}, crdFloor{}, native{}, update{}, newSSAPerWriter(p.Writers), fragments{}, fragments{pool: true}}
}

// objectRow says whether the strategy named writes objects of its own, no
// listeners: its rows have no Gateways and no "all there".
func objectRow(name string) bool {
	for _, s := range strategies(Params{}) {
		if _, ok := s.(objectStrategy); ok && s.name() == name {
			return true
		}
	}
	return false
}

func (h *harness) contention(ctx context.Context, p Params, only selection) ([]StrategyResult, error) {
	var results []StrategyResult
	for _, s := range strategies(p) {
		if !only.strategy(s.name()) {
			continue
		}
		on := fmt.Sprintf("%d Gateways", p.Gateways)
		if pooled(s) {
			on = "one Gateway heading a pool"
		}
		progress("Contention: %s, %d routes on %s, %d writers", s.name(), p.Routes, on, writersOf(s, p))
		if _, ok := s.(fragments); ok {
			// Only now, so that the other strategies pay no admission.
			if _, err := h.serve(ctx, "replica-0"); err != nil {
				return nil, err
			}
		}
		r, err := h.runStrategy(ctx, p, s)
		if err != nil {
			return nil, err
		}
		progress("  writes returned in %.1fs, all there in %.1fs (%d writer requests, %d conflicts, %d Gateway writes on %d Gateways), removed half in %.1fs",
			r.Add.WriteSeconds, r.Add.Seconds, r.Add.WriterRequests, r.Add.Writes.Conflicts, r.Add.GatewayWrites, r.Gateways, r.Remove.Seconds)
		results = append(results, r)
	}
	return results, nil
}

func writersOf(s strategy, p Params) int {
	if _, ok := s.(gatewayStrategy); ok {
		return 1
	}
	return p.Writers
}

func (h *harness) runStrategy(ctx context.Context, p Params, s strategy) (StrategyResult, error) {
	res := StrategyResult{Strategy: s.name(), Writers: writersOf(s, p)}
	ns := "contention-" + s.name()
	setup, err := h.client("bench-setup")
	if err != nil {
		return res, err
	}
	writer, err := h.client("bench-writer/" + s.name())
	if err != nil {
		return res, err
	}
	var labels map[string]string
	if _, ok := s.(crdFloor); ok {
		labels = map[string]string{webhook.AdmissionLabel: webhook.AdmissionDisabled}
	}
	if err := h.namespace(ctx, ns, labels); err != nil {
		return res, err
	}
	gateways := gatewaysOf(s, p)
	routes := make([]route, p.Routes)
	for i := range routes {
		routes[i] = route{index: i, gatewayIndex: i % gateways, gateway: gatewayName(i % gateways), hostname: fmt.Sprintf("route-%d.example.com", i)}
	}
	_, objects := s.(objectStrategy)
	if !objects {
		if err := h.createGateways(ctx, setup, ns, gateways, pooled(s), routes); err != nil {
			return res, err
		}
	}

	res.Add = h.phase(ctx, p, ns, writer, s, true, routes, routes)
	if !objects {
		gws := &gwv1.GatewayList{}
		if err := h.observer.List(ctx, gws, client.InNamespace(ns)); err != nil {
			return res, err
		}
		res.Gateways = len(gws.Items)
		for _, gw := range gws.Items {
			res.ListenersPerGateway += float64(len(gw.Spec.Listeners)) / float64(len(gws.Items))
			raw, _ := json.Marshal(gw)
			res.GatewayBytes += len(raw) / len(gws.Items)
			mf, _ := json.Marshal(gw.ManagedFields)
			res.ManagedFieldsBytes += len(mf) / len(gws.Items)
		}
	}

	var removed, kept []route
	for _, r := range routes {
		if r.index%2 == 0 {
			removed = append(removed, r)
		} else {
			kept = append(kept, r)
		}
	}
	res.Remove = h.phase(ctx, p, ns, writer, s, false, removed, kept)
	if _, ok := s.(crdFloor); ok {
		// The manager a gatefold row starts would fold the fragments kept,
		// opted out of admission or not, in that row's window.
		if err := setup.DeleteAllOf(ctx, &v1alpha1.ListenerFragment{}, client.InNamespace(ns)); err != nil {
			return res, fmt.Errorf("deleting crd-floor's fragments: %w", err)
		}
	}
	return res, nil
}

// exampleGateway is a Gateway of class example, which no implementation
// serves, with one listener of its own, "http", that allows listeners from
// its namespace.
func exampleGateway(ns, name string) *gwv1.Gateway {
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "example",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
		},
	}
}

// createGateways creates the shared Gateways, each with a listener of its
// own (with pool, one that heads a pool), and the routes' certificate
// Secrets.
func (h *harness) createGateways(ctx context.Context, setup client.Client, ns string, gateways int, pool bool, routes []route) error {
	for g := range gateways {
		gw := exampleGateway(ns, gatewayName(g))
		if pool {
			gw.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
		}
		if err := setup.Create(ctx, gw); err != nil {
			return err
		}
	}
	return parallel(32, routes, func(r route) error {
		return setup.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name() + "-tls"}, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}})
	})
}

// phase writes the change to the routes in changed (added, or removed),
// and times until exactly the routes in present are
// there: on the Gateways, besides their own listener "http", or as the
// strategy's objects.
func (h *harness) phase(ctx context.Context, p Params, ns string, c client.Client, s strategy, adding bool, changed, present []route) Phase {
	var ph Phase
	watchCtx, stopWatch := context.WithCancel(ctx)
	gatewayWrites := h.countGatewayWrites(watchCtx, ns)

	// Adding is the window profiled: the creates, and for gatefold the folds.
	var prof *window
	if adding {
		prof = h.profile("contention-" + s.name())
	}
	start := time.Now()
	var mu sync.Mutex
	record := func(name string, t tally, err error) {
		mu.Lock()
		defer mu.Unlock()
		ph.WriterRequests += t.writes
		ph.WriterConflicts += t.conflicts
		ph.WriterTimeouts += t.timeouts
		if err == nil {
			return
		}
		if ph.WriterErrors++; len(ph.Errors) < 5 {
			ph.Errors = append(ph.Errors, fmt.Sprintf("%s: %v", name, err))
		}
	}
	switch s := s.(type) {
	case gatewayStrategy:
		var t tally
		err := s.write(ctx, c, ns, p.Gateways, present, &t)
		record("writer", t, err)
	case routeStrategy:
		op := s.remove
		if adding {
			op = s.add
		}
		_ = partitioned(p.Writers, changed, func(r route) int { return r.index }, func(r route, w int) error {
			var t tally
			err := op(ctx, c, ns, r, w, &t)
			record(r.name(), t, err)
			return nil
		})
	}
	ph.WriteSeconds = time.Since(start).Seconds()
	ph.Converged = testenv.Poll(time.Until(start.Add(p.PhaseTimeout)), 100*time.Millisecond, func() error {
		missing, extra, err := h.compare(ctx, ns, s, present)
		if err == nil && missing == 0 && extra == 0 {
			return nil
		}
		ph.Missing, ph.Extra = missing, extra
		return errPending
	}) == nil
	end := time.Now()
	prof.end()
	ph.Seconds = end.Sub(start).Seconds()
	if ph.Converged {
		ph.Missing, ph.Extra = 0, 0
	}
	// Writes that land after convergence (statuses) belong to the phase too.
	time.Sleep(p.Settle)
	stopWatch()
	ph.GatewayWrites = <-gatewayWrites
	ph.Writes, _ = h.countWrites(start, time.Now())
	return ph
}

// compare counts routes in present that are missing, and listeners (or
// objects) there that are not in present or are there twice, as placement
// counts them.
func (h *harness) compare(ctx context.Context, ns string, s strategy, present []route) (int, int, error) {
	if o, ok := s.(objectStrategy); ok {
		names, err := o.names(ctx, h.observer, ns)
		if err != nil {
			return 0, 0, err
		}
		want := map[string]bool{}
		for _, r := range present {
			want[r.name()] = true
		}
		extra := 0
		for _, n := range names {
			if !want[n] {
				extra++
			}
		}
		return len(present) - (len(names) - extra), extra, nil
	}
	want := map[string]map[string]bool{}
	for _, r := range present {
		if want[r.gateway] == nil {
			want[r.gateway] = map[string]bool{}
		}
		want[r.gateway][r.hostname] = true
	}
	gws := &gwv1.GatewayList{}
	if err := h.observer.List(ctx, gws, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	missing, extra := placement(gws.Items, want)
	return missing, extra, nil
}

// placement compares the listeners on gws, but for their own listener
// "http", with want, the hostnames wanted by the Gateway they name: it
// counts those wanted and on none of them, and those there but not wanted
// or there twice. A listener may be on any Gateway of the pool of the
// Gateway it names, and only once in that pool.
func placement(gws []gwv1.Gateway, want map[string]map[string]bool) (missing, extra int) {
	seen := map[string]map[string]bool{}
	for i := range gws {
		gw := &gws[i]
		named := gw.Name
		if head, ok := rules.HeadOf(gw); ok {
			named = head.Name
		}
		if seen[named] == nil {
			seen[named] = map[string]bool{}
		}
		for _, l := range gw.Spec.Listeners {
			if l.Name == "http" {
				continue
			}
			host := string(ptr.Deref(l.Hostname, ""))
			if !want[named][host] || seen[named][host] {
				extra++
			}
			seen[named][host] = true
		}
	}
	for gw, hosts := range want {
		for host := range hosts {
			if !seen[gw][host] {
				missing++
			}
		}
	}
	return missing, extra
}

// countGatewayWrites counts the Gateways' resourceVersion changes in the
// namespace until ctx ends, and then sends the count: their updates, and the
// creates and deletes of a pool's siblings.
func (h *harness) countGatewayWrites(ctx context.Context, ns string) <-chan int {
	out := make(chan int, 1)
	n := 0
	done, err := h.watchGateways(ctx, ns, nil, func(t watch.EventType, _ *gwv1.Gateway) {
		if t == watch.Added || t == watch.Modified || t == watch.Deleted {
			n++
		}
	})
	if err != nil {
		out <- -1
		return out
	}
	go func() {
		<-done
		out <- n
	}()
	return out
}

// watchGateways lists the Gateways of namespace ns and hands them to
// initial (when not nil), then hands event every change of them until ctx
// ends, from one goroutine. A watch the API server closes is resumed from
// the last version seen, so none is missed. The channel closes once it
// stopped.
func (h *harness) watchGateways(ctx context.Context, ns string, initial func([]gwv1.Gateway), event func(watch.EventType, *gwv1.Gateway)) (<-chan struct{}, error) {
	list := &gwv1.GatewayList{}
	if err := h.observer.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	if initial != nil {
		initial(list.Items)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			w, err := h.observer.Watch(ctx, &gwv1.GatewayList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for e := range w.ResultChan() {
				if gw, ok := e.Object.(*gwv1.Gateway); ok {
					rv = gw.ResourceVersion
					event(e.Type, gw)
				}
			}
			w.Stop()
		}
	}()
	return done, nil
}

// partitioned runs f for every item with n workers, worker k taking the
// items whose key is k modulo n, and returns the first error.
func partitioned[T any](n int, items []T, key func(T) int, f func(T, int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, it := range items {
				if key(it)%n != w {
					continue
				}
				if err := f(it, w); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// parallel runs f for every item with n workers and returns the first error.
func parallel[T any](n int, items []T, f func(T) error) error {
	ch := make(chan T)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := f(it); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return first
}
