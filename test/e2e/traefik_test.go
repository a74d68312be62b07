package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// TestTraefikServesWhatGatefoldFolds runs gatefold as installed (config/self-signed,
// as its ServiceAccount, its webhooks called by the API server) and Traefik
// as the implementation of the Gateway's class, and checks with real
// requests on loopback that what gatefold folds is what Traefik serves:
// fragments' HTTP and HTTPS listeners (certificates in Secrets, some in a
// third namespace behind ReferenceGrants) and a ListenerSet, with routes that
// attach by the generated sectionName read from the fragment's status; that a
// conflicting fragment, a deleted one and a route the listener does not
// admit are not served; and that Traefik's status reaches the fragments.
func TestTraefikServesWhatGatefoldFolds(t *testing.T) {
	env, dp, audit := startTraefik(t, "own", "checkout", "catalog", "blog", "intruder", "squatter", "deals")
	c := env.Client
	ctx := context.Background()
	httpPort, httpsPort := gwv1.PortNumber(dp.HTTPPort), gwv1.PortNumber(dp.HTTPSPort)

	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "infra"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "certs"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		// Admission skips this namespace: a fragment there is stored whatever
		// it conflicts with, and only the merger judges it.
		{ObjectMeta: metav1.ObjectMeta{Name: "optout", Labels: map[string]string{webhook.AdmissionLabel: "disabled"}}},
	} {
		create(t, c, ns)
	}
	ca, err := dataplane.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]*x509.Certificate{}
	for _, s := range []struct{ ns, name, host string }{
		{"shop", "checkout-tls", "checkout.example.com"},
		{"certs", "catalog-tls", "catalog.example.com"},
		{"certs", "blog-tls", "blog.example.com"},
		{"optout", "squat-tls", "squat.example.com"},
	} {
		secret, cert := tlsSecret(t, ca, s.ns, s.name, s.host)
		create(t, c, secret)
		certs[s.host] = cert
	}
	// Namespace certs lets fragments of shop and team reference its Secrets
	// (gatefold's admission and fold check this), and the Gateway's
	// namespace read them (Traefik checks this: it reads a folded listener
	// as the Gateway's).
	create(t, c, secretGrant("certs", "fragments", v1alpha1.GroupVersion.Group, "ListenerFragment", "shop", "team"))
	create(t, c, secretGrant("certs", "gateway", gwv1.GroupName, "Gateway", "infra"))
	// And the squatter's: were its HTTPS listener folded, Traefik could
	// read the squat certificate and serve it, which the test would see.
	create(t, c, secretGrant("optout", "gateway", gwv1.GroupName, "Gateway", "infra"))

	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll, fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "own.example.com"))
	gw.Spec.GatewayClassName = gwv1.ObjectName(dp.GatewayClass)
	create(t, c, gw)

	httpEntry := func(host string) gwv1.ListenerEntry {
		return fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, host)
	}
	httpsEntry := func(host, ns, secret string) gwv1.ListenerEntry {
		e := fixture.Entry("https", httpsPort, gwv1.HTTPSProtocolType, host)
		ref := gwv1.SecretObjectReference{Name: gwv1.ObjectName(secret)}
		if ns != "" {
			ref.Namespace = ptr.To(gwv1.Namespace(ns))
		}
		e.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{ref}}
		return e
	}
	// Created through gatefold's webhooks, as a route controller does.
	checkout := fixture.Fragment("shop", "checkout", gw, httpEntry("checkout.example.com"), httpsEntry("checkout.example.com", "", "checkout-tls"))
	catalog := fixture.Fragment("shop", "catalog", gw, httpEntry("catalog.example.com"), httpsEntry("catalog.example.com", "certs", "catalog-tls"))
	blog := fixture.Fragment("team", "blog", gw, httpEntry("blog.example.com"), httpsEntry("blog.example.com", "certs", "blog-tls"))
	for _, lf := range []*v1alpha1.ListenerFragment{checkout, catalog, blog} {
		create(t, c, lf)
	}
	// A ListenerSet, which gatefold folds for Traefik's class.
	deals := fixture.ListenerSet("shop", "deals", gw, httpEntry("deals.example.com"))
	create(t, c, deals)

	// The routes attach to the Gateway by the listener names the fragments'
	// statuses give.
	names := map[string]gwv1.SectionName{}
	for _, lf := range []*v1alpha1.ListenerFragment{checkout, catalog, blog} {
		for listener, name := range waitListenerNames(t, c, lf, "http", "https") {
			names[lf.Namespace+"/"+lf.Name+"/"+string(listener)] = name
		}
	}
	names["shop/deals/http"] = v1alpha1.ListenerSetListenerName("shop", "deals", "http")
	// One route per listener: Traefik v3.6.12 counts a route once per
	// parentRef to the Gateway on every listener it attaches to, so a route
	// with two parentRefs would make attachedRoutes 2.
	create(t, c, route("infra", "own", "", "own", "own"))
	for _, key := range []string{"shop/checkout", "shop/catalog", "team/blog"} {
		ns, name, _ := strings.Cut(key, "/")
		create(t, c, route(ns, name+"-http", "", name, names[key+"/http"]))
		create(t, c, route(ns, name+"-https", "", name, names[key+"/https"]))
	}
	// The ListenerSet's listener is on the Gateway of the ListenerSets, which
	// a route reaches by naming that Gateway and the listener's name there.
	create(t, c, routeTo("shop", "deals-http", "", "deals", listenerSetParent(gw, names["shop/deals/http"])))
	// Listener team/blog/http admits routes of namespace team only (Same, the
	// default, is the fragment's namespace): this one would take
	// blog.example.com/intruder if it were admitted.
	intruder := route("other", "intruder", "/intruder", "intruder", names["team/blog/http"])
	create(t, c, intruder)

	p := newProber(t, dp)
	p.waitServed("HTTP", "own.example.com", "/", "own", nil)
	for _, host := range []string{"checkout", "catalog", "blog", "deals"} {
		p.waitServed("HTTP", host+".example.com", "/", host, nil)
	}
	for _, host := range []string{"checkout", "catalog", "blog"} {
		p.waitServed("HTTPS", host+".example.com", "/", host, certs[host+".example.com"])
	}
	p.waitNotServed("HTTP", "unknown.example.com", "/")

	// Traefik's report on each folded listener reaches the fragment, at its
	// generation: Accepted, ResolvedRefs and Programmed, with one route each
	// (the intruder is not counted).
	for _, lf := range []*v1alpha1.ListenerFragment{checkout, catalog, blog} {
		waitProgrammed(t, c, lf, map[gwv1.SectionName]int32{"http": 1, "https": 1})
	}
	waitListenerSetProgrammed(t, c, deals, map[gwv1.SectionName]int32{"http": 1})
	checkGatewayAddress(t, c, gw)

	// The route the listener does not admit is refused by Traefik, and its
	// path is served by the admitted route.
	waitRouteRefused(t, c, intruder, string(gwv1.RouteReasonNotAllowedByListeners))
	p.stillServed("HTTP", "blog.example.com", "/intruder", "blog", nil)

	// An update is served, and the status follows the fragment's new
	// generation.
	current := &v1alpha1.ListenerFragment{}
	get(t, c, client.ObjectKeyFromObject(checkout), current)
	current.Spec.Listeners = append(current.Spec.Listeners, fixture.Entry("api", httpPort, gwv1.HTTPProtocolType, "api.checkout.example.com"))
	if err := c.Update(ctx, current); err != nil {
		t.Fatalf("Adding a listener to fragment shop/checkout: %v", err)
	}
	names["shop/checkout/api"] = waitListenerNames(t, c, current, "api")["api"]
	create(t, c, route("shop", "checkout-api", "", "checkout", names["shop/checkout/api"]))
	p.waitServed("HTTP", "api.checkout.example.com", "/", "checkout", nil)
	waitProgrammed(t, c, current, map[gwv1.SectionName]int32{"http": 1, "https": 1, "api": 1})

	// A fragment that admission would deny, stored through the opt-out: its
	// HTTP listener takes checkout.example.com (held by an older fragment)
	// and its HTTPS listener takes the HTTP port. The merger folds neither,
	// so Traefik never sees them, and its route attaches to nothing.
	for time.Since(checkout.CreationTimestamp.Time) < 1100*time.Millisecond {
		// Fragments created in one second are ordered by namespace/name,
		// and optout/ sorts before shop/: make the squatter younger.
		time.Sleep(100 * time.Millisecond)
	}
	squatterTLS := fixture.Entry("https", httpPort, gwv1.HTTPSProtocolType, "squat.example.com")
	squatterTLS.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "squat-tls"}}}
	squatter := fixture.Fragment("optout", "squatter", gw, httpEntry("checkout.example.com"), squatterTLS)
	create(t, c, squatter)
	waitConflicted(t, c, squatter, map[gwv1.SectionName]string{"http": "HostnameConflict", "https": "ProtocolConflict"})
	// Its route names both listeners: were either folded, Traefik would
	// accept the route there.
	squatterRoute := route("optout", "squatter", "/squatter", "squatter",
		v1alpha1.ListenerName("optout", "squatter", "http"), v1alpha1.ListenerName("optout", "squatter", "https"))
	create(t, c, squatterRoute)
	waitRouteRefused(t, c, squatterRoute, string(gwv1.RouteReasonNoMatchingParent))
	p.stillServed("HTTP", "checkout.example.com", "/squatter", "checkout", nil)
	p.stillServed("HTTP", "squat.example.com", "/squatter", "", nil)
	// Folded, the HTTPS listener would put TLS with the squat certificate
	// on the HTTP entryPoint: no handshake on either entryPoint presents it.
	p.noCertificateFor(p.httpsPort, "squat.example.com", "/squatter")
	p.noCertificateFor(p.httpPort, "squat.example.com", "/squatter")

	// A deleted fragment's hostname stops being served, over HTTP and HTTPS.
	if err := c.Delete(ctx, catalog); err != nil {
		t.Fatal(err)
	}
	p.waitNotServed("HTTP", "catalog.example.com", "/")
	p.waitNotServed("HTTPS", "catalog.example.com", "/")
	// The others still are.
	for _, host := range []string{"checkout", "blog"} {
		p.stillServed("HTTPS", host+".example.com", "/", host, certs[host+".example.com"])
	}
	p.stillServed("HTTP", "deals.example.com", "/", "deals", nil)
	p.stillServed("HTTP", "own.example.com", "/", "own", nil)

	// Traefik writes the whole status with Gateway API v1.4 types, which lack
	// status.attachedListenerSets: gatefold applies it again after each drop.
	testenv.Eventually(t, servedWithin, func() error {
		final := &gwv1.Gateway{}
		get(t, c, client.ObjectKeyFromObject(gw), final)
		if n := ptr.Deref(final.Status.AttachedListenerSets, 0); n != 1 {
			return fmt.Errorf("the Gateway's status.attachedListenerSets is %d, want 1 (ListenerSet shop/deals)", n)
		}
		return nil
	})
	checkStatusWriters(t, audit, gw)
}

