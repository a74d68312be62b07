package merger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestCarriedSinceTheGenerationThatLastChangedTheListener(t *testing.T) {
	listener := func(hostname string) gwv1.Listener {
		return gwv1.Listener{Name: "l", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname(hostname)),
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSelector),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "a", "team": "b"}}}}}
	}
	cases := map[string]struct {
		next gwv1.Listener
		want int64
	}{
		"the same listener, another copy, is carried since the first generation": {next: listener("a.example.com"), want: 1},
		"a changed hostname is carried since the new generation":                 {next: listener("b.example.com"), want: 2},
	}
	gateway := func(generation int64, l gwv1.Listener) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: generation},
			Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{l}}}
	}
	key := types.NamespacedName{Namespace: "ns", Name: "gw"}
	managed := sets.New[gwv1.SectionName]("l")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var m carriedMemo
			m.observe(key, gateway(1, listener("a.example.com")), managed)
			if got := m.observe(key, gateway(2, tc.next), managed)["l"]; got != tc.want {
				t.Errorf("carried since generation %d, want %d", got, tc.want)
			}
		})
	}
}
