package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/testenv"
)

// TestFreshReplicaIsReadyOnlyOnceItsInformersSynced starts a third replica,
// a follower as any replica but the leader is, wired as `gatefold manager`
// wires its readiness, and sends it an admission request the moment its
// /readyz first answers 200. The manager starts the webhook server before
// the caches, and nothing else on a follower starts the informers the
// webhooks read: before, the first admission request built them within its
// timeout.
func TestFreshReplicaIsReadyOnlyOnceItsInformersSynced(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)

	probe, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	probeAddr := net.JoinHostPort(env.WebhookHost(), strconv.Itoa(probe))
	g := webhookReplicas(1, "--health-probe-bind-address="+probeAddr)
	g.Name, g.NoWait = "fresh", true
	ctx := context.Background()
	started := time.Now()
	replicas, err := testenv.Start(ctx, env, g)
	if err != nil {
		t.Fatal(err)
	}
	fresh, mgr := replicas[0], replicas[0].Manager
	t.Cleanup(func() {
		if err := fresh.Stop(); err != nil {
			t.Error(err)
		}
	})
	_, webhookPort, _ := net.SplitHostPort(fresh.WebhookAddr)
	port, err := strconv.Atoi(webhookPort)
	if err != nil {
		t.Fatal(err)
	}

	// Every 5ms: the request must come the moment /readyz first says 200.
	var notReady string
	err = testenv.Poll(30*time.Second, 5*time.Millisecond, func() error {
		resp, err := http.Get("http://" + probeAddr + "/readyz?verbose")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		notReady = string(body)
		return fmt.Errorf("/readyz answers %d: %s", resp.StatusCode, notReady)
	})
	if err != nil {
		t.Fatalf("The fresh replica is not ready after 30s: %v", err)
	}
	ready := time.Since(started)

	ns0 := &metav1.PartialObjectMetadata{}
	ns0.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	for name, obj := range map[string]client.Object{
		"Gateways": &gwv1.Gateway{}, "namespaces": ns0, "ReferenceGrants": &gwv1.ReferenceGrant{}, "ListenerFragments": &v1alpha1.ListenerFragment{},
	} {
		i, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		if !i.HasSynced() {
			t.Errorf("The replica reported ready %v after it started, before its informer of %s synced", ready.Round(time.Millisecond), name)
		}
	}
	t.Logf("Ready %v after it started", ready.Round(time.Millisecond))
	if notReady != "" {
		t.Logf("Before that /readyz answered:\n%s", notReady)
	}

	lf := newFragment(ns, "probe", gw, https("https", "probe.example.com"))
	lf.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ListenerFragment"))
	lf.UID = "probe-uid"
	sent := time.Now()
	resp := review(t, port, lf)
	t.Logf("Its first admission request was answered in %v", time.Since(sent).Round(time.Millisecond))
	if !resp.Allowed || len(resp.Warnings) > 0 {
		t.Errorf("The fresh replica answered allowed=%v, warnings %q, result %+v: want the fragment allowed, its Gateway seen", resp.Allowed, resp.Warnings, resp.Result)
	}
}

// review sends a dry-run create of lf straight to the validating webhook of
// the replica serving on port, and returns its answer.
func review(t *testing.T, port int, lf *v1alpha1.ListenerFragment) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(lf)
	if err != nil {
		t.Fatal(err)
	}
	in := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "probe",
			Kind:      metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "ListenerFragment"},
			Resource:  metav1.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Resource: "listenerfragments"},
			Namespace: lf.Namespace,
			Name:      lf.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
			DryRun:    ptr.To(true),
		},
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.Environment.WebhookInstallOptions.LocalServingCAData)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://%s%s", net.JoinHostPort(env.WebhookHost(), strconv.Itoa(port)), validatePath)
	httpResp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Sending the admission request: %v", err)
	}
	defer httpResp.Body.Close()
	out := admissionv1.AdmissionReview{}
	if err := json.NewDecoder(httpResp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("Reading the admission response (HTTP %d): %v", httpResp.StatusCode, err)
	}
	return out.Response
}
