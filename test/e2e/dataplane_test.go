package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

// servedWithin is how long Traefik may take to serve (or stop serving) a
// change once the API server has it: it applies configuration within about
// a second, after gatefold's debounce.
const servedWithin = 30 * time.Second

// startTraefik starts a control plane (its audit log, of every request, at
// the path returned), gatefold as installed (startInstalledManager, which
// checks its log for refused requests at the end) and Traefik with the echo
// backends named, as the implementation of class dp.GatewayClass; it skips
// the test when there is no Traefik binary.
func startTraefik(t *testing.T, backends ...string) (env *devenv.Env, dp *dataplane.DataPlane, audit string) {
	t.Helper()
	traefik, err := dataplane.FindBinary("")
	if errors.Is(err, dataplane.ErrNoBinary) {
		t.Skipf("Skipping the data-plane test: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	audit = filepath.Join(t.TempDir(), "audit.log")
	var kubeconfig string
	env, kubeconfig = startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t), AuditLog: audit, AuditAll: true})

	startInstalledManager(t, env, "--listenerset-controllers="+dataplane.ControllerName)

	dp, err = dataplane.Start(context.Background(), env.Client, dataplane.Options{
		Binary: traefik, Kubeconfig: kubeconfig, Dir: t.TempDir(),
		// Free ports, so that a `make dev` running beside the tests is no matter.
		HTTPPort: testenv.MustFreePort(t), HTTPSPort: testenv.MustFreePort(t),
		Backends: backends,
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.StopDataPlaneAtCleanup(t, dp)
	t.Logf("Traefik %s serves class %s on 127.0.0.1:%d (HTTP) and 127.0.0.1:%d (HTTPS)", traefik, dp.GatewayClass, dp.HTTPPort, dp.HTTPSPort)
	return env, dp, audit
}

// tlsSecret is a kubernetes.io/tls Secret holding a new certificate for
// host, signed by ca, and that certificate.
func tlsSecret(t *testing.T, ca *dataplane.Authority, ns, name, host string) (*corev1.Secret, *x509.Certificate) {
	t.Helper()
	secret, err := ca.TLSSecret(ns, name, host)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatalf("Secret %s/%s holds no PEM certificate", ns, name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return secret, cert
}

func checkGatewayAddress(t *testing.T, c client.Client, gw *gwv1.Gateway) {
	t.Helper()
	current := &gwv1.Gateway{}
	get(t, c, client.ObjectKeyFromObject(gw), current)
	if len(current.Status.Addresses) != 1 || current.Status.Addresses[0].Value != "127.0.0.1" {
		t.Errorf("Gateway status addresses %+v, want 127.0.0.1 only", current.Status.Addresses)
	}
	if !meta.IsStatusConditionTrue(current.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
		t.Errorf("Gateway not programmed: %+v", current.Status.Conditions)
	}
}

// newProber sends requests to dp's entryPoints.
func newProber(t *testing.T, dp *dataplane.DataPlane) *prober {
	return &prober{t: t, dp: dp, httpPort: dp.HTTPPort, httpsPort: dp.HTTPSPort}
}

// prober sends requests to Traefik's entryPoints as a client would, by
// hostname: the Host header for HTTP, SNI and the Host header for HTTPS.
type prober struct {
	t                   *testing.T
	dp                  *dataplane.DataPlane
	httpPort, httpsPort int
}

// answer is what one request got.
type answer struct {
	status int
	header http.Header
	body   string
	cert   *x509.Certificate // the leaf Traefik served over HTTPS, in a completed handshake
	err    error
}

func (a answer) String() string {
	var s string
	if a.err != nil {
		s = "error: " + a.err.Error()
	} else {
		s = fmt.Sprintf("%d %q", a.status, strings.TrimSpace(a.body))
	}
	if a.cert != nil {
		s += fmt.Sprintf(", certificate %s (serial %x)", describeCert(a.cert), a.cert.SerialNumber)
	}
	return s
}

func describeCert(cert *x509.Certificate) string {
	if len(cert.DNSNames) > 0 {
		return "for " + strings.Join(cert.DNSNames, ",")
	}
	return "CN=" + cert.Subject.CommonName
}

// from says whether the answer came from backend (through Traefik) with
// cert, when cert is set.
func (a answer) from(backend string, cert *x509.Certificate) bool {
	return a.err == nil && a.status == http.StatusOK && strings.HasPrefix(a.body, "backend="+backend+" ") &&
		(cert == nil || (a.cert != nil && a.cert.Equal(cert)))
}

// notFound says whether Traefik answered 404 itself, not a backend.
func (a answer) notFound() bool {
	return a.err == nil && a.status == http.StatusNotFound && !strings.HasPrefix(a.body, "backend=")
}

// certFor says whether the answer's handshake presented a certificate
// valid for host.
func (a answer) certFor(host string) bool {
	return a.cert != nil && a.cert.VerifyHostname(host) == nil
}

// refused says whether nothing took the connection.
func (a answer) refused() bool {
	return errors.Is(a.err, syscall.ECONNREFUSED)
}

// plainHTTP says whether the TLS handshake failed because the port answered
// in plain HTTP.
func (a answer) plainHTTP() bool {
	var rh tls.RecordHeaderError
	return a.cert == nil && errors.As(a.err, &rh)
}

func (p *prober) get(scheme, host, path string) answer {
	port := p.httpPort
	if scheme == "HTTPS" {
		port = p.httpsPort
	}
	return p.getAt(port, scheme, host, path)
}

// getAt sends the request to port, whatever entryPoint that is.
func (p *prober) getAt(port int, scheme, host, path string) answer {
	var a answer
	var mu sync.Mutex
	addr := net.JoinHostPort(p.dp.Address, strconv.Itoa(port))
	transport := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	url := fmt.Sprintf("http://%s%s", addr, path)
	if scheme == "HTTPS" {
		url = "https://" + host + path
		transport.DialTLSContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The test compares the served certificate itself.
			conn := tls.Client(raw, &tls.Config{ServerName: host, InsecureSkipVerify: true})
			if err := conn.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			if cs := conn.ConnectionState(); len(cs.PeerCertificates) > 0 {
				mu.Lock()
				a.cert = cs.PeerCertificates[0]
				mu.Unlock()
			}
			return conn, nil
		}
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Host = host
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a.status, a.header, a.body, a.err = resp.StatusCode, resp.Header, string(body), err
	return a
}

func (p *prober) describeAt(port int, scheme, host, path string) string {
	if scheme == "HTTPS" {
		return fmt.Sprintf("HTTPS %s%s (SNI %s) to %s:%d", host, path, host, p.dp.Address, port)
	}
	return fmt.Sprintf("HTTP %s%s (Host %s) to %s:%d", host, path, host, p.dp.Address, port)
}

func (p *prober) describe(scheme, host, path string) string {
	if scheme == "HTTPS" {
		return p.describeAt(p.httpsPort, scheme, host, path)
	}
	return p.describeAt(p.httpPort, scheme, host, path)
}

// failRefused fails the test at once on a refused connection: an entryPoint
// is down, which no check of what Traefik serves may take for an answer.
func (p *prober) failRefused(what string, a answer) {
	p.t.Helper()
	state := "Traefik is running"
	if err := p.dp.Running(); err != nil {
		state = err.Error()
	}
	log := p.dp.Log()
	var serverErrors []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "Error while running HTTP server") {
			serverErrors = append(serverErrors, line)
		}
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	lines = lines[max(0, len(lines)-30):]
	p.t.Fatalf("%s → %s: the entryPoint refuses connections (%s). Traefik logged %d \"Error while running HTTP server\" lines:\n%s\nIts log ends:\n%s",
		what, a, state, len(serverErrors), strings.Join(serverErrors, "\n"), strings.Join(lines, "\n"))
}

// poll requests until ok accepts an answer, logging each answer that
// differs from the one before, and fails the test after servedWithin, or at
// once on a refused connection when failOnRefused is set.
func (p *prober) poll(scheme, host, path, want string, failOnRefused bool, ok func(answer) bool) {
	p.t.Helper()
	start := time.Now()
	var last string
	for {
		a := p.get(scheme, host, path)
		if s := a.String(); s != last || ok(a) {
			p.t.Logf("%s → %s [%.1fs]", p.describe(scheme, host, path), s, time.Since(start).Seconds())
			last = s
		}
		if ok(a) {
			return
		}
		if failOnRefused && a.refused() {
			p.failRefused(p.describe(scheme, host, path), a)
		}
		if time.Since(start) > servedWithin {
			p.t.Fatalf("%s: no answer %s within %s", p.describe(scheme, host, path), want, servedWithin)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServed waits until the request is answered by backend, over HTTPS
// with cert.
func (p *prober) waitServed(scheme, host, path, backend string, cert *x509.Certificate) {
	p.t.Helper()
	want := "from backend " + backend
	if cert != nil {
		want += " with the certificate " + describeCert(cert) + " of its Secret"
	}
	p.poll(scheme, host, path, want, false, func(a answer) bool { return a.from(backend, cert) })
}

// waitNotServed waits until Traefik answers that it does not serve the
// request: over HTTP a 404 of its own; over HTTPS a completed handshake with
// a certificate not for host (Traefik's default one) and, if the request
// got an answer, a 404. A refused connection fails the test at once: the
// entryPoint is down, which says nothing of what Traefik serves.
func (p *prober) waitNotServed(scheme, host, path string) {
	p.t.Helper()
	want := "404 from Traefik"
	if scheme == "HTTPS" {
		want = "of a handshake with a certificate not for " + host + ", then 404"
	}
	p.poll(scheme, host, path, want, true, func(a answer) bool {
		if scheme == "HTTPS" {
			return a.cert != nil && !a.certFor(host) && (a.err != nil || a.notFound())
		}
		return a.notFound()
	})
}

// noCertificateFor checks for two seconds that TLS handshakes with SNI host
// on port never present a certificate for host, and that the port answers:
// with a completed handshake (then 404, if the request got an answer), or
// in plain HTTP.
func (p *prober) noCertificateFor(port int, host, path string) {
	p.t.Helper()
	what := p.describeAt(port, "HTTPS", host, path)
	var a answer
	testenv.Steady(p.t, 2*time.Second, 200*time.Millisecond, func() error {
		a = p.getAt(port, "HTTPS", host, path)
		switch {
		case a.refused():
			p.failRefused(what, a)
		case a.certFor(host):
			return fmt.Errorf("%s → %s: the handshake presented a certificate for %s", what, a, host)
		case a.cert != nil && (a.err != nil || a.notFound()), a.plainHTTP():
		default:
			return fmt.Errorf("%s → %s, want a handshake with another certificate, then 404, or a plain HTTP answer", what, a)
		}
		return nil
	})
	p.t.Logf("%s → %s [steady for 2s: no certificate for %s]", what, a, host)
}

// stillServed checks that requests keep getting the answer they should
// for two seconds: from backend (with cert), or 404 when backend is "".
func (p *prober) stillServed(scheme, host, path, backend string, cert *x509.Certificate) {
	p.t.Helper()
	ok := func(a answer) bool { return a.from(backend, cert) }
	if backend == "" {
		ok = func(a answer) bool { return a.err == nil && a.status == http.StatusNotFound }
	}
	var a answer
	testenv.Steady(p.t, 2*time.Second, 200*time.Millisecond, func() error {
		if a = p.get(scheme, host, path); !ok(a) {
			return fmt.Errorf("%s → %s, want it answered by %q", p.describe(scheme, host, path), a, backend)
		}
		return nil
	})
	p.t.Logf("%s → %s [steady for 2s]", p.describe(scheme, host, path), a)
}
