package routing

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// TLSRoutes and TCPRoutes are served on a fragment's TLS and TCP listeners
// as HTTPRoutes are on HTTP ones; a TLSRoute naming an HTTPS listener is
// refused. The control plane serves the standard channel's CRDs: the
// controllers read these kinds at v1.
func TestTLSAndTCPRoutesByFragment(t *testing.T) {
	app := newNamespace(t)
	gw := gateway(t, gwv1.NamespacesFromAll)
	tls := fixture.Entry("tls", 8443, gwv1.TLSProtocolType, "t.example.com")
	tls.TLS = &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)}
	lf := fixture.Fragment(app, "lf", gw, tls, fixture.Entry("db", 5432, gwv1.TCPProtocolType, ""), fixture.HTTPS("https", "t.example.com"))
	create(t, lf)
	for _, l := range lf.Spec.Listeners {
		wantListener(t, gw, v1alpha1.ListenerName(app, lf.Name, l.Name))
	}
	backend := []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: "app", Port: ptr.To(gwv1.PortNumber(8443))}}}
	tlsRoute := func(name, section string) client.Object {
		return &gwv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: name}, Spec: gwv1.TLSRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{fragmentRef(lf, section)}},
			Hostnames:       []gwv1.Hostname{"t.example.com"},
			Rules:           []gwv1.TLSRouteRule{{BackendRefs: backend}},
		}}
	}
	tests := map[string]struct {
		route   client.Object
		section string
		want    gwv1.RouteConditionReason
	}{
		"a TLSRoute on the TLS listener": {route: tlsRoute("tls", "tls"), section: "tls", want: gwv1.RouteReasonAccepted},
		"a TCPRoute on the TCP listener": {
			route: &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "db"}, Spec: gwv1.TCPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{fragmentRef(lf, "db")}},
				Rules:           []gwv1.TCPRouteRule{{BackendRefs: backend}},
			}},
			section: "db", want: gwv1.RouteReasonAccepted,
		},
		"a TLSRoute on the HTTPS listener": {route: tlsRoute("https", "https"), section: "https", want: gwv1.RouteReasonNotAllowedByListeners},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			create(t, tc.route)
			r := asRoute(t, tc.route)
			ref := fragmentRef(lf, tc.section)
			if tc.want != gwv1.RouteReasonAccepted {
				wantRouteEntry(t, r, ref, metav1.ConditionFalse, string(tc.want))
				if d := derivedRoutes(t, r.GroupVersionKind(), r); len(d) != 0 {
					t.Errorf("%s %s has %d derived routes, want none", r.GetKind(), r.GetName(), len(d))
				}
				return
			}
			d := wantDerivedRoute(t, r, gw, v1alpha1.ListenerName(app, lf.Name, gwv1.SectionName(tc.section)))
			wantRouteEntry(t, r, ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
			implementRoute(t, d)
			wantRouteEntry(t, r, ref, metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		})
	}
}

// asRoute reads a typed route as stored, unstructured at v1.
func asRoute(t *testing.T, o client.Object) *unstructured.Unstructured {
	t.Helper()
	gvks, _, err := env.Client.Scheme().ObjectKinds(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvks[0])
	u.SetNamespace(o.GetNamespace())
	u.SetName(o.GetName())
	get(t, u)
	return u
}

