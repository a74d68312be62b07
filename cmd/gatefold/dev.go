package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gatefold/gatefold/test/testenv"
)

func runDev(args []string) error {
	fs := newFlagSet("dev", "Run a local control plane (kube-apiserver and etcd built by `make controlplane`) with the Gateway API and gatefold CRDs, until interrupted")
	assets := fs.String("control-plane", "", "Folder holding kube-apiserver, etcd and kubectl (default $KUBEBUILDER_ASSETS, then bin/controlplane)")
	kubeconfigOut := fs.String("kubeconfig-out", filepath.Join("bin", "dev", "kubeconfig"), "Where to write the kubeconfig of the control plane")
	if err := fs.Parse(args); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("Starting the control plane...")
	env, err := testenv.Start(testenv.Options{AssetsDir: *assets})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping the control plane...")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "gatefold: %v\n", err)
		}
	}()

	kc, err := env.Kubeconfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*kubeconfigOut), 0o755); err != nil {
		return fmt.Errorf("creating kubeconfig folder: %w", err)
	}
	if err := os.WriteFile(*kubeconfigOut, kc, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	kubeconfig, _ := filepath.Abs(*kubeconfigOut)
	kubectl := filepath.Join(env.AssetsDir, "kubectl")
	fmt.Printf(`
The control plane is up at %s (Kubernetes v1.37.2, Gateway API standard CRDs, gatefold CRDs).

Use it with the kubectl built beside it:

  export KUBECONFIG=%s
  %s get crd

Press Ctrl-C to stop; the control plane and its data go with it.
`, env.Config.Host, kubeconfig, kubectl)

	<-ctx.Done()
	return nil
}
