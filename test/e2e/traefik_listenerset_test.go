package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
)

// TestTraefikServesNoWholeGatewayRouteOnAListenerSet: a route that names
// the Gateway without a sectionName attaches to the Gateway's own listeners
// only, never to its ListenerSets' (GEP-1713). Traefik attaches such a route
// to every listener of the Gateway it names, so gatefold folds the
// ListenerSets onto a Gateway of their own: the route is served on the
// Gateway's own hostname and not on the ListenerSet's, which Traefik has
// programmed and serves to a route naming its listener there.
func TestTraefikServesNoWholeGatewayRouteOnAListenerSet(t *testing.T) {
	env, dp, _ := startTraefik(t, "whole", "deals")
	c := env.Client
	httpPort := gwv1.PortNumber(dp.HTTPPort)
	for _, ns := range []string{"infra", "shop"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	own := fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "own.example.com")
	own.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll, own)
	gw.Spec.GatewayClassName = gwv1.ObjectName(dp.GatewayClass)
	create(t, c, gw)
	// Its listener admits routes of shop (Same: the ListenerSet's
	// namespace), as the Gateway's own listener does: only where it is keeps
	// the whole-Gateway route of shop off it.
	deals := fixture.ListenerSet("shop", "deals", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "deals.example.com"))
	create(t, c, deals)
	create(t, c, routeTo("shop", "whole", "", "whole", gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace("infra")), Name: "shared"}))

	p := newProber(t, dp)
	p.waitServed("HTTP", "own.example.com", "/", "whole", nil)
	// Traefik programmed the ListenerSet's listener, and no route is
	// attached to it: the whole-Gateway route is not.
	waitListenerSetProgrammed(t, c, deals, map[gwv1.SectionName]int32{"http": 0})
	p.waitNotServed("HTTP", "deals.example.com", "/")

	// A route naming the ListenerSet's listener where it is is served, and
	// counted alone.
	create(t, c, routeTo("shop", "deals", "/deals", "deals", listenerSetParent(gw, v1alpha1.ListenerSetListenerName("shop", "deals", "http"))))
	p.waitServed("HTTP", "deals.example.com", "/deals", "deals", nil)
	waitListenerSetProgrammed(t, c, deals, map[gwv1.SectionName]int32{"http": 1})
	p.waitNotServed("HTTP", "deals.example.com", "/")
	p.stillServed("HTTP", "own.example.com", "/", "whole", nil)
}
