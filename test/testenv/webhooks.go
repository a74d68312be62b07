package testenv

import (
	"context"
	"net/url"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/process"
)

// urlFieldManager is the field manager PointWebhooksAt updates with.
const urlFieldManager = "gatefold-test-url"

// PointWebhooksAt makes the webhook configurations an overlay installed call
// a local server by URL, base + each webhook's Service path, as the Service
// would in a cluster, keeping everything else: the gatefold process a test
// runs serves on loopback, not behind a Service. It may be called again to
// point them elsewhere.
func PointWebhooksAt(t testing.TB, c client.Client, base string) {
	t.Helper()
	ctx := context.Background()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-mutating-webhook-configuration"}, m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + webhookPath(t, m.Webhooks[i].ClientConfig))}
	}
	if err := c.Update(ctx, m, client.FieldOwner(urlFieldManager)); err != nil {
		t.Fatal(err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-validating-webhook-configuration"}, v); err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + webhookPath(t, v.Webhooks[i].ClientConfig))}
	}
	if err := c.Update(ctx, v, client.FieldOwner(urlFieldManager)); err != nil {
		t.Fatal(err)
	}
}

// webhookPath is the path of the webhook's Service, or of its URL where
// PointWebhooksAt has set one.
func webhookPath(t testing.TB, cc admissionregistrationv1.WebhookClientConfig) string {
	t.Helper()
	if cc.Service != nil {
		return ptr.Deref(cc.Service.Path, "")
	}
	u, err := url.Parse(ptr.Deref(cc.URL, ""))
	if err != nil {
		t.Fatalf("Parsing a webhook's URL: %v", err)
	}
	return u.Path
}

// FreePort returns a port free on loopback now.
func FreePort() (int, error) { return process.FreeLoopbackPort() }

// MustFreePort is FreePort for a test, which fails when there is none.
func MustFreePort(t testing.TB) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
