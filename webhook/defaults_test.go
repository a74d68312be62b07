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

// admitDefaults sends obj through the mutating handler and applies the JSON
// patch it returns, as the API server does.
func admitDefaults(t *testing.T, obj *v1alpha1.ListenerFragment) (*v1alpha1.ListenerFragment, int) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	h := admission.WithDefaulter(scheme.New(), admission.Defaulter[*v1alpha1.ListenerFragment](fragmentDefaulter{}))
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}})
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
		"a root-only hostname is dropped": {
			in: fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("."))}),
			want: func() *v1alpha1.ListenerFragment {
				lf := fragment("shop", "a", gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: sameRoutes()})
				lf.Spec.ParentRef = parent("shop")
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

var fuzzProtocols = []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType}

// FuzzDefaultFragment checks that defaulting is idempotent and leaves no
// upper case or trailing dot in a hostname.
func FuzzDefaultFragment(f *testing.F) {
	f.Add("App.Example.COM.", uint8(1), true)
	f.Add(".", uint8(0), false)
	f.Add("*.Example.com", uint8(2), true)
	f.Fuzz(func(t *testing.T, host string, proto uint8, withTLS bool) {
		l := gwv1.ListenerEntry{Name: "l", Port: 443, Protocol: fuzzProtocols[int(proto)%len(fuzzProtocols)], Hostname: ptr.To(gwv1.Hostname(host))}
		if withTLS {
			l.TLS = &gwv1.ListenerTLSConfig{}
		}
		once := fragment("ns", "f", l)
		DefaultFragment(once)
		twice := once.DeepCopy()
		DefaultFragment(twice)
		if diff := cmp.Diff(once, twice); diff != "" {
			t.Fatalf("Defaulting %q twice differs from once (-once +twice):\n%s", host, diff)
		}
		if h := once.Spec.Listeners[0].Hostname; h != nil && (strings.ToLower(string(*h)) != string(*h) || strings.HasSuffix(string(*h), ".") || *h == "") {
			t.Fatalf("Defaulting %q stored hostname %q", host, *h)
		}
	})
}
