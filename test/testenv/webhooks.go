package testenv

import (
	"context"
	"fmt"
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
	if err := pointWebhooks(context.Background(), c, base); err != nil {
		t.Fatal(err)
	}
}

// pointWebhooks is PointWebhooksAt without a test.
func pointWebhooks(ctx context.Context, c client.Client, base string) error {
	return setClientConfigs(ctx, c, func(path string, _ []byte) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path)}
	})
}

// PointWebhooksAtService undoes PointWebhooksAt: the webhooks call Service
// gatefold-webhook-service in namespace again, as installed, keeping their
// caBundle; an upgrade of the installation then finds them as it left them.
func PointWebhooksAtService(t testing.TB, c client.Client, namespace string) {
	t.Helper()
	err := setClientConfigs(context.Background(), c, func(path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{CABundle: caBundle, Service: &admissionregistrationv1.ServiceReference{
			Name: "gatefold-webhook-service", Namespace: namespace, Path: ptr.To(path), Port: ptr.To[int32](443)}}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setClientConfigs sets the client configuration of every webhook of
// gatefold's two configurations to what config returns for its path and
// its caBundle.
func setClientConfigs(ctx context.Context, c client.Client, config func(path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig) error {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-mutating-webhook-configuration"}, m); err != nil {
		return err
	}
	for i := range m.Webhooks {
		path, err := webhookPath(m.Webhooks[i].ClientConfig)
		if err != nil {
			return err
		}
		m.Webhooks[i].ClientConfig = config(path, m.Webhooks[i].ClientConfig.CABundle)
	}
	if err := c.Update(ctx, m, client.FieldOwner(urlFieldManager)); err != nil {
		return err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-validating-webhook-configuration"}, v); err != nil {
		return err
	}
	for i := range v.Webhooks {
		path, err := webhookPath(v.Webhooks[i].ClientConfig)
		if err != nil {
			return err
		}
		v.Webhooks[i].ClientConfig = config(path, v.Webhooks[i].ClientConfig.CABundle)
	}
	return c.Update(ctx, v, client.FieldOwner(urlFieldManager))
}

// webhookPath is the path of the webhook's Service, or of its URL where
// PointWebhooksAt has set one.
func webhookPath(cc admissionregistrationv1.WebhookClientConfig) (string, error) {
	if cc.Service != nil {
		return ptr.Deref(cc.Service.Path, ""), nil
	}
	u, err := url.Parse(ptr.Deref(cc.URL, ""))
	if err != nil {
		return "", fmt.Errorf("parsing a webhook's URL: %w", err)
	}
	return u.Path, nil
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
