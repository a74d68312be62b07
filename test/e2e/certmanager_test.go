package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"         // the CA Issuer's set-up, for the issuers controller
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned" // the self-signed Issuer's
	cmutil "github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

// The default overlay's Certificate for the webhook and the Secret
// cert-manager issues it into, which the Deployment mounts.
const (
	servingCertificate = "gatefold-serving-cert"
	servingSecret      = "gatefold-webhook-server-cert"
)

// certManagerControllers are the controllers of cert-manager's controller
// binary that issue and renew a Certificate from a self-signed or a CA
// Issuer, as the default overlay's are; the rest (ACME, Vault, Venafi, the
// Ingress and Gateway shims) the overlays do not use.
var certManagerControllers = []string{
	issuers.ControllerName,
	crapprover.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// startCertManager runs certManagerControllers in process, from cert-manager's
// Go module, as its controller binary does (one worker each), as a cluster
// administrator: cert-manager is a third party here, not under test.
func startCertManager(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	// With the controller binary's defaults.
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:       kubeconfig,
		KubernetesAPIQPS: 20, KubernetesAPIBurst: 50,
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var controllers []controllerpkg.Interface
	for _, name := range certManagerControllers {
		construct, ok := controllerpkg.Known()[name]
		if !ok {
			t.Fatalf("cert-manager has no controller %s", name)
		}
		c, err := construct(factory)
		if err != nil {
			t.Fatalf("Building cert-manager's %s controller: %v", name, err)
		}
		controllers = append(controllers, c)
	}
	// The controllers registered their informers; start them.
	shared, err := factory.Build()
	if err != nil {
		t.Fatal(err)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	for i, c := range controllers {
		wg.Go(func() {
			if err := c.Run(1, ctx); err != nil && ctx.Err() == nil {
				t.Errorf("cert-manager's %s controller stopped: %v", certManagerControllers[i], err)
			}
		})
	}
}

// startCAInjector runs cert-manager's CA injector in process for webhook
// configurations, from Certificates, as its cainjector binary does.
func startCAInjector(t *testing.T, cfg *rest.Config) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cmapi.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	// The binary's options: its field manager is its user agent's first
	// word, and it reads Secrets from the API server, not from a cache that
	// may not hold the change it was woken for yet.
	mgr, err := ctrl.NewManager(cmutil.RestConfigWithUserAgent(cfg, "cainjector"), ctrl.Options{
		Scheme:  scheme,
		Cache:   cache.Options{ReaderFailOnMissingInformer: true},
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Each test that needs one starts its own in this process, under
		// the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	}); err != nil {
		close(done)
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("cert-manager's CA injector stopped: %v", err)
		}
	}()
}

// mountSecret keeps dir as the kubelet keeps a Secret volume: each key a
// link into ..data, itself a link swapped at once to a new folder when the
// Secret changes, so that a reader never sees one certificate beside another
// one's key. It copies a change lag after it sees it, as the kubelet does
// after its sync period (a minute or more in a cluster).
func mountSecret(t *testing.T, c client.Client, key client.ObjectKey, dir string, lag time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var mounted map[string][]byte
		for ; ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
			s := &corev1.Secret{}
			if err := c.Get(ctx, key, s); err != nil || maps.EqualFunc(s.Data, mounted, bytes.Equal) {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(lag):
			}
			if err := writeVolume(dir, s.Data); err != nil {
				t.Errorf("Mounting Secret %s: %v", key, err)
				return
			}
			mounted = s.Data
			serial, err := serialNumber(s.Data[corev1.TLSCertKey])
			if err != nil {
				serial = err.Error()
			}
			t.Logf("Mounted Secret %s (serial %s) into %s", key, serial, dir)
		}
	}()
}

// writeVolume writes data into dir as the kubelet's atomic writer does.
func writeVolume(dir string, data map[string][]byte) error {
	ts, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), v, 0o600); err != nil {
			return err
		}
	}
	dataLink, tmpLink := filepath.Join(dir, "..data"), filepath.Join(dir, "..data_tmp")
	old, _ := os.Readlink(dataLink)
	if err := os.Symlink(filepath.Base(ts), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		return err
	}
	for k := range data {
		if _, err := os.Lstat(filepath.Join(dir, k)); errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
				return err
			}
		}
	}
	if old == "" {
		return nil
	}
	return os.RemoveAll(filepath.Join(dir, old))
}

// serialNumber is the serial number of the first certificate in certPEM.
func serialNumber(certPEM []byte) (string, error) {
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return "", fmt.Errorf("decoding a certificate: %w", err)
	}
	return cert.SerialNumber.String(), nil
}

// serialOf is serialNumber for the test's goroutine, which it fails when
// certPEM holds no certificate.
func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	serial, err := serialNumber(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return serial
}

