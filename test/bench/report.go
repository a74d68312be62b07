package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Report is everything one run measured; benchmarks.json holds it as is.
type Report struct {
	Date       string           `json:"date"`
	Command    string           `json:"command"`
	Quick      bool             `json:"quick"`
	Seconds    float64          `json:"seconds"`
	Params     Params           `json:"params"`
	Contention []StrategyResult `json:"contention"`
	Admission  AdmissionResult  `json:"admission"`
	Scale      ScaleResult      `json:"scale"`
	Failover   FailoverResult   `json:"failover"`
	GoBench    []GoBenchmark    `json:"goBenchmarks"`
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

var procs = regexp.MustCompile(`-\d+$`)

func (r *Report) markdown() string {
	var b strings.Builder
	p := r.Params
	fmt.Fprintf(&b, "Run on %s with\n\n```sh\n%s\n```\n\n", r.Date, r.Command)
	fmt.Fprintf(&b, "(%.0f s in all; the machine and its load are in the reading below. Ratios, not absolute times, are what carry over.)\n\n", r.Seconds)

	fmt.Fprintf(&b, "### Contention: %d routes, one HTTPS listener each, on %d Gateways, %d writers\n\n", p.Routes, p.Gateways, p.Writers)
	var base StrategyResult
	for _, s := range r.Contention {
		if s.Strategy == "update" {
			base = s
		}
	}
	b.WriteString("| strategy | time to all listeners | vs update | writer requests | gatefold writes | 409 conflicts | server timeouts | Gateway writes | vs update | correct | remove half: time | vs update | stale left | correct |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Contention {
		fmt.Fprintf(&b, "| %s | %.1f s | %s | %d | %d | %d | %d | %d | %s | %s | %.1f s | %s | %d | %s |\n",
			s.Strategy, s.Add.Seconds, ratio(s.Add.Seconds, base.Add.Seconds), s.Add.WriterRequests, s.Add.Writes.Gatefold,
			s.Add.Writes.Conflicts, s.Add.WriterTimeouts, s.Add.GatewayWrites, ratio(float64(s.Add.GatewayWrites), float64(base.Add.GatewayWrites)), yes(s.Add.Correct()),
			s.Remove.Seconds, ratio(s.Remove.Seconds, base.Remove.Seconds), s.Remove.Extra, yes(s.Remove.Correct()))
	}
	b.WriteString("\n| strategy | listeners per Gateway | Gateway size | managedFields size | writer errors |\n|---|---|---|---|---|\n")
	for _, s := range r.Contention {
		errs := "none"
		if all := append(s.Add.Errors, s.Remove.Errors...); len(all) > 0 {
			errs = fmt.Sprintf("%d or more, e.g. %s", len(all), all[0])
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f KiB | %.1f KiB | %s |\n", s.Strategy, s.ListenersPerGateway,
			float64(s.GatewayBytes)/1024, float64(s.ManagedFieldsBytes)/1024, errs)
	}

	a := r.Admission
	fmt.Fprintf(&b, "\n### Admission: %d sequential fragment creates without, then with, gatefold's webhooks\n\n", a.With.Requests)
	b.WriteString("| | p50 | p90 | p99 |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| without webhooks | %.1f ms | %.1f ms | %.1f ms |\n", a.Without.P50, a.Without.P90, a.Without.P99)
	fmt.Fprintf(&b, "| with webhooks | %.1f ms | %.1f ms | %.1f ms |\n", a.With.P50, a.With.P90, a.With.P99)
	fmt.Fprintf(&b, "| ratio | %s | %s | %s |\n", ratio(a.With.P50, a.Without.P50), ratio(a.With.P90, a.Without.P90), ratio(a.With.P99, a.Without.P99))

	b.WriteString("\n### Go benchmarks (`go test -bench`)\n\n| benchmark | time per op | vs the first of its group |\n|---|---|---|\n")
	first := map[string]float64{}
	for _, g := range r.GoBench {
		name := procs.ReplaceAllString(g.Name, "")
		group, _, _ := strings.Cut(name, "/")
		if _, ok := first[group]; !ok {
			first[group] = g.NsPerOp
		}
		fmt.Fprintf(&b, "| %s | %.3f ms | %s |\n", name, g.NsPerOp/1e6, ratio(g.NsPerOp, first[group]))
	}

	s := r.Scale
	fmt.Fprintf(&b, "\n### Scale: %d fragments on %d Gateways, a freshly started leader\n\n", s.Fragments, s.Gateways)
	b.WriteString("| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| creating the fragments (no gatefold running) | %.1f s |\n", s.CreateSeconds)
	fmt.Fprintf(&b, "| leader start → every listener folded and every fragment Accepted | %.1f s (converged: %s) |\n", s.ConvergeSeconds, yes(s.Converged))
	fmt.Fprintf(&b, "| peak RSS of the manager | %d MiB |\n", s.PeakRSSBytes>>20)
	fmt.Fprintf(&b, "| writes in the following %.0f s of steady state (goal 0) | %d audited (plus %d leader Lease renewals); %.0f Gateway applies sent |\n",
		s.SteadySeconds, s.SteadyWrites.Gatefold, s.SteadyWrites.LeaderLease, s.SteadyGatewayApplies)

	f := r.Failover
	fmt.Fprintf(&b, "\n### Failover: two replicas, the leader killed (SIGKILL), a fragment created at once\n\n")
	b.WriteString("| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| lease duration | %.0f s |\n", f.LeaseSeconds)
	fmt.Fprintf(&b, "| kill → the new fragment's listener on its Gateway | %.1f s (converged: %s) |\n", f.TakeoverSeconds, yes(f.Converged))
	return b.String()
}
