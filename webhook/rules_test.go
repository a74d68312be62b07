package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

var (
	entry      = fixture.Entry
	gwListener = fixture.Own
)

func TestCheckAgainstBoard(t *testing.T) {
	tests := map[string]struct {
		listeners []gwv1.ListenerEntry
		taken     []gwv1.Listener
		wantErr   string
	}{
		"same port, protocol and hostname as a Gateway listener is a duplicate hostname": {
			listeners: []gwv1.ListenerEntry{entry("https", 443, gwv1.HTTPSProtocolType, "app.example.com")},
			taken:     []gwv1.Listener{gwListener("main", 443, gwv1.HTTPSProtocolType, "app.example.com")},
			wantErr:   `spec.listeners[0].hostname: Duplicate value: "app.example.com": Hostname app.example.com on port 443 (HTTPS) is already taken on Gateway infra/shared by a listener of the Gateway itself (HTTPS): choose another hostname or port`,
		},
		"HTTP on an HTTPS port is a protocol conflict, whatever the hostname": {
			listeners: []gwv1.ListenerEntry{entry("http", 8443, gwv1.HTTPProtocolType, "other.example.com")},
			taken:     []gwv1.Listener{gwListener("main", 8443, gwv1.HTTPSProtocolType, "app.example.com")},
			wantErr:   `spec.listeners[0].protocol: Invalid value: "HTTP": Port 8443 on Gateway infra/shared carries a listener of the Gateway itself (HTTPS), which cannot share a port with HTTP: choose another port`,
		},
		"two listeners without hostname on one port conflict": {
			listeners: []gwv1.ListenerEntry{entry("http", 80, gwv1.HTTPProtocolType, "")},
			taken:     []gwv1.Listener{gwListener("main", 80, gwv1.HTTPProtocolType, "")},
			wantErr:   `spec.listeners[0].port: Duplicate value: 80: Port 80 (HTTP) with no hostname is already taken`,
		},
		"UDP beside HTTPS is admitted (HTTP/3)": {
			listeners: []gwv1.ListenerEntry{entry("h3", 443, gwv1.UDPProtocolType, "")},
			taken:     []gwv1.Listener{gwListener("main", 443, gwv1.HTTPSProtocolType, "app.example.com")},
		},
		"two TCP listeners on one port conflict": {
			listeners: []gwv1.ListenerEntry{entry("db", 5432, gwv1.TCPProtocolType, "")},
			taken:     []gwv1.Listener{gwListener("pg", 5432, gwv1.TCPProtocolType, "")},
			wantErr:   `spec.listeners[0].port: Duplicate value: 5432: Port 5432 (TCP) is already taken on Gateway infra/shared by a listener of the Gateway itself (TCP): choose another port`,
		},
		"a fragment whose own listeners clash is denied": {
			listeners: []gwv1.ListenerEntry{entry("db", 8080, gwv1.TCPProtocolType, ""), entry("web", 8080, gwv1.HTTPProtocolType, "app.example.com")},
			wantErr:   `spec.listeners[1].protocol: Invalid value: "HTTP": Port 8080 on Gateway infra/shared carries listener "db" (TCP) of ListenerFragment a, which cannot share a port with HTTP: choose another port`,
		},
		"a fragment repeating its own hostname is denied": {
			listeners: []gwv1.ListenerEntry{entry("a", 443, gwv1.HTTPSProtocolType, "app.example.com"), entry("b", 443, gwv1.TLSProtocolType, "app.example.com")},
			wantErr:   `spec.listeners[1].hostname: Duplicate value: "app.example.com": Hostname app.example.com on port 443 (TLS) is already taken on Gateway infra/shared by listener "a" (HTTPS) of ListenerFragment a`,
		},
		"other ports never conflict": {
			listeners: []gwv1.ListenerEntry{entry("http", 8080, gwv1.HTTPProtocolType, "")},
			taken:     []gwv1.Listener{gwListener("main", 80, gwv1.HTTPProtocolType, ""), gwListener("db", 9000, gwv1.TCPProtocolType, "")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := CheckAgainstBoard(fragment("shop", "a", tc.listeners...), "infra/shared", rules.OwnBoard(tc.taken))
			if tc.wantErr == "" {
				if len(errs) != 0 {
					t.Fatalf("Got errors %v, want none", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.wantErr) {
				t.Fatalf("Got errors %v, want one starting %q", errs, tc.wantErr)
			}
		})
	}
}

// The rules themselves are tested in package rules; these tests check the
// field errors kubectl prints.

func TestCheckAllowedListeners(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"},
		Spec: gwv1.GatewaySpec{AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}}}
	errs := CheckAllowedListeners(fragment("shop", "a", entry("http", 80, gwv1.HTTPProtocolType, "")), gw, nil)
	// The rule that refuses shop is not shop's to read.
	want := "spec.parentRef: Forbidden: Gateway infra/shared does not allow listeners from namespace shop: ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("Got %v, want %q", errs, want)
	}
	if errs := CheckAllowedListeners(fragment("infra", "a", entry("http", 80, gwv1.HTTPProtocolType, "")), gw, nil); len(errs) != 0 {
		t.Fatalf("Got %v for the Gateway's own namespace, want none", errs)
	}
}

