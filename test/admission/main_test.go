// Package admission tests gatefold's webhooks end to end: the real API server
// calls two webhook server replicas over TLS, each webhook's requests sent to
// the replicas in turn, so a create and the duplicate after it are validated
// by different replicas, and every test also shows that replicas agree
// through the claims and not through memory.
package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

const (
	claimsNamespace = "gatefold-system"
	replicas        = 2
	// validatePath is the path of the fragments' validating webhook.
	validatePath = "/validate-gatefold-dev-v1alpha1-listenerfragment"
	// claimGrace is short so tests see a freed tuple reused quickly; in a
	// cluster it is 60s, longer than the slowest admission chain.
	claimGrace = 3 * time.Second
)

var (
	env *devenv.Env
	// validated counts the fragment validations each replica was sent.
	validated [replicas]atomic.Int64
	// caches are the replicas' informer caches.
	caches []client.Reader
	// installed is the ServiceAccount and RBAC of config/default, which the
	// replicas run as.
	installed *testenv.Installed
)

func TestMain(m *testing.M) {
	logs := testenv.CaptureLogs(os.Stderr)
	os.Exit(logs.ExitCode(run(m)))
}

func run(m *testing.M) int {
	var err error
	env, err = devenv.Start(devenv.Options{Webhooks: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the control plane: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: claimsNamespace}}); err != nil {
		fmt.Fprintf(os.Stderr, "Creating %s: %v\n", claimsNamespace, err)
		return 1
	}
	if installed, err = testenv.Install(ctx, env, "default"); err != nil {
		fmt.Fprintf(os.Stderr, "Installing gatefold's RBAC: %v\n", err)
		return 1
	}
	var ports [replicas]int
	for i := range replicas {
		if ports[i], err = startReplica(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "Starting webhook replica %d: %v\n", i, err)
			return 1
		}
	}
	if err := roundRobin(ctx, fmt.Sprintf("%s:%d", env.WebhookHost(), env.WebhookPort()), ports); err != nil {
		fmt.Fprintf(os.Stderr, "Starting the load balancer: %v\n", err)
		return 1
	}
	return m.Run()
}

// startReplica runs one gatefold manager, as installed, with its webhook
// server on a free port, and waits until it serves.
func startReplica(ctx context.Context) (int, error) {
	mgr, port, err := newReplica(ctx, nil)
	if err != nil {
		return 0, err
	}
	caches = append(caches, mgr.GetCache())
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "Webhook replica on port %d stopped: %v\n", port, err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for mgr.GetWebhookServer().StartedChecker()(nil) != nil || !mgr.GetCache().WaitForCacheSync(ctx) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("webhook server on port %d did not start", port)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return port, nil
}

// newReplica builds, without starting it, one gatefold manager as
// installed, its webhook server on a free port and its options changed by
// tweak (when not nil).
func newReplica(ctx context.Context, tweak func(*ctrl.Options)) (ctrl.Manager, int, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	opts := manager.Options()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.LeaderElection = false
	opts.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{
		Host: env.WebhookHost(), Port: port, CertDir: env.WebhookCertDir(),
	})
	if tweak != nil {
		tweak(&opts)
	}
	mgr, err := ctrl.NewManager(installed.Config, opts)
	if err != nil {
		return nil, 0, err
	}
	if err := manager.IndexFragmentParents(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, 0, err
	}
	if err := manager.IndexListenerSetParents(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, 0, err
	}
	if _, err := webhook.Setup(mgr, webhook.Options{
		ClaimsNamespace: claimsNamespace, ClaimGrace: claimGrace, CollectPeriod: time.Second,
		ListenerSetControllers: sets.New(foldedController, nativeController),
	}); err != nil {
		return nil, 0, err
	}
	return mgr, port, nil
}

// freePort returns a port on the webhook host that nothing listens on.
func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(env.WebhookHost(), "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// turns hands out the replicas in turn, one rotation per webhook path: a
// create calls the mutating webhook and then the validating one, so one
// rotation over both would send every validation to the same replica.
type turns struct {
	mu   sync.Mutex
	next map[string]int
}

func (t *turns) take(path string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.next[path]
	t.next[path] = (i + 1) % replicas
	return i
}

// roundRobin serves addr over TLS with the certificate the API server trusts
// and sends each admission request to the replica whose turn it is on that
// webhook's path, so concurrent requests land on both even though the API
// server reuses one connection, and sequential ones alternate.
func roundRobin(ctx context.Context, addr string, ports [replicas]int) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.Environment.WebhookInstallOptions.LocalServingCAData) {
		return fmt.Errorf("no CA for the webhook certificate")
	}
	rotation := &turns{next: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := rotation.take(r.In.URL.Path)
			if r.In.URL.Path == validatePath {
				validated[i].Add(1)
			}
			r.SetURL(&url.URL{Scheme: "https", Host: net.JoinHostPort(env.WebhookHost(), fmt.Sprint(ports[i]))})
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	dir := env.WebhookCertDir()
	go func() { _ = srv.ServeTLS(ln, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")) }()
	return nil
}
