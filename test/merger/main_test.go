// Package merger tests the merge controller on the real control plane: the
// Gateway API CRDs validate every Gateway it writes. No webhook is installed,
// so tests can store the conflicts that races, opted-out namespaces and later
// Gateway edits let through, and the merger must resolve.
package merger

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/test/testenv"
)

var (
	env *devenv.Env
	// cache is the merger's informer cache.
	cache client.Reader
)

func TestMain(m *testing.M) {
	logs := testenv.CaptureLogs(os.Stderr)
	os.Exit(logs.ExitCode(run(m)))
}

func run(m *testing.M) int {
	var err error
	env, err = devenv.Start(devenv.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the control plane: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The merger runs as the ServiceAccount and RBAC of config/default.
	installed, err := testenv.Install(ctx, env, "default")
	if err != nil {
		fmt.Fprintf(os.Stderr, "Installing gatefold's RBAC: %v\n", err)
		return 1
	}
	opts := manager.WithListenerSets(manager.Options())
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(installed.Config, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Creating the manager: %v\n", err)
		return 1
	}
	if err := manager.IndexFragmentParents(ctx, mgr.GetFieldIndexer()); err != nil {
		fmt.Fprintf(os.Stderr, "Indexing: %v\n", err)
		return 1
	}
	if err := manager.IndexListenerSetParents(ctx, mgr.GetFieldIndexer()); err != nil {
		fmt.Fprintf(os.Stderr, "Indexing: %v\n", err)
		return 1
	}
	if err := merger.Setup(ctx, mgr, merger.Options{ManageReferenceGrants: true, Workers: 4, StatusWorkers: 4, Debounce: 200 * time.Millisecond, DebounceMax: 5 * time.Second, Resync: time.Minute, PoolGrace: poolGrace,
		ListenerSetControllers: sets.New(foldedController, nativeController)}); err != nil {
		fmt.Fprintf(os.Stderr, "Setting up the merger: %v\n", err)
		return 1
	}
	cache = mgr.GetCache()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "Manager stopped: %v\n", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "The cache did not sync")
		return 1
	}
	return m.Run()
}