// waitCertificateReady waits until the Certificate is Ready at a revision
// past the given one, and not Issuing again, and returns it.
func waitCertificateReady(t *testing.T, cm cmclient.Interface, name string, past int) *cmapi.Certificate {
	t.Helper()
	var crt *cmapi.Certificate
	testenv.Eventually(t, 30*time.Second, func() error {
		var err error
		if crt, err = cm.CertmanagerV1().Certificates(installNamespace).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("waiting for Certificate %s Ready past revision %d, not Issuing; last: %v", name, past, err)
		}
		ready := apiutil.GetCertificateCondition(crt, cmapi.CertificateConditionReady)
		issuing := apiutil.GetCertificateCondition(crt, cmapi.CertificateConditionIssuing)
		if ready != nil && ready.Status == cmmeta.ConditionTrue && issuing == nil && revision(crt) > past {
			return nil
		}
		return fmt.Errorf("waiting for Certificate %s Ready past revision %d, not Issuing; last: revision %d, %s", name, past, revision(crt), fmtConditions(crt))
	})
	return crt
}

// revision is the Certificate's status.revision, 0 before its first issue.
func revision(crt *cmapi.Certificate) int { return ptr.Deref(crt.Status.Revision, 0) }

// fmtConditions lists a Certificate's conditions as kubectl describe
// would: type=status (reason: message).
func fmtConditions(crt *cmapi.Certificate) string {
	var conds []string
	for _, c := range crt.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(conds, ", ")
}

