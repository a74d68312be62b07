package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
)

var (
	entry      = fixture.Entry
	gwListener = fixture.Own
)

func TestCheckAgainstListeners(t *testing.T) {
	tests := map[string]struct {
		listener gwv1.ListenerEntry
		taken    []gwv1.Listener
		wantErr  string
	}{
		"same port, protocol and hostname as a Gateway listener is a duplicate hostname": {
			listener: entry("https", 443, gwv1.HTTPSProtocolType, "app.example.com"),
			taken:    []gwv1.Listener{gwListener("main", 443, gwv1.HTTPSProtocolType, "app.example.com")},
			wantErr:  `spec.listeners[0].hostname: Duplicate value: "app.example.com": port 443 (HTTP/HTTPS/TLS) with hostname app.example.com is already taken on Gateway infra/shared by the Gateway's own listener "main": choose another hostname or port`,
		},
		"HTTP and HTTPS on one port must differ in hostname": {
			listener: entry("http", 8443, gwv1.HTTPProtocolType, "app.example.com"),
			taken:    []gwv1.Listener{gwListener("main", 8443, gwv1.HTTPSProtocolType, "app.example.com")},
			wantErr:  `spec.listeners[0].hostname: Duplicate value`,
		},
		"two listeners without hostname on one port conflict": {
			listener: entry("http", 80, gwv1.HTTPProtocolType, ""),
			taken:    []gwv1.Listener{gwListener("main", 80, gwv1.HTTPProtocolType, "")},
			wantErr:  `spec.listeners[0].port: Duplicate value: 80: port 80 (HTTP/HTTPS/TLS) with no hostname`,
		},
		"a missing hostname differs from a set one": {
			listener: entry("http", 80, gwv1.HTTPProtocolType, ""),
			taken:    []gwv1.Listener{gwListener("main", 80, gwv1.HTTPProtocolType, "app.example.com")},
		},
		"different hostnames share a port": {
			listener: entry("https", 443, gwv1.HTTPSProtocolType, "b.example.com"),
			taken:    []gwv1.Listener{gwListener("main", 443, gwv1.HTTPSProtocolType, "a.example.com")},
		},
		"HTTP on a TCP port is a protocol conflict": {
			listener: entry("http", 9000, gwv1.HTTPProtocolType, "app.example.com"),
			taken:    []gwv1.Listener{gwListener("db", 9000, gwv1.TCPProtocolType, "")},
			wantErr:  `spec.listeners[0].protocol: Invalid value: "HTTP": port 9000 on Gateway infra/shared already carries TCP or UDP listeners (the Gateway's own listener "db"), which cannot share a port with HTTP: choose another port`,
		},
		"TCP on an HTTPS port is a protocol conflict": {
			listener: entry("db", 443, gwv1.TCPProtocolType, ""),
			taken:    []gwv1.Listener{gwListener("main", 443, gwv1.HTTPSProtocolType, "a.example.com")},
			wantErr:  `spec.listeners[0].protocol: Invalid value: "TCP": port 443 on Gateway infra/shared already carries HTTP, HTTPS or TLS listeners`,
		},
		"TCP and UDP share a port": {
			listener: entry("dns", 53, gwv1.UDPProtocolType, ""),
			taken:    []gwv1.Listener{gwListener("dns-tcp", 53, gwv1.TCPProtocolType, "")},
		},
		"two TCP listeners on one port conflict": {
			listener: entry("db", 5432, gwv1.TCPProtocolType, ""),
			taken:    []gwv1.Listener{gwListener("pg", 5432, gwv1.TCPProtocolType, "")},
			wantErr:  `spec.listeners[0].port: Duplicate value: 5432: port 5432/TCP is already taken on Gateway infra/shared by the Gateway's own listener "pg": choose another port`,
		},
		"other ports never conflict": {
			listener: entry("http", 8080, gwv1.HTTPProtocolType, ""),
			taken:    []gwv1.Listener{gwListener("main", 80, gwv1.HTTPProtocolType, ""), gwListener("db", 9000, gwv1.TCPProtocolType, "")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := CheckAgainstListeners(fragment("shop", "a", tc.listener), "infra/shared", tc.taken)
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

func TestCheckAllowedListeners(t *testing.T) {
	gw := func(al *gwv1.AllowedListeners) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}, Spec: gwv1.GatewaySpec{AllowedListeners: al}}
	}
	from := func(f gwv1.FromNamespaces, sel *metav1.LabelSelector) *gwv1.AllowedListeners {
		return &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(f), Selector: sel}}
	}
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
	tests := map[string]struct {
		gw        *gwv1.Gateway
		fragNS    string
		nsLabels  map[string]string
		wantError string
	}{
		"no allowedListeners admits nobody":        {gw: gw(nil), fragNS: "shop", wantError: "from is None, the default"},
		"All admits any namespace":                 {gw: gw(from(gwv1.NamespacesFromAll, nil)), fragNS: "shop"},
		"Same admits the Gateway's namespace":      {gw: gw(from(gwv1.NamespacesFromSame, nil)), fragNS: "infra"},
		"Same refuses another namespace":           {gw: gw(from(gwv1.NamespacesFromSame, nil)), fragNS: "shop", wantError: "from is Same"},
		"Selector admits a matching namespace":     {gw: gw(from(gwv1.NamespacesFromSelector, team)), fragNS: "shop", nsLabels: map[string]string{"team": "shop"}},
		"Selector refuses a namespace not matched": {gw: gw(from(gwv1.NamespacesFromSelector, team)), fragNS: "blog", nsLabels: map[string]string{"team": "blog"}, wantError: "do not match spec.allowedListeners.namespaces.selector"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := CheckAllowedListeners(fragment(tc.fragNS, "a", entry("http", 80, gwv1.HTTPProtocolType, "")), tc.gw, tc.nsLabels)
			if tc.wantError == "" {
				if len(errs) != 0 {
					t.Fatalf("Got %v, want no error", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != "spec.parentRef" || !strings.Contains(errs[0].Error(), tc.wantError) ||
				!strings.Contains(errs[0].Error(), "Gateway infra/shared does not allow listeners from namespace "+tc.fragNS) {
				t.Fatalf("Got %v, want one spec.parentRef error mentioning %q", errs, tc.wantError)
			}
		})
	}
}

func TestCheckCertificateRefs(t *testing.T) {
	withRef := func(ns string) *v1alpha1.ListenerFragment {
		l := entry("https", 443, gwv1.HTTPSProtocolType, "a.example.com")
		l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}
		if ns != "" {
			l.TLS.CertificateRefs[0].Namespace = ptr.To(gwv1.Namespace(ns))
		}
		return fragment("shop", "a", l)
	}
	grant := func(fromNS string, to *gwv1.ObjectName) gwv1.ReferenceGrant {
		return gwv1.ReferenceGrant{Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: "gatefold.dev", Kind: "ListenerFragment", Namespace: gwv1.Namespace(fromNS)}},
			To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: to}},
		}}
	}
	tests := map[string]struct {
		lf      *v1alpha1.ListenerFragment
		grants  map[string][]gwv1.ReferenceGrant
		wantErr bool
	}{
		"a Secret in the fragment's namespace needs no grant": {lf: withRef("")},
		"an explicit own namespace needs no grant":            {lf: withRef("shop")},
		"a Secret elsewhere without a grant is refused":       {lf: withRef("certs"), wantErr: true},
		"a grant for all Secrets allows it":                   {lf: withRef("certs"), grants: map[string][]gwv1.ReferenceGrant{"certs": {grant("shop", nil)}}},
		"a grant naming the Secret allows it":                 {lf: withRef("certs"), grants: map[string][]gwv1.ReferenceGrant{"certs": {grant("shop", ptr.To(gwv1.ObjectName("cert")))}}},
		"a grant naming another Secret does not":              {lf: withRef("certs"), grants: map[string][]gwv1.ReferenceGrant{"certs": {grant("shop", ptr.To(gwv1.ObjectName("other")))}}, wantErr: true},
		"a grant for another namespace's fragments does not":  {lf: withRef("certs"), grants: map[string][]gwv1.ReferenceGrant{"certs": {grant("blog", nil)}}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := CheckCertificateRefs(tc.lf, tc.grants)
			if !tc.wantErr {
				if len(errs) != 0 {
					t.Fatalf("Got %v, want none", errs)
				}
				return
			}
			want := "spec.listeners[0].tls.certificateRefs[0]: Forbidden: Secret certs/cert is in another namespace and no ReferenceGrant in namespace certs allows ListenerFragments from namespace shop"
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
				t.Fatalf("Got %v, want one starting %q", errs, want)
			}
		})
	}
}

