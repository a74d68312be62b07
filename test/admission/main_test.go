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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/app"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

const (
	claimsNamespace = "gatefold-system"
	replicas        = 2
	// validatePath is the path of the fragments' validating webhook.
	validatePath = "/validate-gatefold-dev-v1alpha1-listenerfragment"
	// defaultPath is the path of the fragments' defaulting webhook.
	defaultPath = "/mutate-gatefold-dev-v1alpha1-listenerfragment"
	// claimGrace is short so tests see a freed tuple reused quickly; in a
	// cluster it is 60s, longer than the slowest admission chain.
	claimGrace = 3 * time.Second
)

var (
	env *devenv.Env
	// validated counts the fragment validations each replica was sent.
	validated [replicas]atomic.Int64
	// defaulted counts the fragment defaulting requests the replicas were
	// sent.
	defaulted atomic.Int64
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
	// Taken before the replicas start, whose servers would otherwise be
	// free to bind the port the API server calls the webhooks on.
	ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", env.WebhookHost(), env.WebhookPort()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the load balancer: %v\n", err)
		return 1
	}
	webhooks, err := testenv.Start(ctx, env, webhookReplicas(replicas))
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the webhook replicas: %v\n", err)
		return 1
	}
	var addrs [replicas]string
	for i, r := range webhooks {
		if !r.Manager.GetCache().WaitForCacheSync(ctx) {
			fmt.Fprintf(os.Stderr, "The cache of webhook replica %s did not sync\n", r.Name)
			return 1
		}
		addrs[i] = r.WebhookAddr
		caches = append(caches, r.Manager.GetCache())
	}
	if err := roundRobin(ctx, ln, addrs); err != nil {
		fmt.Fprintf(os.Stderr, "Starting the load balancer: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := testenv.StopAll(webhooks); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return max(code, 1)
	}
	return code
}

// webhookReplicas are n replicas of gatefold's webhooks alone, in process
// as installed, with args added to their flags.
func webhookReplicas(n int, args ...string) testenv.Gatefold {
	return testenv.Gatefold{
		Installed: installed, Replicas: n, Name: "webhook",
		Args: append([]string{"--leader-elect=false", "--webhook-cert-dir=" + env.WebhookCertDir(), "--claims-namespace=" + claimsNamespace,
			"--claim-collect-period=1s", "--listenerset-controllers=" + foldedController + "," + nativeController}, args...),
		Options: func(o *app.Options) {
			o.SkipMerger = true
			o.Webhook.ClaimGrace = claimGrace // under the 10s Validate asks of a cluster
		},
	}
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

// roundRobin serves ln over TLS with the certificate the API server trusts
// and sends each admission request to the replica whose turn it is on that
// webhook's path, so concurrent requests land on both even though the API
// server reuses one connection, and sequential ones alternate.
func roundRobin(ctx context.Context, ln net.Listener, replicaAddrs [replicas]string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.Environment.WebhookInstallOptions.LocalServingCAData) {
		return fmt.Errorf("no CA for the webhook certificate")
	}
	rotation := &turns{next: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := rotation.take(r.In.URL.Path)
			switch r.In.URL.Path {
			case validatePath:
				validated[i].Add(1)
			case defaultPath:
				defaulted.Add(1)
			}
			r.SetURL(&url.URL{Scheme: "https", Host: replicaAddrs[i]})
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	dir := env.WebhookCertDir()
	go func() { _ = srv.ServeTLS(ln, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")) }()
	return nil
}
