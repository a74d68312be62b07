package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
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
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// relay passes TCP connections from a port of its own on loopback to a
// webhook server, counts them, and closes them all when told. The API server
// keeps its connections to a webhook open: calls on one it made before a
// renewal would not show whether it trusts the renewed certificate.
type relay struct {
	addr string

	mu       sync.Mutex
	open     map[net.Conn]net.Conn
	accepted int
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: l.Addr().String(), open: map[net.Conn]net.Conn{}}
	var accepting, copying sync.WaitGroup
	t.Cleanup(func() { l.Close(); accepting.Wait(); r.sever(); copying.Wait() })
	accepting.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.open[in] = out
			r.accepted++
			r.mu.Unlock()
			for _, pipe := range [][2]net.Conn{{in, out}, {out, in}} {
				copying.Go(func() {
					_, _ = io.Copy(pipe[0], pipe[1])
					in.Close()
					out.Close()
					r.mu.Lock()
					delete(r.open, in)
					r.mu.Unlock()
				})
			}
		}
	})
	return r
}

// sever closes every open connection: the API server's next call makes a
// new one, with a new TLS handshake.
func (r *relay) sever() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for in, out := range r.open {
		in.Close()
		out.Close()
	}
}

// connections is how many connections the relay has accepted.
func (r *relay) connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
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
	waitFor(t, 30*time.Second, fmt.Sprintf("Certificate %s Ready past revision %d, not Issuing", name, past), func() (bool, string) {
		var err error
		if crt, err = cm.CertmanagerV1().Certificates(installNamespace).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		ready := apiutil.GetCertificateCondition(crt, cmapi.CertificateConditionReady)
		issuing := apiutil.GetCertificateCondition(crt, cmapi.CertificateConditionIssuing)
		return ready != nil && ready.Status == cmmeta.ConditionTrue && issuing == nil && revision(crt) > past,
			fmt.Sprintf("revision %d, %s", revision(crt), fmtConditions(crt))
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

// webhookCalls reads from the API server's metrics how many calls it has
// made to gatefold's webhooks, how many of them denied the request, and how
// many failed: got no answer, whether the failure policy then refused the
// request or let it through. It fails the test when the metrics it reads
// are missing: counting nothing must not pass for zero failures.
func webhookCalls(t *testing.T, cfg *rest.Config) (calls, denied, failed float64) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("Reading the API server's metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("Parsing the API server's metrics: %v", err)
	}
	sum := func(family string, match func(labels map[string]string) bool) float64 {
		total := 0.0
		for _, m := range families[family].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if strings.HasSuffix(labels["name"], ".gatefold.dev") && match(labels) {
				total += m.GetCounter().GetValue()
			}
		}
		return total
	}
	for _, family := range []string{"apiserver_admission_webhook_request_total", "apiserver_admission_webhook_rejection_count"} {
		if families[family] == nil {
			t.Fatalf("The API server's metrics have no %s: the webhook calls cannot be counted", family)
		}
	}
	all := func(map[string]string) bool { return true }
	calls = sum("apiserver_admission_webhook_request_total", all)
	denied = sum("apiserver_admission_webhook_rejection_count", func(l map[string]string) bool { return l["error_type"] == "no_error" })
	failed = sum("apiserver_admission_webhook_rejection_count", func(l map[string]string) bool { return l["error_type"] != "no_error" }) +
		sum("apiserver_admission_webhook_fail_open_count", all)
	return calls, denied, failed
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
	addr := runInstalledManager(t, env, kubeconfig, "default", "--cert-mode=cert-manager", "--webhook-cert-dir="+dir)
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
	waitFor(t, 30*time.Second, "the webhook serving the Secret's certificate", func() (bool, string) {
		served, _ := servedCertificate(t, addr)
		return served == before, "serves " + served + ", the Secret holds " + before
	})
	t.Logf("The webhook serves serial %s, the Secret's", before)
	gw := checkFragmentAdmission(t, c)

	// Renew as `cmctl renew` does, while fragments are created; every
	// call after the renewal is made on a new connection.
	callsBefore, deniedBefore, failedBefore := webhookCalls(t, env.Config)
	if failedBefore != 0 {
		t.Errorf("%.0f of the API server's calls to the webhooks failed before the renewal", failedBefore)
	}
	connsBefore := r.connections()
	severed := 0
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
	requests, failures := probeAdmission(t, c, gw, func() bool {
		r.sever()
		severed++
		severedAt := time.Now()
		w.observe()
		// Time for the API server to see its connections closed.
		time.Sleep(100*time.Millisecond - time.Since(severedAt))
		switch {
		case w.servedIn != 0:
			// Go on a while with the new certificate.
			return time.Since(w.start) > w.servedIn+2*time.Second
		case time.Since(w.start) > 30*time.Second:
			t.Errorf("30s after the renewal the Secret holds serial %q (was %s) and the webhook serves %v", w.after, before, w.served)
			return true
		}
		return false
	})
	calls, denied, failed := webhookCalls(t, env.Config)
	crt = waitCertificateReady(t, cm, servingCertificate, issued)
	t.Logf("Certificate %s after the renewal: revision %d, %s", servingCertificate, revision(crt), fmtConditions(crt))
	t.Logf("Serial served before the renewal %s, after %s; after the renewal was triggered, the new one was in the Secret in %s, trusted by every caBundle in %s, served in %s; served meanwhile: %v",
		before, w.after, w.issuedIn.Round(time.Millisecond), w.trustedIn.Round(time.Millisecond), w.servedIn.Round(time.Millisecond), slices.Sorted(maps.Keys(w.served)))
	t.Logf("During the renewal: %d creates, %d failed; the API server called gatefold's webhooks %.0f times over %d new connections, %.0f calls failed",
		requests, failures, calls-callsBefore, r.connections()-connsBefore, failed-failedBefore)
	if w.after == "" || w.after == before {
		t.Errorf("The renewal did not change the serving certificate: %s before, %q after", before, w.after)
	}
	if failed != failedBefore {
		t.Errorf("%.0f of the API server's calls to the webhooks failed during the renewal", failed-failedBefore)
	}
	// Each create is a call to the mutating and one to the validating
	// webhook, half of them duplicates the validating one denies, and each
	// iteration's calls open new connections: else the counts prove nothing.
	if calls-callsBefore < float64(2*requests) || denied-deniedBefore < float64(requests/2) || r.connections()-connsBefore < severed-1 {
		t.Errorf("During the renewal the API server made %.0f webhook calls (want at least %d), %.0f denials (want %d), over %d new connections (want at least %d)",
			calls-callsBefore, 2*requests, denied-deniedBefore, requests/2, r.connections()-connsBefore, severed-1)
	}
	if w.trustedIn == 0 || w.trustedIn > w.servedIn {
		t.Errorf("The new CA was trusted by every caBundle after %s, and the new certificate served after %s: the bundle must trust it first", w.trustedIn, w.servedIn)
	}
	// The injector adds the new CA to the bundle and keeps the old one
	// until it expires.
	caBefore := secret.Data[cmmeta.TLSCAKey]
	get(t, c, secretKey, secret)
	checkInjected(t, c, caBefore, secret.Data[cmmeta.TLSCAKey])
}

