package conformance

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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

// passing are the suite's ListenerSet tests that both runs require to run
// and pass.
var passing = []string{
	"ListenerSetAllowedNamespaceNone",
	"ListenerSetAllowedNamespaceSame",
	"ListenerSetAllowedNamespaceSelector",
	"ListenerSetAllowedRoutesSupportedKinds",
	"ListenerSetDefaultNotAllowed",
	"ListenerSetHostnameConflict",
	"ListenerSetProtocolConflict",
	"ListenerSetReferenceGrant",
}

// passingWithTraffic are the suite's ListenerSet tests that attach routes to
// ListenerSets and send requests through the Gateway, each with what it
// needs: the Traefik run requires them to run and pass; the stub run, which
// serves no traffic and writes no route status, skips them.
var passingWithTraffic = map[string]string{
	"ListenerSetAllowedRoutesNamespaces":          "HTTPRoutes attached to ListenerSets: route status and requests",
	"ListenerSetGatewayParentSectionNameNotFound": "HTTPRoutes by ListenerSet and by Gateway sectionName: route status and requests",
	"ListenerSetHTTPRouting":                      "HTTPRoutes attached to ListenerSets and the Gateway: route status, attachedRoutes and requests",
	"ListenerSetRouteStatusScopedToParentRef":     "HTTPRoutes' status.parents per parentRef and attachedRoutes",
}

// failsInTraefik are the suite's ListenerSet tests that fail because of
// Traefik v3.6.12 itself. The stub run skips them, as passingWithTraffic;
// the Traefik run runs them in a child process (runExpectedFailures), and
// fails unless each fails first at one of the assertions where Traefik's
// verdict shows, or passes (a poll may read gatefold's entry before Traefik
// replaces it), and unless gatefold's own last entry is the one the test
// wants (traefikEvidence).
var failsInTraefik = map[string]traefikFailure{
	"ListenerSetDualParentRefIndependence": {
		needs: "an HTTPRoute with Gateway and ListenerSet parentRefs: route status and requests",
		why: "Traefik judges the route's ListenerSet parentRef against the listeners of its Gateway parentRef, finds no " +
			"listener of that sectionName there, and replaces gatefold's entry for the ListenerSet parentRef, which carries " +
			"Traefik's controllerName, with its own NoMatchingParent",
		code: []string{
			"`kubernetes.go:1115-1142`, `matchingGatewayListeners`: a route's listeners are those of its parentRefs of kind Gateway",
			"`httproute.go:45-91`: every parentRef of the route, the ListenerSet's included, is judged against those listeners, " +
				"`NoMatchingParent` unless one matches",
			"`kubernetes.go:1144-1155`, `matchListener`: a listener matches a parentRef by sectionName and port alone, " +
				"whatever the parentRef's kind and name",
			"`client.go:500-549`, `UpdateHTTPRouteStatus`: writes the entries Traefik computed and keeps, of those stored, " +
				"only the ones of other controllers (`:513-522`)",
		},
		at:    []string{"listenerset-dual-parentref-independence.go:116", "listenerset-dual-parentref-independence.go:122"},
		route: types.NamespacedName{Namespace: suite.InfrastructureNamespace, Name: "route-dual-parentref-one"},
		parent: gwv1.ParentReference{
			Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("ListenerSet")),
			Namespace: ptr.To(gwv1.Namespace(suite.InfrastructureNamespace)), Name: "ls-dual-parentref",
			SectionName: ptr.To(gwv1.SectionName("ls-dual-parentref-listener")),
		},
	},
}

// traefikFailure is why a test fails because of Traefik, and where.
type traefikFailure struct {
	// needs is what the test needs, which the stub run lacks.
	needs string
	// why says what Traefik does, and code where, in
	// pkg/provider/kubernetes/gateway of its module.
	why  string
	code []string
	// at are the assertions, <file>:<line> in upstream's test, that read
	// what Traefik replaced: the test fails first at one of them, or passes.
	at []string
	// route is the route whose status entry for parent Traefik replaces
	// with its own verdict: the run reads both writers' entries from the
	// API server's audit log.
	route  types.NamespacedName
	parent gwv1.ParentReference
}

// supportedFeatures are what gatefold and the stub together claim for the
// ListenerSet tests: ListenerSet from gatefold, the rest from the stub. The
// suite skips a test that needs a feature missing here, and the run then
// fails, naming the test and the feature.
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

