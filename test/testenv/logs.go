package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// forbidden matches the API server's authorizer refusing a request, as
// client-go's errors and informers put it, quotes escaped or not in a JSON or
// klog line: `leases.coordination.k8s.io is forbidden: User "..." cannot list
// resource "leases" ...`. Other Forbidden answers are not about rights and
// would match "is forbidden" too: a ValidatingAdmissionPolicy's denial, an
// event into a namespace being deleted, field.Forbidden in a webhook's denial.
var forbidden = regexp.MustCompile(`forbidden: User \\?"[^"\\]*\\?" cannot `)

// Logs passes every line a manager logs on to a writer and keeps those in
// which the API server refused the manager a request: run as installed, a
// refusal means the shipped RBAC lacks a right (or gatefold asks for one it
// should not need). Give a manager Logger, or CaptureLogs for a TestMain.
type Logs struct {
	out       io.Writer
	mu        sync.Mutex
	forbidden []string
}

// NewLogs returns Logs that write through to out.
func NewLogs(out io.Writer) *Logs { return &Logs{out: out} }

// CaptureLogs routes controller-runtime's logger and klog's, through which
// client-go's informers report failed lists and watches, into new Logs
// writing to out, for the managers of a whole test binary.
func CaptureLogs(out io.Writer) *Logs {
	l := NewLogs(out)
	log := l.Logger()
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return l
}

// Logger is a zap logger, as gatefold's, writing JSON lines into l.
func (l *Logs) Logger() logr.Logger { return zap.New(zap.WriteTo(l)) }

// Write records p, one or more whole lines as zap writes them.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	for line := range bytes.Lines(p) {
		if forbidden.Match(line) {
			l.forbidden = append(l.forbidden, summary(line))
		}
	}
	l.mu.Unlock()
	return l.out.Write(p)
}

// Forbidden returns the lines logged so far that say the API server refused
// a request.
func (l *Logs) Forbidden() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.forbidden...)
}

// Check fails t for every refused request logged so far.
func (l *Logs) Check(t testing.TB) {
	t.Helper()
	for _, line := range l.Forbidden() {
		t.Errorf("The manager, run as installed, was refused a request: %s", line)
	}
}

// ExitCode is for TestMain: code, m.Run's result, or 1 when a refused
// request was logged, which it then prints.
func (l *Logs) ExitCode(code int) int {
	lines := l.Forbidden()
	for _, line := range lines {
		fmt.Fprintf(os.Stderr, "FAIL: the manager, run as installed, was refused a request: %s\n", line)
	}
	if len(lines) > 0 && code == 0 {
		return 1
	}
	return code
}

// ForbiddenInFile returns the lines of a gatefold process's log (zap's JSON
// and klog's text alike) that say the API server refused a request.
func ForbiddenInFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if forbidden.Match(sc.Bytes()) {
			lines = append(lines, summary(sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the log %s: %w", path, err)
	}
	return lines, nil
}

// CheckLogFile fails t for every refused request in a process's log.
func CheckLogFile(t testing.TB, path string) {
	t.Helper()
	lines, err := ForbiddenInFile(path)
	if err != nil {
		t.Error(err)
	}
	for _, line := range lines {
		t.Errorf("%s, run as installed, was refused a request: %s", filepath.Base(path), line)
	}
}

// summary shortens a JSON log line whose error says Forbidden to its time,
// logger, message and error, without the stack trace; other lines are kept
// as they are.
func summary(line []byte) string {
	var entry struct {
		TS     any    `json:"ts"`
		Logger string `json:"logger"`
		Msg    string `json:"msg"`
		Error  string `json:"error"`
	}
	if json.Unmarshal(line, &entry) != nil || !forbidden.MatchString(entry.Error) {
		return string(bytes.TrimSpace(line))
	}
	return fmt.Sprintf("%v %s %q: %s", entry.TS, entry.Logger, entry.Msg, entry.Error)
}
