package conformance

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/netns"
	"github.com/gatefold/gatefold/test/testenv"
)

// traefikClassName is the GatewayClass of the run with Traefik.
const traefikClassName = "gatefold-conformance-traefik"

// The ports of Traefik's entryPoints in the run: every listener of the
// suite's ListenerSet tests is on one of them
// (TestListenersHaveEntryPoints).
const (
	traefikHTTPPort  = 80
	traefikHTTPSPort = 443
)

// TestListenerSetConformanceTraefik runs the upstream suite's ListenerSet
// tests, unmodified, with Traefik (bin/traefik) as the implementation of
// their class, carrying the traffic: gatefold installed from
// config/self-signed folds the ListenerSets of Traefik's class, Traefik
// serves the Gateways on netns.GatewayAddress, ports 80 and 443, and upstream's
// echo server serves the suite's backend Pods. All of it runs in a network
// namespace of the test's own (netns.Enter), so nothing listens outside it.
//
// The tests of failsInTraefik run after the others, in a child process of
// this one (runExpectedFailures), on the same cluster: each must fail where
// Traefik's verdict shows, or pass, with gatefold's own entry the one the
// test wants.
func TestListenerSetConformanceTraefik(t *testing.T) {
	if spec := os.Getenv(expectedFailuresEnv); spec != "" {
		runChild(t, spec)
		return
	}
	traefik, err := dataplane.FindBinary("")
	if errors.Is(err, dataplane.ErrNoBinary) {
		netns.Skip(t, "Skipping the run with Traefik: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if !netns.Enter(t) {
		return
	}
	root, logDir := repoDirs(t, filepath.Join("conformance", "traefik"))
	// The API server appends to its audit log: an earlier run's writes
	// must not count as this run's evidence.
	auditLog := filepath.Join(root, traefikRun.auditLog)
	if err := os.Remove(auditLog); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	crds, err := devenv.GatewayAPICRDDir(root)
	if err != nil {
		t.Fatal(err)
	}
	// Traefik reads TLSRoutes at v1alpha2 (experimentalChannel), which only
	// the experimental channel serves.
	env, err := devenv.Start(devenv.Options{
		CRDDir: t.TempDir(), GatewayAPICRDDir: filepath.Join(filepath.Dir(crds), "experimental"),
		AdvertiseAddress: netns.APIServerAddress,
		// Who wrote which entry of a route's status: the evidence of
		// failsInTraefik.
		AuditLog:               auditLog,
		AuditRouteStatusBodies: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	echo := newEchoBackends(t, logDir)
	startStubs(t, env, logDir,
		&podStub{namespaces: suiteNamespaces, echo: echo},
		&endpointStub{namespaces: suiteNamespaces, echo: echo})
	version := startGatefold(t, env, logDir, dataplane.ControllerName)
	traefikVersion := startTraefik(t, env, traefik, logDir)
	t.Logf("gatefold %s, Traefik %s and the stubs log into %s", version, traefikVersion, logDir)
	r := traefikRun
	r.implementation = "Traefik " + traefikVersion + " carrying the traffic"
	runSuite(t, env, root, version, r)
}

// traefikRun judges gatefold with Traefik carrying the traffic.
var traefikRun = suiteRun{
	class:       traefikClassName,
	reportPath:  "docs/conformance/traefik-listenerset-report.yaml",
	resultsPath: "docs/conformance/traefik-listenerset-results.md",
	failingLog:  "bin/conformance/traefik/expected-failures.log",
	auditLog:    "bin/conformance/traefik/audit.log",
	dataPlane:   reachBackends,
	passing:     slices.Concat(passing, slices.Sorted(maps.Keys(passingWithTraffic))),
	failing:     failsInTraefik,
}

// startTraefik runs Traefik as the implementation of traefikClassName on
// netns.GatewayAddress, traefikHTTPPort and traefikHTTPSPort, with experimentalChannel, until the
// test ends, and returns its version.
func startTraefik(t *testing.T, env *devenv.Env, binary, logDir string) string {
	t.Helper()
	kubeconfig, err := env.WriteKubeconfig(filepath.Join(t.TempDir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := dataplane.Start(context.Background(), env.Client, dataplane.Options{
		Binary: binary, Kubeconfig: kubeconfig, Dir: logDir,
		HTTPPort: traefikHTTPPort, HTTPSPort: traefikHTTPSPort, Address: netns.GatewayAddress,
		ExperimentalChannel: true,
		GatewayClass:        traefikClassName,
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.StopDataPlaneAtCleanup(t, dp)
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatalf("traefik version: %v", err)
	}
	// Version:      v3.6.12
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, "Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("traefik version printed no version: %q", out)
	return ""
}

// reachBackends runs upstream's HTTPRouteSimpleSameNamespace, unmodified
// and outside the report: an HTTPRoute on the base Gateway same-namespace,
// accepted, whose requests to the Gateway's address must reach
// infra-backend-v1's Pods, which say their name and namespace. Without it
// a run could pass all of the ListenerSet tests that send no request with
// nothing served.
func reachBackends(t *testing.T, s *suite.ConformanceTestSuite) {
	tests.HTTPRouteSimpleSameNamespace.Run(t, s)
}
