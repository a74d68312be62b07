package e2e

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gatefold/gatefold/internal/devenv"
)

// issuedSecret is the Secret cert-manager writes for Certificate
// gatefold-serving-cert: tls.crt, tls.key, ca.crt and the annotation that
// ties it to the Certificate.
func issuedSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gatefold-webhook-service.gatefold-system.svc"},
		DNSNames:  []string{"gatefold-webhook-service.gatefold-system.svc"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	certPEM, _, err := pki.SignCertificate(template, template, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodePKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: installNamespace, Name: "gatefold-webhook-server-cert",
			Annotations: map[string]string{cmapi.CertificateNameKey: "gatefold-serving-cert"},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": certPEM},
	}
}

// TestCertManagerCAInjectorHonoursTheDefaultOverlay runs cert-manager's own
// CA injector, from its Go module, against the default overlay: the
// annotation kustomize fills in must lead it to the Certificate's Secret and
// into both webhook configurations.
func TestCertManagerCAInjectorHonoursTheDefaultOverlay(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-f", certManagerCRDs(t))
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-k", overlay(t, "default"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	secret := issuedSecret(t)
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cmapi.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	// The injector's field manager is its user agent's first word, as in
	// cert-manager's own cainjector binary.
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "cert-manager-cainjector/v1.21.2"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("cert-manager's CA injector stopped: %v", err)
		}
	}()

	checkInjected(t, env.Client, secret.Data["ca.crt"])
}
