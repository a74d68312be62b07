package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// middlewareHeader is the response header Middleware shop/add-header adds.
const middlewareHeader = "X-Gatefold-Middleware"

// TestTraefikServesRoutesToServices runs, in a network namespace of its own
// (startInNetNS), gatefold as installed and Traefik on ports 80 and 443,
// with real Service backends behind EndpointSlices, and checks with real
// requests and the routes' status that routes naming their
// ListenerFragment or ListenerSet as parentRef, by its own listener names,
// are served where the listeners landed (a pool's sibling included), HTTP
// and HTTPS, and a TLSRoute through a TLS passthrough listener; that gatefold reports them in the route's status.parents, one
// entry per such parentRef; that a Traefik Middleware works through an
// ExtensionRef filter; and that gatefold writes nothing of the user's routes
// but their status. (That a route naming the Gateway is not served on a
// ListenerSet's hostnames is TestTraefikServesNoWholeGatewayRouteOnAListenerSet.)
func TestTraefikServesRoutesToServices(t *testing.T) {
	n, ok := startInNetNS(t)
	if !ok {
		return
	}
	c := n.env.Client
	httpPort, httpsPort := gwv1.PortNumber(n.dp.HTTPPort), gwv1.PortNumber(n.dp.HTTPSPort)
	for _, ns := range []string{"infra", "edge", "shop"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	ca, err := dataplane.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]*x509.Certificate{}
	for _, host := range []string{"checkout", "deals"} {
		secret, cert := tlsSecret(t, ca, "shop", host+"-tls", host+".example.com")
		create(t, c, secret)
		certs[host] = cert
	}

	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll, fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "own.example.com"))
	gw.Spec.GatewayClassName = gwv1.ObjectName(n.dp.GatewayClass)
	create(t, c, gw)
	head := fixture.PoolHead("edge", gwv1.NamespacesFromAll, fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "edge.example.com"))
	head.Spec.GatewayClassName = gwv1.ObjectName(n.dp.GatewayClass)
	create(t, c, head)

	https := func(host string) gwv1.ListenerEntry {
		e := fixture.Entry("https", httpsPort, gwv1.HTTPSProtocolType, host+".example.com")
		e.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName(host + "-tls")}}}
		return e
	}
	checkout := fixture.Fragment("shop", "checkout", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "checkout.example.com"), https("checkout"))
	create(t, c, checkout)
	deals := fixture.ListenerSet("shop", "deals", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "deals.example.com"), https("deals"))
	create(t, c, deals)
	// The filler takes the pool head's room beside its own listener, so
	// that pooled, younger, lands on the sibling.
	var fill []gwv1.ListenerEntry
	for i := range rules.MaxListeners - 1 {
		fill = append(fill, fixture.Entry(fmt.Sprintf("f%02d", i), httpPort, gwv1.HTTPProtocolType, fmt.Sprintf("filler%02d.example.com", i)))
	}
	filler := fixture.Fragment("shop", "filler", head, fill...)
	create(t, c, filler)
	waitLanded(t, c, filler, "f00")
	pooled := fixture.Fragment("shop", "pooled", head, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "pooled.example.com"))
	create(t, c, pooled)

	n.serve(t, "infra", "own")
	for _, name := range []string{"checkout", "deals", "pooled", "wrong", "mw"} {
		n.serve(t, "shop", name)
	}
	for _, ns := range []string{"infra", "shop"} {
		create(t, c, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware",
			"metadata": map[string]any{"namespace": ns, "name": "add-header"},
			"spec":     map[string]any{"headers": map[string]any{"customResponseHeaders": map[string]any{middlewareHeader: "add-header"}}},
		}})
	}

	fragmentRef := func(name, section string) gwv1.ParentReference {
		ref := gwv1.ParentReference{Group: ptr.To(gwv1.Group(v1alpha1.GroupVersion.Group)), Kind: ptr.To(gwv1.Kind("ListenerFragment")), Name: gwv1.ObjectName(name)}
		if section != "" {
			ref.SectionName = ptr.To(gwv1.SectionName(section))
		}
		return ref
	}
	byParent := map[string]*gwv1.HTTPRoute{
		"checkout-http":  serviceRoute(routeTo("shop", "checkout-http", "", "checkout", fragmentRef("checkout", "http"))),
		"checkout-https": serviceRoute(routeTo("shop", "checkout-https", "", "checkout", fragmentRef("checkout", "https"))),
		"deals":          serviceRoute(routeTo("shop", "deals", "", "deals", gwv1.ParentReference{Kind: ptr.To(gwv1.Kind("ListenerSet")), Name: "deals"})),
		"pooled":         serviceRoute(routeTo("shop", "pooled", "", "pooled", fragmentRef("pooled", ""))),
	}
	// What gatefold refuses, and what names Gateways only: gatefold writes
	// the status of the first, nothing of the second.
	var refused, gatewayOnly []*gwv1.HTTPRoute

	t.Run("GatewayListener", func(t *testing.T) {
		// A route naming the Gateway's own listener reaches the Service's
		// backend through its EndpointSlice, and Traefik applies a
		// Middleware its ExtensionRef filter names.
		r := serviceRoute(route("infra", "own", "", "own", "own"))
		withMiddleware := withAddHeader(serviceRoute(route("infra", "own-mw", "/mw", "own", "own")))
		for _, r := range []*gwv1.HTTPRoute{r, withMiddleware} {
			create(t, c, r)
			gatewayOnly = append(gatewayOnly, r)
		}
		p := newProber(t, n.dp)
		p.waitServed("HTTP", "own.example.com", "/", "own", nil)
		p.waitAddedHeader("own.example.com", "/mw", "own")
	})

	t.Run("ByFragment", func(t *testing.T) {
		create(t, c, byParent["checkout-http"])
		create(t, c, byParent["checkout-https"])
		p := newProber(t, n.dp)
		p.waitServed("HTTP", "checkout.example.com", "/", "checkout", nil)
		p.waitServed("HTTPS", "checkout.example.com", "/", "checkout", certs["checkout"])
	})

	t.Run("ByListenerSet", func(t *testing.T) {
		create(t, c, byParent["deals"])
		p := newProber(t, n.dp)
		p.waitServed("HTTP", "deals.example.com", "/", "deals", nil)
		p.waitServed("HTTPS", "deals.example.com", "/", "deals", certs["deals"])
	})

	t.Run("ByFragmentOnPoolSibling", func(t *testing.T) {
		sibling := rules.SiblingName(head.Name, 2)
		if landed := waitLanded(t, c, pooled, "http")["http"]; string(landed.Name) != sibling {
			t.Fatalf("Fragment shop/pooled landed on Gateway %s, want the pool's sibling %s", landed.Name, sibling)
		}
		create(t, c, byParent["pooled"])
		newProber(t, n.dp).waitServed("HTTP", "pooled.example.com", "/", "pooled", nil)
	})

	t.Run("Status", func(t *testing.T) {
		for _, name := range slices.Sorted(maps.Keys(byParent)) {
			waitParentsStatus(t, c, byParent[name], metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		}
		// Each fragment listener counts the one route attached through it.
		waitProgrammed(t, c, checkout, map[gwv1.SectionName]int32{"http": 1, "https": 1})
		waitProgrammed(t, c, pooled, map[gwv1.SectionName]int32{"http": 1})
	})

	t.Run("ListenerSetAttachedRoutes", func(t *testing.T) {
		// Route shop/deals names the ListenerSet without a sectionName: it
		// is attached through both listeners, once each.
		waitListenerSetProgrammed(t, c, deals, map[gwv1.SectionName]int32{"http": 1, "https": 1})
	})

	t.Run("WrongSectionName", func(t *testing.T) {
		// The fragment has no listener "nope": refused, and its path is
		// served by the route on the listener.
		wrong := serviceRoute(routeTo("shop", "wrong", "/wrong", "wrong", fragmentRef("checkout", "nope")))
		create(t, c, wrong)
		refused = append(refused, wrong)
		waitParentsStatus(t, c, wrong, metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
		newProber(t, n.dp).stillServed("HTTP", "checkout.example.com", "/wrong", "checkout", nil)
	})

	t.Run("MiddlewareByExtensionRef", func(t *testing.T) {
		mw := withAddHeader(serviceRoute(routeTo("shop", "mw", "/mw", "mw", fragmentRef("checkout", "http"))))
		create(t, c, mw)
		byParent["mw"] = mw
		p := newProber(t, n.dp)
		p.waitAddedHeader("checkout.example.com", "/mw", "mw")
		waitParentsStatus(t, c, mw, metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		// The route without the filter answers without the header.
		if a := p.get("HTTP", "checkout.example.com", "/"); !a.from("checkout", nil) || a.header.Get(middlewareHeader) != "" {
			t.Errorf("%s → %s, header %s %q: want backend checkout without the header", p.describe("HTTP", "checkout.example.com", "/"), a, middlewareHeader, a.header.Get(middlewareHeader))
		}
	})

	t.Run("TLSPassthroughByFragment", func(t *testing.T) {
		// A TLSRoute naming a fragment's TLS (Passthrough) listener reaches a
		// backend that terminates TLS itself, with a certificate Traefik
		// never has: its Secret is in no namespace.
		secret, cert := tlsSecret(t, ca, "shop", "vault-tls", "vault.example.com")
		pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			t.Fatal(err)
		}
		n.serveTLS(t, "shop", "vault", &pair)
		passthrough := fixture.Entry("tls", httpsPort, gwv1.TLSProtocolType, "vault.example.com")
		passthrough.TLS = &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)}
		create(t, c, fixture.Fragment("shop", "vault", gw, passthrough))
		ref := fragmentRef("vault", "tls")
		create(t, c, &gwv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "vault"}, Spec: gwv1.TLSRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{ref}},
			Hostnames:       []gwv1.Hostname{"vault.example.com"},
			Rules:           []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{serviceRef("vault").BackendRef}}},
		}})
		newProber(t, n.dp).waitServed("HTTPS", "vault.example.com", "/", "vault", cert)
		waitTLSRouteAccepted(t, c, client.ObjectKey{Namespace: "shop", Name: "vault"}, ref)
	})

	var steadyFrom time.Time
	t.Run("SteadyState", func(t *testing.T) {
		steadyFrom = time.Now()
		p := newProber(t, n.dp)
		p.stillServed("HTTP", "checkout.example.com", "/", "checkout", nil)
		p.stillServed("HTTPS", "checkout.example.com", "/", "checkout", certs["checkout"])
		p.stillServed("HTTP", "deals.example.com", "/", "deals", nil)
		p.stillServed("HTTPS", "deals.example.com", "/", "deals", certs["deals"])
		p.stillServed("HTTP", "pooled.example.com", "/", "pooled", nil)
		for _, name := range slices.Sorted(maps.Keys(byParent)) {
			checkParentsStatus(t, c, byParent[name], metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		}
	})

	t.Run("UserRoutesOnlyStatusWritten", func(t *testing.T) {
		checkOnlyStatusWritten(t, n.audit, append(slices.Collect(maps.Values(byParent)), refused...), gatewayOnly, steadyFrom)
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

// withAddHeader is r with an ExtensionRef filter in its one rule naming
// Middleware add-header of its namespace.
func withAddHeader(r *gwv1.HTTPRoute) *gwv1.HTTPRoute {
	r.Spec.Rules[0].Filters = []gwv1.HTTPRouteFilter{{
		Type:         gwv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gwv1.LocalObjectReference{Group: "traefik.io", Kind: "Middleware", Name: "add-header"},
	}}
	return r
}

// waitAddedHeader waits until HTTP requests for host and path are answered
// by backend with the header Middleware add-header adds.
func (p *prober) waitAddedHeader(host, path, backend string) {
	p.t.Helper()
	p.poll("HTTP", host, path, "from backend "+backend+" with header "+middlewareHeader+": add-header", false, func(a answer) bool {
		return a.from(backend, nil) && a.header.Get(middlewareHeader) == "add-header"
	})
}

// waitParentsStatus waits until checkParentsStatus holds for r.
func waitParentsStatus(t *testing.T, c client.Client, r *gwv1.HTTPRoute, accepted metav1.ConditionStatus, reason string) {
	t.Helper()
	var summary string
	testenv.Eventually(t, servedWithin, func() error {
		var err error
		summary, err = parentsStatus(t, c, r, accepted, reason)
		return err
	})
	t.Logf("HTTPRoute %s/%s: %s", r.Namespace, r.Name, summary)
}

// checkParentsStatus checks, once, that r's status.parents holds for each
// of its parentRefs exactly one entry, with that parentRef as the route
// has it (defaults applied) and Traefik's controllerName, Accepted as
// accepted with reason at the route's generation, and when accepted,
// ResolvedRefs True at that generation too.
func checkParentsStatus(t *testing.T, c client.Client, r *gwv1.HTTPRoute, accepted metav1.ConditionStatus, reason string) {
	t.Helper()
	if _, err := parentsStatus(t, c, r, accepted, reason); err != nil {
		t.Error(err)
	}
}

func parentsStatus(t *testing.T, c client.Client, r *gwv1.HTTPRoute, accepted metav1.ConditionStatus, reason string) (string, error) {
	t.Helper()
	key := client.ObjectKeyFromObject(r)
	current := &gwv1.HTTPRoute{}
	get(t, c, key, current)
	var problems, lines []string
	for _, ref := range current.Spec.ParentRefs {
		var entries []gwv1.RouteParentStatus
		for _, p := range current.Status.Parents {
			if equality.Semantic.DeepEqual(p.ParentRef, ref) {
				entries = append(entries, p)
			}
		}
		if len(entries) != 1 {
			problems = append(problems, fmt.Sprintf("%d entries for parentRef %s, want 1", len(entries), describeParentRef(ref)))
			continue
		}
		e := entries[0]
		if e.ControllerName != dataplane.ControllerName {
			problems = append(problems, fmt.Sprintf("parentRef %s: controllerName %s, want %s", describeParentRef(ref), e.ControllerName, dataplane.ControllerName))
		}
		for _, typ := range []gwv1.RouteConditionType{gwv1.RouteConditionAccepted, gwv1.RouteConditionResolvedRefs} {
			cond := meta.FindStatusCondition(e.Conditions, string(typ))
			switch {
			case typ == gwv1.RouteConditionResolvedRefs && accepted != metav1.ConditionTrue:
				// Upstream requires it of an accepted parentRef only.
			case cond == nil || cond.ObservedGeneration != current.Generation:
				problems = append(problems, fmt.Sprintf("parentRef %s: %s %s, want it at generation %d", describeParentRef(ref), typ, testenv.ConditionString(cond), current.Generation))
			case typ == gwv1.RouteConditionAccepted && (cond.Status != accepted || cond.Reason != reason):
				problems = append(problems, fmt.Sprintf("parentRef %s: Accepted %s, want %s/%s", describeParentRef(ref), testenv.ConditionString(cond), accepted, reason))
			case typ == gwv1.RouteConditionResolvedRefs && cond.Status != metav1.ConditionTrue:
				problems = append(problems, fmt.Sprintf("parentRef %s: ResolvedRefs %s, want True", describeParentRef(ref), testenv.ConditionString(cond)))
			}
		}
		cond := meta.FindStatusCondition(e.Conditions, string(gwv1.RouteConditionAccepted))
		lines = append(lines, fmt.Sprintf("parentRef %s: %s, Accepted %s", describeParentRef(ref), e.ControllerName, testenv.ConditionString(cond)))
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("waiting for HTTPRoute %s's status.parents; last: %s (status.parents %+v)", key, strings.Join(problems, "; "), current.Status.Parents)
	}
	return fmt.Sprintf("generation %d; %s", current.Generation, strings.Join(lines, "; ")), nil
}

// describeParentRef renders ref as group/kind namespace/name#section.
func describeParentRef(ref gwv1.ParentReference) string {
	s := fmt.Sprintf("%s/%s %s", ptr.Deref(ref.Group, ""), ptr.Deref(ref.Kind, ""), ref.Name)
	if ref.Namespace != nil {
		s = fmt.Sprintf("%s/%s %s/%s", ptr.Deref(ref.Group, ""), ptr.Deref(ref.Kind, ""), *ref.Namespace, ref.Name)
	}
	if ref.SectionName != nil {
		s += "#" + string(*ref.SectionName)
	}
	return s
}

// checkOnlyStatusWritten checks, from the audit log, that gatefold's
// ServiceAccount wrote the routes naming a fragment or ListenerSet only
// through their status subresource, and wrote each one's status, but none
// from steadyFrom on; and that it never wrote the routes naming Gateways
// only.
func checkOnlyStatusWritten(t *testing.T, audit string, byParent []*gwv1.HTTPRoute, gatewayOnly []*gwv1.HTTPRoute, steadyFrom time.Time) {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + installNamespace + ":gatefold-controller-manager"
	statusWrites := map[client.ObjectKey]int{}
	for _, r := range byParent {
		statusWrites[client.ObjectKeyFromObject(r)] = 0
	}
	forbidden := map[client.ObjectKey]bool{}
	for _, r := range gatewayOnly {
		forbidden[client.ObjectKeyFromObject(r)] = true
	}
	writers := map[string]int{}
	for _, e := range events {
		key := client.ObjectKey{Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name}
		_, mine := statusWrites[key]
		if (!mine && !forbidden[key]) || e.ObjectRef.Resource != "httproutes" ||
			!slices.Contains([]string{"create", "update", "patch", "delete"}, e.Verb) {
			continue
		}
		writers[fmt.Sprintf("%s %s %s %d", e.Username(), e.Verb, e.ObjectRef.Subresource, e.ResponseStatus.Code)]++
		if e.Username() != user {
			continue
		}
		if !mine || e.ObjectRef.Subresource != "status" {
			t.Errorf("gatefold (%s) wrote HTTPRoute %s: %s %q, code %d; it may write only the status of a route naming a fragment or ListenerSet", user, key, e.Verb, e.ObjectRef.Subresource, e.ResponseStatus.Code)
			continue
		}
		statusWrites[key]++
		if !steadyFrom.IsZero() && !e.StageTimestamp.Before(steadyFrom) {
			t.Errorf("gatefold (%s) wrote the status of HTTPRoute %s at %s, in the steady state from %s: want no write", user, key, e.StageTimestamp.Format(time.RFC3339Nano), steadyFrom.Format(time.RFC3339Nano))
		}
	}
	for key, n := range statusWrites {
		if n == 0 {
			t.Errorf("gatefold (%s) never wrote the status of HTTPRoute %s", user, key)
		}
	}
	t.Logf("Writes of the user's routes by user, verb, subresource and code: %v; gatefold's of the status of each route naming a fragment or ListenerSet: %v", writers, statusWrites)
}

// waitTLSRouteAccepted waits until TLSRoute key's entry of Traefik's
// controllerName for parentRef ref says Accepted=True at its generation.
func waitTLSRouteAccepted(t *testing.T, c client.Client, key client.ObjectKey, ref gwv1.ParentReference) {
	t.Helper()
	testenv.Eventually(t, servedWithin, func() error {
		r := &gwv1.TLSRoute{}
		get(t, c, key, r)
		for _, p := range r.Status.Parents {
			if p.ControllerName != dataplane.ControllerName || !equality.Semantic.DeepEqual(p.ParentRef, ref) {
				continue
			}
			if cond := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != r.Generation {
				return fmt.Errorf("TLSRoute %s Accepted %s, want True at generation %d", key, testenv.ConditionString(cond), r.Generation)
			}
			return nil
		}
		return fmt.Errorf("TLSRoute %s has no entry of %s for parentRef %s: %+v", key, dataplane.ControllerName, describeParentRef(ref), r.Status.Parents)
	})
}
