package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/certs"
	"github.com/gatefold/gatefold/test/testenv"
)

// TestSelfSignedReplicasShareOneCA starts three self-signed certificate
// sources at once, as the ServiceAccount of the self-signed overlay with its
// RBAC, before any CA exists: they race to create the CA Secret, and every
// replica must end up serving a certificate of the one CA that won, which
// the webhook configurations trust.
func TestSelfSignedReplicasShareOneCA(t *testing.T) {
	logs := testenv.NewLogs(os.Stderr)
	t.Cleanup(func() { logs.Check(t) }) // after the replicas stopped
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), logs.Logger()))
	defer cancel()
	c := env.Client
	installed, err := testenv.Install(ctx, env, "self-signed")
	if err != nil {
		t.Fatal(err)
	}
	// The replicas' client, as `gatefold manager --cert-mode=self-signed` builds it.
	sa, err := client.New(installed.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ns := installed.Namespace
	// Webhook configurations that match nothing, to receive the bundle.
	hook := func(name string) (admissionregistrationv1.MutatingWebhook, admissionregistrationv1.ValidatingWebhook) {
		cc := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + name)}
		none := ptr.To(admissionregistrationv1.SideEffectClassNone)
		return admissionregistrationv1.MutatingWebhook{Name: name + ".gatefold.dev", ClientConfig: cc, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
			admissionregistrationv1.ValidatingWebhook{Name: name + ".gatefold.dev", ClientConfig: cc, SideEffects: none, AdmissionReviewVersions: []string{"v1"}}
	}
	m1, v1 := hook("a")
	_, v2 := hook("b")
	// The names the self-signed RBAC lets gatefold patch.
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gatefold-mutating-webhook-configuration"}, Webhooks: []admissionregistrationv1.MutatingWebhook{m1}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gatefold-validating-webhook-configuration"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{v1, v2}}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	replicas := make([]*certs.SelfSigned, 3)
	var start sync.WaitGroup
	start.Add(1)
	for i := range replicas {
		replicas[i] = &certs.SelfSigned{
			Client: sa, Namespace: ns, SecretName: "gatefold-webhook-ca",
			DNSNames:        []string{"gatefold-webhook-service." + ns + ".svc"},
			MutatingWebhook: mutating.Name, ValidatingWebhook: validating.Name,
			CAValidity: time.Hour, ServingValidity: 10 * time.Minute, CheckPeriod: time.Second,
		}
		go func() { start.Wait(); _ = replicas[i].Start(ctx) }()
	}
	start.Done()

	secret := &corev1.Secret{}
	testenv.Eventually(t, 20*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gatefold-webhook-ca"}, secret); err != nil {
			return fmt.Errorf("the replicas did not all get a serving certificate: %w", err)
		}
		for i, r := range replicas {
			if err := r.Ready(nil); err != nil {
				return fmt.Errorf("the replicas did not all get a serving certificate: replica %d: %w", i, err)
			}
		}
		return nil
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data[certs.CABundleKey]) {
		t.Fatal("The CA Secret holds no bundle")
	}
	for i, r := range replicas {
		if _, err := r.Leaf().Verify(x509.VerifyOptions{Roots: pool, DNSName: "gatefold-webhook-service." + ns + ".svc"}); err != nil {
			t.Errorf("Replica %d serves a certificate the stored CA does not sign: %v", i, err)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(validating), validating); err != nil {
			t.Fatal(err)
		}
		trusted := len(validating.Webhooks) == 2
		for _, w := range validating.Webhooks {
			trusted = trusted && bytes.Equal(w.ClientConfig.CABundle, secret.Data[certs.CABundleKey])
		}
		if !trusted {
			return errors.New("the ValidatingWebhookConfiguration does not trust the stored CA bundle")
		}
		return nil
	})
}
