package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gatefold/gatefold/internal/app"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/internal/process"
)

// readyWithin is how long Start waits for a replica's /readyz.
const readyWithin = 60 * time.Second

// Gatefold says which gatefold replicas Start runs, and how.
type Gatefold struct {
	// Overlay is the config/ overlay whose ServiceAccount and RBAC the
	// replicas run as; "" is "default".
	Overlay string
	// Installed, when set, is that ServiceAccount already installed.
	Installed *Installed
	// Apply applies the whole overlay first, as a user does with kubectl
	// apply --server-side -k: its CRDs, webhook configurations and the rest.
	Apply bool
	// Args are `gatefold manager` flags for every replica. Start adds, where
	// Args lack them, --webhook-port and --health-probe-bind-address on free
	// loopback ports and --metrics-bind-address=0; for the binary, the
	// --kubeconfig of the ServiceAccount.
	Args []string
	// Replicas is how many replicas run; 0 is one.
	Replicas int
	// Name names the replica, or Name-0, Name-1, ... for several: their
	// POD_NAME, or Options.Identity in process; "" is "gatefold".
	Name string
	// Binary is the gatefold executable to run (MustBuildGatefold); "" runs
	// the replicas in this process, logging through ctrl.Log.
	Binary string
	// Dir receives a process's log, <name>.log; it is needed for Binary.
	// Kubeconfigs go to a temporary folder of their own, removed at Stop.
	Dir string
	// StopGrace is how long Stop gives a process to exit after SIGTERM
	// before it kills it; 0 is 10s.
	StopGrace time.Duration
	// Env is added to the environment of the binary, e.g. POD_NAMESPACE.
	Env []string
	// Options, in process, changes a replica's Options once its Args are
	// parsed and validated: for the fields without a flag, or a value below
	// what Validate allows.
	Options func(*app.Options)
	// PointWebhooks makes the overlay's webhook configurations call the
	// first replica by URL on loopback (PointWebhooksAt).
	PointWebhooks bool
	// NoWait returns once the replicas are started, not once they are ready.
	NoWait bool
	// Server is the address (host:port) the replicas reach the API server
	// at, e.g. a proxy's, instead of the control plane's; "" is that one.
	Server string
}

// Replica is one gatefold replica Start started.
type Replica struct {
	Name string
	// WebhookAddr and ProbeAddr are where its webhook server and its
	// /healthz and /readyz listen, host:port.
	WebhookAddr string
	ProbeAddr   string
	// Log is the binary's log; in process it is "".
	Log string
	// Cmd is the binary's process, for signals (SIGKILL, SIGSTOP); nil in
	// process.
	Cmd *exec.Cmd
	// Manager is the replica in process; nil for the binary.
	Manager ctrl.Manager
	// Started is when it was started.
	Started time.Time

	cancel context.CancelFunc
	exited chan struct{}
	err    error
	// grace is Gatefold.StopGrace; configDir holds the binary's kubeconfig.
	grace     time.Duration
	configDir string
}

// Start runs the replicas g asks for, as the ServiceAccount of g's overlay,
// and unless g.NoWait waits until each answers /readyz. A replica in process
// runs until ctx ends or it is stopped; on an error Start stops those it
// started. It needs no *testing.T, for TestMain and the bench.
func Start(ctx context.Context, env *devenv.Env, g Gatefold) ([]*Replica, error) {
	if g.Overlay == "" {
		g.Overlay = "default"
	}
	if g.Name == "" {
		g.Name = "gatefold"
	}
	if g.Binary != "" && g.Dir == "" {
		return nil, errors.New("starting gatefold: a binary needs Dir, for its log")
	}
	if g.Binary == "" && len(g.Env) > 0 {
		return nil, errors.New("starting gatefold: Env is for the binary; in process, set Options")
	}
	if g.Apply {
		if err := apply(ctx, env, g.Overlay); err != nil {
			return nil, err
		}
	}
	installed := g.Installed
	if installed == nil {
		var err error
		if installed, err = Install(ctx, env, g.Overlay); err != nil {
			return nil, err
		}
	}
	var replicas []*Replica
	failed := func(err error) ([]*Replica, error) {
		_ = StopAll(replicas)
		return nil, err
	}
	for i := range max(g.Replicas, 1) {
		r := &Replica{Name: g.Name, exited: make(chan struct{}), grace: g.StopGrace}
		if g.Replicas > 1 {
			r.Name = fmt.Sprintf("%s-%d", g.Name, i)
		}
		args, err := r.addresses(g.Args)
		if err != nil {
			return failed(err)
		}
		if i == 0 && g.PointWebhooks {
			if err := pointWebhooks(ctx, env.Client, "https://"+r.WebhookAddr); err != nil {
				return failed(err)
			}
		}
		if g.Binary != "" {
			err = r.startBinary(installed, g, args)
		} else {
			err = r.startInProcess(ctx, installed.Config, g, args)
		}
		if err != nil {
			return failed(fmt.Errorf("starting gatefold replica %s: %w", r.Name, err))
		}
		replicas = append(replicas, r)
	}
	if !g.NoWait {
		for _, r := range replicas {
			if err := r.WaitReady(ctx); err != nil {
				return failed(err)
			}
		}
	}
	return replicas, nil
}

