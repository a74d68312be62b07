package conformance

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/netns"
)

// expectedFailuresEnv is set, to a childSpec in JSON, in the test binary
// that runExpectedFailures re-executes.
const expectedFailuresEnv = "GATEFOLD_CONFORMANCE_EXPECTED_FAILURES"

// failingTimeoutCap caps every timeout of the suite in the child process:
// a failing test waits out its timeouts, upstream's allow a minute or more
// each, and with Traefik everything the tests wait for settles within a
// few seconds.
const failingTimeoutCap = 15 * time.Second

// childSpec says what the child process runs: the tests, on class, on the
// cluster kubeconfig names, as its administrator.
type childSpec struct {
	Kubeconfig string   `json:"kubeconfig"`
	Class      string   `json:"class"`
	Tests      []string `json:"tests"`
}

// childResult is one test's result in the child process, pass, FAIL or
// skip, and for a failure the first assertion that failed and at,
// <file>:<line>, where it is (empty without one).
type childResult struct {
	result, at string
	failure    []string
}

// panicLine is the line a panic starts its report with.
var panicLine = regexp.MustCompile(`(?m)^panic: .*$`)

// childExitError says what is wrong with how the child process ended, out
// its output: it must exit with status 0, every test passed, or 1, tests
// failed, and without a panic, which go test reports as a failure of the
// test it stopped.
func childExitError(code int, out string) error {
	if p := panicLine.FindString(out); p != "" {
		return fmt.Errorf("panicked (%s), so its results are not the tests' own", p)
	}
	if code != 0 && code != 1 {
		return fmt.Errorf("exited with status %d, want 0 (tests passed) or 1 (tests failed)", code)
	}
	return nil
}

// runExpectedFailures runs r.failing, the tests that fail because of the
// implementation, on the running cluster of env and r's class, in a child
// process of this test binary (upstream's suite fails the whole test when
// one test fails), in the same network namespace, with the suite's base resources as runSuite left them, and
// returns their outcomes: pass, FAIL with the first failing assertion, or
// not run. The child's output goes to r.failingLog.
func runExpectedFailures(t *testing.T, env *devenv.Env, root string, r suiteRun, lsTests []suite.ConformanceTest) map[string]outcome {
	t.Helper()
	kubeconfig, err := env.WriteKubeconfig(filepath.Join(t.TempDir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(r.failing))
	spec, err := json.Marshal(childSpec{Kubeconfig: kubeconfig, Class: r.class, Tests: names})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Time for this process to report what the child left.
	args := append([]string{"-test.run=^" + t.Name() + "$", "-test.count=1", "-test.v"}, netns.ChildTimeout(t, 20*time.Second)...)
	logPath := filepath.Join(root, r.failingLog)
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), expectedFailuresEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	runErr := cmd.Run() // fails whenever one of the tests fails
	logFile.Close()
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("The tests that fail because of the implementation ran in a child process in %s (%v); its output is %s", time.Since(start).Round(time.Second), runErr, logPath)
	if cmd.ProcessState == nil {
		t.Fatalf("Running the child process: %v", runErr)
	}
	if err := childExitError(cmd.ProcessState.ExitCode(), string(out)); err != nil {
		t.Errorf("The child process that runs the tests that fail because of the implementation %v: see %s", err, logPath)
	}
	results := parseChild(string(out), names)
	outcomes := map[string]outcome{}
	for _, ct := range lsTests {
		if _, ok := r.failing[ct.ShortName]; !ok {
			continue
		}
		o := outcome{name: ct.ShortName, description: ct.Description, result: "not run"}
		if res, ok := results[ct.ShortName]; ok {
			o.result, o.failure, o.at = res.result, res.failure, res.at
		}
		if o.result != "FAIL" && o.result != "pass" {
			o.why = "in the child process: see " + r.failingLog
		}
		outcomes[ct.ShortName] = o
	}
	return outcomes
}

// runChild is the child process of runExpectedFailures: it runs the tests
// spec names, and only those, on the cluster it names, with timeouts capped
// at failingTimeoutCap, leaving the base resources to the parent.
func runChild(t *testing.T, rawSpec string) {
	var spec childSpec
	if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
		t.Fatalf("Reading $%s: %v", expectedFailuresEnv, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	lsTests := listenerSetTests()
	var skip []string
	for _, ct := range lsTests {
		if !slices.Contains(spec.Tests, ct.ShortName) {
			skip = append(skip, ct.ShortName)
		}
	}
	s := newSuite(t, cfg, suite.ConfigurableOptions{
		GatewayClassName: spec.Class,
		TimeoutConfig:    failingTimeouts(),
		SkipTests:        skip,
	}, nil)
	s.Setup(t, lsTests)
	if err := s.Run(t, lsTests); err != nil {
		t.Fatal(err)
	}
}

// failingTimeouts are timeouts() capped at failingTimeoutCap (capTimeouts).
func failingTimeouts() config.TimeoutConfig {
	return capTimeouts(timeouts(), failingTimeoutCap)
}

// capTimeouts is tc with every duration of upstream's TimeoutConfig but
// DefaultPollInterval, how often the waits poll, at most limit.
func capTimeouts(tc config.TimeoutConfig, limit time.Duration) config.TimeoutConfig {
	v := reflect.ValueOf(&tc).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Type() == reflect.TypeFor[time.Duration]() && v.Type().Field(i).Name != "DefaultPollInterval" {
			f.SetInt(int64(min(time.Duration(f.Int()), limit)))
		}
	}
	return tc
}