// suiteRun is one run of the suite: the class it runs on, what serves it,
// where its results go and what it expects of each test.
type suiteRun struct {
	// class is the GatewayClass the suite runs on.
	class string
	// implementation says, in the results, what serves the class.
	implementation string
	// reportPath is upstream's report of the run, per conformance profile;
	// resultsPath the result of each test of the run.
	reportPath, resultsPath string
	// dataPlane, when set, runs between the suite's Setup and its tests and
	// fails the run unless requests reach the suite's backends.
	dataPlane func(*testing.T, *suite.ConformanceTestSuite)
	// passing are the tests the run requires to pass, skipped those it
	// skips, each with why, and failing those that fail because of the
	// implementation; the three name every ListenerSet test once.
	passing []string
	skipped map[string]string
	failing map[string]traefikFailure
	// failingLog, relative to the repository, receives the output of the
	// child process that runs failing; auditLog is the API server's audit
	// log, which records who wrote their routes' status.
	failingLog, auditLog string
}

// stubRun judges gatefold's own verdicts: the stub implementation writes
// the status every implementation would and serves nothing.
var stubRun = suiteRun{
	class:          stubClassName,
	implementation: "the stub Gateway implementation (status only, no traffic)",
	reportPath:     "docs/conformance/gatefold-listenerset-report.yaml",
	resultsPath:    "docs/conformance/gatefold-listenerset-results.md",
	passing:        passing,
	skipped:        stubSkipped(),
}

// stubSkipped are the tests the stub run skips: those that need traffic,
// Traefik's failures included, with what each needs.
func stubSkipped() map[string]string {
	skipped := maps.Clone(passingWithTraffic)
	for name, f := range failsInTraefik {
		skipped[name] = f.needs
	}
	return skipped
}