// MustStart is Start for one test: it fails t when a replica does not
// start, and at the end of the test stops the replicas and fails t for every
// request the API server refused a process (CheckLogFile). Dir defaults to
// a temporary folder.
func MustStart(t testing.TB, env *devenv.Env, g Gatefold) []*Replica {
	t.Helper()
	if g.Dir == "" {
		g.Dir = t.TempDir()
	}
	replicas, err := Start(context.Background(), env, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			if err := r.Stop(); err != nil {
				t.Error(err)
			}
			if r.Log != "" {
				CheckLogFile(t, r.Log)
			}
		}
	})
	return replicas
}

// StopAll stops every replica and returns their errors joined.
func StopAll(replicas []*Replica) error {
	var errs []error
	for _, r := range replicas {
		errs = append(errs, r.Stop())
	}
	return errors.Join(errs...)
}

// addresses returns args with the replica's own addresses added where args
// lack them, and records them in r.
func (r *Replica) addresses(args []string) ([]string, error) {
	args = append([]string(nil), args...)
	port, ok := flagValue(args, "webhook-port")
	if !ok {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		port = strconv.Itoa(p)
		args = append(args, "--webhook-port="+port)
	}
	r.WebhookAddr = net.JoinHostPort("127.0.0.1", port)
	probes, ok := flagValue(args, "health-probe-bind-address")
	if !ok {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		probes = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		args = append(args, "--health-probe-bind-address="+probes)
	}
	if host, port, err := net.SplitHostPort(probes); err == nil && host == "" {
		probes = net.JoinHostPort("127.0.0.1", port)
	}
	r.ProbeAddr = probes
	if _, ok := flagValue(args, "metrics-bind-address"); !ok {
		args = append(args, "--metrics-bind-address=0")
	}
	return args, nil
}

// flagValue returns the last value args give the flag name, which takes a
// value: -name=v, --name=v, -name v or --name v.
func flagValue(args []string, name string) (string, bool) {
	var value string
	found := false
	for i := 0; i < len(args); i++ {
		arg, ok := strings.CutPrefix(args[i], "-")
		if !ok {
			continue
		}
		arg = strings.TrimPrefix(arg, "-")
		if k, v, ok := strings.Cut(arg, "="); ok && k == name {
			value, found = v, true
		} else if arg == name && i+1 < len(args) {
			value, found = args[i+1], true
			i++
		}
	}
	return value, found
}

// startInProcess parses args as `gatefold manager` does and runs the
// replica in this process, its webhook server on loopback.
func (r *Replica) startInProcess(ctx context.Context, cfg *rest.Config, g Gatefold, args []string) error {
	var o app.Options
	fs := flag.NewFlagSet("gatefold manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing %q: %w", args, err)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	o.WebhookHost, o.Identity = "127.0.0.1", r.Name
	if g.Options != nil {
		g.Options(&o)
	}
	cfg = rest.CopyConfig(cfg)
	var err error
	if cfg.Host, err = serverURL(cfg.Host, g.Server); err != nil {
		return err
	}
	mgr, err := app.New(ctx, cfg, o)
	if err != nil {
		return err
	}
	r.Manager = mgr
	ctx, r.cancel = context.WithCancel(ctx)
	r.Started = time.Now()
	go func() {
		r.err = mgr.Start(ctx)
		if r.err != nil && ctx.Err() == nil {
			ctrl.Log.Error(r.err, "A gatefold replica ended before it was stopped", "replica", r.Name)
		}
		close(r.exited)
	}()
	return nil
}

