// Package routing tests, on the real control plane, the routing controllers
// as installed: routes that name a ListenerFragment as parentRef get a
// derived route naming the Gateway listener the fragment's listener landed
// on, and status.parents entries for that parentRef. The tests stand in for
// the Gateway implementation: they write the derived routes' status.
package routing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatefold/gatefold/internal/app"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

var (
	env *devenv.Env
	// auditLog holds every write to Gateways, fragments and routes; the
	// replica's carry agent.
	auditLog string
	ctx      = context.Background()
)

const (
	name = "routing"
	// agent is the user agent of the replica's requests, as app sets it.
	agent = "gatefold/dev (" + name + ")"
	// controller is the controllerName of the tests' GatewayClasses.
	controller = "gatefold.dev/test-routing"
)

func TestMain(m *testing.M) {
	logs := testenv.CaptureLogs(os.Stderr)
	os.Exit(logs.ExitCode(run(m)))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gatefold-routing-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "Creating a directory for the audit log: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	auditLog = filepath.Join(dir, "audit.log")
	env, err = devenv.Start(devenv.Options{AuditLog: auditLog})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the control plane: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The merger and the routing controllers run as the ServiceAccount and
	// RBAC of config/default, without webhooks.
	replicas, err := testenv.Start(ctx, env, testenv.Gatefold{
		Name:    name,
		Args:    []string{"--leader-elect=false", "--merger-debounce-max=2s", "--merger-resync-period=1m", "--listenerset-controllers=" + controller},
		Options: func(o *app.Options) { o.SkipWebhooks = true },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting gatefold: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := testenv.StopAll(replicas); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return max(code, 1)
	}
	return code
}
