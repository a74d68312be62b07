package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gatefold/gatefold/certs"
	"github.com/gatefold/gatefold/internal/devenv"
)

const devNamespace = "gatefold-system"

// devController is the controllerName of the samples' GatewayClass
// (config/samples/gatewayclass.yaml).
const devController = "example.com/gateway-controller"

func runDev(args []string) error {
	fs := newFlagSet("dev", "Run a local control plane (kube-apiserver and etcd built by `make controlplane`) with the Gateway API and gatefold CRDs, gatefold's webhooks and merger in this process, and the samples applied, until interrupted")
	assets := fs.String("control-plane", "", "Folder holding kube-apiserver, etcd and kubectl (default $KUBEBUILDER_ASSETS, then bin/controlplane)")
	kubeconfigOut := fs.String("kubeconfig-out", filepath.Join("bin", "dev", "kubeconfig"), "Where to write the kubeconfig of the control plane")
	samples := fs.String("samples", "", "Kustomize folder applied once gatefold serves (default config/samples of the repository; \"none\" applies nothing)")
	logFile := fs.String("log-file", filepath.Join("bin", "dev", "gatefold.log"), "Where gatefold's log goes, human-readable, so that it does not bury the summary; \"-\" is standard error")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
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

	managerDone, err := startDevManager(ctx, env)
	if err != nil {
		return err
	}
	if *samples != "none" {
		if err := env.ApplySamples(ctx, kubeconfig, *samples, os.Stdout); err != nil {
			return err
		}
	}
	fmt.Printf(`
The control plane is up at %s (Kubernetes v1.37.2, Gateway API standard CRDs,
gatefold CRDs), with gatefold's webhooks and merger running in this process
as cluster-admin: an install runs them as ServiceAccount
gatefold-controller-manager with only the RBAC in config/rbac.

gatefold's log: %s

Use it with the kubectl built beside it:

  export KUBECONFIG=%s
  %s get listenerfragments -A

Press Ctrl-C to stop; the control plane and its data go with it.
`, env.Config.Host, *logFile, kubeconfig, filepath.Join(env.AssetsDir, "kubectl"))

	select {
	case <-ctx.Done():
		return <-managerDone
	case err := <-managerDone:
		return err
	}
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

// startDevManager runs one replica, without leader election, serving the
// webhooks the control plane was configured to call.
func startDevManager(ctx context.Context, env *devenv.Env) (<-chan error, error) {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", devNamespace, err)
	}
	// The manager's defaults, then what a process beside its own control
	// plane needs.
	var o managerOptions
	o.bindFlags(flag.NewFlagSet("manager", flag.ContinueOnError))
	o.metrics.bindAddress, o.probeAddr = "0", "0"
	o.webhookHost, o.webhookPort = env.WebhookHost(), env.WebhookPort()
	o.certDir = env.WebhookCertDir() // envtest's, which the API server trusts
	o.certs.mode = certs.ModeCertManager
	o.webhook.ClaimsNamespace = devNamespace
	o.webhook.ClaimGrace, o.webhook.CollectPeriod = 30*time.Second, 15*time.Second
	o.leaderElect = false
	// The samples' class has no implementation, so no ListenerSet support:
	// a ListenerSet applied to its Gateway folds like a fragment.
	o.listenerSetControllers = []string{devController}
	done := make(chan error, 1)
	go func() { done <- startManager(ctx, env.Config, o) }()
	return done, nil
}
