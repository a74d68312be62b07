package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gatefold/gatefold/certs"
	"github.com/gatefold/gatefold/internal/app"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
)

const devNamespace = "gatefold-system"

func runDev(args []string) error {
	fs := newFlagSet("dev", "Run a local control plane (kube-apiserver, etcd and kube-controller-manager built by `make controlplane`) with the Gateway API and gatefold CRDs, gatefold's webhooks and merger in this process, and the samples applied, until interrupted")
	assets := fs.String("control-plane", "", "Folder holding kube-apiserver, kube-controller-manager, etcd and kubectl (default $KUBEBUILDER_ASSETS, then bin/controlplane)")
	kubeconfigOut := fs.String("kubeconfig-out", filepath.Join("bin", "dev", "kubeconfig"), "Where to write the kubeconfig of the control plane")
	samples := fs.String("samples", "", "Kustomize folder applied once gatefold serves (default config/samples of the repository; \"none\" applies nothing)")
	traefik := fs.String("traefik", "", "The traefik executable run as the Gateway implementation (default $GATEFOLD_TRAEFIK, then bin/traefik/traefik, which `make traefik` builds); \"none\" runs none")
	logFile := fs.String("log-file", filepath.Join("bin", "dev", "gatefold.log"), "Where gatefold's log goes, human-readable, so that it does not bury the summary; \"-\" is standard error")
	metricsAddr := fs.String("metrics-bind-address", "127.0.0.1:8080", "Loopback address where gatefold's Prometheus metrics are served, over plain HTTP to anyone; \"0\" serves none")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkDevMetricsAddress(*metricsAddr); err != nil {
		return err
	}
	logs, err := devLog(*logFile)
	if err != nil {
		return err
	}
	defer logs.Close()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.ConsoleEncoder(), zap.WriteTo(logs)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("Starting the control plane...")
	env, err := devenv.Start(devenv.Options{AssetsDir: *assets, Webhooks: true})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping the control plane...")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "gatefold: %v\n", err)
		}
	}()
	kubeconfig, err := env.WriteKubeconfig(*kubeconfigOut)
	if err != nil {
		return err
	}

	managerDone, err := startDevManager(ctx, env, *metricsAddr)
	if err != nil {
		return err
	}
	var dp *dataplane.DataPlane
	if *traefik != "none" {
		fmt.Println("Starting Traefik and the echo backends...")
		if dp, err = startDevDataPlane(ctx, env, kubeconfig, *traefik); err != nil {
			return err
		}
		defer func() { _ = dp.Stop() }()
	}
	if *samples != "none" {
		var served *servedSamples
		if *samples == "" && dp != nil {
			if served, err = sampleCertificates(ctx, env, filepath.Dir(kubeconfig), dp); err != nil {
				return err
			}
		}
		if err := env.ApplySamples(ctx, kubeconfig, *samples, os.Stdout); err != nil {
			return err
		}
		if served != nil {
			if err := served.print(ctx, os.Stdout); err != nil {
				return err
			}
		}
	}
	metrics, err := devMetrics(ctx, *metricsAddr)
	if err != nil {
		return err
	}
	fmt.Printf(`
The control plane is up at %s (Kubernetes v1.37.2, Gateway API standard CRDs,
gatefold CRDs), with gatefold's webhooks and merger running in this process
as cluster-admin: an install runs them as ServiceAccount
gatefold-controller-manager with only the RBAC in config/rbac.

gatefold's log: %s
%s
Use it with the kubectl built beside it:

  export KUBECONFIG=%s
  %s get listenerfragments -A

Press Ctrl-C to stop; the control plane and its data go with it.
`, env.Config.Host, *logFile, metrics, kubeconfig, filepath.Join(env.AssetsDir, "kubectl"))

	select {
	case <-ctx.Done():
		return <-managerDone
	case err := <-managerDone:
		return err
	}
}

// devBackends are the echo backends `gatefold dev` runs, one per sample route.
var devBackends = []string{"checkout", "catalog"}

// startDevDataPlane runs Traefik as the implementation of the samples'
// GatewayClass, with the samples' echo backends, all on loopback.
func startDevDataPlane(ctx context.Context, env *devenv.Env, kubeconfig, binary string) (*dataplane.DataPlane, error) {
	bin, err := dataplane.FindBinary(binary)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(filepath.Dir(kubeconfig), "traefik")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating Traefik's folder: %w", err)
	}
	return dataplane.Start(ctx, env.Client, dataplane.Options{Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Backends: devBackends})
}

// servedSamples are the sample routes as Traefik serves them.
type servedSamples struct {
	ca     *dataplane.Authority
	caFile string
	dp     *dataplane.DataPlane
}

