package testenv

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// CheckPool fails t for each invariant that the Gateways of head's pool, as
// read (gws, the head included), break: no Gateway holds more than
// rules.MaxListeners listeners, each carries the head's own listeners (those
// of head as the test created it), each sibling is a clone of the head's
// class that the head controls, and no folded listener's tuple is on two
// Gateways.
func CheckPool(t testing.TB, head *gwv1.Gateway, gws []gwv1.Gateway) {
	t.Helper()
	tuples := map[string]string{}
	for _, g := range gws {
		if n := len(g.Spec.Listeners); n > rules.MaxListeners {
			t.Errorf("Gateway %s holds %d listeners, more than %d", g.Name, n, rules.MaxListeners)
		}
		if g.Name != head.Name && (g.Spec.GatewayClassName != head.Spec.GatewayClassName || !metav1.IsControlledBy(&g, head)) {
			t.Errorf("Sibling %s is not a controlled clone of the head: class %q, owners %+v", g.Name, g.Spec.GatewayClassName, g.OwnerReferences)
		}
		// The Gateway of the head's ListenerSets carries only theirs.
		for _, own := range head.Spec.Listeners {
			if rules.ListenerSetGateway(&g) {
				break
			}
			if !slices.ContainsFunc(g.Spec.Listeners, func(l gwv1.Listener) bool { return fixture.Summary(l) == fixture.Summary(own) }) {
				t.Errorf("Gateway %s lacks the head's own listener %s", g.Name, fixture.Summary(own))
			}
		}
		for _, l := range g.Spec.Listeners {
			if OwnListener(head, l) {
				continue
			}
			tuple := strings.TrimPrefix(fixture.Summary(l), string(l.Name)+" ")
			if other, ok := tuples[tuple]; ok {
				t.Errorf("%s is on Gateway %s and on Gateway %s", tuple, other, g.Name)
			}
			tuples[tuple] = g.Name
		}
	}
}

// OwnListener says whether l is one of the head's own listeners, which
// every Gateway of its pool carries, rather than a folded one.
func OwnListener(head *gwv1.Gateway, l gwv1.Listener) bool {
	return slices.ContainsFunc(head.Spec.Listeners, func(own gwv1.Listener) bool { return own.Name == l.Name })
}
