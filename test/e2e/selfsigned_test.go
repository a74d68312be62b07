package e2e

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"maps"
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
	"github.com/gatefold/gatefold/test/testenv"
)

// TestSelfSignedCertificatesEndToEnd installs the self-signed overlay, runs
// the manager out of cluster with --cert-mode=self-signed, and checks that it
// creates the CA, injects the bundle, and that the API server then calls it
// over that TLS, through renewals of the serving certificate and a rotation
// of the CA, without one failed call: through a relay whose connections are
// closed before each round of requests, so that every call makes a new
// handshake with the certificate served then.
func TestSelfSignedCertificatesEndToEnd(t *testing.T) {
	env, _ := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	// Lifetimes short enough to renew the serving certificate and rotate the
	// CA while the test watches.
	addr := startInstalledManager(t, env, "--serving-cert-validity=12s", "--ca-validity=36s", "--cert-check-period=500ms")
	r := startRelay(t, addr)
	// Pointing the webhooks rewrites them whole: the manager injects the
	// bundle again.
	testenv.PointWebhooksAt(t, c, "https://"+r.addr)

	// The CA Secret exists and its bundle is what the webhook configurations trust.
	ca := &corev1.Secret{}
	get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-webhook-ca"}, ca)
	checkInjected(t, c, ca.Data[certs.CABundleKey])

	gw := checkFragmentAdmission(t, c)

	// Admission through renewals and a CA rotation; each handshake the test
	// makes is judged against the caBundles read before it began.
	serials, issuers := map[string]bool{}, map[string]bool{}
	callsBefore := countCalls(t, env.Config, r)
	end := time.Now().Add(30 * time.Second)
	requests, failures, severed := probeThroughRelay(t, c, gw, r, func() bool {
		_, bundles := webhookBundles(t, c)
		leaf := servedCertificate(t, addr)
		checkTrusted(t, leaf, bundles)
		serials[leaf.SerialNumber.String()], issuers[leaf.Issuer.CommonName] = true, true
		return time.Now().After(end)
	})
	checkCalls(t, "through the renewals", callsBefore, countCalls(t, env.Config, r), requests, severed)
	t.Logf("%d creates did not get their answer; %d serving certificates, %d CAs seen", failures, len(serials), len(issuers))
	if len(serials) < 3 {
		t.Errorf("Saw %d serving certificates in 30s with a 12s lifetime, want at least 3", len(serials))
	}
	if len(issuers) < 2 {
		t.Errorf("Saw %d CAs in 30s with a 36s CA lifetime, want the CA rotated", len(issuers))
	}
	get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-webhook-ca"}, ca)
	checkInjected(t, c, ca.Data[certs.CABundleKey])
}

// webhookBundles reads gatefold's two webhook configurations and returns
// them and the caBundle of each of their webhooks.
func webhookBundles(t *testing.T, c client.Client) ([]client.Object, [][]byte) {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	get(t, c, client.ObjectKey{Name: "gatefold-mutating-webhook-configuration"}, m)
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	get(t, c, client.ObjectKey{Name: "gatefold-validating-webhook-configuration"}, v)
	var bundles [][]byte
	for _, w := range m.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return []client.Object{m, v}, bundles
}

// certSet is the set of the certificates, DER, in a PEM bundle.
func certSet(bundle []byte) map[string]bool {
	set := map[string]bool{}
	for b, rest := pem.Decode(bundle); b != nil; b, rest = pem.Decode(rest) {
		set[string(b.Bytes)] = true
	}
	return set
}

// checkFragmentAdmission creates namespaces infra and shop, a Gateway in
// infra that admits fragments from all namespaces, and a fragment in shop
// through the webhooks, which must default it, and checks that they deny a
// duplicate of its listener; it returns the Gateway.
func checkFragmentAdmission(t *testing.T, c client.Client) *gwv1.Gateway {
	t.Helper()
	ctx := context.Background()
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
		t.Fatalf("Creating a fragment through the webhooks: %v", err)
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
	return gw
}

// probeAdmission sends, every 200ms until done is true, a dry-run create of
// a new fragment on gw (checkFragmentAdmission's), which the webhooks must
// admit, and a dry-run duplicate, which they must deny, and returns how many
// creates it sent and how many did not get their answer. Their hostnames
// are upper-case, so that defaulting acts on them and each create calls
// both webhooks (their matchConditions skip defaulting otherwise).
func probeAdmission(t *testing.T, c client.Client, gw *gwv1.Gateway, done func() bool) (requests, failures int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; !done(); i++ {
		lf := fixture.Fragment("shop", fmt.Sprintf("probe-%d", i), gw, fixture.HTTPS("web", fmt.Sprintf("Probe-%d.Example.com", i)))
		requests += 2
		if err := c.Create(ctx, lf, client.DryRunAll); err != nil {
			failures++
			t.Errorf("A dry-run create was not admitted: %v", err)
		}
		dup := fixture.Fragment("shop", fmt.Sprintf("dup-%d", i), gw, fixture.HTTPS("web", "App.Example.com"))
		if err := c.Create(ctx, dup, client.DryRunAll); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Duplicate value") {
			failures++
			t.Errorf("A dry-run duplicate was not denied as invalid: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return requests, failures
}

// checkInjected waits until every webhook trusts exactly the certificates
// of bundles, and checks that gatefold's injector, where it wrote, owns
// caBundle and nothing else.
func checkInjected(t *testing.T, c client.Client, bundles ...[]byte) {
	t.Helper()
	want := certSet(bytes.Join(bundles, []byte("\n")))
	var configs []client.Object
	testenv.Eventually(t, 30*time.Second, func() error {
		var trusted [][]byte
		configs, trusted = webhookBundles(t, c)
		for _, b := range trusted {
			if !maps.Equal(certSet(b), want) {
				return fmt.Errorf("the webhook configurations do not trust exactly the %d certificates of the CA bundles", len(want))
			}
		}
		return nil
	})
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