// startBinary runs `gatefold manager` with args as installed's
// ServiceAccount, logging into Dir; its kubeconfig is in a temporary folder
// that Stop removes.
func (r *Replica) startBinary(installed *Installed, g Gatefold, args []string) error {
	dir, err := os.MkdirTemp("", "gatefold-"+r.Name+"-")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := installed.WriteKubeconfig(kubeconfig, g.Server); err != nil {
		os.RemoveAll(dir)
		return err
	}
	r.Log = filepath.Join(g.Dir, r.Name+".log")
	log, err := os.Create(r.Log)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	r.Cmd = exec.Command(g.Binary, append([]string{"manager", "--kubeconfig", kubeconfig}, args...)...)
	r.Cmd.Env = append(append(append(os.Environ(), "POD_NAME="+r.Name), installed.Env...), g.Env...)
	r.Cmd.Stdout, r.Cmd.Stderr = log, log
	r.Started = time.Now()
	if err := r.Cmd.Start(); err != nil {
		log.Close()
		os.RemoveAll(dir)
		return err
	}
	r.configDir = dir
	go func() { r.err = r.Cmd.Wait(); log.Close(); close(r.exited) }()
	return nil
}

// Exited is closed once the replica has ended.
func (r *Replica) Exited() <-chan struct{} { return r.exited }

// Err is how the replica ended, once Exited is closed: the process's exit
// status, or the manager's error in process (nil when it was stopped
// cleanly).
func (r *Replica) Err() error {
	<-r.exited
	return r.err
}

// Stop ends the replica as a rolling update does, SIGTERM for a process
// (killed if it is not gone within StopGrace), and waits until it has
// ended. In process it cancels the manager and returns its error, if any.
func (r *Replica) Stop() error {
	if r.Cmd == nil {
		r.cancel()
		if err := r.Err(); err != nil {
			return fmt.Errorf("gatefold replica %s ended: %w", r.Name, err)
		}
		return nil
	}
	defer os.RemoveAll(r.configDir)
	grace := r.grace
	if grace == 0 {
		grace = process.StopWait
	}
	return process.StopWithin("gatefold replica "+r.Name, r.Cmd, r.exited, grace)
}

// WaitReady waits until the replica's /readyz answers 200, and fails at once
// when it ends first.
func (r *Replica) WaitReady(ctx context.Context) error {
	return r.WaitReadyWithin(ctx, readyWithin)
}

// WaitReadyWithin is WaitReady for at most within, for a replica whose
// informers have many objects to list.
func (r *Replica) WaitReadyWithin(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := c.Get("http://" + r.ProbeAddr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("gatefold replica %s ended before it was ready (%v)%s", r.Name, r.err, r.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("gatefold replica %s is not ready after %v%s", r.Name, within, r.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LogTail is the end of the binary's log, for an error message.
func (r *Replica) LogTail() string {
	if r.Log == "" {
		return ""
	}
	b, _ := os.ReadFile(r.Log)
	return fmt.Sprintf("; its log %s ends:\n%s", r.Log, b[max(0, len(b)-4000):])
}

// apply applies config/<overlay> with the control plane's kubectl, as the
// administrator, whose kubeconfig it writes to a temporary folder and
// removes.
func apply(ctx context.Context, env *devenv.Env, overlay string) error {
	root, err := devenv.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gatefold-apply-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig, err := env.WriteKubeconfig(filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(env.AssetsDir, "kubectl"), "--kubeconfig", kubeconfig, "apply", "--server-side", "-k", filepath.Join(root, "config", overlay))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("applying config/%s: %w\n%s", overlay, err, out)
	}
	return nil
}

// MustBuildGatefold returns $GATEFOLD_BINARY, or builds the working tree's
// gatefold into a temporary folder of t.
func MustBuildGatefold(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("GATEFOLD_BINARY"); bin != "" {
		return bin
	}
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "gatefold")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gatefold")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("Building gatefold: %v\n%s", err, out)
	}
	return bin
}

// listenFlags are the flags that say where a replica listens.
var listenFlags = []string{"webhook-port", "health-probe-bind-address", "metrics-bind-address"}

// LocalArgs is args as installed (Installed.Args) without the flags that
// say where to listen, so that Start picks free loopback addresses.
func LocalArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, _ := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !slices.Contains(listenFlags, name) {
			out = append(out, args[i])
		} else if !strings.Contains(args[i], "=") {
			i++ // the flag's value is the next argument
		}
	}
	return out
}
