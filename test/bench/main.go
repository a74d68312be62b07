// Command bench measures gatefold on the real control plane and writes the
// results to docs/benchmarks.json and docs/benchmarks.md. `make bench` runs
// it; `make bench-quick` runs a reduced set in under two minutes.
//
// It compares, on one API server and one workload, ways of giving N routes
// one HTTPS listener each on G shared Gateways, gatefold's among them (and
// gatefold's on one Gateway heading a pool, which grows), with the physical
// limit (one apply per Gateway), the floor of any design with one object
// per route (N plain creates), the same fragments created with no webhook
// called and nothing folding them (crd-floor), and N upstream ListenerSets
// no controller folds (native); the admission overhead of
// gatefold's webhooks, one create at a time and W at once; how a leader
// converges many fragments at first install and after a warm restart; what
// it reads and writes in a steady state; how long a failover takes; and,
// with Traefik as the Gateway implementation, how long a fragment takes
// from its create to its first request served, beside its fold and beside
// Traefik's own reaction to a route; and, with Traefik, how long routes
// that name their fragment as parentRef on a pool take to be Accepted and
// served, with the writes per route, beside routes naming the generated
// listener and Traefik alone, and that gatefold then writes nothing.
// --only runs a part alone.
//
// A row that is not correct (a phase that did not converge, listeners
// missing or extra, writer errors) fails the run, quick or full, once its
// report is written.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gatefold/gatefold/internal/devenv"
)

// Params are the workload's sizes; flags set them.
type Params struct {
	Routes           int `json:"routes"`
	Gateways         int `json:"gateways"`
	Writers          int `json:"writers"`
	AdmissionCreates int `json:"admissionCreates"`
	ScaleFragments   int `json:"scaleFragments"`
	ScaleGateways    int `json:"scaleGateways"`
	// ScalePool makes the scale fragments all name one Gateway heading a
	// pool instead of ScaleGateways made by hand.
	ScalePool       bool          `json:"scalePool,omitempty"`
	DataplaneRoutes int           `json:"dataplaneRoutes"`
	RouteParents    int           `json:"routeParents"`
	SteadyState     time.Duration `json:"steadyState"`
	LeaseDuration   time.Duration `json:"leaseDuration"`
	PhaseTimeout    time.Duration `json:"phaseTimeout"`
	// Settle is how long writes are still counted to a phase after it
	// converged.
	Settle      time.Duration `json:"settle"`
	GoBenchTime string        `json:"goBenchTime"`
	// GatefoldArgs are added to every gatefold manager's flags;
	// GatefoldFlags are all the flags a manager gets besides its own
	// addresses and files.
	GatefoldArgs  []string `json:"gatefoldArgs,omitempty"`
	GatefoldFlags []string `json:"gatefoldFlags"`
}

// phases are the parts of a run, in the order they run; contention's
// strategies can also be run alone, as contention:NAME.
var phases = []string{"contention", "admission", "scale", "steady", "failover", "dataplane", "routes", "go"}

// selection is what --only asked for: phases, and contention strategies
// by name. Empty, it is everything.
type selection struct {
	phases     map[string]bool
	strategies map[string]bool
}

func parseOnly(only string, strategyNames []string) (selection, error) {
	sel := selection{phases: map[string]bool{}, strategies: map[string]bool{}}
	if only == "" {
		return sel, nil
	}
	for _, item := range strings.Split(only, ",") {
		phase, strategy, named := strings.Cut(strings.TrimSpace(item), ":")
		switch {
		case !slices.Contains(phases, phase):
			return sel, fmt.Errorf("--only: no phase %q (phases: %s)", phase, strings.Join(phases, ", "))
		case named && phase != "contention":
			return sel, fmt.Errorf("--only: %s has no parts to choose from, only contention has (contention:NAME)", phase)
		case named && !slices.Contains(strategyNames, strategy):
			return sel, fmt.Errorf("--only: no contention strategy %q (strategies: %s)", strategy, strings.Join(strategyNames, ", "))
		case named:
			sel.strategies[strategy] = true
		}
		sel.phases[phase] = true
	}
	return sel, nil
}