// checkStatusWriters logs who wrote the Gateway's status, from the audit
// log: gatefold (attachedListenerSets) and Traefik (the rest) share it.
// gatefold writes the count once, and again after each Traefik write that
// dropped it with a backoff that doubles from 1 s: at most 2 + log2 of the
// seconds from its first write to the end of the test, however often
// Traefik drops it.
func checkStatusWriters(t *testing.T, audit string, gw *gwv1.Gateway) {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	writes, gatefold, others := map[string]int{}, 0, 0
	var first, end time.Time
	for _, e := range events {
		if e.StageTimestamp.After(end) {
			end = e.StageTimestamp
		}
		if e.ObjectRef.Resource != "gateways" || e.ObjectRef.Subresource != "status" || e.ObjectRef.Name != gw.Name || e.Verb == "get" {
			continue
		}
		agent, _, _ := strings.Cut(e.UserAgent, " ")
		writes[fmt.Sprintf("%s %s %d", agent, e.Verb, e.ResponseStatus.Code)]++
		switch {
		case e.ResponseStatus.Code >= 300:
		case strings.HasPrefix(agent, "gatefold/"):
			if gatefold == 0 {
				first = e.StageTimestamp
			}
			gatefold++
		default:
			others++
		}
	}
	seconds := end.Sub(first).Seconds()
	limit := 2 + math.Log2(max(seconds, 1))
	t.Logf("Writes of Gateway %s/%s status by user agent, verb and code: %v; gatefold's %d in %.1f s, at most %.1f", gw.Namespace, gw.Name, writes, gatefold, seconds, limit)
	if gatefold < 1 || float64(gatefold) > limit {
		t.Errorf("gatefold wrote the Gateway's status %d times (Traefik %d) in the %.1f s from its first write to the end of the test, want 1 to %.1f (2 + log2 of the seconds)",
			gatefold, others, seconds, limit)
	}
}

