package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
)

func fragment(ns, name string, listeners ...gwv1.ListenerEntry) *v1alpha1.ListenerFragment {
	return &v1alpha1.ListenerFragment{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ListenerFragment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: "shared"},
			Listeners: listeners,
		},
	}
}

func sameRoutes() *gwv1.AllowedRoutes {
	return &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}
}

// mutate sends obj, as a create, through the mutating handler.
func mutate(t *testing.T, obj *v1alpha1.ListenerFragment) ([]byte, admission.Response) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	h := admission.WithDefaulter(scheme.New(), admission.Defaulter[*v1alpha1.ListenerFragment](fragmentDefaulter{}))
	return raw, h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}})
}

// admitDefaults sends obj through the mutating handler and applies the JSON
// patch it returns, as the API server does.
func admitDefaults(t *testing.T, obj *v1alpha1.ListenerFragment) (*v1alpha1.ListenerFragment, int) {
	t.Helper()
	raw, resp := mutate(t, obj)
	if !resp.Allowed {
		t.Fatalf("Defaulting denied: %v", resp.Result)
	}
	patchJSON, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		t.Fatalf("Decoding patch %s: %v", patchJSON, err)
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("Applying patch %s: %v", patchJSON, err)
	}
	out := &v1alpha1.ListenerFragment{}
	if err := json.Unmarshal(patched, out); err != nil {
		t.Fatal(err)
	}
	return out, len(resp.Patches)
}

func TestDefaultingPatch(t *testing.T) {
	parent := func(ns string) gwv1.ParentGatewayReference {
		return gwv1.ParentGatewayReference{
			Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")),
			Name: "shared", Namespace: ptr.To(gwv1.Namespace(ns)),
		}
	}
	tests := map[string]struct {
		in   *v1alpha1.ListenerFragment
		want *v1alpha1.ListenerFragment
	}{
		"parentRef and allowedRoutes are filled in": {
			in: fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}),
			want: func() *v1alpha1.ListenerFragment {
				lf := fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: sameRoutes()})
				lf.Spec.ParentRef = parent("shop")
				return lf
			}(),
		},
		"hostname is lowercased and loses its trailing dots": {
			in: fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("App.Example.COM."))}),
			want: func() *v1alpha1.ListenerFragment {
				lf := fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("app.example.com")), AllowedRoutes: sameRoutes()})
				lf.Spec.ParentRef = parent("shop")
				return lf
			}(),
		},
		"HTTPS TLS mode defaults to Terminate and an explicit parent namespace stays": {
			in: func() *v1alpha1.ListenerFragment {
				lf := fragment("shop", "a", gwv1.ListenerEntry{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
					TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}})
				lf.Spec.ParentRef.Namespace = ptr.To(gwv1.Namespace("infra"))
				return lf
			}(),
			want: func() *v1alpha1.ListenerFragment {
				lf := fragment("shop", "a", gwv1.ListenerEntry{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
					TLS:           &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}},
					AllowedRoutes: sameRoutes()})
				lf.Spec.ParentRef = parent("infra")
				return lf
			}(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, _ := admitDefaults(t, tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Defaulted fragment (-want +got):\n%s", diff)
			}
			again, n := admitDefaults(t, got)
			if n != 0 {
				t.Errorf("Defaulting a defaulted fragment returned %d patch operations, want 0", n)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("Defaulting is not idempotent (-first +second):\n%s", diff)
			}
		})
	}
}

// admitDenied sends obj through the mutating handler and returns the
// denial's message.
func admitDenied(t *testing.T, obj *v1alpha1.ListenerFragment) string {
	t.Helper()
	raw, resp := mutate(t, obj)
	if resp.Allowed {
		t.Fatalf("Defaulting allowed %s with patches %v, want a denial", raw, resp.Patches)
	}
	if resp.Result == nil || resp.Result.Reason != metav1.StatusReasonInvalid {
		t.Fatalf("Denial %v is not Invalid", resp.Result)
	}
	return resp.Result.Message
}

func TestDefaultingNeverWidens(t *testing.T) {
	withHost := func(h string) *v1alpha1.ListenerFragment {
		return fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, gwv1.ListenerEntry{Name: "web", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname(h))})
	}
	withParent := func(group, kind *string) *v1alpha1.ListenerFragment {
		lf := withHost("a.example.com")
		lf.Spec.ParentRef.Group = (*gwv1.Group)(group)
		lf.Spec.ParentRef.Kind = (*gwv1.Kind)(kind)
		return lf
	}
	tests := map[string]struct {
		in   *v1alpha1.ListenerFragment
		want string
	}{
		"a root-only hostname is not match-all": {in: withHost("."),
			want: `spec.listeners[1].hostname: Invalid value: ".": without its trailing dots the hostname is empty, which is not every hostname: set the hostname served, or leave hostname out for every hostname`},
		"dots alone are not match-all":       {in: withHost(".."), want: `spec.listeners[1].hostname: Invalid value: ".."`},
		"an empty hostname is not match-all": {in: withHost(""), want: `spec.listeners[1].hostname: Invalid value: ""`},
		"an empty group is not the Gateway group": {in: withParent(ptr.To(""), nil),
			want: `spec.parentRef.group: Invalid value: "": an empty group is the core API group, which has no Gateway: set group to gateway.networking.k8s.io, or leave it out`},
		"an empty kind is not the Gateway kind": {in: withParent(nil, ptr.To("")),
			want: `spec.parentRef.kind: Invalid value: "": an empty kind names no Gateway: set kind to Gateway, or leave it out`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := admitDenied(t, tc.in); !strings.Contains(got, tc.want) {
				t.Errorf("Denial %q does not contain %q", got, tc.want)
			}
		})
	}
}

