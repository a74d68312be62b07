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

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/app"
	"github.com/gatefold/gatefold/internal/devenv"
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

const (
	// mergerName names the merger's replica.
	mergerName = "merger"
	// mergerAgent is the user agent of its requests, as app sets it.
	mergerAgent = "gatefold/dev (" + mergerName + ")"
)

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
	// The merger runs alone, as the ServiceAccount and RBAC of
	// config/default, counting its folds.
	replicas, err := testenv.Start(ctx, env, testenv.Gatefold{
		Name: mergerName,
		Args: []string{"--leader-elect=false", "--merger-status-workers=4", "--merger-debounce-max=5s", "--merger-resync-period=1m",
			"--pool-sibling-grace=" + poolGrace.String(), "--listenerset-controllers=" + foldedController + "," + nativeController},
		Options: func(o *app.Options) { o.SkipWebhooks, o.Merger.Claims = true, folds.claims },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the merger: %v\n", err)
		return 1
	}
	if !replicas[0].Manager.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "The cache did not sync")
		return 1
	}
	cache = replicas[0].Manager.GetCache()
	code := m.Run()
	if err := testenv.StopAll(replicas); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return max(code, 1)
	}
	return code
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
