package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// written sends lf through do (a create or an update), checks that the API
// server called the defaulting webhook calls times for it, and returns the
// fragment stored.
func written(t *testing.T, lf *v1alpha1.ListenerFragment, do func(context.Context, *v1alpha1.ListenerFragment) error, calls int64, what string) *v1alpha1.ListenerFragment {
	t.Helper()
	ctx := context.Background()
	before := defaulted.Load()
	if err := do(ctx, lf); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if n := defaulted.Load() - before; n != calls {
		t.Errorf("%s called the defaulting webhook %d times, want %d", what, n, calls)
	}
	stored := &v1alpha1.ListenerFragment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lf), stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

// TestOnlyFragmentsThatNeedDefaultingAreSentToIt shows the defaulting
// webhook's matchCondition on the API server: a fragment written in full,
// as route controllers write it, is stored as written without a call to the
// webhook, on create and on update, as is one the schema's defaults
// complete; one that needs defaulting is sent to it and stored defaulted.
func TestOnlyFragmentsThatNeedDefaultingAreSentToIt(t *testing.T) {
	create := func(ctx context.Context, lf *v1alpha1.ListenerFragment) error { return env.Client.Create(ctx, lf) }
	update := func(ctx context.Context, lf *v1alpha1.ListenerFragment) error { return env.Client.Update(ctx, lf) }
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	full := newFragment(ns, "full", gw, gwv1.ListenerEntry{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("full.example.com")),
		TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate),
			CertificateRefs: []gwv1.SecretObjectReference{{Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Secret")), Name: "cert"}}},
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
	})
	full.Spec.ParentRef.Group, full.Spec.ParentRef.Kind = ptr.To(gwv1.Group(gwv1.GroupName)), ptr.To(gwv1.Kind("Gateway"))
	want := full.Spec.DeepCopy()
	stored := written(t, full, create, 0, "The create of a fragment written in full")
	if diff := cmp.Diff(want, &stored.Spec); diff != "" {
		t.Errorf("The fragment written in full was stored otherwise (-written +stored):\n%s", diff)
	}

	stored.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("other.example.com"))
	want = stored.Spec.DeepCopy()
	stored = written(t, stored, update, 0, "An update that keeps it in full")
	if diff := cmp.Diff(want, &stored.Spec); diff != "" {
		t.Errorf("The update in full was stored otherwise (-written +stored):\n%s", diff)
	}
	stored.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("Upper.Example.COM."))
	stored = written(t, stored, update, 1, "An update to an upper-case hostname")
	if h := ptr.Deref(stored.Spec.Listeners[0].Hostname, ""); h != "upper.example.com" {
		t.Errorf("The updated hostname was stored as %q, want upper.example.com", h)
	}

	// The schema's defaults, which the API server applies before the
	// matchCondition, fill in the group, kind, tls.mode and allowedRoutes.
	written(t, newFragment(ns, "schema-defaulted", gw, https("https", "schema.example.com")), create, 0,
		"The create of a fragment that only the schema's defaults complete")

	needs := newFragment(ns, "needs", gw, gwv1.ListenerEntry{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("Needs.Example.COM."))})
	needs.Spec.ParentRef = gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gw.Name)}
	stored = written(t, needs, create, 1, "The create of a fragment that needs defaulting")
	wantSpec := v1alpha1.ListenerFragmentSpec{
		ParentRef: gwv1.ParentGatewayReference{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")), Namespace: ptr.To(gwv1.Namespace(ns)), Name: gwv1.ObjectName(gw.Name)},
		Listeners: []gwv1.ListenerEntry{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("needs.example.com")),
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}}},
	}
	if diff := cmp.Diff(wantSpec, stored.Spec); diff != "" {
		t.Errorf("The fragment that needs defaulting was stored otherwise (-want +stored):\n%s", diff)
	}
}
