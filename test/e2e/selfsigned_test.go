package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/certs"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
)

func waitReady(t *testing.T, url string, log string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("%s is not ready after 60s; log:\n%s", url, b)
}

// servedCertificate is the certificate the webhook server presents now.
func servedCertificate(t *testing.T, addr string) (serial, issuer string) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only reading what is served
	if err != nil {
		t.Fatalf("Connecting to the webhook server: %v", err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	return leaf.SerialNumber.String(), leaf.Issuer.CommonName
}

// TestSelfSignedCertificatesEndToEnd installs the self-signed overlay, runs
// the manager out of cluster with --cert-mode=self-signed, and checks that it
// creates the CA, injects the bundle, and that the API server then calls it
// over that TLS, through renewals of the serving certificate and a rotation
// of the CA, without one failed admission request.
func TestSelfSignedCertificatesEndToEnd(t *testing.T) {
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	ctx := context.Background()
	// Lifetimes short enough to renew the serving certificate and rotate the
	// CA while the test watches.
	addr := startInstalledManager(t, env, kubeconfig, "--serving-cert-validity=12s", "--ca-validity=36s", "--cert-check-period=500ms")

	// The CA Secret exists and its bundle is what the webhook configurations trust.
	ca := &corev1.Secret{}
	get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-webhook-ca"}, ca)
	checkInjected(t, c, ca.Data[certs.CABundleKey])

	for _, ns := range []string{"infra", "shop"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	if err := c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	first := fixture.Fragment("shop", "first", gw, fixture.HTTPS("web", "app.example.com"))
	first.Spec.ParentRef.Namespace = ptr.To(gwv1.Namespace("infra"))
	if err := c.Create(ctx, first); err != nil {
		t.Fatalf("Creating a fragment through the self-signed webhook: %v", err)
	}
	if first.Spec.ParentRef.Kind == nil || *first.Spec.ParentRef.Kind != "Gateway" {
		t.Errorf("The mutating webhook did not default parentRef.kind: %+v", first.Spec.ParentRef)
	}
	// The webhook cache may not hold the first fragment's claim holder yet;
	// the claim itself is in the API server, so the duplicate is denied.
	dup := fixture.Fragment("shop", "copy", gw, fixture.HTTPS("web", "app.example.com"))
	if err := c.Create(ctx, dup); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Duplicate value") {
		t.Fatalf("Creating a duplicate: %v, want an Invalid duplicate error", err)
	}

	// Admission through renewals and a CA rotation.
	serials, issuers := map[string]bool{}, map[string]bool{}
	failures, requests := 0, 0
	for i, end := 0, time.Now().Add(30*time.Second); time.Now().Before(end); i++ {
		serial, issuer := servedCertificate(t, addr)
		serials[serial], issuers[issuer] = true, true

		lf := fixture.Fragment("shop", fmt.Sprintf("probe-%d", i), gw, fixture.HTTPS("web", fmt.Sprintf("probe-%d.example.com", i)))
		requests += 2
		if err := c.Create(ctx, lf, client.DryRunAll); err != nil {
			failures++
			t.Errorf("A dry-run create was not admitted: %v", err)
		}
		dup := fixture.Fragment("shop", fmt.Sprintf("dup-%d", i), gw, fixture.HTTPS("web", "app.example.com"))
		if err := c.Create(ctx, dup, client.DryRunAll); !apierrors.IsInvalid(err) {
			failures++
			t.Errorf("A dry-run duplicate was not denied as invalid: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d admission requests, %d failed; %d serving certificates, %d CAs seen", requests, failures, len(serials), len(issuers))
	if len(serials) < 3 {
		t.Errorf("Saw %d serving certificates in 30s with a 12s lifetime, want at least 3", len(serials))
	}
	if len(issuers) < 2 {
		t.Errorf("Saw %d CAs in 30s with a 36s CA lifetime, want the CA rotated", len(issuers))
	}
	get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-webhook-ca"}, ca)
	checkInjected(t, c, ca.Data[certs.CABundleKey])
}

// checkInjected waits until every webhook trusts exactly bundle, and checks
// that gatefold's injector, where it wrote, owns caBundle and nothing else.
func checkInjected(t *testing.T, c client.Client, bundle []byte) {
	t.Helper()
	var configs []client.Object
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		get(t, c, client.ObjectKey{Name: "gatefold-mutating-webhook-configuration"}, m)
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		get(t, c, client.ObjectKey{Name: "gatefold-validating-webhook-configuration"}, v)
		configs = []client.Object{m, v}
		ok := true
		for _, w := range m.Webhooks {
			ok = ok && bytes.Equal(w.ClientConfig.CABundle, bundle)
		}
		for _, w := range v.Webhooks {
			ok = ok && bytes.Equal(w.ClientConfig.CABundle, bundle)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("The webhook configurations do not trust the CA Secret's bundle (%s...)", base64.StdEncoding.EncodeToString(bundle)[:16])
		}
	}
	for _, obj := range configs {
		for _, mf := range obj.GetManagedFields() {
			if mf.Manager != certs.InjectorFieldOwner {
				continue
			}
			owned := mf.FieldsV1.GetRawString()
			if !strings.Contains(owned, `"f:caBundle"`) || strings.Contains(owned, `"f:url"`) || strings.Contains(owned, `"f:rules"`) {
				t.Errorf("%s: the injector owns more than caBundle: %s", obj.GetName(), owned)
			}
		}
	}
}