// TestListenerSetConformance runs the upstream suite's ListenerSet tests,
// unmodified, on a real control plane with gatefold installed from
// config/self-signed and the stub Gateway implementation.
func TestListenerSetConformance(t *testing.T) {
	root, logDir := repoDirs(t, "conformance")
	// gatefold's CRDs come from the overlay, as a user installs them.
	env, err := devenv.Start(devenv.Options{CRDDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	startStubs(t, env, logDir, &gatewayStub{}, &podStub{namespaces: suiteNamespaces})
	if err := createStubClass(context.Background(), env.Client); err != nil {
		t.Fatal(err)
	}
	version := startGatefold(t, env, logDir, stubControllerName)
	t.Logf("gatefold %s and the stubs log into %s", version, logDir)
	runSuite(t, env, root, version, stubRun)
}

// repoDirs returns the repository's root and its folder bin/<logs>, which
// it creates, for the run's logs.
func repoDirs(t *testing.T, logs string) (root, logDir string) {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	logDir = filepath.Join(root, "bin", logs)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, logDir
}

// stub is a controller of the test process that stands in for a part of a
// cluster the control plane lacks; setup gives it the manager's client.
type stub interface {
	setup(ctrl.Manager) error
}

// startStubs runs stubs in this process until the test ends, logging into
// logDir/stubs.log.
func startStubs(t *testing.T, env *devenv.Env, logDir string, stubs ...stub) {
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
	for _, s := range stubs {
		if err := s.setup(mgr); err != nil {
			t.Fatal(err)
		}
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
// balancer, capped at 30 s (capTimeouts): the stub reports a Gateway within
// milliseconds, Traefik within a second or two, and gatefold folds within a
// second, and a regression then fails the tests, one after another, in
// minutes rather than half an hour.
func timeouts() config.TimeoutConfig {
	return capTimeouts(config.DefaultTimeoutConfig(), 30*time.Second)
}

// outcome is one test's result in the run: pass, FAIL, skip (with why)
// or not run, and for a test that failed in the child process its first
// failing assertion and where it is.
type outcome struct {
	name, description, result, why string
	failure                        []string
	// at is where the first failing assertion is, <file>:<line>, for a
	// test that failed in the child process; empty without one.
	at string
	// writes, for a test of r.failing, says what gatefold and Traefik
	// wrote into its route's status (traefikEvidence); writesErr, when
	// gatefold's own entry is not the one the test wants, or cannot be read.
	writes    []string
	writesErr error
}

// runSuite runs the suite's ListenerSet tests on r's class as the
// administrator, a user of the cluster, then r.failing in a child process,
// and writes upstream's report and a table of each test's
// result into docs/conformance.
func runSuite(t *testing.T, env *devenv.Env, root, version string, r suiteRun) {
	lsTests := listenerSetTests()
	want, err := expectations(lsTests, r)
	if err != nil {
		t.Fatal(err)
	}
	// r.failing runs in the child, not here: a test that fails here would
	// fail the whole test.
	skipTests := slices.Concat(slices.Collect(maps.Keys(r.skipped)), slices.Collect(maps.Keys(r.failing)))

	var mu sync.Mutex
	outcomes := map[string]outcome{}
	cSuite := newSuite(t, env.Config, suite.ConfigurableOptions{
		GatewayClassName:     r.class,
		CleanupBaseResources: true,
		TimeoutConfig:        timeouts(),
		SkipTests:            skipTests,
		ConformanceProfiles:  []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayTLSConformanceProfileName},
		Implementation: confv1.Implementation{
			Organization: "gatefold",
			Project:      "gatefold",
			URL:          "https://github.com/gatefold/gatefold",
			Version:      version,
			Contact:      []string{"https://github.com/gatefold/gatefold/issues"},
		},
	}, func(st *testing.T, ct suite.ConformanceTest, s *suite.ConformanceTestSuite) {
		o := outcome{name: ct.ShortName, description: ct.Description, result: "pass"}
		switch {
		case st.Failed():
			o.result = "FAIL"
		case st.Skipped():
			o.result, o.why = "skip", skipReason(ct, s, r.skipped)
		}
		mu.Lock()
		outcomes[ct.ShortName] = o
		mu.Unlock()
	})

	// The suite reports only once Run's clean-up has marked it stopped:
	// report in a clean-up registered before Run's, which runs after it,
	// as upstream's RunConformanceWithOptions does.
	t.Cleanup(func() {
		report, err := cSuite.Report()
		if err != nil {
			t.Errorf("Reporting: %v", err)
			return
		}
		writeReport(t, filepath.Join(root, r.reportPath), report)
		mu.Lock()
		defer mu.Unlock()
		writeResults(t, filepath.Join(root, r.resultsPath), version, r, lsTests, want, outcomes)
		for _, m := range mismatches(lsTests, want, outcomes, r) {
			t.Error(m)
		}
	})
	cSuite.Setup(t, lsTests)
	if r.dataPlane != nil && !t.Run("DataPlane", func(t *testing.T) { r.dataPlane(t, cSuite) }) {
		t.Fatal("Requests through the Gateway do not reach the suite's backends: the ListenerSet tests would judge nothing")
	}
	if err := cSuite.Run(t, lsTests); err != nil {
		t.Fatal(err)
	}
	if len(r.failing) > 0 {
		judged := runExpectedFailures(t, env, root, r, lsTests)
		addEvidence(judged, r, filepath.Join(root, r.auditLog))
		mu.Lock()
		maps.Copy(outcomes, judged)
		mu.Unlock()
	}
}

// newSuite is upstream's suite on the cluster of cfg, as its administrator,
// with opts and what every run of the harness shares: gatefold's supported
// features, test resources cleaned up and one test at a time. hook gets
// each test's outcome.
func newSuite(t *testing.T, cfg *rest.Config, opts suite.ConfigurableOptions, hook func(*testing.T, suite.ConformanceTest, *suite.ConformanceTestSuite)) *suite.ConformanceTestSuite {
	t.Helper()
	scheme := suiteScheme()
	cfg = rest.CopyConfig(cfg) // the suite sets its user agent per test
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.CleanupTestResources = true
	// One at a time: each test's readiness check waits for every Gateway in
	// the namespace, so in parallel the tests leave it together, just as
	// gatefold folds another test's Gateway, and GatewayMustHaveCondition,
	// which fails at once on a condition older than the Gateway's
	// generation, can read that Gateway between gatefold's write and the
	// implementation's status (docs/conformance/README.md).
	opts.DisableParallelTests = true
	opts.SupportedFeatures = supportedFeatures
	opts.Mode = "default"
	s, err := suite.NewConformanceTestSuite(suite.ConformanceOptions{
		ConfigurableOptions: opts,
		Client:              c,
		ClientOptions:       client.Options{Scheme: scheme},
		Clientset:           cs,
		RestConfig:          cfg,
		ManifestFS:          []fs.FS{&conformance.Manifests},
		Hook:                hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// listenerSetTests are the suite's tests for ListenerSet.
func listenerSetTests() []suite.ConformanceTest {
	var out []suite.ConformanceTest
	for _, ct := range tests.ConformanceTests {
		if strings.HasPrefix(ct.ShortName, "ListenerSet") {
			out = append(out, ct)
		}
	}
	return out
}

// failOrPass is the result expected of a test that fails because of the
// implementation: it fails where the implementation's verdict shows, or
// passes.
const failOrPass = "FAIL or pass"

// expectations maps each ListenerSet test of the suite to its expected
// result in r, pass, skip or failOrPass, and fails unless r.passing,
// r.skipped and r.failing name every one of them, once, and nothing else.
func expectations(lsTests []suite.ConformanceTest, r suiteRun) (map[string]string, error) {
	want := map[string]string{}
	for result, names := range map[string][]string{
		"pass": r.passing, "skip": slices.Collect(maps.Keys(r.skipped)), failOrPass: slices.Collect(maps.Keys(r.failing)),
	} {
		for _, name := range names {
			if _, ok := want[name]; ok {
				return nil, fmt.Errorf("%s is expected twice (passing, skipped, failing): keep it in one", name)
			}
			want[name] = result
		}
	}
	for _, ct := range lsTests {
		if _, ok := want[ct.ShortName]; !ok {
			return nil, fmt.Errorf("the suite's ListenerSet test %s is in none of passing, skipped and failing: add it to one", ct.ShortName)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if !slices.ContainsFunc(lsTests, func(ct suite.ConformanceTest) bool { return ct.ShortName == name }) {
			return nil, fmt.Errorf("%s is not among the suite's ListenerSet tests: remove it or rename it", name)
		}
	}
	return want, nil
}

// skipReason says why the suite skipped ct, as the suite decides it: a
// feature the test needs that the suite was not told is supported, or
// the run's skipped list.
func skipReason(ct suite.ConformanceTest, s *suite.ConformanceTestSuite, skipped map[string]string) string {
	var missing []string
	for _, f := range ct.Features {
		if !s.SupportedFeatures.Has(f) {
			missing = append(missing, string(f))
		}
	}
	if len(missing) > 0 {
		return "the suite does not support " + strings.Join(missing, ", ")
	}
	if why, ok := skipped[ct.ShortName]; ok {
		return "needs " + why
	}
	return "skipped by the suite"
}

// resultOf is ct's outcome in the run, "not run" when the suite never
// reached it.
func resultOf(ct suite.ConformanceTest, outcomes map[string]outcome) outcome {
	if o, ok := outcomes[ct.ShortName]; ok {
		return o
	}
	return outcome{name: ct.ShortName, description: ct.Description, result: "not run"}
}

// mismatches says, for every ListenerSet test whose result is not the one
// want expects, the test, its result and, for a skip, why; for a test of
// r.failing, that it failed first elsewhere than where the implementation's
// verdict shows, or that gatefold's own entry is not the one the test wants.
func mismatches(lsTests []suite.ConformanceTest, want map[string]string, outcomes map[string]outcome, r suiteRun) []string {
	var out []string
	for _, ct := range lsTests {
		o := resultOf(ct, outcomes)
		exp, failing := r.failing[ct.ShortName]
		switch {
		case asExpected(ct.ShortName, o, want[ct.ShortName], r):
			continue
		case failing && o.writesErr != nil:
			out = append(out, fmt.Sprintf("ListenerSet conformance test %s %s: %v, so the implementation alone cannot be what fails it: see %s",
				ct.ShortName, o.result, o.writesErr, r.auditLog))
			continue
		case failing && o.result == "FAIL":
			out = append(out, fmt.Sprintf("ListenerSet conformance test %s fails first at %s, and the implementation's verdict shows at %s (%s): see %s; "+
				"if that is gatefold's failure, fix it, else update at in failsInTraefik", ct.ShortName, cmp.Or(o.at, "no testify assertion"),
				strings.Join(exp.at, " or "), exp.why, r.failingLog))
			continue
		}
		got := o.result
		if o.why != "" {
			got += " (" + o.why + ")"
		}
		out = append(out, fmt.Sprintf("ListenerSet conformance test %s: %s, want %s", ct.ShortName, got, want[ct.ShortName]))
	}
	return out
}

// asExpected says whether o, test name's outcome, is the result want
// expects; for a test of r.failing, whether it passed or failed first where
// r expects it to, with gatefold's own entry the one the test wants.
func asExpected(name string, o outcome, want string, r suiteRun) bool {
	if exp, ok := r.failing[name]; ok {
		return o.writesErr == nil && (o.result == "pass" || o.result == "FAIL" && slices.Contains(exp.at, o.at))
	}
	return o.result == want
}

// writeReport writes upstream's report, which counts results per profile,
// to path.
func writeReport(t *testing.T, path string, report *confv1.ConformanceReport) {
	b, err := yaml.Marshal(report)
	if err != nil {
		t.Errorf("Encoding the report: %v", err)
		return
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Errorf("Writing the report: %v", err)
	}
}

// writeResults prints and writes to path a table of every ListenerSet
// test's result and the expected one, which upstream's report only counts,
// and what makes each test of r.failing fail (writeFailures).
func writeResults(t *testing.T, path, version string, r suiteRun, lsTests []suite.ConformanceTest, want map[string]string, outcomes map[string]outcome) {
	var b strings.Builder
	b.WriteString("<!-- Written by `make conformance` (test/conformance); do not edit. -->\n")
	fmt.Fprintf(&b, "# gatefold: Gateway API %s ListenerSet conformance, per test\n\n", suiteVersion(t))
	fmt.Fprintf(&b, "gatefold %s, installed from config/%s, with %s; see [README.md](README.md).\n\n", version, overlay, r.implementation)
	b.WriteString("| Test | Result | Expected | What it checks |\n|---|---|---|---|\n")
	counts := map[string]int{}
	var unexpected []string
	for _, ct := range lsTests {
		o := resultOf(ct, outcomes)
		desc := o.description
		switch {
		case o.why != "" && o.result == "skip":
			desc += " (skipped: " + o.why + ")"
		case o.why != "":
			desc += " (" + o.result + " " + o.why + ")"
		}
		if _, ok := r.failing[ct.ShortName]; ok {
			desc += " (fails because of the implementation: see below)"
		}
		counts[o.result]++
		if !asExpected(ct.ShortName, o, want[ct.ShortName], r) {
			unexpected = append(unexpected, ct.ShortName)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", o.name, o.result, want[ct.ShortName], desc)
	}
	fmt.Fprintf(&b, "\n%d passed, %d failed, %d skipped", counts["pass"], counts["FAIL"], counts["skip"])
	if n := counts["not run"]; n > 0 {
		fmt.Fprintf(&b, ", %d not run", n)
	}
	if len(unexpected) == 0 {
		b.WriteString("; every test as expected.\n")
	} else {
		fmt.Fprintf(&b, "; not as expected: %s.\n", strings.Join(unexpected, ", "))
	}
	writeFailures(&b, lsTests, r, outcomes)
	t.Logf("ListenerSet conformance:\n%s", b.String())
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("Writing the results: %v", err)
	}
}

// writeFailures writes, for each test of r.failing, whether it failed and
// where, why, the implementation's code that makes it fail, the first
// assertion that failed, and what gatefold and the implementation wrote
// into its route's status.
func writeFailures(b *strings.Builder, lsTests []suite.ConformanceTest, r suiteRun, outcomes map[string]outcome) {
	if len(r.failing) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Failing because of the implementation\n\n")
	fmt.Fprintf(b, "Run in a child process, with every timeout at most %s; its output is `%s`.\n", failingTimeoutCap, r.failingLog)
	for _, ct := range lsTests {
		exp, ok := r.failing[ct.ShortName]
		if !ok {
			continue
		}
		o := resultOf(ct, outcomes)
		fmt.Fprintf(b, "\n### %s\n\n", ct.ShortName)
		switch o.result {
		case "FAIL":
			fmt.Fprintf(b, "**FAIL**, first at `%s` (expected at %s, or a pass).\n", cmp.Or(o.at, "no testify assertion"), "`"+strings.Join(exp.at, "` or `")+"`")
		case "pass":
			fmt.Fprintf(b, "**pass**: every poll of the test read gatefold's entry before Traefik replaced it (it may fail at %s).\n", "`"+strings.Join(exp.at, "` or `")+"`")
		default:
			fmt.Fprintf(b, "**%s** %s.\n", o.result, o.why)
		}
		fmt.Fprintf(b, "\n%s. Traefik's code (`pkg/provider/kubernetes/gateway`):\n\n", exp.why)
		for _, c := range exp.code {
			fmt.Fprintf(b, "- %s\n", c)
		}
		if o.result == "FAIL" {
			fmt.Fprintf(b, "\nThe first assertion that failed:\n\n```\n%s\n```\n", strings.Join(o.failure, "\n"))
		}
		writes := o.writes
		if o.writesErr != nil {
			writes = append(slices.Clone(writes), "NOT AS EXPECTED: "+o.writesErr.Error())
		}
		fmt.Fprintf(b, "\nWhat gatefold and Traefik wrote (the API server's audit log, `%s`):\n\n```\n%s\n```\n", r.auditLog, strings.Join(writes, "\n"))
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

// suiteVersion is the version of upstream's conformance suite this test
// binary was built with.
func suiteVersion(t *testing.T) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "sigs.k8s.io/gateway-api/conformance" {
				return m.Version
			}
		}
	}
	t.Fatal("The test binary has no build information naming sigs.k8s.io/gateway-api/conformance")
	return ""
}
