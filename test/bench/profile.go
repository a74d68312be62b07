package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// With --profile, each timed phase is a window in which the harness records
// a CPU profile of the API server and of every gatefold replica running.
// A profile is one GET /debug/pprof/profile?seconds=LONG held open for the
// whole window: at the window's end the harness half-closes the connection,
// Go's pprof handler sees its request context end, stops profiling and
// still writes the profile back. A window's profiles so cover the phase
// exactly, however long, and cost the processes only the sampling and the
// profile's encoding at the end.

// PhaseProfile is the CPU profiles taken in one timed phase.
type PhaseProfile struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
	// Files are the profiles written, by the process profiled ("apiserver",
	// "gatefold-NAME"), relative to --profile's folder.
	Files map[string]string `json:"files"`
	// APIServer is what `go tool pprof -top` says of the API server's.
	APIServer *TopProfile `json:"apiserver,omitempty"`
}

// TopProfile is the head of `go tool pprof -top`: the duration, the CPU
// sampled in it, and the functions that used the most themselves.
type TopProfile struct {
	Duration  string        `json:"duration"`
	Samples   string        `json:"samples"`
	Functions []TopFunction `json:"functions"`
}

// TopFunction is a line of `go tool pprof -top`.
type TopFunction struct {
	Flat        string `json:"flat"`
	FlatPercent string `json:"flatPercent"`
	Cum         string `json:"cum"`
	Function    string `json:"function"`
}

// profiler takes the profiles of the phases; nil, it takes none.
type profiler struct {
	dir       string
	apiserver string
	tls       *tls.Config
	token     string
	// seconds is what each profile asks for: longer than any window, which
	// the half-close ends sooner.
	seconds  int
	mu       sync.Mutex
	window   *window
	profiles []PhaseProfile
}

func newProfiler(dir string, cfg *rest.Config, longest time.Duration) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	// HTTP/1.1: a half-closed HTTP/2 stream would be a cancelled one.
	tlsConfig.NextProtos = []string{"http/1.1"}
	return &profiler{dir: dir, apiserver: u.Host, tls: tlsConfig, token: cfg.BearerToken,
		seconds: int((longest + time.Minute).Seconds())}, nil
}

// window is one phase's profiles being taken.
type window struct {
	p     *profiler
	phase string
	start time.Time
	wg    sync.WaitGroup
	stop  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	files map[string]string
}

// profile opens the phase's window: it profiles the API server and the
// replicas running now, and those launched before the window ends from
// when they serve their profiles. A nil profiler opens a window that does
// nothing.
func (h *harness) profile(phase string) *window {
	pr := h.profiler
	if pr == nil {
		return nil
	}
	w := &window{p: pr, phase: phase, start: time.Now(), stop: make(chan struct{}), files: map[string]string{}}
	pr.mu.Lock()
	pr.window = w
	pr.mu.Unlock()
	w.take("apiserver", "the API server, the whole phase", func() (net.Conn, error) { return tls.Dial("tcp", pr.apiserver, pr.tls) }, pr.token)
	for _, m := range h.managers {
		if m.alive() {
			w.add(m, "the whole phase")
		}
	}
	return w
}

// launched adds a replica the harness just started to the open window.
func (pr *profiler) launched(m *manager) {
	if pr == nil {
		return
	}
	// Under the lock, so that the window cannot end between the two.
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.window != nil {
		pr.window.add(m, "from when it served profiles")
	}
}

