package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/idna"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The schema a fragment or ListenerSet listener is stored under admits values
// Gateway API does not (an unprefixed protocol such as HTPP, an IPv4 hostname),
// which an implementation refuses, perhaps with the whole Gateway. These rules
// name what is wrong and the fix; each returns "" for a value Gateway API allows.

// CoreProtocols are Gateway API's core protocols, the only unprefixed ones.
var CoreProtocols = []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType}

// customProtocol is the domain-prefixed half of upstream's ProtocolType
// pattern, anchored at both ends: upstream's is anchored only at its end, so
// it admits Example.com/x or even "a b.example.com/x".
var customProtocol = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]+$`)

// ProtocolProblem says what is wrong with a listener's protocol: Gateway
// API reserves unprefixed names for the core protocols, and an
// implementation-specific protocol is prefixed with a domain
// (example.com/name). A case variant or near miss of a core protocol is
// told which one it may mean.
func ProtocolProblem(p gwv1.ProtocolType) string {
	if slices.Contains(CoreProtocols, p) || customProtocol.MatchString(string(p)) {
		return ""
	}
	guess := ""
	if near := nearestProtocols(p); len(near) > 0 {
		guess = fmt.Sprintf(" (did you mean %s?)", orList(near))
	}
	return fmt.Sprintf("not a Gateway API protocol%s: use %s, or a domain-prefixed one such as example.com/name",
		guess, orList(CoreProtocols))
}

// nearestProtocols returns the core protocols p is a case variant of, or
// else those nearest to it, ignoring case, within an edit for each two
// letters of theirs (one for TCP, two for HTTP): GRPC is near no protocol.
func nearestProtocols(p gwv1.ProtocolType) []gwv1.ProtocolType {
	upper := strings.ToUpper(string(p))
	best, near := 3, []gwv1.ProtocolType(nil)
	for _, c := range CoreProtocols {
		switch d := editDistance(upper, string(c)); {
		case d > len(c)/2:
		case d < best:
			best, near = d, []gwv1.ProtocolType{c}
		case d == best:
			near = append(near, c)
		}
	}
	return near
}

// editDistance is the optimal string alignment distance of a and b: the
// insertions, deletions, substitutions and swaps of adjacent bytes that
// turn one into the other (HTPP is one swap from HTTP).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// orList joins values as "A", "A or B", "A, B or C".
func orList[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// HostnameProblem says what is wrong with a listener's hostname that the
// schema admits: Gateway API hostnames may not be IP addresses, and a name
// of digits and dots alone is one to a resolver (1.2.3.4, 127.1).
func HostnameProblem(h string) string {
	if h != "" && strings.Trim(h, "0123456789.") == "" {
		return "a Gateway API hostname may not be an IP address: set the DNS name clients connect to, or leave hostname out to match every hostname"
	}
	return ""
}

// NonASCIIHostnameProblem says what is wrong with a hostname that is not
// ASCII: Gateway API hostnames are, so an internationalised name is written
// in its IDNA (punycode) form, which it names where it can compute it.
func NonASCIIHostnameProblem(h string) string {
	if !strings.ContainsFunc(h, func(r rune) bool { return r > 0x7f }) {
		return ""
	}
	name, wildcard := strings.CutPrefix(h, "*.")
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "a hostname must be ASCII: write an internationalised name in its IDNA (punycode) form, xn--…"
	}
	if wildcard {
		ascii = "*." + ascii
	}
	return fmt.Sprintf("a hostname must be ASCII: write it in its IDNA (punycode) form, %q", ascii)
}

// CertificateKindProblem says what is wrong with a certificateRef's kind:
// one that is Secret in another case names no Secret, since kinds are
// case-sensitive.
func CertificateKindProblem(ref gwv1.SecretObjectReference) string {
	group, kind := GroupKindOf(ref)
	if group == "" && kind != "Secret" && strings.EqualFold(string(kind), "Secret") {
		return `kind must be "Secret" (kinds are case-sensitive)`
	}
	return ""
}

// ListenerProblem says what is wrong with a listener's values that Gateway
// API disallows and admission denies, with the listener reason to report:
// the fold leaves out such a listener stored past admission (a namespace
// that opted out, or a fragment stored before gatefold checked it).
func ListenerProblem(l gwv1.ListenerEntry) (gwv1.ListenerEntryConditionReason, string) {
	if msg := ProtocolProblem(l.Protocol); msg != "" {
		return gwv1.ListenerEntryConditionReason(gwv1.ListenerReasonUnsupportedProtocol), fmt.Sprintf("Protocol %q is %s", l.Protocol, msg)
	}
	if l.Hostname != nil {
		if msg := HostnameProblem(string(*l.Hostname)); msg != "" {
			return gwv1.ListenerEntryReasonInvalid, fmt.Sprintf("Hostname %q is invalid: %s", *l.Hostname, msg)
		}
	}
	if msg := RouteKindsProblem(l); msg != "" {
		return gwv1.ListenerEntryConditionReason(gwv1.ListenerReasonInvalidRouteKinds), msg
	}
	if l.TLS != nil {
		for _, ref := range l.TLS.CertificateRefs {
			if msg := CertificateKindProblem(ref); msg != "" {
				return gwv1.ListenerEntryConditionReason(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s has kind %q: %s", ref.Name, *ref.Kind, msg)
			}
		}
	}
	return "", ""
}