var (
	// resultLine is the line `go test -v` ends a (sub)test with.
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)
	// runLine is the line with which `go test -v` starts a (sub)test or
	// returns to one's output.
	runLine = regexp.MustCompile(`^=== (?:RUN|NAME|CONT|PAUSE)\s+(\S+)`)
	// testifyLine is a line of a testify failure: `go test` indents it,
	// testify starts it with a tab.
	testifyLine = regexp.MustCompile(`^ *\t`)
	// testifyField starts a field of a testify failure, "Error:   \tvalue".
	testifyField = regexp.MustCompile(`^ *\t(Error Trace|Error|Test|Messages):\s*(.*)$`)
	// logLine is a line a test logged, "    file.go:12: text".
	logLine = regexp.MustCompile(`^\s+([\w.-]+\.go:\d+): (.*)$`)
	// times are the times upstream's tlog puts first in each line it logs
	// (RFC 3339) and those of conditions it prints (time.Time's String).
	times = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d): |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} \w+`)
)

// childLine is a line of the child's output and the (sub)test it is of.
type childLine struct {
	test, text string
}

// parseChild reads the output of the child process, `go test -v`, and
// returns each of tests' result and its first failing assertion.
func parseChild(out string, tests []string) map[string]childResult {
	testOf := func(path string) string {
		for _, name := range tests {
			if strings.HasSuffix(path, "/"+name) || strings.Contains(path, "/"+name+"/") {
				return name
			}
		}
		return ""
	}
	lines := map[string][]childLine{}
	results := map[string]childResult{}
	current, path := "", ""
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if m := runLine.FindStringSubmatch(line); m != nil {
			current, path = testOf(m[1]), m[1]
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			if name := testOf(m[2]); name != "" && strings.HasSuffix(m[2], "/"+name) {
				results[name] = childResult{result: map[string]string{"PASS": "pass", "FAIL": "FAIL", "SKIP": "skip"}[m[1]]}
			}
			continue
		}
		if current != "" {
			lines[current] = append(lines[current], childLine{test: path, text: line})
		}
	}
	for name, res := range results {
		if res.result == "FAIL" {
			res.at, res.failure = firstAssertion(lines[name])
			results[name] = res
		}
	}
	return results
}

// firstAssertion is where the first testify failure in lines is,
// <file>:<line> (ownFrame), and the failure: where the test made it, its Error and its Messages, and the last line its (sub)test
// logged before it when the wait that failed logged it (what it saw last),
// without times. A wait that
// timed out says so, as the error's wording depends on the request its
// deadline cut.
func firstAssertion(lines []childLine) (at string, failure []string) {
	start := slices.IndexFunc(lines, func(l childLine) bool {
		m := testifyField.FindStringSubmatch(l.text)
		return m != nil && m[1] == "Error Trace"
	})
	if start < 0 {
		return "", []string{"(no testify assertion in the output: see the log)"}
	}
	fields := map[string][]string{}
	field := ""
	for i, l := range lines[start:] {
		m := testifyField.FindStringSubmatch(l.text)
		if !testifyLine.MatchString(l.text) || m != nil && m[1] == "Error Trace" && i > 0 {
			break // the end of the block, or the next one
		}
		value := strings.TrimSpace(l.text)
		if m != nil {
			field, value = m[1], m[2]
		}
		fields[field] = append(fields[field], times.ReplaceAllString(value, ""))
	}
	errText := strings.Join(fields["Error"], "\n  ")
	if strings.Contains(errText, "deadline") {
		errText = fields["Error"][0] + " the wait's deadline passed"
	}
	at = ownFrame(fields["Error Trace"])
	out := []string{
		"at " + at,
		"Error: " + errText,
		"Messages: " + strings.Join(fields["Messages"], "\n  "),
	}
	for _, l := range slices.Backward(lines[:start]) {
		if l.test != lines[start].test {
			break
		}
		if m := logLine.FindStringSubmatch(l.text); m != nil && strings.TrimSpace(m[2]) != "" {
			// A wait that ended well says "... matched expectations": the
			// line is an earlier wait's.
			if loggedBy(m[1], fields["Error Trace"]) && !strings.Contains(m[2], "matched expectations") {
				out = append(out, "What the wait saw last: "+times.ReplaceAllString(m[2], ""))
			}
			break
		}
	}
	return at, out
}

// loggedBy says whether a line logged at source (file.go:12) was logged by
// the wait that trace's assertion ended: a line at most 40 lines above the
// assertion's first frame, in its file.
func loggedBy(source string, trace []string) bool {
	if len(trace) == 0 {
		return false
	}
	file, line, ok := strings.Cut(source, ":")
	tFile, tLine, tok := strings.Cut(filepath.Base(trace[0]), ":")
	if !ok || !tok || file != tFile {
		return false
	}
	n, err1 := strconv.Atoi(line)
	at, err2 := strconv.Atoi(tLine)
	return err1 == nil && err2 == nil && n < at && at-n <= 40
}

// ownFrame is the frame of a testify trace in the test's own file
// (tests/listenerset-*.go), without its directory, else the first frame.
func ownFrame(trace []string) string {
	for _, f := range trace {
		if strings.Contains(f, "/tests/") {
			return filepath.Base(f)
		}
	}
	if len(trace) == 0 {
		return "(no trace)"
	}
	return filepath.Base(trace[0])
}
