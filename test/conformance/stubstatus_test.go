package conformance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func routeKinds(kinds ...gwv1.Kind) []gwv1.RouteGroupKind {
	var out []gwv1.RouteGroupKind
	for _, k := range kinds {
		out = append(out, gwv1.RouteGroupKind{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: k})
	}
	return out
}

func httpsListener(secretNamespace string) gwv1.Listener {
	return gwv1.Listener{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: &gwv1.ListenerTLSConfig{
		CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert", Namespace: ptr.To(gwv1.Namespace(secretNamespace))}},
	}}
}

func grant(ns string, fromKind gwv1.Kind, fromNamespace string, name *gwv1.ObjectName) gwv1.ReferenceGrant {
	return gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: fromKind, Namespace: gwv1.Namespace(fromNamespace)}},
			To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: name}},
		},
	}
}

func TestStubResolvesListeners(t *testing.T) {
	tests := map[string]struct {
		listener gwv1.Listener
		grants   []gwv1.ReferenceGrant
		kinds    []gwv1.RouteGroupKind
		reason   gwv1.ListenerConditionReason
	}{
		"HTTP listener supports HTTPRoute and GRPCRoute": {
			listener: gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonResolvedRefs,
		},
		"TLS listener allowing only HTTPRoute has invalid route kinds and none supported": {
			listener: gwv1.Listener{Name: "tls", Port: 443, Protocol: gwv1.TLSProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{
				Kinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			}},
			reason: gwv1.ListenerReasonInvalidRouteKinds,
		},
		"HTTP listener allowing HTTPRoute and TLSRoute keeps HTTPRoute and has invalid route kinds": {
			listener: gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{
				Kinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "TLSRoute"}},
			}},
			kinds:  routeKinds("HTTPRoute"),
			reason: gwv1.ListenerReasonInvalidRouteKinds,
		},
		"HTTP listener allowing HTTPRoute of another group has invalid route kinds": {
			listener: gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{
				Kinds: []gwv1.RouteGroupKind{{Group: ptr.To(gwv1.Group("example.com")), Kind: "HTTPRoute"}},
			}},
			reason: gwv1.ListenerReasonInvalidRouteKinds,
		},
		"certificate in the Gateway's namespace resolves": {
			listener: httpsListener("infra"),
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonResolvedRefs,
		},
		"certificate in another namespace without a grant is not permitted": {
			listener: httpsListener("certs"),
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonRefNotPermitted,
		},
		"certificate granted to Gateways of the namespace resolves": {
			listener: httpsListener("certs"),
			grants:   []gwv1.ReferenceGrant{grant("certs", "Gateway", "infra", nil)},
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonResolvedRefs,
		},
		"certificate granted by name resolves": {
			listener: httpsListener("certs"),
			grants:   []gwv1.ReferenceGrant{grant("certs", "Gateway", "infra", ptr.To(gwv1.ObjectName("cert")))},
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonResolvedRefs,
		},
		"grant of another Secret is not permission": {
			listener: httpsListener("certs"),
			grants:   []gwv1.ReferenceGrant{grant("certs", "Gateway", "infra", ptr.To(gwv1.ObjectName("other")))},
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonRefNotPermitted,
		},
		"grant to ListenerSets is not permission for the Gateway": {
			listener: httpsListener("certs"),
			grants:   []gwv1.ReferenceGrant{grant("certs", "ListenerSet", "infra", nil)},
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonRefNotPermitted,
		},
		"grant to Gateways of another namespace is not permission": {
			listener: httpsListener("certs"),
			grants:   []gwv1.ReferenceGrant{grant("certs", "Gateway", "elsewhere", nil)},
			kinds:    routeKinds("HTTPRoute", "GRPCRoute"),
			reason:   gwv1.ListenerReasonRefNotPermitted,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kinds, resolved, reason, _ := resolveListener("infra", tc.listener, tc.grants)
			if diff := cmp.Diff(tc.kinds, kinds); diff != "" {
				t.Errorf("Supported kinds (-want +got):\n%s", diff)
			}
			if reason != string(tc.reason) || resolved != (tc.reason == gwv1.ListenerReasonResolvedRefs) {
				t.Errorf("ResolvedRefs %t %s, want reason %s", resolved, reason, tc.reason)
			}
		})
	}
}

func TestStubStatusFollowsGenerationAndSettles(t *testing.T) {
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "infra", Generation: 1},
		Spec: gwv1.GatewaySpec{GatewayClassName: stubClassName, Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	}
	first := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gw.Status = stubGatewayStatus(gw, nil, first)
	if !statusCurrent(gw.Status, stubGatewayStatus(gw, nil, metav1.Now())) {
		t.Errorf("A Gateway whose status the stub wrote needs another write")
	}

	// A listener folded in: a new generation, and the status of each
	// listener at it; the transition times of unchanged conditions stay.
	gw.Generation = 2
	gw.Spec.Listeners = append(gw.Spec.Listeners, httpsListener("certs"))
	later := metav1.NewTime(first.Add(time.Minute))
	want := stubGatewayStatus(gw, nil, later)
	if statusCurrent(gw.Status, want) {
		t.Fatalf("A new generation needs no write")
	}
	if n := len(want.Listeners); n != 2 {
		t.Fatalf("%d listener statuses, want 2", n)
	}
	for _, c := range append(append([]metav1.Condition{}, want.Conditions...), append(want.Listeners[0].Conditions, want.Listeners[1].Conditions...)...) {
		if c.ObservedGeneration != 2 {
			t.Errorf("Condition %s observed generation %d, want 2", c.Type, c.ObservedGeneration)
		}
	}
	if got := meta.FindStatusCondition(want.Listeners[0].Conditions, "Accepted").LastTransitionTime; !got.Equal(&first) {
		t.Errorf("The kept listener's Accepted changed its transition time to %v", got)
	}
	if got := meta.FindStatusCondition(want.Listeners[1].Conditions, "ResolvedRefs"); got.Status != metav1.ConditionFalse || !got.LastTransitionTime.Equal(&later) {
		t.Errorf("The new listener's ResolvedRefs is %+v, want False since %v", got, later)
	}
	if got := meta.FindStatusCondition(want.Listeners[1].Conditions, "Programmed"); got.Status != metav1.ConditionFalse {
		t.Errorf("A listener whose references do not resolve is programmed: %+v", got)
	}
	if want.AttachedListenerSets != nil {
		t.Errorf("The stub reports attachedListenerSets, which gatefold owns")
	}
}
