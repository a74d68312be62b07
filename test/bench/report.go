package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/webhook"
)

// Report is everything one run measured; benchmarks.json holds it as is.
type Report struct {
	Date     string `json:"date"`
	Command  string `json:"command"`
	Quick    bool   `json:"quick"`
	Gatefold string `json:"gatefold"`
	// Load is the machine's load average (1, 5 and 15 minutes) when the
	// run started and when it ended: other work on it moves the numbers.
	Load       [2]string        `json:"load"`
	Seconds    float64          `json:"seconds"`
	Params     Params           `json:"params"`
	Contention []StrategyResult `json:"contention,omitempty"`
	Admission  *AdmissionResult `json:"admission,omitempty"`
	Scale      *ScaleResult     `json:"scale,omitempty"`
	Steady     *SteadyResult    `json:"steadyState,omitempty"`
	Failover   *FailoverResult  `json:"failover,omitempty"`
	Dataplane  *DataplaneResult `json:"dataplane,omitempty"`
	Routes     *RoutesResult    `json:"routes,omitempty"`
	GoBench    []GoBenchmark    `json:"goBenchmarks,omitempty"`
	// Profiles are the CPU profiles --profile took, by phase.
	Profiles []PhaseProfile `json:"profiles,omitempty"`
}

// The generated part of benchmarks.md lies between these markers; the rest
// of the file (the reading of the numbers) is written by people.
const (
	beginMarker = "<!-- results:begin (written by test/bench) -->"
	endMarker   = "<!-- results:end -->"
)

func (r *Report) write(dir string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "benchmarks.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	md := filepath.Join(dir, "benchmarks.md")
	doc, err := os.ReadFile(md)
	if errors.Is(err, os.ErrNotExist) {
		doc = []byte("# Benchmarks\n\n" + beginMarker + "\n" + endMarker + "\n")
	} else if err != nil {
		return err
	}
	before, rest, ok := strings.Cut(string(doc), beginMarker)
	_, after, ok2 := strings.Cut(rest, endMarker)
	if !ok || !ok2 {
		return fmt.Errorf("%s lacks the markers %q and %q", md, beginMarker, endMarker)
	}
	return os.WriteFile(md, []byte(before+beginMarker+"\n"+r.markdown()+endMarker+after), 0o644)
}

// failures names each row that is not correct: a phase that did not
// converge or settle within Params.PhaseTimeout, ended with listeners
// missing or extra, or whose writers got errors. A run with any still
// writes its report, then fails.
func (r *Report) failures() []string {
	var out []string
	fail := func(ok bool, row string) {
		if !ok {
			out = append(out, row)
		}
	}
	for _, s := range r.Contention {
		for _, ph := range []struct {
			name  string
			phase Phase
		}{{"adding every route", s.Add}, {"removing half", s.Remove}} {
			if ps := ph.phase.problems(); len(ps) > 0 {
				out = append(out, fmt.Sprintf("contention %s, %s: %s", s.Strategy, ph.name, strings.Join(ps, "; ")))
			}
		}
	}
	if a := r.Admission; a != nil {
		for _, t := range []struct {
			label string
			t     Throughput
		}{{"without webhooks", a.ThroughputWithout}, {"with webhooks", a.ThroughputWith}} {
			fail(t.t.Errors == 0, fmt.Sprintf("admission, %d creates by %d writers %s: %s, e.g. %s", t.t.Creates, t.t.Writers, t.label, plural(t.t.Errors, "error"), t.t.FirstErrorMsg))
		}
	}
	timeout := r.Params.PhaseTimeout
	if s := r.Scale; s != nil {
		st := r.Params.scaleTimeout()
		fail(s.Install.Converged, fmt.Sprintf("scale, first install: not every listener folded (on %d Gateways) and every fragment Accepted within %s", r.Params.scaleGatewaysWanted(), st))
		fail(s.Install.Settled, fmt.Sprintf("scale, first install: not every claim backfilled and the leader quiet within %s", st))
		fail(s.Restart.Converged, fmt.Sprintf("scale, warm restart: the new leader did not fold every Gateway within %s", st))
	}
	if f := r.Failover; f != nil {
		fail(f.Converged, fmt.Sprintf("failover: the fragment created after the kill was not on its Gateway within %s", timeout))
	}
	if d := r.Dataplane; d != nil && !d.Correct() {
		row := fmt.Sprintf("data plane: of %d, %d folded, %d served, %d served by Traefik alone", d.Fragments, d.Folded, d.Served, d.AloneServed)
		if len(d.Errors) > 0 {
			row += "; writer errors, e.g. " + d.Errors[0]
		}
		out = append(out, row)
	}
	if rt := r.Routes; rt != nil && !rt.Correct() {
		row := fmt.Sprintf("routes: of %d each way, served %d alone, %d by name, %d by fragment; Accepted %d, %d, %d; folded %d by name, %d by fragment; gatefold wrote %d in the steady state",
			rt.Routes, rt.Alone.FirstRequest.Requests, rt.ByName.FirstRequest.Requests, rt.ByFragment.FirstRequest.Requests,
			rt.Alone.Accepted.Requests, rt.ByName.Accepted.Requests, rt.ByFragment.Accepted.Requests, rt.ByName.Fold.Requests, rt.ByFragment.Fold.Requests,
			rt.SteadyWrites.Gatefold)
		if len(rt.Errors) > 0 {
			row += "; writer errors, e.g. " + rt.Errors[0]
		}
		out = append(out, row)
	}
	return out
}