var fuzzProtocols = []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType}

func fuzzEntry(port, proto, host uint8) gwv1.ListenerEntry {
	p := fuzzProtocols[int(proto)%len(fuzzProtocols)]
	h := ""
	if ClassOf(p) == ClassL7 && host%3 != 0 {
		h = []string{"", "a.example.com", "b.example.com"}[host%3]
	}
	return entry("l", gwv1.PortNumber(80+port%3), p, h)
}

// FuzzCheckAgainstListeners checks that a conflict does not depend on which
// side holds the port, and that listeners on different ports never conflict.
func FuzzCheckAgainstListeners(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(1), uint8(0), uint8(0), uint8(1))
	f.Add(uint8(0), uint8(0), uint8(1), uint8(0), uint8(3), uint8(0))
	f.Add(uint8(1), uint8(3), uint8(0), uint8(1), uint8(4), uint8(0))
	f.Fuzz(func(t *testing.T, p1, pr1, h1, p2, pr2, h2 uint8) {
		a, b := fuzzEntry(p1, pr1, h1), fuzzEntry(p2, pr2, h2)
		ab := CheckAgainstListeners(fragment("ns", "f", a), "g/w", []gwv1.Listener{gwListener("b", b.Port, b.Protocol, hostOf(b))})
		ba := CheckAgainstListeners(fragment("ns", "f", b), "g/w", []gwv1.Listener{gwListener("a", a.Port, a.Protocol, hostOf(a))})
		if (len(ab) == 0) != (len(ba) == 0) {
			t.Fatalf("Conflict is not symmetric: %v against %v gives %v, the reverse %v", a, b, ab, ba)
		}
		if a.Port != b.Port && len(ab) != 0 {
			t.Fatalf("Listeners on ports %d and %d conflict: %v", a.Port, b.Port, ab)
		}
		if len(ab) > 1 {
			t.Fatalf("One listener got %d errors against one other: %v", len(ab), ab)
		}
	})
}

func hostOf(l gwv1.ListenerEntry) string {
	if l.Hostname == nil {
		return ""
	}
	return string(*l.Hostname)
}

func TestOwnListenerIndexes(t *testing.T) {
	lf := fragment("shop", "checkout", entry("https", 443, gwv1.HTTPSProtocolType, "a.example.com"))
	folded := gwListener(string(v1alpha1.ListenerName("shop", "checkout", "https")), 443, gwv1.HTTPSProtocolType, "a.example.com")
	gw := &gwv1.Gateway{Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
		gwListener("main", 80, gwv1.HTTPProtocolType, ""), folded, gwListener("https", 443, gwv1.HTTPSProtocolType, "b.example.com"),
	}}}
	got := OwnListenerIndexes(gw, []v1alpha1.ListenerFragment{*lf})
	if len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("OwnListenerIndexes = %v, want [0 2]: a human's listener named like a fragment's local name is still the Gateway's own", got)
	}
}
