package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/test/fixture"
)

// TestTraefikServesRoutesToServices runs, in a network namespace of its own
// (startInNetNS), gatefold as installed and Traefik on ports 80 and 443,
// with real Service backends behind EndpointSlices, and checks with real
// requests what Traefik serves for routes.
func TestTraefikServesRoutesToServices(t *testing.T) {
	n, ok := startInNetNS(t)
	if !ok {
		return
	}
	c := n.env.Client
	httpPort := gwv1.PortNumber(n.dp.HTTPPort)
	for _, ns := range []string{"infra"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	own := fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "own.example.com")
	own.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll, own)
	gw.Spec.GatewayClassName = gwv1.ObjectName(n.dp.GatewayClass)
	create(t, c, gw)
	n.serve(t, "infra", "own")

	t.Run("GatewayListener", func(t *testing.T) {
		// A route naming the Gateway's own listener reaches the Service's
		// backend through its EndpointSlice.
		create(t, c, serviceRoute(route("infra", "own", "", "own", "own")))
		newProber(t, n.dp).waitServed("HTTP", "own.example.com", "/", "own", nil)
	})
}

// serviceRoute is r with its backend, named in its one rule, a Service of
// its namespace (serviceRef) rather than Traefik's echo backend of that
// name.
func serviceRoute(r *gwv1.HTTPRoute) *gwv1.HTTPRoute {
	for i, rule := range r.Spec.Rules {
		for j, ref := range rule.BackendRefs {
			name, _ := strings.CutSuffix(string(ref.Name), "@file")
			r.Spec.Rules[i].BackendRefs[j] = serviceRef(name)
		}
	}
	return r
}