func (s selection) all() bool { return len(s.phases) == 0 }

// phase says whether the phase runs, in whole or in part.
func (s selection) phase(name string) bool { return s.all() || s.phases[name] }

// strategy says whether a contention strategy runs.
func (s selection) strategy(name string) bool {
	return s.phase("contention") && (len(s.strategies) == 0 || s.strategies[name])
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run() (err error) {
	var p Params
	var names, choices []string
	for _, s := range strategies(p) {
		names = append(names, s.name())
		choices = append(choices, "contention:"+s.name())
	}
	quick := flag.Bool("quick", false, "A reduced run for CI smoke use (under two minutes): small sizes, short steady state and lease")
	out := flag.String("out", "", "Folder to write benchmarks.json and benchmarks.md into (default docs, or bin/bench with --only, so that a partial run never replaces the published tables)")
	gatefold := flag.String("gatefold", "bin/gatefold", "The gatefold binary to run as the manager")
	only := flag.String("only", "", "Run only these, comma-separated: phases ("+strings.Join(phases, ", ")+") or contention strategies ("+strings.Join(choices, ", ")+"); steady and failover run on scale's fragments, so they run scale too")
	gatefoldArgs := flag.String("gatefold-args", "", "Flags added to every gatefold manager's, space-separated (e.g. \"--merger-workers=8\")")
	profileDir := flag.String("profile", "", "Folder to write CPU profiles into, of the API server and of every gatefold replica, for each timed phase (PHASE-apiserver.pprof, PHASE-gatefold-REPLICA.pprof); the report then shows the API server's top functions")
	flag.IntVar(&p.Routes, "routes", 1008, "Routes (N), one HTTPS listener each; 1008 fills 16 Gateways to the 64-listener cap beside one own listener each (gatefold-pool's pool grows to as many). Also the fragment creates of the admission throughput")
	flag.IntVar(&p.Gateways, "gateways", 16, "Shared Gateways (G) the routes are spread over (gatefold-pool starts from one, heading a pool)")
	flag.IntVar(&p.Writers, "writers", 32, "Concurrent writers (W), as route controller workers")
	flag.IntVar(&p.AdmissionCreates, "admission-creates", 200, "Sequential fragment creates timed with and without the webhooks")
	flag.IntVar(&p.ScaleFragments, "scale-fragments", 10000, "Fragments a leader converges at first install and after a warm restart; each wait of the scale phase may take 30 ms per fragment where that is longer than --phase-timeout")
	flag.IntVar(&p.ScaleGateways, "scale-gateways", 200, "Gateways those fragments are spread over")
	flag.BoolVar(&p.ScalePool, "scale-pool", false, "The scale fragments all name one Gateway heading a pool (gatefold.dev/pool), which grows to ⌈N/63⌉ Gateways, instead of --scale-gateways made by hand")
	flag.IntVar(&p.DataplaneRoutes, "dataplane-routes", 100, "Fragments, each with an HTTPRoute, timed from their creates to their first requests through Traefik (63 to a Gateway)")
	flag.IntVar(&p.RouteParents, "route-parents", 1000, "Routes by fragment parentRef on one Gateway heading a pool (63 to a Gateway), timed to Accepted and to their first requests through Traefik, beside as many by the generated listener name and as many on Traefik alone")
	flag.DurationVar(&p.SteadyState, "steady-state", 60*time.Second, "How long reads and writes are counted in the steady state")
	flag.DurationVar(&p.LeaseDuration, "lease-duration", 15*time.Second, "The leader Lease duration, gatefold's default")
	flag.DurationVar(&p.PhaseTimeout, "phase-timeout", 10*time.Minute, "How long a phase may take before it is reported as not converged")
	flag.DurationVar(&p.Settle, "settle", 2*time.Second, "How long after a phase converged its writes are still counted")
	flag.StringVar(&p.GoBenchTime, "go-benchtime", "2s", "-benchtime of the Go benchmarks")
	flag.Parse()
	if *quick {
		// The claims of the first install are backfilled within one collect
		// period: a short one keeps the run short.
		p = Params{Routes: 24, Gateways: 2, Writers: 4, AdmissionCreates: 20, ScaleFragments: 200, ScaleGateways: 4, DataplaneRoutes: 20, RouteParents: 8,
			SteadyState: 3 * time.Second, LeaseDuration: 3 * time.Second, PhaseTimeout: 30 * time.Second, Settle: 500 * time.Millisecond,
			GoBenchTime: "50ms", GatefoldArgs: []string{"--claim-collect-period=3s"}}
	}
	p.GatefoldArgs = append(p.GatefoldArgs, strings.Fields(*gatefoldArgs)...)
	p.GatefoldFlags = managerArgs(p)
	sel, err := parseOnly(*only, names)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = "docs"
		if !sel.all() {
			*out = filepath.Join("bin", "bench")
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	// The harness reports its own progress; the managers log to files.
	ctrl.SetLogger(logr.Discard())

	bin, err := filepath.Abs(*gatefold)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no gatefold binary at %s: run make build: %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "gatefold-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	started, load := time.Now(), loadAverage()
	progress("Starting the control plane")
	env, err := devenv.Start(devenv.Options{Webhooks: true, AuditLog: filepath.Join(dir, "audit.log"), AuditAll: true})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	h, err := newHarness(env, bin, dir, p)
	if err != nil {
		return err
	}
	defer h.stopManagers()
	if *profileDir != "" {
		if h.profiler, err = newProfiler(*profileDir, h.config("bench-profiler"), max(p.PhaseTimeout, p.SteadyState)); err != nil {
			return err
		}
	}
	// gatefold runs as installed: a request the API server refused it fails
	// the run before the report is written, and may say why a phase failed.
	defer func() {
		if err != nil {
			err = errors.Join(err, h.checkRefusals())
		}
	}()
	ctx := context.Background()

	report := &Report{Date: started.UTC().Format(time.RFC3339), Command: commandLine(), Params: p, Quick: *quick, Gatefold: gatefoldVersion(bin)}
	report.Load[0] = load
	if sel.phase("contention") {
		if report.Contention, err = h.contention(ctx, p, sel); err != nil {
			return fmt.Errorf("contention: %w", err)
		}
	}
	if sel.phase("admission") {
		a, err := h.admission(ctx, p)
		if err != nil {
			return fmt.Errorf("admission: %w", err)
		}
		report.Admission = &a
	}
	if sel.phase("scale") || sel.phase("steady") || sel.phase("failover") {
		if report.Scale, report.Steady, report.Failover, err = h.scale(ctx, p, sel); err != nil {
			return fmt.Errorf("scale: %w", err)
		}
	}
	if sel.phase("dataplane") {
		if report.Dataplane, err = h.dataplane(ctx, p); err != nil {
			return fmt.Errorf("data plane: %w", err)
		}
	}
	if sel.phase("routes") {
		if report.Routes, err = h.routes(ctx, p); err != nil {
			return fmt.Errorf("routes: %w", err)
		}
	}
	if sel.phase("go") {
		if report.GoBench, err = goBenchmarks(p.GoBenchTime, *quick); err != nil {
			return fmt.Errorf("go benchmarks: %w", err)
		}
	}
	if err := h.checkRefusals(); err != nil {
		return err
	}
	report.Seconds = time.Since(started).Seconds()
	report.Load[1] = loadAverage()
	report.Profiles = h.profiler.summarize()
	progress("Writing %s/benchmarks.json and %s/benchmarks.md (%.0fs in all)", *out, *out, report.Seconds)
	if err := report.write(*out); err != nil {
		return err
	}
	if fs := report.failures(); len(fs) > 0 {
		return fmt.Errorf("%s not correct (listed in %s too):\n  %s", plural(len(fs), "row"), filepath.Join(*out, "benchmarks.md"), strings.Join(fs, "\n  "))
	}
	return nil
}

// gatefoldVersion is what the binary says of itself.
func gatefoldVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "gatefold (version unknown: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func commandLine() string {
	cmd := "go run ./test/bench"
	for _, a := range os.Args[1:] {
		cmd += " " + a
	}
	return cmd
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