// waitListenerSetProgrammed waits until Traefik's report reached the
// ListenerSet's status: Programmed at its generation, and each of its
// listeners with the attachedRoutes given.
func waitListenerSetProgrammed(t *testing.T, c client.Client, ls *gwv1.ListenerSet, attached map[gwv1.SectionName]int32) {
	t.Helper()
	key := client.ObjectKeyFromObject(ls)
	testenv.Eventually(t, servedWithin, func() error {
		current := &gwv1.ListenerSet{}
		get(t, c, key, current)
		cond := meta.FindStatusCondition(current.Status.Conditions, string(gwv1.ListenerSetConditionProgrammed))
		ok := cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == current.Generation &&
			len(current.Status.Listeners) == len(attached)
		for _, l := range current.Status.Listeners {
			ok = ok && attached[l.Name] == l.AttachedRoutes
		}
		if ok {
			return nil
		}
		return fmt.Errorf("waiting for Traefik's report on ListenerSet %s to reach its status, attachedRoutes %v; last: Programmed %s, listeners %+v", key, attached, testenv.ConditionString(cond), current.Status.Listeners)
	})
	t.Logf("ListenerSet %s: Programmed, its listeners with attachedRoutes %v", key, attached)
}

// waitRouteRefused waits until Traefik refuses the route on each of its
// parentRefs with the reason given.
func waitRouteRefused(t *testing.T, c client.Client, r *gwv1.HTTPRoute, reason string) {
	t.Helper()
	key := client.ObjectKeyFromObject(r)
	testenv.Eventually(t, servedWithin, func() error {
		current := &gwv1.HTTPRoute{}
		get(t, c, key, current)
		refused := map[gwv1.SectionName]bool{}
		for _, p := range current.Status.Parents {
			cond := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
			if p.ControllerName == dataplane.ControllerName && p.ParentRef.SectionName != nil {
				refused[*p.ParentRef.SectionName] = cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == reason
			}
		}
		for _, ref := range current.Spec.ParentRefs {
			if ref.SectionName == nil || !refused[*ref.SectionName] {
				return fmt.Errorf("waiting for Traefik to refuse HTTPRoute %s on its %d parentRefs; last: %+v", key, len(r.Spec.ParentRefs), current.Status.Parents)
			}
		}
		return nil
	})
	t.Logf("HTTPRoute %s: Traefik reports Accepted=False %s on each of its %d parentRefs", key, reason, len(r.Spec.ParentRefs))
}
