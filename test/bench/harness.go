package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

const systemNamespace = "gatefold-system"

// harness holds the control plane and the gatefold processes under test.
type harness struct {
	env        *devenv.Env
	bin        string
	dir        string
	kubeconfig string
	audit      string
	// webhooks are the webhook configurations envtest installed, kept so
	// that phases can run with and without them.
	webhooks []client.Object
	managers []*manager
	// observer reads for the harness itself; it is never counted.
	observer client.WithWatch
}

func newHarness(env *devenv.Env, bin, dir string) (*harness, error) {
	h := &harness{env: env, bin: bin, dir: dir, audit: filepath.Join(dir, "audit.log")}
	var err error
	if h.observer, err = client.NewWithWatch(h.config("bench-observer"), client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}); err != nil {
		return nil, err
	}
	// gatefold runs as the ServiceAccount and RBAC of config/default, as
	// installed; the writers and the observer are the administrator.
	installed, err := testenv.Install(ctx, env, "default")
	if err != nil {
		return nil, err
	}
	h.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := installed.WriteKubeconfig(h.kubeconfig); err != nil {
		return nil, err
	}
	m := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := env.Client.List(ctx, m); err != nil {
		return nil, err
	}
	if err := env.Client.List(ctx, v); err != nil {
		return nil, err
	}
	for i := range m.Items {
		h.webhooks = append(h.webhooks, &m.Items[i])
	}
	for i := range v.Items {
		h.webhooks = append(h.webhooks, &v.Items[i])
	}
	return h, h.setWebhooks(ctx, false)
}

// config is a rest config whose requests the audit log attributes to agent,
// unthrottled so that the client never limits what is measured.
func (h *harness) config(agent string) *rest.Config {
	cfg := rest.CopyConfig(h.env.Config)
	cfg.UserAgent = agent
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

func (h *harness) client(agent string) (client.Client, error) {
	return client.New(h.config(agent), client.Options{Scheme: scheme.New()})
}

// setWebhooks installs or removes gatefold's webhook configurations, and
// waits for the API server to use the change.
func (h *harness) setWebhooks(ctx context.Context, on bool) error {
	for _, w := range h.webhooks {
		obj := w.DeepCopyObject().(client.Object)
		obj.SetResourceVersion("")
		obj.SetUID("")
		var err error
		if on {
			err = client.IgnoreAlreadyExists(h.env.Client.Create(ctx, obj))
		} else {
			err = client.IgnoreNotFound(h.env.Client.Delete(ctx, obj))
		}
		if err != nil {
			return fmt.Errorf("switching webhooks: %w", err)
		}
	}
	time.Sleep(2 * time.Second) // the API server's webhook informer
	return nil
}

// manager is one `gatefold manager` process.
type manager struct {
	name    string
	cmd     *exec.Cmd
	metrics string
	log     string
	exited  chan error
	started time.Time
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startManager starts a replica; the first one serves the webhooks the
// control plane calls, later ones serve on ports nobody calls.
func (h *harness) startManager(name string, webhookPort int) (*manager, error) {
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	probes, err := freePort()
	if err != nil {
		return nil, err
	}
	m := &manager{name: name, metrics: fmt.Sprintf("127.0.0.1:%d", metrics), log: filepath.Join(h.dir, name+".log"), exited: make(chan error, 1)}
	logFile, err := os.Create(m.log)
	if err != nil {
		return nil, err
	}
	lease := h.leaseArgs()
	m.cmd = exec.Command(h.bin, append([]string{"manager", "--kubeconfig", h.kubeconfig,
		"--metrics-bind-address", m.metrics, "--metrics-secure=false", "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probes),
		"--webhook-port", strconv.Itoa(webhookPort), "--webhook-cert-dir", h.env.WebhookCertDir(),
		"--leader-election-namespace", systemNamespace, "--claims-namespace", systemNamespace,
		"--zap-log-level", "error"}, lease...)...)
	m.cmd.Env = append(os.Environ(), "POD_NAME="+name)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.started = time.Now()
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.exited <- m.cmd.Wait(); logFile.Close() }()
	h.managers = append(h.managers, m)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probes)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("manager %s is not ready after 60s, see %s", name, m.log)
		}
	}
}

// leaseDuration is set per run by scaleAndFailover; the rest keep
// gatefold's ratios (renew deadline 2/3, retry period 2/15 of it).
var leaseDuration = 15 * time.Second

func (h *harness) leaseArgs() []string {
	return []string{
		"--leader-election-lease-duration", leaseDuration.String(),
		"--leader-election-renew-deadline", (leaseDuration * 2 / 3).String(),
		"--leader-election-retry-period", (leaseDuration * 2 / 15).String(),
	}
}

// stop ends a replica gracefully, as a rolling update does.
func (m *manager) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

func (h *harness) stopManagers() {
	for _, m := range h.managers {
		if m.cmd.ProcessState == nil {
			_ = m.cmd.Process.Kill()
		}
	}
}

// checkRefusals fails the run when a replica logged that the API server
// refused it a request: the shipped RBAC would then not carry what was
// measured.
func (h *harness) checkRefusals() error {
	var refused []string
	for _, m := range h.managers {
		lines, err := testenv.ForbiddenInFile(m.log)
		if err != nil {
			return err
		}
		for _, line := range lines {
			refused = append(refused, m.name+": "+line)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("gatefold, run as installed, was refused requests:\n%s", strings.Join(refused, "\n"))
	}
	return nil
}

// peakRSS is the process's peak resident set, from /proc.
func (m *manager) peakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", m.cmd.Process.Pid)
}

// counter sums a counter of the replica's metrics over series whose labels
// include every given label.
func (m *manager) counter(name string, labels map[string]string) (float64, error) {
	resp, err := http.Get("http://" + m.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0.0
	f, ok := families[name]
	if !ok {
		return 0, nil
	}
series:
	for _, s := range f.GetMetric() {
		for _, l := range s.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
				continue series
			}
		}
		total += s.GetCounter().GetValue()
	}
	return total, nil
}

// writes counts the API writes audited between from and to, by who made
// them: "writers", "gatefold" or other, and how many were 409 conflicts.
type writes struct {
	Writers   int `json:"writers"`
	Gatefold  int `json:"gatefold"`
	Conflicts int `json:"conflicts"`
	// LeaderLease are gatefold's renewals of its leader Lease, apart.
	LeaderLease int `json:"leaderLease"`
}

func (h *harness) countWrites(from, to time.Time) (writes, error) {
	var w writes
	events, err := testenv.ReadAuditLog(h.audit)
	if err != nil {
		return w, err
	}
	for _, e := range events {
		if e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) {
			continue
		}
		switch {
		case strings.HasPrefix(e.UserAgent, "bench-writer"):
			w.Writers++
		case e.ObjectRef.Name == "gatefold-leader":
			w.LeaderLease++
			continue
		case strings.HasPrefix(e.UserAgent, "gatefold/"):
			w.Gatefold++
		default:
			continue
		}
		if e.ResponseStatus.Code == http.StatusConflict {
			w.Conflicts++
		}
	}
	return w, nil
}