// secs shows a time in seconds, to hundredths below ten seconds, where the
// references (the floor above all) are short.
func secs(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.2f s", s)
	}
	return fmt.Sprintf("%.1f s", s)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// met says whether a measure met its target: "yes", "**not met**", or "–"
// when it could not be judged (a reference it is measured against did not
// run).
// maxPoolCPURatio is issue 25's target for admission's CPU per request on a
// pool's head, the largest pool against the smallest.
const maxPoolCPURatio = 1.2

// poolCPU is BenchmarkValidateCreate's dry-run CPU per op on a pool's head
// of pool fragments.
type poolCPU struct {
	pool string
	cpu  float64
}

// poolAdmissionCPU returns the dry runs on the smallest and the largest
// pool's head, by their fragment count; false without two of them.
func poolAdmissionCPU(results []GoBenchmark) (small, large poolCPU, ok bool) {
	var runs []poolCPU
	for _, g := range results {
		name := procs.ReplaceAllString(g.Name, "")
		pool, found := strings.CutPrefix(name, "BenchmarkValidateCreate/pool=")
		if n, dry := strings.CutSuffix(pool, "/dry-run"); found && dry && g.CPUNsPerOp > 0 {
			runs = append(runs, poolCPU{pool: n, cpu: g.CPUNsPerOp})
		}
	}
	if len(runs) < 2 {
		return small, large, false
	}
	size := func(p poolCPU) int { n, _ := strconv.Atoi(p.pool); return n }
	small, large = runs[0], runs[0]
	for _, p := range runs[1:] {
		if size(p) < size(small) {
			small = p
		}
		if size(p) > size(large) {
			large = p
		}
	}
	return small, large, true
}

func met(ok, judged bool) string {
	switch {
	case !judged:
		return "–"
	case ok:
		return "yes"
	}
	return "**not met**"
}

// within says whether a is at most limit times b, and whether that could
// be judged (b was measured), as met shows it.
func within(a, b, limit float64) string { return met(a <= limit*b, b > 0) }

var procs = regexp.MustCompile(`-\d+$`)

