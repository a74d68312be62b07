package conformance

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1alpha3 "sigs.k8s.io/gateway-api/apis/v1alpha3"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/gatefold/gatefold/internal/devenv"
)

// The suite's tests for ListenerSet that attach routes to a ListenerSet and
// send requests through the Gateway: the stub serves no traffic and writes
// no route status, and gatefold does not translate a route's ListenerSet
// parentRef (docs/conformance/README.md says what each would need).
var skipped = map[string]string{
	"ListenerSetAllowedRoutesNamespaces":          "HTTPRoutes attached to ListenerSets: route status and requests",
	"ListenerSetDualParentRefIndependence":        "an HTTPRoute with Gateway and ListenerSet parentRefs: route status and requests",
	"ListenerSetGatewayParentSectionNameNotFound": "HTTPRoutes by ListenerSet and by Gateway sectionName: route status and requests",
	"ListenerSetHTTPRouting":                      "HTTPRoutes attached to ListenerSets and the Gateway: route status, attachedRoutes and requests",
	"ListenerSetRouteStatusScopedToParentRef":     "HTTPRoutes' status.parents per parentRef and attachedRoutes",
}

// supportedFeatures are what gatefold and the stub together claim for the
// ListenerSet tests: ListenerSet from gatefold, the rest from the stub.
var supportedFeatures = []features.FeatureName{
	features.SupportGateway,
	features.SupportListenerSet,
	features.SupportReferenceGrant,
	features.SupportHTTPRoute,
	features.SupportTLSRoute,
}

// The suite's base manifests deploy their backends into these namespaces.
var suiteNamespaces = map[string]bool{
	suite.InfrastructureNamespace: true,
	suite.AppBackendNamespace:     true,
	suite.WebBackendNamespace:     true,
}

const (
	// reportPath is upstream's report of the run, per conformance profile.
	reportPath = "docs/conformance/gatefold-listenerset-report.yaml"
	// resultsPath is the result of each test of the run.
	resultsPath = "docs/conformance/gatefold-listenerset-results.md"
)

// TestListenerSetConformance runs the upstream suite's ListenerSet tests,
// unmodified, on a real control plane with gatefold installed from
// config/self-signed and the stub Gateway implementation.
func TestListenerSetConformance(t *testing.T) {
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(root, "bin", "conformance")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// gatefold's CRDs come from the overlay, as a user installs them.
	env, err := devenv.Start(devenv.Options{CRDDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	startStubs(t, env, logDir)
	version := startGatefold(t, env, root, logDir)
	t.Logf("gatefold %s and the stubs log into %s", version, logDir)
	runSuite(t, env, root, version)
}

// startStubs runs the stub Gateway implementation and Pod readiness in this
// process until the test ends, logging into logDir/stubs.log.
func startStubs(t *testing.T, env *devenv.Env, logDir string) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(logDir, "stubs.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := zap.New(zap.WriteTo(logFile), zap.Level(zapcore.InfoLevel), func(o *zap.Options) {
		o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder // to line writes up with the suite's log
	})
	ctrl.SetLogger(log)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 suiteScheme(),
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	gateways := &gatewayStub{Client: mgr.GetClient()}
	pods := &podStub{Client: mgr.GetClient(), namespaces: suiteNamespaces}
	if err := gateways.setup(mgr); err != nil {
		t.Fatal(err)
	}
	if err := pods.setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("The stubs' manager: %v", err)
		}
		logFile.Close()
	})
	if err := createStubClass(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
}

// suiteScheme knows what the suite and the stubs read and write.
func suiteScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		gwv1.Install,
		gwv1beta1.Install,
		gwv1alpha2.Install,
		gwv1alpha3.Install,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building the scheme: %v", err))
		}
	}
	return s
}

// timeouts are upstream's defaults, which allow minutes for a cloud load
// balancer, capped at 30 s: the stub reports a Gateway within milliseconds
// and gatefold folds within a second, and a regression then fails the eight
// tests, one after another, in minutes rather than half an hour.
func timeouts() config.TimeoutConfig {
	tc := config.DefaultTimeoutConfig()
	for _, d := range []*time.Duration{
		&tc.GWCMustBeAccepted, &tc.NamespacesMustBeReady, &tc.GatewayMustHaveAddress, &tc.GatewayMustHaveCondition,
		&tc.GatewayStatusMustHaveListeners, &tc.GatewayListenersMustHaveConditions,
		&tc.ListenerSetMustHaveCondition, &tc.ListenerSetListenersMustHaveConditions,
	} {
		*d = min(*d, 30*time.Second)
	}
	return tc
}

// outcome is one test's result in the run.
type outcome struct {
	name, description, result string
}

