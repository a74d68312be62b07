package soak

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/app"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

// readyWithin is how long a restart waits for the API server's /readyz.
const readyWithin = time.Minute

// restartAPIServer stops kube-apiserver and starts it again with its port,
// certificates, CAs, flags (its audit log among them) and etcd, so that
// every client keeps working; it returns once /readyz answers 200. It must
// not run beside another restart.
func restartAPIServer(ctx context.Context, env *devenv.Env) error {
	return restart(ctx, env, "kube-apiserver", env.Environment.ControlPlane.GetAPIServer())
}

// restartEtcd stops etcd and starts it again with its data and client
// port; kube-apiserver reconnects by itself. It returns once the API
// server's /readyz, which checks etcd, answers 200. It must not run beside
// another restart.
func restartEtcd(ctx context.Context, env *devenv.Env) error {
	return restart(ctx, env, "etcd", env.Environment.ControlPlane.Etcd)
}

// controlPlaneProcess is etcd or kube-apiserver as envtest runs it.
type controlPlaneProcess interface {
	Start() error
	Stop() error
}

// restart stops p, named name, and starts it again, and waits for the API
// server's /readyz.
func restart(ctx context.Context, env *devenv.Env, name string, p controlPlaneProcess) error {
	if err := p.Stop(); err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", name, err)
	}
	return waitAPIServerReady(ctx, env)
}

// waitAPIServerReady polls the API server's /readyz until it answers 200,
// for up to readyWithin.
func waitAPIServerReady(ctx context.Context, env *devenv.Env) error {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		return fmt.Errorf("creating a client for /readyz: %w", err)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyWithin, true, func(ctx context.Context) (bool, error) {
		_, last = dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server's /readyz: %w (last: %v)", err, last)
	}
	return nil
}

func TestControlPlaneRestartsKeepData(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.log")
	env := startControlPlane(t, devenv.Options{AuditLog: audit})
	ctx := t.Context()
	kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}, Data: map[string]string{"k": "v"}}
	if err := env.Client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	before := auditedLease(t, env, audit, "before-restarts", nil)

	start := time.Now()
	if err := restartAPIServer(ctx, env); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted in %v", time.Since(start).Round(time.Millisecond))
	checkKept(t, env, kept)
	auditedLease(t, env, audit, "after-apiserver-restart", before)

	start = time.Now()
	if err := restartEtcd(ctx, env); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd restarted in %v", time.Since(start).Round(time.Millisecond))
	checkKept(t, env, kept)
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-etcd-restart"}}
	if err := env.Client.Create(ctx, created); err != nil {
		t.Errorf("Creating a ConfigMap after etcd's restart: %v", err)
	}
}

// checkKept fails t unless want is stored as it was.
func checkKept(t *testing.T, env *devenv.Env, want *corev1.ConfigMap) {
	t.Helper()
	got := &corev1.ConfigMap{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatalf("After the restart: %v", err)
	}
	if got.Data["k"] != want.Data["k"] || got.UID != want.UID {
		t.Fatalf("After the restart ConfigMap %s is %v (uid %s), want %v (uid %s)", want.Name, got.Data, got.UID, want.Data, want.UID)
	}
}

// auditedLease creates Lease name, which the audit policy logs, and waits
// until the audit log holds it, still starting with prefix. It returns the
// log then.
func auditedLease(t *testing.T, env *devenv.Env, audit, name string, prefix []byte) []byte {
	t.Helper()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := env.Client.Create(t.Context(), lease); err != nil {
		t.Fatalf("Creating Lease %s: %v", name, err)
	}
	var log []byte
	testenv.Eventually(t, 5*time.Second, func() error {
		var err error
		if log, err = os.ReadFile(audit); err != nil {
			return err
		}
		if !bytes.HasPrefix(log, prefix) {
			return fmt.Errorf("the audit log %s no longer starts with its %d bytes of before", audit, len(prefix))
		}
		if !bytes.Contains(log[len(prefix):], []byte(`"name":"`+name+`"`)) {
			return fmt.Errorf("the audit log %s has no write of Lease %s after its first %d bytes", audit, name, len(prefix))
		}
		return nil
	})
	return log
}

func TestReplicaBehindABlackholedProxyLosesTheLease(t *testing.T) {
	env := startControlPlane(t, devenv.Options{})
	api, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProxy(api.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	replicas, err := testenv.Start(t.Context(), env, testenv.Gatefold{
		Server: p.Addr(), Name: "partitioned",
		Args:    []string{"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"},
		Options: func(o *app.Options) { o.SkipWebhooks = true },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := replicas[0]
	t.Cleanup(func() { _ = r.Stop() }) // it fails: the replica lost its lease
	lease := &coordinationv1.Lease{}
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "gatefold-system", Name: "gatefold-leader"}, lease); err != nil {
			return err
		}
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); !strings.HasPrefix(h, r.Name+"_") {
			return fmt.Errorf("the leader Lease is held by %q, want %s", h, r.Name)
		}
		return nil
	})

	p.Set(proxyMode{Kind: blackhole})
	start := time.Now()
	select {
	case <-r.Exited():
		t.Logf("Replica %s ended %v after its proxy went %v", r.Name, time.Since(start).Round(time.Millisecond), proxyMode{Kind: blackhole})
	case <-time.After(15 * time.Second):
		t.Fatalf("Replica %s still runs 15s after its proxy to the API server went %v", r.Name, proxyMode{Kind: blackhole})
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "leader election lost") {
		t.Errorf("Replica %s behind a %v ended with %v, want leader election lost", r.Name, proxyMode{Kind: blackhole}, err)
	}
}

// startControlPlane starts a control plane of the test's own, stopped at
// its end.
func startControlPlane(t *testing.T, opts devenv.Options) *devenv.Env {
	t.Helper()
	env, err := devenv.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}
