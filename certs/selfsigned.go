package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// InjectorFieldOwner is the field manager of the caBundle gatefold applies to
// its own webhook configurations; it owns nothing else there.
const InjectorFieldOwner = "gatefold-ca-injector"

// The rights below go to config/rbac/self-signed, which only the self-signed
// overlay installs: create of Secrets in gatefold's namespace (they cannot be
// created by name), the CA Secret alone, and gatefold's webhook
// configurations alone.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=gatefold-system
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=gatefold-webhook-ca,verbs=get;update,namespace=gatefold-system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=gatefold-mutating-webhook-configuration;gatefold-validating-webhook-configuration,verbs=get;patch

// SelfSigned provisions the webhook's certificate where cert-manager is
// absent. Every replica shares one CA, kept in a Secret; each signs its own
// serving certificate with it and holds it in memory, and applies the CA
// bundle to gatefold's webhook configurations.
type SelfSigned struct {
	// Client reads and writes the CA Secret and the webhook configurations
	// directly: caching every Secret would need rights gatefold lacks.
	Client client.Client
	// Namespace and SecretName name the CA Secret.
	Namespace, SecretName string
	// DNSNames and IPs are the serving certificate's names: the webhook
	// Service's DNS names in a cluster.
	DNSNames []string
	IPs      []net.IP
	// MutatingWebhook and ValidatingWebhook name the webhook
	// configurations that get the CA bundle.
	MutatingWebhook, ValidatingWebhook string
	// CAValidity and ServingValidity are the certificates' lifetimes; each is
	// renewed two thirds into its life.
	CAValidity, ServingValidity time.Duration
	// CheckPeriod is how often the CA Secret and the bundles are checked.
	CheckPeriod time.Duration

	serving atomic.Pointer[tls.Certificate]
}

var _ Source = &SelfSigned{}

func (s *SelfSigned) NeedLeaderElection() bool { return false }

func (s *SelfSigned) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("certs").WithValues("secret", klog.KRef(s.Namespace, s.SecretName))
	for {
		next, err := s.reconcile(ctx, time.Now())
		wait := s.CheckPeriod
		if err != nil {
			log.Error(err, "Provisioning the webhook certificate")
			wait = min(wait, 5*time.Second)
		} else if until := time.Until(next); until < wait {
			wait = until
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// reconcile makes the CA, the bundles and the serving certificate current,
// and returns when it must run again at the latest.
func (s *SelfSigned) reconcile(ctx context.Context, now time.Time) (time.Time, error) {
	ca, err := s.ensureCA(ctx, now)
	if err != nil {
		return now, err
	}
	// The bundle is applied before a certificate from a new CA is served,
	// and given time to reach the API server, so that it trusts the new
	// certificate from its first handshake.
	injected, err := s.inject(ctx, ca.bundle)
	if err != nil {
		return now, err
	}
	current := s.serving.Load()
	fromOldCA := current != nil && !bytes.Equal(current.Leaf.AuthorityKeyId, ca.cert.SubjectKeyId)
	if injected && fromOldCA && now.Before(current.Leaf.NotAfter) {
		return now.Add(bundleSettle), nil
	}
	if current == nil || fromOldCA || !now.Before(renewAt(current.Leaf)) {
		issued, err := ca.issue(now, s.ServingValidity, s.DNSNames, s.IPs)
		if err != nil {
			return now, err
		}
		s.serving.Store(issued)
		logf.FromContext(ctx).WithName("certs").Info("Serving a new certificate", "dnsNames", s.DNSNames, "ips", s.IPs,
			"notAfter", issued.Leaf.NotAfter, "renewAt", renewAt(issued.Leaf), "ca", ca.cert.Subject.CommonName)
		current = issued
	}
	return earliest(renewAt(current.Leaf), renewAt(ca.cert)), nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ensureCA reads the CA Secret, creating it when it is missing and rotating
// the CA two thirds into its life. Replicas racing to create or rotate it
// are settled by the API server: the loser reads the winner's CA.
func (s *SelfSigned) ensureCA(ctx context.Context, now time.Time) (*authority, error) {
	key := client.ObjectKey{Namespace: s.Namespace, Name: s.SecretName}
	secret := &corev1.Secret{}
	err := s.Client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		ca, err := newAuthority(now, s.CAValidity, nil)
		if err != nil {
			return nil, err
		}
		data, err := ca.secretData()
		if err != nil {
			return nil, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.SecretName, Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.FieldManager}},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}
		switch err := s.Client.Create(ctx, secret); {
		case err == nil:
			logf.FromContext(ctx).WithName("certs").Info("Created the webhook CA", "secret", klog.KObj(secret), "notAfter", ca.cert.NotAfter)
			return ca, nil
		case apierrors.IsAlreadyExists(err):
			return s.ensureCA(ctx, now) // another replica won
		default:
			return nil, fmt.Errorf("creating the CA Secret %s: %w", key, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the CA Secret %s: %w", key, err)
	}
	ca, err := parseAuthority(secret.Data)
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s is not usable (delete it to have gatefold create a new CA): %w", key, err)
	}
	if now.Before(renewAt(ca.cert)) {
		return ca, nil
	}
	rotated, err := newAuthority(now, s.CAValidity, ca.bundle)
	if err != nil {
		return nil, err
	}
	if secret.Data, err = rotated.secretData(); err != nil {
		return nil, err
	}
	// Update carries the resourceVersion read: of two rotating replicas,
	// one fails here and uses the other's CA on its next round.
	if err := s.Client.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("rotating the CA in Secret %s: %w", key, err)
	}
	logf.FromContext(ctx).WithName("certs").Info("Rotated the webhook CA", "secret", klog.KObj(secret), "notAfter", rotated.cert.NotAfter)
	return rotated, nil
}

