package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The tests of the webhook's certificate (self-signed and cert-manager's)
// put a relay between the API server and the webhook server, close its
// connections before every round of admission requests, and count the API
// server's calls in its own metrics: every call is then made over a new
// TLS handshake, which must succeed whatever certificate is served.

// servedCertificate is the certificate the webhook server presents to a
// handshake the test makes now, offering HTTP/2 as the API server does;
// checkTrusted judges it as the API server would. The server must not take
// HTTP/2.
func servedCertificate(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) // verified by checkTrusted
	if err != nil {
		t.Fatalf("Connecting to the webhook server: %v", err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("The webhook server negotiated %q, want http/1.1: HTTP/2 must stay off", p)
	}
	return conn.ConnectionState().PeerCertificates[0]
}

// checkTrusted checks that every caBundle of bundles (webhookBundles) trusts
// leaf for 127.0.0.1, where the API server calls the webhooks.
func checkTrusted(t *testing.T, leaf *x509.Certificate, bundles [][]byte) {
	t.Helper()
	for i, b := range bundles {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			t.Errorf("The caBundle of webhook %d holds no certificate", i)
			continue
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
			t.Errorf("The webhook served serial %s (issuer %s), which the caBundle of webhook %d does not trust: %v", leaf.SerialNumber, leaf.Issuer.CommonName, i, err)
		}
	}
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

// callCount is what the API server's metrics (webhookCalls) and the relay
// counted of the API server's calls to gatefold's webhooks at one moment.
type callCount struct {
	calls, denied, failed float64
	connections           int
}

func countCalls(t *testing.T, cfg *rest.Config, r *relay) callCount {
	t.Helper()
	calls, denied, failed := webhookCalls(t, cfg)
	return callCount{calls: calls, denied: denied, failed: failed, connections: r.connections()}
}

// probeThroughRelay runs probeAdmission on gw until done is true, closing
// the relay's connections before each round and giving the API server
// 100ms to see them closed, so that each round's calls make new
// handshakes; it returns how many creates were sent, how many did not get
// their answer, and how many times it closed the connections.
func probeThroughRelay(t *testing.T, c client.Client, gw *gwv1.Gateway, r *relay, done func() bool) (requests, failures, severed int) {
	t.Helper()
	requests, failures = probeAdmission(t, c, gw, func() bool {
		r.sever()
		severed++
		severedAt := time.Now()
		finished := done()
		time.Sleep(100*time.Millisecond - time.Since(severedAt))
		return finished
	})
	return requests, failures, severed
}

// checkCalls checks the API server's calls to the webhooks between before
// and after, while probeThroughRelay sent requests creates and closed the
// connections severed times: none failed; and each create was a call to the
// mutating and one to the validating webhook, half of them duplicates the
// validating one denies, over a new connection after each close: else the
// counts prove nothing.
func checkCalls(t *testing.T, during string, before, after callCount, requests, severed int) {
	t.Helper()
	calls, denied, failed, conns := after.calls-before.calls, after.denied-before.denied, after.failed-before.failed, after.connections-before.connections
	t.Logf("%s: %d creates; the API server called gatefold's webhooks %.0f times over %d new connections, %.0f calls failed", during, requests, calls, conns, failed)
	if failed != 0 {
		t.Errorf("%.0f of the API server's calls to the webhooks failed %s", failed, during)
	}
	if calls < float64(2*requests) || denied < float64(requests/2) || conns < severed-1 {
		t.Errorf("%s the API server made %.0f webhook calls (want at least %d), %.0f denials (want %d), over %d new connections (want at least %d)",
			during, calls, 2*requests, denied, requests/2, conns, severed-1)
	}
}
