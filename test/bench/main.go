// Command bench measures gatefold on the real control plane and writes the
// results to docs/benchmarks.json and docs/benchmarks.md. `make bench` runs
// it; `make bench-quick` runs a reduced set in under a minute.
//
// It compares, on one API server and one workload, three ways of giving N
// routes one HTTPS listener each on G shared Gateways; the admission overhead
// of gatefold's webhooks; how a fresh leader converges many fragments; and
// how long a failover takes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gatefold/gatefold/internal/devenv"
)

// Params are the workload's sizes; flags set them.
type Params struct {
	Routes           int           `json:"routes"`
	Gateways         int           `json:"gateways"`
	Writers          int           `json:"writers"`
	AdmissionCreates int           `json:"admissionCreates"`
	ScaleFragments   int           `json:"scaleFragments"`
	ScaleGateways    int           `json:"scaleGateways"`
	SteadyState      time.Duration `json:"steadyState"`
	LeaseDuration    time.Duration `json:"leaseDuration"`
	PhaseTimeout     time.Duration `json:"phaseTimeout"`
	GoBenchTime      string        `json:"goBenchTime"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run() (err error) {
	var p Params
	quick := flag.Bool("quick", false, "A reduced run for CI smoke use (under a minute): small sizes, short steady state and lease")
	out := flag.String("out", "docs", "Folder to write benchmarks.json and benchmarks.md into")
	gatefold := flag.String("gatefold", "bin/gatefold", "The gatefold binary to run as the manager")
	flag.IntVar(&p.Routes, "routes", 1008, "Routes (N), one HTTPS listener each; 1008 fills 16 Gateways to the 64-listener cap beside one own listener each")
	flag.IntVar(&p.Gateways, "gateways", 16, "Shared Gateways (G) the routes are spread over")
	flag.IntVar(&p.Writers, "writers", 32, "Concurrent writers (W), as route controller workers")
	flag.IntVar(&p.AdmissionCreates, "admission-creates", 200, "Fragment creates timed with and without the webhooks")
	flag.IntVar(&p.ScaleFragments, "scale-fragments", 10000, "Fragments a fresh leader converges")
	flag.IntVar(&p.ScaleGateways, "scale-gateways", 200, "Gateways those fragments are spread over")
	flag.DurationVar(&p.SteadyState, "steady-state", 60*time.Second, "How long writes are counted after convergence")
	flag.DurationVar(&p.LeaseDuration, "lease-duration", 15*time.Second, "The leader Lease duration, gatefold's default")
	flag.DurationVar(&p.PhaseTimeout, "phase-timeout", 5*time.Minute, "How long a phase may take before it is reported as not converged")
	flag.StringVar(&p.GoBenchTime, "go-benchtime", "2s", "-benchtime of the Go benchmarks")
	flag.Parse()
	if *quick {
		p = Params{Routes: 24, Gateways: 2, Writers: 4, AdmissionCreates: 20, ScaleFragments: 200, ScaleGateways: 4,
			SteadyState: 3 * time.Second, LeaseDuration: 3 * time.Second, PhaseTimeout: 30 * time.Second, GoBenchTime: "50ms"}
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

	started := time.Now()
	progress("Starting the control plane")
	env, err := devenv.Start(devenv.Options{Webhooks: true, AuditLog: filepath.Join(dir, "audit.log")})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	h, err := newHarness(env, bin, dir)
	if err != nil {
		return err
	}
	defer h.stopManagers()
	// gatefold runs as installed: a request the API server refused it fails
	// the run before the report is written, and may say why a phase failed.
	defer func() {
		if err != nil {
			err = errors.Join(err, h.checkRefusals())
		}
	}()
	ctx := context.Background()

	report := &Report{Date: started.UTC().Format(time.RFC3339), Command: commandLine(), Params: p, Quick: *quick}
	if report.Contention, err = h.contention(ctx, p); err != nil {
		return fmt.Errorf("contention: %w", err)
	}
	if report.Admission, err = h.admission(ctx, p); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	if report.Scale, report.Failover, err = h.scaleAndFailover(ctx, p); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	if report.GoBench, err = goBenchmarks(p.GoBenchTime, *quick); err != nil {
		return fmt.Errorf("go benchmarks: %w", err)
	}
	if err := h.checkRefusals(); err != nil {
		return err
	}
	report.Seconds = time.Since(started).Seconds()
	progress("Writing %s/benchmarks.json and %s/benchmarks.md (%.0fs in all)", *out, *out, report.Seconds)
	return report.write(*out)
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
