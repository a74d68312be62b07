package conformance

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

const (
	// overlay is the install the suite judges: gatefold serving its own
	// webhooks without cert-manager.
	overlay = "self-signed"
	// installNamespace is the overlay's namespace.
	installNamespace = "gatefold-system"
	// binaryEnv names a gatefold binary to run instead of one built from
	// the working tree (make conformance passes bin/gatefold).
	binaryEnv = "GATEFOLD_BINARY"
)

// gatefoldBinary returns $GATEFOLD_BINARY, or builds the working tree's
// gatefold into a temporary folder.
func gatefoldBinary(t *testing.T, root string) string {
	t.Helper()
	if bin := os.Getenv(binaryEnv); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "gatefold")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gatefold")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("Building gatefold: %v\n%s", err, out)
	}
	return bin
}

// startGatefold installs the overlay with kubectl as a user does, points its
// webhooks at a local port, and runs `gatefold manager` there as the
// overlay's ServiceAccount (never as cluster-admin), folding the
// ListenerSets of the stub's class. It stops gatefold at the end of the test
// and then fails it for every request the API server refused gatefold. It
// returns the version of the gatefold it runs.
func startGatefold(t *testing.T, env *devenv.Env, root, logDir string) string {
	t.Helper()
	ctx := context.Background()
	adminKubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	kc, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adminKubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := exec.Command(filepath.Join(env.AssetsDir, "kubectl"), "apply", "--server-side", "-k", filepath.Join(root, "config", overlay))
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+adminKubeconfig)
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("Installing config/%s: %v\n%s", overlay, err, out)
	}
	port, probes := testenv.MustFreePort(t), testenv.MustFreePort(t)
	testenv.PointWebhooksAt(t, env.Client, fmt.Sprintf("https://127.0.0.1:%d", port))

	installed, err := testenv.Install(ctx, env, overlay)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "gatefold.kubeconfig")
	if err := installed.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(logDir, "gatefold.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	bin := gatefoldBinary(t, root)
	cmd := exec.Command(bin, "manager", "--kubeconfig", kubeconfig,
		"--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes), "--metrics-bind-address=0", "--leader-elect=false",
		"--listenerset-controllers="+stubControllerName)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+installNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		testenv.CheckLogFile(t, logPath)
	})
	waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", probes), logPath, exited)
	waitCABundles(t, env.Client)
	return gatefoldVersion(t, bin)
}

// waitCABundles waits until gatefold has given every webhook the CA bundle
// that lets the API server call it, so that no request the suite makes is
// refused, or let through unchecked, for want of it.
func waitCABundles(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-mutating-webhook-configuration"}, m); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-validating-webhook-configuration"}, v); err != nil {
			t.Fatal(err)
		}
		injected := true
		for _, w := range m.Webhooks {
			injected = injected && len(w.ClientConfig.CABundle) > 0
		}
		for _, w := range v.Webhooks {
			injected = injected && len(w.ClientConfig.CABundle) > 0
		}
		if injected {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("gatefold has not injected its CA bundle into its webhook configurations after 60s")
		}
	}
}

// waitReady waits until gatefold answers on url, failing at once if it exits.
func waitReady(t *testing.T, url, logPath string, exited <-chan struct{}) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("gatefold exited before it was ready; log:\n%s", b)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("%s is not ready after 60s; log:\n%s", url, b)
}