// bundleSettle is how long a new CA bundle is given to reach the API
// server's webhook clients before a certificate from the new CA is served.
const bundleSettle = 2 * time.Second

// inject applies the bundle as the caBundle of every webhook of gatefold's
// webhook configurations, owning only that field, when any differs, and says
// whether it did.
func (s *SelfSigned) inject(ctx context.Context, bundle []byte) (bool, error) {
	encoded := base64.StdEncoding.EncodeToString(bundle)
	applied := false
	for kind, name := range map[string]string{"MutatingWebhookConfiguration": s.MutatingWebhook, "ValidatingWebhookConfiguration": s.ValidatingWebhook} {
		current := &unstructured.Unstructured{}
		current.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind(kind))
		if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, current); err != nil {
			return applied, fmt.Errorf("reading %s %s: %w", kind, name, err)
		}
		webhooks, _, _ := unstructured.NestedSlice(current.Object, "webhooks")
		stale := false
		var webhookBundles []any
		for _, w := range webhooks {
			w, _ := w.(map[string]any)
			ca, _, _ := unstructured.NestedString(w, "clientConfig", "caBundle")
			stale = stale || ca != encoded
			webhookBundles = append(webhookBundles, map[string]any{"name": w["name"], "clientConfig": map[string]any{"caBundle": encoded}})
		}
		if !stale {
			continue
		}
		ac := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": admissionregistrationv1.SchemeGroupVersion.String(),
			"kind":       kind,
			"metadata":   map[string]any{"name": name},
			"webhooks":   webhookBundles,
		}}
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(ac), client.FieldOwner(InjectorFieldOwner), client.ForceOwnership); err != nil {
			return applied, fmt.Errorf("applying the CA bundle to %s %s: %w", kind, name, err)
		}
		logf.FromContext(ctx).WithName("certs").Info("Applied the CA bundle", "kind", kind, "name", name, "webhooks", len(webhookBundles))
		applied = true
	}
	return applied, nil
}

func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.serving.Load(); c != nil {
		return c, nil
	}
	return nil, errNotLoaded
}

func (s *SelfSigned) Ready(*http.Request) error {
	if s.serving.Load() == nil {
		return errNotLoaded
	}
	return nil
}

// Leaf returns the serving certificate in use, or nil.
func (s *SelfSigned) Leaf() *x509.Certificate {
	if c := s.serving.Load(); c != nil {
		return c.Leaf
	}
	return nil
}