// TestDefaultingExplainsWhatTheSchemaRejects: the API server checks its
// schema after the mutating webhook, and would quote a pattern or a length.
func TestDefaultingExplainsWhatTheSchemaRejects(t *testing.T) {
	withHost := func(h string) *v1alpha1.ListenerFragment {
		return fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname(h))})
	}
	noParent := withHost("a.example.com")
	noParent.Spec.ParentRef = gwv1.ParentGatewayReference{}
	tests := map[string]struct {
		in   *v1alpha1.ListenerFragment
		want string
	}{
		"a Unicode hostname is told its IDNA form": {in: withHost("Ünï.Example.com."),
			want: `spec.listeners[0].hostname: Invalid value: "Ünï.Example.com.": a hostname must be ASCII: write it in its IDNA (punycode) form, "xn--n-nga1b.example.com"`},
		// Only ASCII letters are lowercased: a Kelvin sign is not taken for a k
		// silently, only suggested as one.
		"a Kelvin sign is not lowercased": {in: withHost("\u212aAFÉ.Example."),
			want: "spec.listeners[0].hostname: Invalid value: \"\u212aAFÉ.Example.\": a hostname must be ASCII: write it in its IDNA (punycode) form, \"xn--kaf-dma.example\""},
		"a missing parentRef name names the field and the Gateway to point at": {in: noParent,
			want: `spec.parentRef.name: Required value: set spec.parentRef.name to the name of the Gateway that should carry these listeners`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := admitDenied(t, tc.in); !strings.Contains(got, tc.want) {
				t.Errorf("Denial %q does not contain %q", got, tc.want)
			}
		})
	}
}

var fuzzProtocols = []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType}

// FuzzDefaultFragment checks that defaulting is idempotent, never widens a
// fragment (a hostname either stays a hostname or is an error on that field;
// an empty parentRef group or kind is an error), lowercases ASCII letters
// and nothing else, leaves no trailing dot, and denies a hostname that is
// not ASCII.
func FuzzDefaultFragment(f *testing.F) {
	f.Add("App.Example.COM.", uint8(1), true, uint8(0))
	f.Add(".", uint8(0), false, uint8(0))
	f.Add("..", uint8(0), false, uint8(1))
	f.Add("*.Example.com", uint8(2), true, uint8(2))
	f.Add("\u212a.example.", uint8(0), false, uint8(0))
	f.Fuzz(func(t *testing.T, host string, proto uint8, withTLS bool, parent uint8) {
		l := gwv1.ListenerEntry{Name: "l", Port: 443, Protocol: fuzzProtocols[int(proto)%len(fuzzProtocols)], Hostname: ptr.To(gwv1.Hostname(host))}
		if withTLS {
			l.TLS = &gwv1.ListenerTLSConfig{}
		}
		once := fragment("ns", "f", l)
		switch parent % 3 {
		case 1:
			once.Spec.ParentRef.Group = ptr.To(gwv1.Group(""))
		case 2:
			once.Spec.ParentRef.Kind = ptr.To(gwv1.Kind(""))
		}
		errs := DefaultFragment(once)
		if parent%3 != 0 && len(errs) == 0 {
			t.Fatalf("Defaulting an empty parentRef group or kind (case %d) gave no error", parent%3)
		}
		trimmed := strings.TrimRight(host, ".")
		h := once.Spec.Listeners[0].Hostname
		switch {
		case trimmed == "":
			if !hasError(errs, "spec.listeners[0].hostname") {
				t.Fatalf("Hostname %q normalises to nothing and gave no error on it: %v", host, errs)
			}
		case h == nil || *h == "":
			t.Fatalf("Defaulting %q widened the listener to every hostname", host)
		case string(*h) != strings.TrimRight(lowerASCII(host), "."):
			t.Fatalf("Defaulting %q stored %q: only ASCII letters may change, and trailing dots go", host, *h)
		case strings.HasSuffix(string(*h), ".") || strings.ContainsAny(string(*h), "ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
			t.Fatalf("Defaulting %q stored %q, with an upper-case ASCII letter or a trailing dot", host, *h)
		}
		if strings.ContainsFunc(host, func(r rune) bool { return r > 0x7f }) && !hasError(errs, "spec.listeners[0].hostname") {
			t.Fatalf("Hostname %q is not ASCII and gave no error on it: %v", host, errs)
		}
		if len(errs) > 0 {
			return
		}
		twice := once.DeepCopy()
		if errs := DefaultFragment(twice); len(errs) > 0 {
			t.Fatalf("Defaulting a defaulted fragment failed: %v", errs)
		}
		if diff := cmp.Diff(once, twice); diff != "" {
			t.Fatalf("Defaulting %q twice differs from once (-once +twice):\n%s", host, diff)
		}
	})
}

func hasError(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
	}
	return false
}
