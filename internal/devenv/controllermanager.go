package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatefold/gatefold/internal/process"
)

// controllers are the kube-controller-manager controllers that delete what a
// real cluster deletes (a namespace's content with it, and dependents with
// their controller owner) and that fill the aggregated ClusterRoles admin,
// edit and view. The others need nodes, a cloud or signing keys.
var controllers = []string{"namespace-controller", "garbage-collector-controller", "clusterrole-aggregation-controller"}

// controllerManager is kube-controller-manager running beside the API server.
type controllerManager struct {
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logFile *os.File
}

// startControllerManager runs kube-controller-manager from assets against
// env's API server as an administrator, serving its health checks on
// loopback only, and returns once /healthz answers. Its output reaches the
// terminal when envtest attaches the control plane's, as the API server's
// does; else it goes to a log file that a failed start quotes.
func startControllerManager(ctx context.Context, env *envtest.Environment, assets string) (*controllerManager, error) {
	dir, err := os.MkdirTemp("", "gatefold-kube-controller-manager-")
	if err != nil {
		return nil, fmt.Errorf("creating kube-controller-manager's folder: %w", err)
	}
	m := &controllerManager{dir: dir, exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			_ = m.stop()
		}
	}()
	kc, err := adminKubeconfig(env, "system:kube-controller-manager")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, fmt.Errorf("writing kube-controller-manager's kubeconfig: %w", err)
	}
	port, err := process.FreeLoopbackPort()
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+dir,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
	)
	if env.AttachControlPlaneOutput {
		m.cmd.Stdout, m.cmd.Stderr = os.Stdout, os.Stderr
	} else {
		if m.logFile, err = os.Create(m.logPath()); err != nil {
			return nil, fmt.Errorf("creating kube-controller-manager's log: %w", err)
		}
		m.cmd.Stdout, m.cmd.Stderr = m.logFile, m.logFile
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	go func() { m.waitErr = m.cmd.Wait(); close(m.exited) }()
	if err := m.waitHealthy(ctx, port); err != nil {
		return nil, fmt.Errorf("%w; its log ends:\n%s", err, m.logTail(20))
	}
	ok = true
	return m, nil
}

func (m *controllerManager) logPath() string {
	return filepath.Join(m.dir, "kube-controller-manager.log")
}

// waitHealthy waits until /healthz answers 200 over the TLS of the
// self-signed certificate kube-controller-manager wrote into its folder.
func (m *controllerManager) waitHealthy(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = m.healthz(ctx, url); last == nil {
			return nil
		}
		select {
		case <-m.exited:
			return fmt.Errorf("kube-controller-manager exited before it was healthy: %v", m.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager is not healthy at %s after a minute: %w", url, last)
		case <-tick.C:
		}
	}
}

func (m *controllerManager) healthz(ctx context.Context, url string) error {
	pem, err := os.ReadFile(filepath.Join(m.dir, "kube-controller-manager.crt"))
	if err != nil {
		return fmt.Errorf("reading its serving certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answered %s: %s", resp.Status, body)
	}
	return nil
}

// logTail returns the last n lines of the log file, for an error message.
func (m *controllerManager) logTail(n int) string {
	if m.logFile == nil {
		return "(on the terminal)"
	}
	b, err := os.ReadFile(m.logPath())
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", m.logPath(), err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// stop stops kube-controller-manager (SIGTERM, then SIGKILL after 10s) and
// removes its folder.
func (m *controllerManager) stop() error {
	errs := []error{process.Stop("kube-controller-manager", m.cmd, m.exited)}
	m.cmd = nil
	if m.logFile != nil {
		errs = append(errs, m.logFile.Close())
		m.logFile = nil
	}
	errs = append(errs, os.RemoveAll(m.dir))
	return errors.Join(errs...)
}
