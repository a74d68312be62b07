package main

import (
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/webhook"
)

func runManager(args []string) error {
	fs := newFlagSet("manager", "Run the webhook server and the leader-elected merger against a cluster")
	metricsAddr := fs.String("metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; 0 disables it")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to")
	webhookPort := fs.Int("webhook-port", 9443, "Port the admission webhook server listens on")
	certDir := fs.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Folder holding the webhook server's tls.crt and tls.key")
	whOpts := webhook.Options{}
	fs.StringVar(&whOpts.ClaimsNamespace, "claims-namespace", envOr("POD_NAMESPACE", "gatefold-system"), "Namespace holding the listener claims (gatefold's own; tenants must have no rights there)")
	fs.DurationVar(&whOpts.ClaimGrace, "claim-grace", 30*time.Second, "How long a claim no fragment wants is kept before it is released; longer than any admission request")
	fs.DurationVar(&whOpts.CollectPeriod, "claim-collect-period", 15*time.Second, "How often orphaned claims are collected")
	config.RegisterFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		WebhookServer:          ctrlwebhook.NewServer(ctrlwebhook.Options{Port: *webhookPort, CertDir: *certDir}),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if _, err := webhook.Setup(ctx, mgr, whOpts); err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}

	log.Info("Starting manager", "version", version)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
