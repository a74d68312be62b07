package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

// TestInstalledMetricsServeOnlyReaders runs the manager as installed (the
// ServiceAccount and RBAC of config/default) with its default metrics
// settings, and scrapes it as a user would: over HTTPS with a
// ServiceAccount's token, which the manager has the API server review.
func TestInstalledMetricsServeOnlyReaders(t *testing.T) {
	env, kubeconfig := startControlPlane(t, devenv.Options{})
	ctx := context.Background()
	metricsPort := testenv.MustFreePort(t)
	// No webhook certificate: the webhook server waits for one, the metrics
	// server does not need it.
	replica := testenv.MustStart(t, env, testenv.Gatefold{Binary: testenv.MustBuildGatefold(t), NoWait: true,
		Args: []string{fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--webhook-cert-dir=" + t.TempDir(), "--leader-elect=false"}})[0]

	// A scraper bound to the shipped reader role, and one bound to nothing.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scraper", "stranger"} {
		if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-reads-gatefold-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gatefold-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "scraper"}},
	}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		return strings.TrimSpace(kubectl(t, env, kubeconfig, "-n", ns.Name, "create", "token", sa))
	}

	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	// The certificate is self-signed, as a scraper of the shipped overlays sees it.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2: true,
	}}
	scrape := func(bearer string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Proto, string(body)
	}

	var status int
	var body string
	_ = testenv.Poll(time.Minute, 200*time.Millisecond, func() error {
		select {
		case <-replica.Exited():
			return nil
		default:
		}
		if status, _, body = scrape(""); status == 0 {
			return errors.New(body)
		}
		return nil
	})
	select {
	case <-replica.Exited():
		t.Fatalf("gatefold manager ended before its metrics were scraped: %v%s", replica.Err(), replica.LogTail())
	default:
	}
	if status != http.StatusUnauthorized {
		t.Fatalf("A scrape without a token got %d %s, want 401%s", status, body, replica.LogTail())
	}
	if status, _, body := scrape(token("stranger")); status != http.StatusForbidden {
		t.Errorf("A ServiceAccount bound to no role got %d %s, want 403", status, body)
	}
	status, proto, body := scrape(token("scraper"))
	if status != http.StatusOK {
		t.Fatalf("A ServiceAccount bound to gatefold-metrics-reader got %d %s, want 200", status, body)
	}
	if !strings.Contains(body, "gatefold_merger_folds_total") {
		t.Errorf("The metrics lack gatefold_merger_folds_total:\n%s", body)
	}
	if proto != "HTTP/1.1" {
		t.Errorf("The metrics were served over %s, want HTTP/1.1 (HTTP/2 off)", proto)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("The metrics are served over plain HTTP too")
		}
	}
}