// derivedRoutes returns the derived routes of kind gvk that owner
// controls.
func derivedRoutes(t *testing.T, gvk schema.GroupVersionKind, owner client.Object) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := env.Client.List(ctx, list, client.InNamespace(owner.GetNamespace()), client.MatchingLabels{v1alpha1.DerivedLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	var out []unstructured.Unstructured
	for _, d := range list.Items {
		if metav1.IsControlledBy(&d, owner) {
			out = append(out, d)
		}
	}
	return out
}

// routeFields are the fields of every route kind the tests read.
type routeFields struct {
	Spec struct {
		gwv1.CommonRouteSpec `json:",inline"`
		Hostnames            []gwv1.Hostname `json:"hostnames,omitempty"`
		Rules                any             `json:"rules,omitempty"`
	} `json:"spec"`
	Status gwv1.RouteStatus `json:"status"`
}

func fieldsOf(t *testing.T, u *unstructured.Unstructured) routeFields {
	t.Helper()
	var f routeFields
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &f); err != nil {
		t.Fatalf("Reading %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return f
}

// wantDerivedRoute waits until r has exactly one derived route, of its
// kind, which names listener `listener` of Gateway gw and has r's spec
// otherwise, and returns it.
func wantDerivedRoute(t *testing.T, r *unstructured.Unstructured, gw *gwv1.Gateway, listener gwv1.SectionName) *unstructured.Unstructured {
	t.Helper()
	want := []gwv1.ParentReference{{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")),
		Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), Name: gwv1.ObjectName(gw.Name), SectionName: ptr.To(listener)}}
	user := fieldsOf(t, r)
	var d *unstructured.Unstructured
	testenv.Eventually(t, settle, func() error {
		got := derivedRoutes(t, r.GroupVersionKind(), r)
		if len(got) != 1 {
			return fmt.Errorf("%s %s has %d derived routes, want 1", r.GetKind(), r.GetName(), len(got))
		}
		d = &got[0]
		f := fieldsOf(t, d)
		if !reflect.DeepEqual(f.Spec.ParentRefs, want) {
			return fmt.Errorf("derived %s %s names %s, want Gateway %s/%s section %s", d.GetKind(), d.GetName(), refs(f.Spec.ParentRefs), gw.Namespace, gw.Name, listener)
		}
		if !reflect.DeepEqual(f.Spec.Rules, user.Spec.Rules) || !reflect.DeepEqual(f.Spec.Hostnames, user.Spec.Hostnames) {
			return fmt.Errorf("derived %s %s has hostnames %v and rules %v, want the user route's %v and %v", d.GetKind(), d.GetName(), f.Spec.Hostnames, f.Spec.Rules, user.Spec.Hostnames, user.Spec.Rules)
		}
		return nil
	})
	return d
}

// wantRouteEntry waits until r's entry of controller for ref says Accepted
// status/reason at r's generation.
func wantRouteEntry(t *testing.T, r *unstructured.Unstructured, ref gwv1.ParentReference, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testenv.Eventually(t, settle, func() error {
		got := r.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
			return err
		}
		parents := fieldsOf(t, got).Status.Parents
		for _, p := range parents {
			if string(p.ControllerName) != controller || !reflect.DeepEqual(p.ParentRef, ref) {
				continue
			}
			c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
			if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != got.GetGeneration() {
				return fmt.Errorf("%s %s Accepted = %s, want %s/%s at generation %d", r.GetKind(), r.GetName(), testenv.ConditionString(c), status, reason, got.GetGeneration())
			}
			return nil
		}
		return fmt.Errorf("%s %s has no status entry of %s for its parentRef; entries: %+v", r.GetKind(), r.GetName(), controller, parents)
	})
}

// implementRoute writes the derived route's status as the implementation
// of controller would: each parentRef Accepted with resolved references.
func implementRoute(t *testing.T, d *unstructured.Unstructured) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, d)
		var st gwv1.RouteStatus
		for _, ref := range fieldsOf(t, d).Spec.ParentRefs {
			st.Parents = append(st.Parents, gwv1.RouteParentStatus{ParentRef: ref, ControllerName: controller, Conditions: []metav1.Condition{
				{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonAccepted), ObservedGeneration: d.GetGeneration(), LastTransitionTime: metav1.Now(), Message: "Accepted"},
				{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs), ObservedGeneration: d.GetGeneration(), LastTransitionTime: metav1.Now(), Message: "Resolved"},
			}})
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			return err
		}
		d.Object["status"] = m
		return env.Client.Status().Update(ctx, d)
	}); err != nil {
		t.Fatal(err)
	}
}