func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run on %s with\n\n```sh\n%s\n```\n\n", r.Date, r.Command)
	fmt.Fprintf(&b, "(%.0f s in all; load average %s at the start, %s at the end; the machine is in the reading below. Ratios, not absolute times, are what carry over. ", r.Seconds, r.Load[0], r.Load[1])
	fmt.Fprintf(&b, "%s ran as `gatefold manager %s` besides its addresses.)\n", r.Gatefold, strings.Join(r.Params.GatefoldFlags, " "))
	if fs := r.failures(); len(fs) > 0 {
		fmt.Fprintf(&b, "\n**The run failed**: %s not correct, so it exited non-zero:\n\n", plural(len(fs), "row"))
		for _, f := range fs {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	if len(r.Contention) > 0 {
		r.contentionMarkdown(&b)
	}
	if r.Admission != nil {
		r.admissionMarkdown(&b)
	}
	if len(r.GoBench) > 0 {
		b.WriteString("\n### Go benchmarks (`go test -bench`)\n\n| benchmark | time per op | CPU per op | vs the first of its group |\n|---|---|---|---|\n")
		first := map[string]float64{}
		for _, g := range r.GoBench {
			name := procs.ReplaceAllString(g.Name, "")
			group, _, _ := strings.Cut(name, "/")
			if _, ok := first[group]; !ok {
				first[group] = g.NsPerOp
			}
			cpu := "–"
			if g.CPUNsPerOp > 0 {
				cpu = fmt.Sprintf("%.3f ms", g.CPUNsPerOp/1e6)
			}
			fmt.Fprintf(&b, "| %s | %.3f ms | %s | %s |\n", name, g.NsPerOp/1e6, cpu, ratio(g.NsPerOp, first[group]))
		}
		if small, large, ok := poolAdmissionCPU(r.GoBench); ok {
			fmt.Fprintf(&b, "\nAdmission CPU per request (dry run) on a pool's head of %s fragments against %s: %s (target ≤ %.1f×): %s\n",
				large.pool, small.pool, ratio(large.cpu, small.cpu), maxPoolCPURatio, met(large.cpu <= maxPoolCPURatio*small.cpu, true))
		}
	}
	if r.Scale != nil {
		r.scaleMarkdown(&b)
	}
	if st := r.Steady; st != nil {
		fmt.Fprintf(&b, "\n### Steady state: %d fragments, the restarted leader serving the webhooks, %.0f s\n\n", st.Fragments, st.Seconds)
		b.WriteString("| measure | value | target | met |\n|---|---|---|---|\n")
		fmt.Fprintf(&b, "| gatefold reads (get, list; not watch) | %d, %.2f per second%s | ≤ 1 per second | %s |\n", st.Reads.Gatefold, st.ReadsPerSecond, byResource(st.Reads.ByResource), met(st.ReadsPerSecond <= 1, true))
		fmt.Fprintf(&b, "| gatefold writes | %d%s | 0 | %s |\n", st.Writes.Gatefold, byResource(st.Writes.ByResource), met(st.Writes.Gatefold == 0, true))
		fmt.Fprintf(&b, "| leader Lease, apart | %d reads, %d writes | | |\n", st.Reads.LeaderLease, st.Writes.LeaderLease)
		fmt.Fprintf(&b, "| applies sent (the leader's metrics) | %.0f Gateway, %.0f status | | |\n", st.GatewayApplies, st.StatusApplies)
		fmt.Fprintf(&b, "| peak RSS of the leader | %d MiB | ≤ %d MiB | %s |\n", st.PeakRSSBytes>>20, maxRSS>>20, met(st.PeakRSSBytes <= maxRSS, true))
	}
	if f := r.Failover; f != nil {
		fmt.Fprintf(&b, "\n### Failover: two replicas, the leader killed (SIGKILL), a fragment created at once\n\n")
		b.WriteString("| measure | value |\n|---|---|\n")
		fmt.Fprintf(&b, "| lease duration | %.0f s |\n", f.LeaseSeconds)
		fmt.Fprintf(&b, "| kill → the new fragment's listener on its Gateway | %.1f s (converged: %s) |\n", f.TakeoverSeconds, yes(f.Converged))
	}
	if r.Dataplane != nil {
		r.dataplaneMarkdown(&b)
	}
	if r.Routes != nil {
		r.routesMarkdown(&b)
	}
	if len(r.Profiles) > 0 {
		r.profilesMarkdown(&b)
	}
	return b.String()
}

// profilesMarkdown shows, for each phase profiled, the API server's top
// functions by CPU used in them alone (flat).
func (r *Report) profilesMarkdown(b *strings.Builder) {
	b.WriteString("\n### CPU profiles (`--profile`): the API server's top functions by flat CPU, per phase\n\n")
	b.WriteString("Each phase's profiles cover it from its start (a replica's, from when it served profiles) to its end; the numbers above were measured with profiling on. ")
	b.WriteString("The files are in the folder `--profile` named; `go tool pprof -top FILE` shows more.\n")
	for _, ph := range r.Profiles {
		fmt.Fprintf(b, "\n**%s** (%s", ph.Phase, secs(ph.Seconds))
		if len(ph.Files) > 0 {
			b.WriteString("; " + strings.Join(slices.Sorted(maps.Values(ph.Files)), ", "))
		}
		b.WriteString(")")
		top := ph.APIServer
		if top == nil {
			b.WriteString(": no API server profile\n")
			continue
		}
		fmt.Fprintf(b, ": API server CPU %s in %s\n\n| flat | flat%% | cum | function |\n|---|---|---|---|\n", top.Samples, top.Duration)
		for _, f := range top.Functions {
			fmt.Fprintf(b, "| %s | %s | %s | `%s` |\n", f.Flat, f.FlatPercent, f.Cum, f.Function)
		}
	}
}

// byResource lists counts by resource, most first, in parentheses. The
// leader Lease is counted apart, so gatefold's other Leases are claims.
func byResource(counts map[string]int) string {
	if len(counts) == 0 {
		return ""
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", strings.Replace(k, "leases", "leases (claims)", 1), counts[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// Issue 25's targets for gatefold's contention rows, as ratios: its creates
// against crd-floor's, its folds against ideal (crd-floor + limit).
const (
	createsTarget = 2.5
	foldedTarget  = 1.5
)

func (r *Report) contentionMarkdown(b *strings.Builder) {
	p := r.Params
	byName := map[string]StrategyResult{}
	for _, s := range r.Contention {
		byName[s.Strategy] = s
	}
	lim, flo, crd, nat := byName["limit"], byName["floor"], byName[crdFloor{}.name()], byName[native{}.name()]
	pool, pooled := byName[fragments{pool: true}.name()]
	fmt.Fprintf(b, "\n### Contention: %d routes, one HTTPS listener each, on %d Gateways, %d writers\n\n", p.Routes, p.Gateways, p.Writers)
	b.WriteString("`limit`: one writer applies each Gateway's full list once (the physical limit). `floor`: the writers create one plain ConfigMap per route (the floor of any design with one object per route). ")
	fmt.Fprintf(b, "`crd-floor`: the writers create the same fragments as gatefold's rows in a namespace labelled `%s=%s`, so the API server calls no webhook, before gatefold runs, so nothing folds them (the API server's own cost of a fragment create). ", webhook.AdmissionLabel, webhook.AdmissionDisabled)
	b.WriteString("`native`: the writers create one upstream ListenerSet per route, its HTTPS listener naming the route's Gateway, and no controller folds them (what an implementation with native ListenerSet support pays for the objects). ")
	b.WriteString("`ideal` = crd-floor's writes returned + limit's all there: fragment creates without admission, then one write per Gateway. ")
	if pooled {
		fmt.Fprintf(b, "`%s`: the fragments all name one Gateway marked `%s: \"true\"` instead of %d made by hand, and the merger creates the Gateways of its pool as they fill (⌈%d / %d⌉ = %d). ",
			pool.Strategy, v1alpha1.PoolAnnotation, p.Gateways, p.Routes, poolRoom, poolGateways(p.Routes))
	}
	b.WriteString("\"Writes returned\": until the last writer's last write returned; \"all there\": until every listener was on its Gateway (for the rows of objects, until they all existed).\n\n")
	b.WriteString("| strategy | writers | writes returned | vs floor | vs crd-floor | all there | vs limit | Gateways | Gateway writes | per Gateway | 409 conflicts | server timeouts | writer requests | gatefold writes | correct |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Contention {
		a := s.Add
		there, vsLimit, gws, gw, perGW := secs(a.Seconds), ratio(a.Seconds, lim.Add.Seconds), fmt.Sprint(s.Gateways), fmt.Sprint(a.GatewayWrites), fmt.Sprintf("%.1f", s.perGateway(a))
		if objectRow(s.Strategy) {
			there, vsLimit, gws, gw, perGW = "–", "–", "–", "–", "–"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %s |\n",
			s.Strategy, s.Writers, secs(a.WriteSeconds), ratio(a.WriteSeconds, flo.Add.WriteSeconds), ratio(a.WriteSeconds, crd.Add.WriteSeconds), there, vsLimit, gws, gw, perGW,
			a.Writes.Conflicts, a.WriterTimeouts, a.WriterRequests, a.Writes.Gatefold, yes(a.Correct()))
	}
	ideal := 0.0
	if crd.Add.WriteSeconds > 0 && lim.Add.Seconds > 0 {
		ideal = crd.Add.WriteSeconds + lim.Add.Seconds
	}
	for _, f := range []fragments{{}, {pool: true}} {
		g, ok := byName[f.name()]
		if !ok {
			continue
		}
		a := g.Add
		fmt.Fprintf(b, "\n**%s against the limit and the floor** (targets from issue 25; Gateway writes and 409s from issue 11)\n\n", g.Strategy)
		fmt.Fprintf(b, "| measure | %s | reference | ratio | target | met |\n|---|---|---|---|---|---|\n", g.Strategy)
		fmt.Fprintf(b, "| %d fragment creates through admission, %d writers | %s | %s | %s | ≤ %.1f× | %s |\n", p.Routes, g.Writers, secs(a.WriteSeconds),
			reference("crd-floor", crd.Add.WriteSeconds), ratio(a.WriteSeconds, crd.Add.WriteSeconds), createsTarget, within(a.WriteSeconds, crd.Add.WriteSeconds, createsTarget))
		fmt.Fprintf(b, "| the same, against ConfigMap creates | | %s | %s | | |\n", reference("floor", flo.Add.WriteSeconds), ratio(a.WriteSeconds, flo.Add.WriteSeconds))
		fmt.Fprintf(b, "| the same, against native ListenerSet creates | | %s | %s | | |\n", reference("native", nat.Add.WriteSeconds), ratio(a.WriteSeconds, nat.Add.WriteSeconds))
		idealRef := "ideal: not run (needs crd-floor and limit)"
		if ideal > 0 {
			idealRef = fmt.Sprintf("ideal: %s + %s = %s", secs(crd.Add.WriteSeconds), secs(lim.Add.Seconds), secs(ideal))
		}
		fmt.Fprintf(b, "| every listener folded | %s | %s | %s | ≤ %.1f× | %s |\n", secs(a.Seconds), idealRef, ratio(a.Seconds, ideal), foldedTarget, within(a.Seconds, ideal, foldedTarget))
		fmt.Fprintf(b, "| the same, against the limit | | %s | %s | | |\n", reference("limit", lim.Add.Seconds), ratio(a.Seconds, lim.Add.Seconds))
		fmt.Fprintf(b, "| the same, against native ListenerSet creates | | %s | %s | | |\n", reference("native", nat.Add.WriteSeconds), ratio(a.Seconds, nat.Add.WriteSeconds))
		if f.pool {
			fmt.Fprintf(b, "| Gateways the pool ended with | %d | ⌈%d / %d⌉ = %d | | no more | %s |\n", g.Gateways, p.Routes, poolRoom, poolGateways(p.Routes), met(g.Gateways <= poolGateways(p.Routes), true))
		}
		fmt.Fprintf(b, "| Gateway writes per Gateway | %.1f | 1 | | ≤ 2 | %s |\n", g.perGateway(a), met(g.perGateway(a) <= 2, true))
		fmt.Fprintf(b, "| 409 conflicts | %d | | | 0 | %s |\n", a.Writes.Conflicts, met(a.Writes.Conflicts == 0, true))
	}

	b.WriteString("\nThen half the routes are removed:\n\n| strategy | writes returned | all gone | vs limit | Gateway writes | 409 conflicts | stale left | correct |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Contention {
		rm := s.Remove
		gone, vsLimit, gw := secs(rm.Seconds), ratio(rm.Seconds, lim.Remove.Seconds), fmt.Sprint(rm.GatewayWrites)
		if objectRow(s.Strategy) {
			gone, vsLimit, gw = "–", "–", "–"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d | %d | %s |\n", s.Strategy, secs(rm.WriteSeconds), gone, vsLimit, gw, rm.Writes.Conflicts, rm.Extra, yes(rm.Correct()))
	}

	b.WriteString("\n| strategy | listeners per Gateway | Gateway size | managedFields size | writer errors |\n|---|---|---|---|---|\n")
	for _, s := range r.Contention {
		errs := "none"
		if all := append(s.Add.Errors, s.Remove.Errors...); len(all) > 0 {
			errs = fmt.Sprintf("%d, e.g. %s", max(s.Add.WriterErrors+s.Remove.WriterErrors, len(all)), all[0])
		}
		if objectRow(s.Strategy) {
			fmt.Fprintf(b, "| %s | – | – | – | %s |\n", s.Strategy, errs)
			continue
		}
		fmt.Fprintf(b, "| %s | %.1f | %.1f KiB | %.1f KiB | %s |\n", s.Strategy, s.ListenersPerGateway,
			float64(s.GatewayBytes)/1024, float64(s.ManagedFieldsBytes)/1024, errs)
	}
}

// poolRoom is how many routes' listeners a Gateway of a pool holds: all
// but the head's own one.
const poolRoom = rules.MaxListeners - 1

// poolGateways is how many Gateways a pool needs for n routes.
func poolGateways(n int) int { return (n + poolRoom - 1) / poolRoom }

// perGateway is the phase's Gateway writes per Gateway the strategy ended
// with.
func (s StrategyResult) perGateway(ph Phase) float64 {
	if s.Gateways == 0 {
		return 0
	}
	return float64(ph.GatewayWrites) / float64(s.Gateways)
}

// reference names a reference row and its time, or says it did not run.
func reference(name string, seconds float64) string {
	if seconds == 0 {
		return name + ": not run"
	}
	return name + ": " + secs(seconds)
}

func (r *Report) admissionMarkdown(b *strings.Builder) {
	a := r.Admission
	fmt.Fprintf(b, "\n### Admission: fragment creates without, then with, gatefold's webhooks\n\n")
	b.WriteString("Without: in a namespace labelled `gatefold.dev/admission=disabled`, which the API server calls no webhook for. The manager runs in both.\n\n")
	fmt.Fprintf(b, "%d creates one at a time:\n\n", a.With.Requests)
	b.WriteString("| | p50 | p90 | p99 |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| without webhooks | %.1f ms | %.1f ms | %.1f ms |\n", a.Without.P50, a.Without.P90, a.Without.P99)
	fmt.Fprintf(b, "| with webhooks | %.1f ms | %.1f ms | %.1f ms |\n", a.With.P50, a.With.P90, a.With.P99)
	fmt.Fprintf(b, "| ratio | %s | %s | %s |\n", ratio(a.With.P50, a.Without.P50), ratio(a.With.P90, a.Without.P90), ratio(a.With.P99, a.Without.P99))
	fmt.Fprintf(b, "| target (issue 25) | | | ≤ %.1f×, met: %s |\n", p99Target, within(a.With.P99, a.Without.P99, p99Target))
	fmt.Fprintf(b, "\n%d creates by %d writers at once, over %d Gateways:\n\n", a.ThroughputWith.Creates, a.ThroughputWith.Writers, r.Params.Gateways)
	b.WriteString("| | time | creates per second | errors |\n|---|---|---|---|\n")
	for _, t := range []struct {
		label string
		t     Throughput
	}{{"without webhooks", a.ThroughputWithout}, {"with webhooks", a.ThroughputWith}} {
		errs := fmt.Sprint(t.t.Errors)
		if t.t.FirstErrorMsg != "" {
			errs += ", e.g. " + t.t.FirstErrorMsg
		}
		fmt.Fprintf(b, "| %s | %s | %.0f | %s |\n", t.label, secs(t.t.Seconds), t.t.PerSecond, errs)
	}
	fmt.Fprintf(b, "| ratio (with / without) | %s | %s | |\n", ratio(a.ThroughputWith.Seconds, a.ThroughputWithout.Seconds), ratio(a.ThroughputWith.PerSecond, a.ThroughputWithout.PerSecond))
}

// Issue 25's targets for admission and for the scale phases.
const (
	p99Target     = 1.5              // admission p99 with the webhooks, against without
	installTarget = 1.5              // first install, against the creates
	maxRSS        = int64(512) << 20 // peak RSS of a replica
	restartTarget = 10 * time.Second // warm restart
)

func (r *Report) scaleMarkdown(b *strings.Builder) {
	s := r.Scale
	in, re := s.Install, s.Restart
	if s.Pool {
		fmt.Fprintf(b, "\n### Scale: %d fragments on one Gateway heading a pool, which ended with %d Gateways\n\n", s.Fragments, s.Gateways)
	} else {
		fmt.Fprintf(b, "\n### Scale: %d fragments on %d Gateways\n\n", s.Fragments, s.Gateways)
	}
	b.WriteString("First install: the fragments created while gatefold is stopped (no status, no claim), then a leader started, serving the webhooks. Targets from issue 25.\n\n")
	b.WriteString("| measure | value | target | met |\n|---|---|---|---|\n")
	if s.Pool {
		fmt.Fprintf(b, "| Gateways the pool ended with | %d | ⌈%d / %d⌉ = %d, no more | %s |\n", s.Gateways, s.Fragments, poolRoom, poolGateways(s.Fragments), met(s.Gateways <= poolGateways(s.Fragments), true))
	}
	fmt.Fprintf(b, "| creating the fragments and Gateways (gatefold stopped) | %.1f s | | |\n", in.CreateSeconds)
	fmt.Fprintf(b, "| leader start → every listener folded and every fragment Accepted | %s (converged: %s) | | |\n", secs(in.ConvergeSeconds), yes(in.Converged))
	fmt.Fprintf(b, "| that, as a ratio of the creates | %s | ≤ %.1f× | %s |\n", ratio(in.ConvergeSeconds, in.CreateSeconds), installTarget, met(in.Converged && in.ConvergeSeconds <= installTarget*in.CreateSeconds, in.CreateSeconds > 0))
	fmt.Fprintf(b, "| gatefold writes until then | %d%s | | |\n", in.ConvergeWrites.Gatefold, byResource(in.ConvergeWrites.ByResource))
	fmt.Fprintf(b, "| leader start → every claim backfilled, then nothing sent for %.0f s | %.1f s (settled: %s) | | |\n", quiet.Seconds(), in.SettleSeconds, yes(in.Settled))
	fmt.Fprintf(b, "| gatefold writes until then | %d%s | | |\n", in.SettleWrites.Gatefold, byResource(in.SettleWrites.ByResource))
	fmt.Fprintf(b, "| peak RSS of the leader | %d MiB | ≤ %d MiB | %s |\n", in.PeakRSSBytes>>20, maxRSS>>20, met(in.PeakRSSBytes <= maxRSS, true))
	b.WriteString("\nWarm restart: that leader stopped, a new one started where every status is current. Converged: its `gatefold_merger_folds_total` shows it folded every Gateway once.\n\n")
	b.WriteString("| measure | value | target | met |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| leader start → converged | %s (converged: %s) | ≤ %.0f s | %s |\n", secs(re.ConvergeSeconds), yes(re.Converged), restartTarget.Seconds(), met(re.Converged && re.ConvergeSeconds <= restartTarget.Seconds(), true))
	fmt.Fprintf(b, "| gatefold writes until %s after | %d%s | 0 | %s |\n", r.Params.Settle, re.Writes.Gatefold, byResource(re.Writes.ByResource), met(re.Writes.Gatefold == 0, true))
	fmt.Fprintf(b, "| applies sent (its metrics) | %.0f Gateway, %.0f status | 0 | %s |\n", re.GatewayApplies, re.StatusApplies, met(re.GatewayApplies+re.StatusApplies == 0, true))
}

// plural is "1 noun" or "N nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// millis shows a time given in milliseconds, in seconds from one second.
func millis(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.2f s", ms/1000)
}

func (r *Report) dataplaneMarkdown(b *strings.Builder) {
	d := r.Dataplane
	fmt.Fprintf(b, "\n### Data plane: fragment create to first request through Traefik\n\n")
	fmt.Fprintf(b, "%d fragments, one HTTP listener each with a hostname of its own, on %s of class `traefik`, served by Traefik %s on loopback. ", d.Fragments, plural(d.Gateways, "Gateway"), d.Traefik)
	fmt.Fprintf(b, "%d writers create each fragment, then its HTTPRoute to an echo backend, attached by the listener name `v1alpha1.ListenerName` gives (no wait for the fragment's status), as a route controller does; ", d.Writers)
	fmt.Fprintf(b, "each hostname is requested every %.0f ms until the backend answers for it. Fold and first request are timed from the fragment's create returning. ", d.ProbeMillis)
	b.WriteString("Traefik alone: as many HTTPRoutes, each with a hostname of its own, created by the same writers on a listener already on the Gateway, timed from their creates to their first answers: Traefik's own reaction to a route, the floor of the first request. ")
	b.WriteString("Run it alone with `go run ./test/bench --only dataplane` (after `make traefik`; `--dataplane-routes` sets the count).\n\n")
	b.WriteString("| measure | samples | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, row := range []struct {
		label string
		l     Latency
		n     int
	}{
		{"fold: create → listener on the Gateway's spec", d.Fold, d.Folded},
		{"first request: create → first answer through Traefik", d.FirstRequest, d.Served},
		{"Traefik alone: route create → first answer", d.TraefikAlone, d.AloneServed},
	} {
		fmt.Fprintf(b, "| %s | %d of %d | %s | %s | %s | %s |\n", row.label, row.n, d.Fragments, millis(row.l.P50), millis(row.l.P90), millis(row.l.P99), millis(row.l.Max))
	}
	for _, row := range []struct {
		label string
		by    Latency
	}{{"first request / fold", d.Fold}, {"first request / Traefik alone", d.TraefikAlone}} {
		f := d.FirstRequest
		fmt.Fprintf(b, "| %s | | %s | %s | %s | %s |\n", row.label, ratio(f.P50, row.by.P50), ratio(f.P90, row.by.P90), ratio(f.P99, row.by.P99), ratio(f.Max, row.by.Max))
	}
	errs := "none"
	if len(d.Errors) > 0 {
		errs = fmt.Sprintf("%d or more, e.g. %s", len(d.Errors), d.Errors[0])
	}
	traefik := sum(d.TraefikWrites)
	fmt.Fprintf(b, "\nGateway spec writes until the last hostname was served: %d (%.1f per Gateway). Writes from the first create until %s after the last answer: gatefold %d%s; Traefik %d%s. Writer errors: %s; correct: %s.\n",
		d.GatewaySpecWrites, float64(d.GatewaySpecWrites)/float64(max(d.Gateways, 1)), r.Params.Settle, d.Writes.Gatefold, byResource(d.Writes.ByResource),
		traefik, byResource(d.TraefikWrites), errs, yes(d.Correct()))
}

func (r *Report) routesMarkdown(b *strings.Builder) {
	rt := r.Routes
	n := rt.Routes
	fmt.Fprintf(b, "\n### Routes by fragment parentRef: %d routes on a pool, through Traefik\n\n", n)
	fmt.Fprintf(b, "Three ways of serving %d HTTPRoutes, each with a hostname of its own, to an echo backend, one way after the other (the routes of the way before deleted), served by Traefik %s on loopback, created by %d writers; ", n, rt.Traefik, rt.Writers)
	fmt.Fprintf(b, "each hostname is requested every %.0f ms until the backend answers for it. ", rt.ProbeMillis)
	fmt.Fprintf(b, "**By fragment**: each route's fragment (one HTTP listener) names one Gateway marked `gatefold.dev/pool: \"true\"`, and the route, created right after it with no wait, names the fragment: `parentRefs: [{group: gatefold.dev, kind: ListenerFragment, name, sectionName: http}]`; gatefold derives a route per landed listener and writes the route's status (%s at the end). ", plural(rt.ByFragment.Gateways, "Gateway"))
	fmt.Fprintf(b, "**By generated name**: the data-plane row's way, the fragments on %s made by hand, each route naming its Gateway and the listener name `v1alpha1.ListenerName` gives. ", plural(rt.ByName.Gateways, "Gateway"))
	b.WriteString("**Traefik alone**: routes on a listener already on a Gateway, the floor. ")
	b.WriteString("Times run from the create returning (the fragment's, where there is one); Accepted is the route's own `status.parents` entry for its parentRef (gatefold's for the fragment way, Traefik's for the others). ")
	b.WriteString("Run it alone with `go run ./test/bench --only routes` (after `make traefik`; `--route-parents` sets the count).\n\n")
	b.WriteString("| measure | way | samples | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|\n")
	row := func(label, way string, l Latency) {
		fmt.Fprintf(b, "| %s | %s | %d of %d | %s | %s | %s | %s |\n", label, way, l.Requests, n, millis(l.P50), millis(l.P90), millis(l.P99), millis(l.Max))
	}
	ratios := func(label string, a, by Latency) {
		fmt.Fprintf(b, "| %s | | | %s | %s | %s | %s |\n", label, ratio(a.P50, by.P50), ratio(a.P90, by.P90), ratio(a.P99, by.P99), ratio(a.Max, by.Max))
	}
	row("create → listener on a Gateway's spec", "by fragment", rt.ByFragment.Fold)
	row("", "by generated name", rt.ByName.Fold)
	row("create → route Accepted", "by fragment", rt.ByFragment.Accepted)
	row("", "by generated name", rt.ByName.Accepted)
	row("", "Traefik alone", rt.Alone.Accepted)
	row("create → first answer through Traefik", "by fragment", rt.ByFragment.FirstRequest)
	row("", "by generated name", rt.ByName.FirstRequest)
	row("", "Traefik alone", rt.Alone.FirstRequest)
	ratios("first answer, by fragment / Traefik alone", rt.ByFragment.FirstRequest, rt.Alone.FirstRequest)
	ratios("first answer, by fragment / by generated name", rt.ByFragment.FirstRequest, rt.ByName.FirstRequest)
	ratios("Accepted, by fragment / Traefik alone", rt.ByFragment.Accepted, rt.Alone.Accepted)
	ratios("Accepted, by fragment / by generated name", rt.ByFragment.Accepted, rt.ByName.Accepted)

	fmt.Fprintf(b, "\nWrites from the first create until gatefold sent nothing for %s after the last route was served and Accepted, per route (the least for the fragment way: 1 derived route create and 1 route status write by gatefold per route):\n\n", quiet)
	b.WriteString("| way | all served and Accepted | gatefold writes | per route | Traefik writes | per route |\n|---|---|---|---|---|---|\n")
	for _, w := range []struct {
		label string
		w     RouteWay
	}{{"by fragment", rt.ByFragment}, {"by generated name", rt.ByName}, {"Traefik alone", rt.Alone}} {
		traefik := sum(w.w.TraefikWrites)
		fmt.Fprintf(b, "| %s | %s | %d%s | %.2f | %d%s | %.2f |\n", w.label, secs(w.w.Seconds), w.w.Writes.Gatefold, byResource(w.w.Writes.ByResource),
			float64(w.w.Writes.Gatefold)/float64(n), traefik, byResource(w.w.TraefikWrites), float64(traefik)/float64(n))
	}
	errs := "none"
	if len(rt.Errors) > 0 {
		errs = fmt.Sprintf("%d or more, e.g. %s", len(rt.Errors), rt.Errors[0])
	}
	fmt.Fprintf(b, "\nSteady state, the %.0f s after that: gatefold writes %d%s (target 0); Traefik %d%s. Writer errors: %s; correct: %s.\n",
		rt.SteadySeconds, rt.SteadyWrites.Gatefold, byResource(rt.SteadyWrites.ByResource), sum(rt.SteadyTraefikWrites), byResource(rt.SteadyTraefikWrites), errs, yes(rt.Correct()))
}