// add profiles a replica from when its pprof server accepts a connection;
// covers says how much of the phase that is.
func (w *window) add(m *manager, covers string) {
	if m.pprof == "" {
		return
	}
	w.take("gatefold-"+m.Name, "gatefold "+m.Name+", "+covers, func() (net.Conn, error) {
		for {
			c, err := net.Dial("tcp", m.pprof)
			if err == nil {
				return c, nil
			}
			select {
			case <-w.stop:
				return nil, fmt.Errorf("%s served no profiles before the phase ended: %w", m.Name, err)
			case <-m.Exited():
				return nil, fmt.Errorf("%s exited before it served profiles", m.Name)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}, "")
}

// closeWriter is a connection whose writing side can be shut alone:
// *net.TCPConn, and *tls.Conn, which sends close_notify.
type closeWriter interface {
	net.Conn
	CloseWrite() error
}

// take requests a profile of one process on a connection of dial's and
// writes it to the window's file for the process when the window ends.
func (w *window) take(process, what string, dial func() (net.Conn, error), token string) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		file := fmt.Sprintf("%s-%s.pprof", w.phase, process)
		if err := w.request(dial, token, filepath.Join(w.p.dir, file)); err != nil {
			progress("  %s: no CPU profile of %s: %v", w.phase, what, err)
			return
		}
		w.mu.Lock()
		w.files[process] = file
		w.mu.Unlock()
		progress("  %s: CPU profile of %s: go tool pprof -top %s", w.phase, what, filepath.Join(w.p.dir, file))
	}()
}

func (w *window) request(dial func() (net.Conn, error), token, path string) error {
	conn, err := dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	req, err := http.NewRequest(http.MethodGet, "/debug/pprof/profile?seconds="+strconv.Itoa(w.p.seconds), nil)
	if err != nil {
		return err
	}
	req.Host, req.Close = conn.RemoteAddr().String(), true
	req.Header.Set("User-Agent", "bench-profiler")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if err := req.Write(conn); err != nil {
		return err
	}
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		got <- result{resp, err}
	}()
	var r result
	select {
	case r = <-got:
	case <-w.stop:
		if err := conn.(closeWriter).CloseWrite(); err != nil {
			return err
		}
		select {
		case r = <-got:
		case <-time.After(time.Minute):
			return fmt.Errorf("no profile a minute after the phase ended")
		}
	}
	if r.err != nil {
		return r.err
	}
	defer r.resp.Body.Close()
	if r.resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(r.resp.Body, 1024))
		return fmt.Errorf("%s: %s", r.resp.Status, strings.TrimSpace(string(msg)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.ReadFrom(r.resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// end closes the window and waits for its profiles. It may be called more
// than once.
func (w *window) end() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		seconds := time.Since(w.start).Seconds()
		w.p.mu.Lock()
		w.p.window = nil
		w.p.mu.Unlock()
		close(w.stop)
		w.wg.Wait()
		w.p.mu.Lock()
		w.p.profiles = append(w.p.profiles, PhaseProfile{Phase: w.phase, Seconds: seconds, Files: w.files})
		w.p.mu.Unlock()
	})
}

// summarize reads the top of each phase's API server profile, after the
// run, so that pprof takes no CPU from a phase.
func (pr *profiler) summarize() []PhaseProfile {
	if pr == nil {
		return nil
	}
	for i, ph := range pr.profiles {
		file, ok := ph.Files["apiserver"]
		if !ok {
			continue
		}
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=10", filepath.Join(pr.dir, file)).Output()
		if err != nil {
			progress("go tool pprof -top %s: %v", filepath.Join(pr.dir, file), err)
			continue
		}
		pr.profiles[i].APIServer = parseTop(string(out))
	}
	return pr.profiles
}

// parseTop reads the output of `go tool pprof -top`.
func parseTop(out string) *TopProfile {
	t := &TopProfile{}
	table := false
	for _, line := range strings.Split(out, "\n") {
		if d, ok := strings.CutPrefix(line, "Duration: "); ok {
			t.Duration, t.Samples, _ = strings.Cut(d, ", Total samples = ")
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && f[0] == "flat" && f[1] == "flat%":
			table = true
		case table && len(f) >= 6:
			t.Functions = append(t.Functions, TopFunction{Flat: f[0], FlatPercent: f[1], Cum: f[3], Function: strings.Join(f[5:], " ")})
		}
	}
	return t
}
