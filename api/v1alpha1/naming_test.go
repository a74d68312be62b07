package v1alpha1

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// sectionNameRE is the pattern of gateway-api's SectionName.
var sectionNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func TestListenerName(t *testing.T) {
	long := strings.Repeat("a", 253)
	tests := map[string]struct {
		namespace, fragment string
		listener            gwv1.SectionName
		wantPrefix          string
	}{
		"short names keep a readable prefix": {
			namespace: "shop", fragment: "checkout", listener: "https",
			wantPrefix: "shop-checkout-https-",
		},
		"dotted names keep their dots": {
			namespace: "shop", fragment: "checkout.v2", listener: "https.alt",
			wantPrefix: "shop-checkout.v2-https.alt-",
		},
		"longest names are cut to fit": {
			namespace: strings.Repeat("n", 63), fragment: long, listener: gwv1.SectionName(long),
			wantPrefix: strings.Repeat("n", 46) + "-",
		},
		"a cut on a separator drops the separator": {
			namespace: strings.Repeat("n", 45), fragment: "x", listener: "y",
			wantPrefix: strings.Repeat("n", 45) + "-",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := string(ListenerName(tc.namespace, tc.fragment, tc.listener))
			if !strings.HasPrefix(got, tc.wantPrefix) {
				t.Errorf("ListenerName() = %q, want prefix %q", got, tc.wantPrefix)
			}
			checkSectionName(t, got)
		})
	}
}

func TestListenerNameIsStable(t *testing.T) {
	// Route controllers persist these names in Routes: changing them breaks
	// every attached Route on upgrade.
	const want = "shop-checkout-https-3vawcgqvt6og6c36"
	if got := ListenerName("shop", "checkout", "https"); got != want {
		t.Errorf("ListenerName(shop, checkout, https) = %q, want %q: the naming scheme changed", got, want)
	}
}

func TestListenerSetListenerNameCarriesTheKind(t *testing.T) {
	ls, lf := ListenerSetListenerName("shop", "checkout", "https"), ListenerName("shop", "checkout", "https")
	if !strings.HasPrefix(string(ls), "ls-shop-checkout-https-") {
		t.Errorf("ListenerSetListenerName(shop, checkout, https) = %q, want the prefix ls-shop-checkout-https-", ls)
	}
	if ls == lf {
		t.Errorf("a ListenerSet and a ListenerFragment named shop/checkout both name their listener %q", ls)
	}
	checkSectionName(t, string(ListenerSetListenerName(strings.Repeat("n", 63), strings.Repeat("s", 253), "x")))
}

func TestListenerNameSeparatesDots(t *testing.T) {
	a := ListenerName("ns", "a.b", "c")
	b := ListenerName("ns", "a", "b.c")
	if a == b {
		t.Errorf("ListenerName(ns, a.b, c) and ListenerName(ns, a, b.c) are both %q", a)
	}
}

func checkSectionName(t *testing.T, name string) {
	t.Helper()
	if len(name) > 63 {
		t.Errorf("%q is %d characters, want at most 63", name, len(name))
	}
	if !sectionNameRE.MatchString(name) {
		t.Errorf("%q is not a valid SectionName", name)
	}
}

// validInputs says whether a fuzzed triple is one the API server could hold:
// a namespace label, a fragment subdomain name and a SectionName.
func validInputs(namespace, fragment, listener string) bool {
	return len(validation.IsDNS1123Label(namespace)) == 0 &&
		len(validation.IsDNS1123Subdomain(fragment)) == 0 &&
		len(listener) <= 253 && sectionNameRE.MatchString(listener)
}

func FuzzListenerName(f *testing.F) {
	f.Add("shop", "checkout", "https", "shop", "checkout", "http")
	f.Add("ns", "a.b", "c", "ns", "a", "b.c")
	f.Add("ns-a", "b", "c", "ns", "a-b", "c")
	f.Add(strings.Repeat("n", 63), strings.Repeat("f", 253), "x", strings.Repeat("n", 63), strings.Repeat("f", 253), "y")
	f.Fuzz(func(t *testing.T, ns1, frag1, l1, ns2, frag2, l2 string) {
		if !validInputs(ns1, frag1, l1) {
			return
		}
		n1 := ListenerName(ns1, frag1, gwv1.SectionName(l1))
		checkSectionName(t, string(n1))
		if n1 != ListenerName(ns1, frag1, gwv1.SectionName(l1)) {
			t.Fatalf("ListenerName(%q, %q, %q) is not deterministic", ns1, frag1, l1)
		}
		if !validInputs(ns2, frag2, l2) || (ns1 == ns2 && frag1 == frag2 && l1 == l2) {
			return
		}
		if n2 := ListenerName(ns2, frag2, gwv1.SectionName(l2)); n1 == n2 {
			t.Fatalf("ListenerName(%q, %q, %q) and ListenerName(%q, %q, %q) are both %q", ns1, frag1, l1, ns2, frag2, l2, n1)
		}
		if s2 := ListenerSetListenerName(ns2, frag2, gwv1.SectionName(l2)); n1 == s2 {
			t.Fatalf("ListenerName(%q, %q, %q) and ListenerSetListenerName(%q, %q, %q) are both %q", ns1, frag1, l1, ns2, frag2, l2, n1)
		}
	})
}
