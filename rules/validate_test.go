package rules

import (
	"testing"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestProtocolProblem(t *testing.T) {
	const fix = ": use HTTP, HTTPS, TLS, TCP or UDP, or a domain-prefixed one such as example.com/name"
	tests := map[string]struct {
		protocol gwv1.ProtocolType
		want     string // "" when allowed
	}{
		"a core protocol":                                    {protocol: "HTTPS"},
		"a domain-prefixed protocol":                         {protocol: "example.com/Quic3"},
		"a one-label domain prefix, as upstream":             {protocol: "acme/x"},
		"a lower-case core protocol":                         {protocol: "http", want: "not a Gateway API protocol (did you mean HTTP?)" + fix},
		"a mixed-case core protocol":                         {protocol: "HTTPs", want: "not a Gateway API protocol (did you mean HTTPS?)" + fix},
		"two letters swapped":                                {protocol: "HTPP", want: "not a Gateway API protocol (did you mean HTTP?)" + fix},
		"one letter missing":                                 {protocol: "UD", want: "not a Gateway API protocol (did you mean UDP?)" + fix},
		"as near to two":                                     {protocol: "HTTPX", want: "not a Gateway API protocol (did you mean HTTP or HTTPS?)" + fix},
		"nothing near":                                       {protocol: "GRPC", want: "not a Gateway API protocol" + fix},
		"a prefix upstream's pattern admits only unanchored": {protocol: "Example.com/x", want: "not a Gateway API protocol" + fix},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ProtocolProblem(tc.protocol); got != tc.want {
				t.Errorf("ProtocolProblem(%q) =\n%q\nwant\n%q", tc.protocol, got, tc.want)
			}
		})
	}
}

func TestHostnameProblem(t *testing.T) {
	const ip = "a Gateway API hostname may not be an IP address: set the DNS name clients connect to, or leave hostname out to match every hostname"
	tests := map[string]struct {
		hostname string
		want     string
	}{
		"a DNS name":                         {hostname: "app.example.com"},
		"a wildcard":                         {hostname: "*.example.com"},
		"no hostname":                        {hostname: ""},
		"digits in a DNS name":               {hostname: "1.2.3.example"},
		"an IPv4 address":                    {hostname: "1.2.3.4", want: ip},
		"a short IPv4 form a resolver takes": {hostname: "127.1", want: ip},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := HostnameProblem(tc.hostname); got != tc.want {
				t.Errorf("HostnameProblem(%q) = %q, want %q", tc.hostname, got, tc.want)
			}
		})
	}
}

func TestNonASCIIHostnameProblem(t *testing.T) {
	tests := map[string]struct {
		hostname string
		want     string
	}{
		"ASCII":                     {hostname: "xn--n-ctaf.example.com"},
		"Unicode letters":           {hostname: "ünï.example.com", want: `a hostname must be ASCII: write it in its IDNA (punycode) form, "xn--n-nga1b.example.com"`},
		"a wildcard keeps its star": {hostname: "*.ünï.example.com", want: `a hostname must be ASCII: write it in its IDNA (punycode) form, "*.xn--n-nga1b.example.com"`},
		"the Kelvin sign maps to k": {hostname: "\u212a.example.com", want: `a hostname must be ASCII: write it in its IDNA (punycode) form, "k.example.com"`},
		"no IDNA form":              {hostname: "a\u0000ü.example.com", want: "a hostname must be ASCII: write an internationalised name in its IDNA (punycode) form, xn--…"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := NonASCIIHostnameProblem(tc.hostname); got != tc.want {
				t.Errorf("NonASCIIHostnameProblem(%q) = %q, want %q", tc.hostname, got, tc.want)
			}
		})
	}
}

func TestCertificateKindProblem(t *testing.T) {
	const want = `kind must be "Secret" (kinds are case-sensitive)`
	tests := map[string]struct {
		group, kind *string
		want        string
	}{
		"left out": {},
		"Secret":   {kind: ptr.To("Secret")},
		"secret":   {kind: ptr.To("secret"), want: want},
		"SECRET in the core group named as empty":       {group: ptr.To(""), kind: ptr.To("SECRET"), want: want},
		"secret of another group is the group's affair": {group: ptr.To("example.com"), kind: ptr.To("secret")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ref := gwv1.SecretObjectReference{Name: "cert", Group: (*gwv1.Group)(tc.group), Kind: (*gwv1.Kind)(tc.kind)}
			if got := CertificateKindProblem(ref); got != tc.want {
				t.Errorf("CertificateKindProblem(%v, %v) = %q, want %q", tc.group, tc.kind, got, tc.want)
			}
		})
	}
}
