package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gatefold/gatefold/internal/app"
)

func runManager(args []string) error {
	fs := newFlagSet("manager", "Run the webhook server and the leader-elected merger against a cluster")
	var o app.Options
	o.BindFlags(fs)
	config.RegisterFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	o.Version = version
	return app.Run(ctrl.SetupSignalHandler(), cfg, o)
}
