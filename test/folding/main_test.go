// Package folding tests the merge controller's folding on the real control
// plane: the Gateway API CRDs validate every Gateway it writes. No webhook is
// installed, so tests can store the conflicts that races, opted-out namespaces
// and later Gateway edits let through, and the merger must resolve.
package folding

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/testenv"
)

var (
	env *devenv.Env
	// cache is the merger's informer cache.
	cache client.Reader
	// watcher lists and watches as the administrator (testenv.Follow).
	watcher client.WithWatch
	// auditLog holds every write to Gateways, ReferenceGrants and
	// ListenerFragments; the merger's carry mergerAgent.
	auditLog string
)

// mergerAgent is the user agent of the merger's requests.
const mergerAgent = "gatefold-merger-test"

func TestMain(m *testing.M) {
	logs := testenv.CaptureLogs(os.Stderr)
	os.Exit(logs.ExitCode(run(m)))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gatefold-merger-test-")
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
	if watcher, err = client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()}); err != nil {
		fmt.Fprintf(os.Stderr, "Creating a watching client: %v\n", err)
		return 1
	}

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
	cfg := rest.CopyConfig(installed.Config)
	cfg.UserAgent = mergerAgent
	mgr, err := ctrl.NewManager(cfg, opts)
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
		ListenerSetControllers: sets.New(foldedController, nativeController), Claims: folds.claims}); err != nil {
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

// folds counts the folds of each Gateway that is no pool's sibling: the
// merger reads a Gateway's claims once per fold, and here, with no webhook
// to take any, there are none.
var folds foldCounter

type foldCounter struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

func (f *foldCounter) claims(_ context.Context, gw types.NamespacedName) (map[rules.Tuple]types.NamespacedName, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[types.NamespacedName]int{}
	}
	f.n[gw]++
	return nil, nil
}

// of returns how many times the Gateway was folded.
func (f *foldCounter) of(gw types.NamespacedName) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[gw]
}