// sampleCertificates creates the certificate Secrets the samples' HTTPS
// listeners name, signed by a throwaway authority written to dir/ca.crt.
func sampleCertificates(ctx context.Context, env *devenv.Env, dir string, dp *dataplane.DataPlane) (*servedSamples, error) {
	ca, err := dataplane.NewAuthority()
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing the data plane's CA: %w", err)
	}
	for _, s := range []struct{ ns, name, host string }{
		{"shop", "checkout-tls", "checkout.example.com"},
		{"shop", "catalog-tls", "catalog.example.com"},
		{"infra", "legacy-tls", "legacy.example.com"},
	} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating namespace %s: %w", s.ns, err)
		}
		secret, err := ca.TLSSecret(s.ns, s.name, s.host)
		if err != nil {
			return nil, err
		}
		if err := env.Client.Create(ctx, secret); err != nil {
			return nil, fmt.Errorf("creating Secret %s/%s: %w", s.ns, s.name, err)
		}
	}
	return &servedSamples{ca: ca, caFile: caFile, dp: dp}, nil
}

// print waits until Traefik serves each sample route, then prints the curl
// lines that reach them: a line printed works when it is printed.
func (s *servedSamples) print(ctx context.Context, w io.Writer) error {
	type line struct{ backend, host, scheme string }
	var curls []string
	for _, l := range []line{{"checkout", "checkout.example.com", "https"}, {"catalog", "catalog.example.com", "https"}, {"catalog", "catalog.example.com", "http"}} {
		port, cacert := s.dp.HTTPSPort, fmt.Sprintf("--cacert %s ", s.caFile)
		if l.scheme == "http" {
			port, cacert = s.dp.HTTPPort, ""
		}
		url := fmt.Sprintf("%s://%s:%d/", l.scheme, l.host, port)
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		err := s.ca.WaitServed(wait, url, "backend="+l.backend+" ")
		cancel()
		if err != nil {
			return fmt.Errorf("the samples are not served by Traefik (its log: %s): %w", s.dp.LogPath, err)
		}
		curls = append(curls, fmt.Sprintf("  curl %s--resolve %s:%d:127.0.0.1 %s", cacert, l.host, port, url))
	}
	_, err := fmt.Fprintf(w, "\nTraefik serves the Gateway on 127.0.0.1 (its log: %s), and the routes\nreach the echo backends:\n\n%s\n", s.dp.LogPath, strings.Join(curls, "\n"))
	return err
}

// devLog opens the dev log: path, created with its folder, or standard error
// for "-".
func devLog(path string) (io.WriteCloser, error) {
	if path == "-" {
		return nopCloser{os.Stderr}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the folder of the log: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// checkDevMetricsAddress refuses a metrics address off loopback, where
// metrics served without authentication would reach the network, and one
// whose port is taken.
func checkDevMetricsAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--metrics-bind-address is %q: metrics are served without authentication: give a loopback address, such as 127.0.0.1:8080", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s, where gatefold dev serves metrics, is taken (is another `make dev` running?); --metrics-bind-address moves them: %w", addr, err)
	}
	return l.Close()
}

// devMetrics waits until gatefold serves its metrics on addr, then returns
// the paragraph that says where, and which to watch (those of
// docs/operations.md's alerts): a curl line printed works when it is
// printed. It returns "" for "0".
func devMetrics(ctx context.Context, addr string) (string, error) {
	if addr == "0" {
		return "", nil
	}
	url := "http://" + addr + "/metrics"
	c := &http.Client{Timeout: 2 * time.Second}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := c.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "\ngatefold_merger_folds_total "), nil
	})
	if err != nil {
		return "", fmt.Errorf("gatefold's metrics are not served at %s (last: %s): %w", url, last, err)
	}
	return fmt.Sprintf(`
gatefold's metrics: %s, over plain HTTP (an install serves them
over HTTPS, to scrapers the API server authorizes). Watch
gatefold_merger_listeners (fragment listeners per Gateway: folded,
conflicted, too_many), gatefold_merger_conflicts_total (listeners that
stopped being folded, by reason) and gatefold_merger_gateway_applies_total
(Gateway writes; result="error" is a fold the API server refused):

  curl -s %s | grep ^gatefold_
`, url, url), nil
}

// startDevManager runs one replica, without leader election, serving the
// webhooks the control plane was configured to call and its metrics on
// metricsAddr over plain HTTP.
func startDevManager(ctx context.Context, env *devenv.Env, metricsAddr string) (<-chan error, error) {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", devNamespace, err)
	}
	// The manager's defaults, then what a process beside its own control
	// plane needs.
	var o app.Options
	o.BindFlags(flag.NewFlagSet("manager", flag.ContinueOnError))
	o.Metrics.BindAddress, o.Metrics.Secure, o.ProbeAddr = metricsAddr, false, "0"
	o.WebhookHost, o.WebhookPort = env.WebhookHost(), env.WebhookPort()
	o.CertDir = env.WebhookCertDir() // envtest's, which the API server trusts
	o.Certs.Mode = certs.ModeCertManager
	o.Webhook.ClaimsNamespace = devNamespace
	o.Webhook.ClaimGrace, o.Webhook.CollectPeriod = 30*time.Second, 15*time.Second
	o.LeaderElect = false
	// Traefik v3.6 does not support ListenerSets: a ListenerSet applied to
	// the samples' Gateway folds like a fragment.
	o.ListenerSetControllers = []string{dataplane.ControllerName}
	o.Version = version
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, env.Config, o) }()
	return done, nil
}