// TestCertManagerIssuesTheWebhookCertificate installs the default overlay
// and lets cert-manager, its controllers and CA injector run in process from
// its Go module, issue the overlay's Certificate into the Secret the manager
// serves (copied into the manager's folder as the kubelet mounts it) and
// inject the CA. The API server must then call the webhooks over that TLS,
// through a renewal forced as `cmctl renew` does, without one failed call.
func TestCertManagerIssuesTheWebhookCertificate(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c, ctx := env.Client, context.Background()
	cm, err := cmclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	secretKey := client.ObjectKey{Namespace: installNamespace, Name: servingSecret}
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-f", certManagerCRDs(t))
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-k", overlay(t, "default"))
	// The API server calls the webhooks by URL on loopback here, not
	// through the Service, so the certificate must name 127.0.0.1 too (as
	// --webhook-cert-hosts does in the self-signed mode).
	if _, err := cm.CertmanagerV1().Certificates(installNamespace).Patch(ctx, servingCertificate, types.MergePatchType,
		[]byte(`{"spec":{"ipAddresses":["127.0.0.1"]}}`), metav1.PatchOptions{FieldManager: "gatefold-test"}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	startCertManager(t, kubeconfig)
	dir := t.TempDir()
	mountSecret(t, c, secretKey, dir, 2*time.Second)
	// Ready once the certificate is mounted.
	addr := runInstalledManager(t, env, testenv.Gatefold{Overlay: "default", Args: []string{"--cert-mode=cert-manager", "--webhook-cert-dir=" + dir}})
	r := startRelay(t, addr)
	testenv.PointWebhooksAt(t, c, "https://"+r.addr)
	// Only now: pointing the webhooks rewrites them whole.
	startCAInjector(t, env.Config)

	crt := waitCertificateReady(t, cm, servingCertificate, 0)
	ready := time.Duration(0)
	if c := apiutil.GetCertificateCondition(crt, cmapi.CertificateConditionReady); c != nil && c.LastTransitionTime != nil {
		ready = c.LastTransitionTime.Sub(start)
	}
	t.Logf("Certificate %s Ready %s after cert-manager started (to the second): revision %d, %s", servingCertificate, ready.Round(time.Second), revision(crt), fmtConditions(crt))
	secret := &corev1.Secret{}
	get(t, c, secretKey, secret)
	checkInjected(t, c, secret.Data[cmmeta.TLSCAKey])
	before := serialOf(t, secret.Data[corev1.TLSCertKey])
	testenv.Eventually(t, 30*time.Second, func() error {
		served := servedCertificate(t, addr).SerialNumber.String()
		if served == before {
			return nil
		}
		return fmt.Errorf("waiting for the webhook serving the Secret's certificate; last: %s", "serves "+served+", the Secret holds "+before)
	})
	t.Logf("The webhook serves serial %s, the Secret's", before)
	gw := checkFragmentAdmission(t, c)

	// Renew as `cmctl renew` does, while fragments are created; every
	// call after the renewal is made on a new connection.
	callsBefore := countCalls(t, env.Config, r)
	if callsBefore.failed != 0 {
		t.Errorf("%.0f of the API server's calls to the webhooks failed before the renewal", callsBefore.failed)
	}
	issued := revision(crt)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crt, err := cm.CertmanagerV1().Certificates(installNamespace).Get(ctx, servingCertificate, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionIssuing, cmmeta.ConditionTrue, "ManuallyTriggered", "Certificate re-issuance manually triggered")
		_, err = cm.CertmanagerV1().Certificates(installNamespace).UpdateStatus(ctx, crt, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("Triggering a renewal: %v", err)
	}
	w := &renewal{t: t, c: c, addr: addr, before: before, start: time.Now(), served: map[string]bool{}}
	requests, failures, severed := probeThroughRelay(t, c, gw, r, func() bool {
		w.observe()
		switch {
		case !w.servedAt.IsZero():
			// Go on a while with the new certificate.
			return time.Since(w.servedAt) > 2*time.Second
		case time.Since(w.start) > 30*time.Second:
			t.Errorf("30s after the renewal the Secret holds serial %q (was %s) and the webhook serves %v", w.after, before, w.served)
			return true
		}
		return false
	})
	callsAfter := countCalls(t, env.Config, r)
	crt = waitCertificateReady(t, cm, servingCertificate, issued)
	t.Logf("Certificate %s after the renewal: revision %d, %s", servingCertificate, revision(crt), fmtConditions(crt))
	t.Logf("Serial served before the renewal %s, after %s; after the renewal was triggered, the new one was in the Secret in %s, seen trusted by every caBundle in %s, last seen not served in %s, first seen served in %s; served meanwhile: %v",
		before, w.after, w.issuedIn.Round(time.Millisecond), w.since(w.trustedAt), w.since(w.oldAt), w.since(w.servedAt), slices.Sorted(maps.Keys(w.served)))
	t.Logf("%d of the creates did not get their answer", failures)
	if w.after == "" || w.after == before {
		t.Errorf("The renewal did not change the serving certificate: %s before, %q after", before, w.after)
	}
	checkCalls(t, "during the renewal", callsBefore, callsAfter, requests, severed)
	// A handshake that began after every caBundle was read trusting the new
	// CA still served the old certificate: the new one was first served
	// after the bundle that trusts it was stored, however coarse the rounds.
	if w.trustedAt.IsZero() || !w.oldAt.After(w.trustedAt) {
		t.Errorf("No handshake served the old certificate after every caBundle was seen trusting the new CA (seen trusted after %s, old last served in a handshake begun after %s): the bundle is not shown to trust it before it is served",
			w.since(w.trustedAt), w.since(w.oldAt))
	}
	// The injector adds the new CA to the bundle and keeps the old one
	// until it expires.
	caBefore := secret.Data[cmmeta.TLSCAKey]
	get(t, c, secretKey, secret)
	checkInjected(t, c, caBefore, secret.Data[cmmeta.TLSCAKey])
}

// renewal follows a serving certificate's renewal: when the new one is in
// the Secret, when every caBundle was read trusting its CA, and the
// handshakes the test makes, each against the caBundles read before it
// began (checkTrusted), which serve the old certificate or the new one.
type renewal struct {
	t      *testing.T
	c      client.Client
	addr   string
	before string
	start  time.Time

	after    string
	issuedIn time.Duration
	// trustedAt is when a read of the caBundles that all trust the new CA
	// returned; oldAt and servedAt are when the last handshake that served
	// the old certificate and the first that served the new one began.
	trustedAt, oldAt, servedAt time.Time
	served                     map[string]bool
}

func (w *renewal) observe() {
	s := &corev1.Secret{}
	get(w.t, w.c, client.ObjectKey{Namespace: installNamespace, Name: servingSecret}, s)
	if inSecret := serialOf(w.t, s.Data[corev1.TLSCertKey]); inSecret != w.before && w.issuedIn == 0 {
		w.after, w.issuedIn = inSecret, time.Since(w.start)
	}
	_, bundles := webhookBundles(w.t, w.c)
	if w.after != "" && w.trustedAt.IsZero() {
		trusted := true
		for ca := range certSet(s.Data[cmmeta.TLSCAKey]) {
			for _, b := range bundles {
				trusted = trusted && certSet(b)[ca]
			}
		}
		if trusted {
			w.trustedAt = time.Now()
		}
	}
	began := time.Now()
	leaf := servedCertificate(w.t, w.addr)
	checkTrusted(w.t, leaf, bundles)
	now := leaf.SerialNumber.String()
	w.served[now] = true
	switch {
	case now == w.before:
		w.oldAt = began
	case w.after != "" && now == w.after && w.servedAt.IsZero():
		w.servedAt = began
	}
}

// since is how long after the renewal was triggered t came, or "never".
func (w *renewal) since(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(w.start).Round(time.Millisecond).String()
}