// runSuite runs the suite's ListenerSet tests as the administrator, a
// user of the cluster, and writes upstream's report and a table of each
// test's result into docs/conformance.
func runSuite(t *testing.T, env *devenv.Env, root, version string) {
	var lsTests []suite.ConformanceTest
	for _, ct := range tests.ConformanceTests {
		if strings.HasPrefix(ct.ShortName, "ListenerSet") {
			lsTests = append(lsTests, ct)
		}
	}
	if len(lsTests) != 13 {
		t.Fatalf("The suite has %d ListenerSet tests, want the 13 of v1.6.3", len(lsTests))
	}
	var skipTests []string
	for name := range skipped {
		if !hasTest(lsTests, name) {
			t.Fatalf("Skipped test %s is not among the suite's ListenerSet tests", name)
		}
		skipTests = append(skipTests, name)
	}

	scheme := suiteScheme()
	cfg := rest.CopyConfig(env.Config) // the suite sets its user agent per test
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	outcomes := map[string]outcome{}
	cSuite, err := suite.NewConformanceTestSuite(suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     stubClassName,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			// One at a time: each test's readiness check waits for every
			// Gateway in the namespace, so in parallel the tests leave it
			// together, just as gatefold folds another test's Gateway, and
			// GatewayMustHaveCondition, which fails at once on a condition
			// older than the Gateway's generation, can read that Gateway
			// between gatefold's write and the implementation's status
			// (docs/conformance/README.md).
			DisableParallelTests: true,
			TimeoutConfig:        timeouts(),
			SupportedFeatures:    supportedFeatures,
			SkipTests:            skipTests,
			Mode:                 "default",
			ConformanceProfiles:  []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayTLSConformanceProfileName},
			Implementation: confv1.Implementation{
				Organization: "gatefold",
				Project:      "gatefold",
				URL:          "https://github.com/gatefold/gatefold",
				Version:      version,
				Contact:      []string{"https://github.com/gatefold/gatefold/issues"},
			},
		},
		Client:        c,
		ClientOptions: client.Options{Scheme: scheme},
		Clientset:     cs,
		RestConfig:    cfg,
		ManifestFS:    []fs.FS{&conformance.Manifests},
		Hook: func(st *testing.T, ct suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
			result := "pass"
			switch {
			case st.Failed():
				result = "FAIL"
			case st.Skipped():
				result = "skip"
			}
			mu.Lock()
			outcomes[ct.ShortName] = outcome{name: ct.ShortName, description: ct.Description, result: result}
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	// The suite reports only once Run's clean-up has marked it stopped:
	// report in a clean-up registered before Run's, which runs after it,
	// as upstream's RunConformanceWithOptions does.
	t.Cleanup(func() {
		report, err := cSuite.Report()
		if err != nil {
			t.Errorf("Reporting: %v", err)
			return
		}
		writeReport(t, root, report)
		mu.Lock()
		defer mu.Unlock()
		writeResults(t, root, version, lsTests, outcomes)
	})
	cSuite.Setup(t, lsTests)
	if err := cSuite.Run(t, lsTests); err != nil {
		t.Fatal(err)
	}
}

func hasTest(ts []suite.ConformanceTest, name string) bool {
	for _, ct := range ts {
		if ct.ShortName == name {
			return true
		}
	}
	return false
}

// writeReport writes upstream's report, which counts results per profile.
func writeReport(t *testing.T, root string, report *confv1.ConformanceReport) {
	b, err := yaml.Marshal(report)
	if err != nil {
		t.Errorf("Encoding the report: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(root, reportPath), b, 0o644); err != nil {
		t.Errorf("Writing the report: %v", err)
	}
}

// writeResults prints and writes a table of every ListenerSet test's
// result, which upstream's report only counts.
func writeResults(t *testing.T, root, version string, lsTests []suite.ConformanceTest, outcomes map[string]outcome) {
	var b strings.Builder
	b.WriteString("<!-- Written by `make conformance` (test/conformance); do not edit. -->\n")
	b.WriteString("# gatefold: Gateway API v1.6.3 ListenerSet conformance, per test\n\n")
	fmt.Fprintf(&b, "gatefold %s, installed from config/%s; see [README.md](README.md).\n\n", version, overlay)
	b.WriteString("| Test | Result | What it checks |\n|---|---|---|\n")
	counts := map[string]int{}
	for _, ct := range lsTests {
		o, ok := outcomes[ct.ShortName]
		if !ok {
			o = outcome{name: ct.ShortName, description: ct.Description, result: "not run"}
		}
		desc := o.description
		if why, ok := skipped[ct.ShortName]; ok {
			desc += " (skipped: needs " + why + ")"
		}
		counts[o.result]++
		fmt.Fprintf(&b, "| %s | %s | %s |\n", o.name, o.result, desc)
	}
	fmt.Fprintf(&b, "\n%d passed, %d failed, %d skipped", counts["pass"], counts["FAIL"], counts["skip"])
	if n := counts["not run"]; n > 0 {
		fmt.Fprintf(&b, ", %d not run", n)
	}
	b.WriteString(".\n")
	t.Logf("ListenerSet conformance:\n%s", b.String())
	if err := os.WriteFile(filepath.Join(root, resultsPath), []byte(b.String()), 0o644); err != nil {
		t.Errorf("Writing the results: %v", err)
	}
}

// gatefoldVersion is the version `gatefold version` prints, with the
// commit when the version is only "dev".
func gatefoldVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("gatefold version: %v", err)
	}
	// gatefold <version> (commit <commit>, <go>, <platform>)
	var version, commit string
	if _, err := fmt.Sscanf(string(out), "gatefold %s (commit %s", &version, &commit); err != nil {
		t.Fatalf("Reading the version in %q: %v", out, err)
	}
	commit = strings.TrimSuffix(commit, ",")
	if version == "dev" && commit != "unknown" {
		version += "+" + commit
	}
	return version
}