// renewal follows a serving certificate's renewal: when the new one is in
// the Secret, in every caBundle and served by the webhook.
type renewal struct {
	t      *testing.T
	c      client.Client
	addr   string
	before string
	start  time.Time

	after                         string
	issuedIn, trustedIn, servedIn time.Duration
	served                        map[string]bool
}

func (w *renewal) observe() {
	now, _ := servedCertificate(w.t, w.addr)
	w.served[now] = true
	s := &corev1.Secret{}
	get(w.t, w.c, client.ObjectKey{Namespace: installNamespace, Name: servingSecret}, s)
	if inSecret := serialOf(w.t, s.Data[corev1.TLSCertKey]); inSecret != w.before && w.issuedIn == 0 {
		w.after, w.issuedIn = inSecret, time.Since(w.start)
	}
	if w.after != "" && w.trustedIn == 0 {
		_, bundles := webhookBundles(w.t, w.c)
		trusted := true
		for ca := range certSet(s.Data[cmmeta.TLSCAKey]) {
			for _, b := range bundles {
				trusted = trusted && certSet(b)[ca]
			}
		}
		if trusted {
			w.trustedIn = time.Since(w.start)
		}
	}
	if w.after != "" && now == w.after && w.servedIn == 0 {
		w.servedIn = time.Since(w.start)
	}
}