func TestCheckCertificateRefs(t *testing.T) {
	l := entry("https", 443, gwv1.HTTPSProtocolType, "a.example.com")
	l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert", Namespace: ptr.To(gwv1.Namespace("certs"))}}}
	errs := CheckCertificateRefs(fragment("shop", "a", l), nil)
	want := "spec.listeners[0].tls.certificateRefs[0]: Forbidden: No ReferenceGrant in namespace certs lets ListenerFragments of namespace shop use Secret cert: add one (from: gatefold.dev/ListenerFragment in shop), or use a Secret in shop"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("Got %v, want %q", errs, want)
	}
}

func TestCheckValues(t *testing.T) {
	withKind := func(kind string) gwv1.ListenerEntry {
		l := entry("https", 443, gwv1.HTTPSProtocolType, "a.example.com")
		l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert", Kind: ptr.To(gwv1.Kind(kind))}}}
		return l
	}
	tests := map[string]struct {
		old       []gwv1.ListenerEntry // the stored spec's listeners; none for a create
		listeners []gwv1.ListenerEntry
		want      []string
	}{
		"core protocols, a hostname and a Secret": {
			listeners: []gwv1.ListenerEntry{entry("http", 80, gwv1.HTTPProtocolType, "a.example.com"), withKind("Secret")},
		},
		"a lower-case core protocol": {
			listeners: []gwv1.ListenerEntry{entry("http", 80, "http", "a.example.com")},
			want:      []string{`spec.listeners[0].protocol: Invalid value: "http": not a Gateway API protocol (did you mean HTTP?): use HTTP, HTTPS, TLS, TCP or UDP, or a domain-prefixed one such as example.com/name`},
		},
		"a misspelt protocol and an IP hostname": {
			listeners: []gwv1.ListenerEntry{entry("ok", 80, gwv1.HTTPProtocolType, "a.example.com"), entry("web", 80, "HTPP", "1.2.3.4")},
			want: []string{
				`spec.listeners[1].protocol: Invalid value: "HTPP": not a Gateway API protocol (did you mean HTTP?)`,
				`spec.listeners[1].hostname: Invalid value: "1.2.3.4": a Gateway API hostname may not be an IP address: set the DNS name clients connect to, or leave hostname out to match every hostname`,
			},
		},
		"a lower-case Secret kind": {
			listeners: []gwv1.ListenerEntry{withKind("secret")},
			want:      []string{`spec.listeners[0].tls.certificateRefs[0].kind: Invalid value: "secret": kind must be "Secret" (kinds are case-sensitive)`},
		},
		"an update keeps what its listener had": {
			old:       []gwv1.ListenerEntry{entry("web", 80, "http", "1.2.3.4"), withKind("secret")},
			listeners: []gwv1.ListenerEntry{entry("web", 80, "http", "1.2.3.4"), withKind("secret"), entry("more", 8080, gwv1.HTTPProtocolType, "")},
		},
		"an update checks what its listener did not have": {
			old:       []gwv1.ListenerEntry{entry("web", 80, gwv1.HTTPProtocolType, "a.example.com")},
			listeners: []gwv1.ListenerEntry{entry("web", 80, "Http", "5.6.7.8"), entry("other", 81, "http", "")},
			want: []string{
				`spec.listeners[0].protocol: Invalid value: "Http"`,
				`spec.listeners[0].hostname: Invalid value: "5.6.7.8"`,
				`spec.listeners[1].protocol: Invalid value: "http"`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var old *v1alpha1.ListenerFragment
			if tc.old != nil {
				old = fragment("shop", "a", tc.old...)
			}
			errs := CheckValues(old, fragment("shop", "a", tc.listeners...))
			if len(errs) != len(tc.want) {
				t.Fatalf("Got errors %v, want %d", errs, len(tc.want))
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(errs[i].Error(), want) {
					t.Errorf("Error %d is %q, want it to start %q", i, errs[i].Error(), want)
				}
			}
		})
	}
}
