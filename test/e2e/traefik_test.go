package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// servedWithin is how long Traefik may take to serve (or stop serving) a
// change once the API server has it: it applies configuration within about
// a second, after gatefold's debounce.
const servedWithin = 30 * time.Second

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
	c, dp, audit := startTraefik(t, "own", "checkout", "catalog", "blog", "intruder", "squatter", "deals")
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
	for _, key := range []string{"shop/checkout", "shop/catalog", "team/blog", "shop/deals"} {
		ns, name, _ := strings.Cut(key, "/")
		create(t, c, route(ns, name+"-http", "", name, names[key+"/http"]))
		if key != "shop/deals" {
			create(t, c, route(ns, name+"-https", "", name, names[key+"/https"]))
		}
	}
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
	waitListenerSetProgrammed(t, c, deals)
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

	final := &gwv1.Gateway{}
	get(t, c, client.ObjectKeyFromObject(gw), final)
	t.Logf("The Gateway's status.attachedListenerSets at the end: %v (gatefold applies it; Traefik writes the whole status with Gateway API v1.4 types, which lack the field)",
		ptrString(final.Status.AttachedListenerSets))
	logStatusWriters(t, audit, gw)
}

// startTraefik starts a control plane (its audit log, of every request, at
// the path returned), gatefold as installed (startInstalledManager, which
// checks its log for refused requests at the end) and Traefik with the echo
// backends named, as the implementation of class dp.GatewayClass; it skips
// the test when there is no Traefik binary.
func startTraefik(t *testing.T, backends ...string) (c client.Client, dp *dataplane.DataPlane, audit string) {
	t.Helper()
	traefik, err := dataplane.FindBinary("")
	if errors.Is(err, dataplane.ErrNoBinary) {
		t.Skipf("Skipping the data-plane test: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	audit = filepath.Join(t.TempDir(), "audit.log")
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t), AuditLog: audit, AuditAll: true})

	startInstalledManager(t, env, kubeconfig, "--listenerset-controllers="+dataplane.ControllerName)

	dp, err = dataplane.Start(context.Background(), env.Client, dataplane.Options{
		Binary: traefik, Kubeconfig: kubeconfig, Dir: t.TempDir(),
		// Free ports, so that a `make dev` running beside the tests is no matter.
		HTTPPort: testenv.MustFreePort(t), HTTPSPort: testenv.MustFreePort(t),
		Backends: backends,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dp.Running(); err != nil {
			t.Errorf("Traefik did not run to the end of the test: %v", err)
		}
		if err := dp.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			access, _ := os.ReadFile(dp.AccessLogPath)
			t.Logf("Traefik's log:\n%s\nIts access log:\n%s", dp.Log(), access)
		}
	})
	t.Logf("Traefik %s serves class %s on 127.0.0.1:%d (HTTP) and 127.0.0.1:%d (HTTPS)", traefik, dp.GatewayClass, dp.HTTPPort, dp.HTTPSPort)
	return env.Client, dp, audit
}

// logStatusWriters logs who wrote the Gateway's status, from the audit log:
// gatefold (attachedListenerSets) and Traefik (the rest) share it.
func logStatusWriters(t *testing.T, audit string, gw *gwv1.Gateway) {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	writes, gatefold := map[string]int{}, 0
	for _, e := range events {
		if e.ObjectRef.Resource != "gateways" || e.ObjectRef.Subresource != "status" || e.ObjectRef.Name != gw.Name || e.Verb == "get" {
			continue
		}
		agent, _, _ := strings.Cut(e.UserAgent, " ")
		writes[fmt.Sprintf("%s %s %d", agent, e.Verb, e.ResponseStatus.Code)]++
		if strings.HasPrefix(agent, "gatefold/") && e.ResponseStatus.Code < 300 {
			gatefold++
		}
	}
	t.Logf("Writes of Gateway %s/%s status by user agent, verb and code: %v", gw.Namespace, gw.Name, writes)
	// The count changed once (0 to 1): gatefold does not write it again
	// after each of Traefik's writes, which drop it.
	if gatefold < 1 || gatefold > 2 {
		t.Errorf("gatefold wrote the Gateway's status %d times, want once or twice (attachedListenerSets set once, perhaps retried)", gatefold)
	}
}

// startInstalledManager runs `gatefold manager --cert-mode=self-signed` as
// the ServiceAccount of config/self-signed, applied with kubectl (see
// runInstalledManager); it returns the webhook server's address.
func startInstalledManager(t *testing.T, env *devenv.Env, kubeconfig string, flags ...string) (webhookAddr string) {
	t.Helper()
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-k", overlay(t, "self-signed"))
	return runInstalledManager(t, env, kubeconfig, "self-signed", append([]string{"--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1"}, flags...)...)
}

// runInstalledManager runs `gatefold manager` as the ServiceAccount of
// config/<overlayName>, which the test has applied, with the webhooks
// pointed at it by URL on loopback, waits until it is ready, and checks its
// log for refused requests at the end; it returns the webhook server's
// address.
func runInstalledManager(t *testing.T, env *devenv.Env, kubeconfig, overlayName string, flags ...string) (webhookAddr string) {
	t.Helper()
	port, probes := testenv.MustFreePort(t), testenv.MustFreePort(t)
	testenv.PointWebhooksAt(t, env.Client, fmt.Sprintf("https://127.0.0.1:%d", port))
	log := filepath.Join(t.TempDir(), "manager.log")
	logFile, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"manager", "--kubeconfig", installedKubeconfig(t, env, overlayName), fmt.Sprintf("--webhook-port=%d", port),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes), "--metrics-bind-address=0", "--leader-elect=false"}, flags...)
	cmd := exec.Command(buildGatefold(t), args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+installNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logFile.Close(); testenv.CheckLogFile(t, log) })
	waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", probes), log)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// tlsSecret is a kubernetes.io/tls Secret holding a new certificate for
// host, signed by ca, and that certificate.
func tlsSecret(t *testing.T, ca *dataplane.Authority, ns, name, host string) (*corev1.Secret, *x509.Certificate) {
	t.Helper()
	secret, err := ca.TLSSecret(ns, name, host)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatalf("Secret %s/%s holds no PEM certificate", ns, name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return secret, cert
}

// secretGrant lets group/kind objects of the namespaces from read the
// Secrets of ns.
func secretGrant(ns, name, group, kind string, from ...string) *gwv1beta1.ReferenceGrant {
	g := &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gwv1beta1.ReferenceGrantSpec{To: []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret"}}},
	}
	for _, f := range from {
		g.Spec.From = append(g.Spec.From, gwv1beta1.ReferenceGrantFrom{Group: gwv1.Group(group), Kind: gwv1.Kind(kind), Namespace: gwv1.Namespace(f)})
	}
	return g
}

// landedParent is the parentRef a route controller writes for a fragment
// listener, from its status: the Gateway it landed on (on a pool, perhaps
// a sibling) and its name there.
func landedParent(l v1alpha1.GatewayListenerReference) gwv1.ParentReference {
	return gwv1.ParentReference{Namespace: ptr.To(l.Namespace), Name: l.Name, SectionName: ptr.To(l.ListenerName)}
}

// route is HTTPRoute ns/name to echo backend, attached to Gateway
// infra/shared's listeners sections, matching path prefix prefix ("" for
// every path).
func route(ns, name, prefix, backend string, sections ...gwv1.SectionName) *gwv1.HTTPRoute {
	var parents []gwv1.ParentReference
	for _, s := range sections {
		parents = append(parents, landedParent(v1alpha1.GatewayListenerReference{Namespace: "infra", Name: "shared", ListenerName: s}))
	}
	return routeTo(ns, name, prefix, backend, parents...)
}

// routeTo is route attached to parents.
func routeTo(ns, name, prefix, backend string, parents ...gwv1.ParentReference) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ParentRefs = parents
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{dataplane.BackendRef(backend)}}
	if prefix != "" {
		rule.Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(prefix)}}}
	}
	r.Spec.Rules = []gwv1.HTTPRouteRule{rule}
	return r
}

// waitListenerNames waits until the fragment's status says which Gateway
// listener each of its listeners was folded into, and returns those names.
func waitListenerNames(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, listeners ...gwv1.SectionName) map[gwv1.SectionName]gwv1.SectionName {
	t.Helper()
	names := map[gwv1.SectionName]gwv1.SectionName{}
	for l, landed := range waitLanded(t, c, lf, listeners...) {
		names[l] = landed.ListenerName
	}
	return names
}

// waitLanded waits until the fragment's status says where each of its
// listeners was folded (which Gateway, under which name), and returns that.
func waitLanded(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, listeners ...gwv1.SectionName) map[gwv1.SectionName]v1alpha1.GatewayListenerReference {
	t.Helper()
	landed := map[gwv1.SectionName]v1alpha1.GatewayListenerReference{}
	waitFor(t, servedWithin, fmt.Sprintf("fragment %s/%s to report where %v were folded", lf.Namespace, lf.Name, listeners), func() (bool, string) {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, client.ObjectKeyFromObject(lf), current)
		for _, l := range current.Status.Listeners {
			if l.Gateway != nil && slices.Contains(listeners, l.Name) {
				landed[l.Name] = *l.Gateway
			}
		}
		return len(landed) == len(listeners), fmt.Sprintf("%+v", current.Status.Listeners)
	})
	for _, l := range listeners {
		if want := v1alpha1.ListenerName(lf.Namespace, lf.Name, l); landed[l].ListenerName != want {
			t.Errorf("Fragment %s/%s listener %s was folded as %s, want %s (ListenerName)", lf.Namespace, lf.Name, l, landed[l].ListenerName, want)
		}
	}
	return landed
}

// waitProgrammed waits until Traefik's report on every listener of the
// fragment reached its status at its current generation: for each folded
// listener, exactly one entry in the status.listeners of the Gateway the
// fragment's status says it landed on (on a pool, perhaps a sibling),
// Accepted and Programmed True there at or after the Gateway generation that
// carried the listener; the fragment's listener Accepted, ResolvedRefs and
// Programmed True and not Conflicted at its generation, the same as the
// Gateway's entry says, with attachedRoutes as wanted and as the Gateway's;
// and the fragment Programmed.
func waitProgrammed(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, attached map[gwv1.SectionName]int32) {
	t.Helper()
	key := client.ObjectKeyFromObject(lf)
	// since is, by Gateway listener, the Gateway's generation when a poll
	// first found the listener in its spec: at least the generation that
	// first carried it, so Traefik's conditions observed at or after it are
	// about this listener, not an older one or none.
	since := map[v1alpha1.GatewayListenerReference]int64{}
	var summary string
	waitFor(t, servedWithin, fmt.Sprintf("Traefik's report on fragment %s to reach its status", key), func() (bool, string) {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, key, current)
		// Each Gateway named is read once a poll, after the fragment.
		gateways := map[client.ObjectKey]*gwv1.Gateway{}
		var problems, lines []string
		gen := current.Generation
		if cond := meta.FindStatusCondition(current.Status.Conditions, string(v1alpha1.FragmentConditionProgrammed)); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != gen {
			problems = append(problems, fmt.Sprintf("fragment Programmed %s", conditionString(cond)))
		}
		if len(current.Status.Listeners) != len(attached) {
			problems = append(problems, fmt.Sprintf("%d listeners in the status, want %d", len(current.Status.Listeners), len(attached)))
		}
		for _, l := range current.Status.Listeners {
			want, ok := attached[l.Name]
			if !ok || l.Gateway == nil {
				problems = append(problems, fmt.Sprintf("listener %s unexpected or not folded", l.Name))
				continue
			}
			gwName := l.Gateway.ListenerName
			if expected := v1alpha1.ListenerName(lf.Namespace, lf.Name, l.Name); gwName != expected {
				problems = append(problems, fmt.Sprintf("listener %s folded as %s, want %s", l.Name, gwName, expected))
				continue
			}
			gwKey := client.ObjectKey{Namespace: string(l.Gateway.Namespace), Name: string(l.Gateway.Name)}
			gw := gateways[gwKey]
			if gw == nil {
				gw = &gwv1.Gateway{}
				get(t, c, gwKey, gw)
				gateways[gwKey] = gw
			}
			if _, seen := since[*l.Gateway]; !seen && slices.ContainsFunc(gw.Spec.Listeners, func(gl gwv1.Listener) bool { return gl.Name == gwName }) {
				since[*l.Gateway] = gw.Generation
			}
			minGen, inSpec := since[*l.Gateway]
			if !inSpec {
				problems = append(problems, fmt.Sprintf("listener %s: %s not in the spec of Gateway %s (generation %d)", l.Name, gwName, gwKey, gw.Generation))
				continue
			}
			// The report is Traefik's: first, what the Gateway's status says
			// of this listener, as it is.
			var entries []gwv1.ListenerStatus
			for _, gl := range gw.Status.Listeners {
				if gl.Name == gwName {
					entries = append(entries, gl)
				}
			}
			if len(entries) != 1 {
				problems = append(problems, fmt.Sprintf("listener %s: %d entries named %s in the status.listeners of Gateway %s, want 1", l.Name, len(entries), gwName, gwKey))
				continue
			}
			theirs := entries[0]
			reported := true
			for _, typ := range []gwv1.ListenerConditionType{gwv1.ListenerConditionAccepted, gwv1.ListenerConditionProgrammed} {
				cond := meta.FindStatusCondition(theirs.Conditions, string(typ))
				if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration < minGen {
					problems = append(problems, fmt.Sprintf("Gateway %s's status of %s: %s %s, want True at generation %d or later", gwKey, gwName, typ, conditionString(cond), minGen))
					reported = false
				}
			}
			if !reported {
				continue
			}
			// Then the fragment's, at its generation, and the same.
			for typ, status := range map[gwv1.ListenerConditionType]metav1.ConditionStatus{
				gwv1.ListenerConditionAccepted:     metav1.ConditionTrue,
				gwv1.ListenerConditionResolvedRefs: metav1.ConditionTrue,
				gwv1.ListenerConditionProgrammed:   metav1.ConditionTrue,
				gwv1.ListenerConditionConflicted:   metav1.ConditionFalse,
			} {
				cond := meta.FindStatusCondition(l.Conditions, string(typ))
				if cond == nil || cond.Status != status || cond.ObservedGeneration != gen {
					problems = append(problems, fmt.Sprintf("listener %s %s %s, want %s at generation %d", l.Name, typ, conditionString(cond), status, gen))
					continue
				}
				gc := meta.FindStatusCondition(theirs.Conditions, string(typ))
				if gc == nil || gc.ObservedGeneration < minGen {
					continue // Traefik does not report it on this listener: gatefold's own.
				}
				if gc.Status != cond.Status || gc.Reason != cond.Reason || gc.Message != cond.Message {
					problems = append(problems, fmt.Sprintf("listener %s %s %s differs from Gateway %s's status of %s: %s", l.Name, typ, conditionString(cond), gwKey, gwName, conditionString(gc)))
				}
			}
			if l.AttachedRoutes != want || theirs.AttachedRoutes != want {
				problems = append(problems, fmt.Sprintf("listener %s attachedRoutes %d, Gateway %s's status of %s %d, want %d", l.Name, l.AttachedRoutes, gwKey, gwName, theirs.AttachedRoutes, want))
			}
			programmed := meta.FindStatusCondition(theirs.Conditions, string(gwv1.ListenerConditionProgrammed))
			lines = append(lines, fmt.Sprintf("%s as %s of Gateway %s (in its spec at generation %d): Programmed %s, attachedRoutes %d", l.Name, gwName, gwKey, minGen, conditionString(programmed), l.AttachedRoutes))
		}
		summary = fmt.Sprintf("generation %d; %s", gen, strings.Join(lines, "; "))
		return len(problems) == 0, strings.Join(problems, "; ")
	})
	t.Logf("Fragment %s: %s", key, summary)
}

// waitListenerSetProgrammed waits until Traefik's report reached the
// ListenerSet's status.
func waitListenerSetProgrammed(t *testing.T, c client.Client, ls *gwv1.ListenerSet) {
	t.Helper()
	key := client.ObjectKeyFromObject(ls)
	waitFor(t, servedWithin, fmt.Sprintf("Traefik's report on ListenerSet %s to reach its status", key), func() (bool, string) {
		current := &gwv1.ListenerSet{}
		get(t, c, key, current)
		cond := meta.FindStatusCondition(current.Status.Conditions, string(gwv1.ListenerSetConditionProgrammed))
		ok := cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == current.Generation &&
			len(current.Status.Listeners) == 1 && current.Status.Listeners[0].AttachedRoutes == 1
		return ok, fmt.Sprintf("Programmed %s, listeners %+v", conditionString(cond), current.Status.Listeners)
	})
	t.Logf("ListenerSet %s: Programmed, its listener with 1 attached route", key)
}

// waitConflicted waits until the merger reports each listener of the
// fragment conflicted with the reason given, and the fragment not accepted.
func waitConflicted(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, reasons map[gwv1.SectionName]string) {
	t.Helper()
	key := client.ObjectKeyFromObject(lf)
	waitFor(t, servedWithin, fmt.Sprintf("fragment %s to be reported conflicted", key), func() (bool, string) {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, key, current)
		ok := meta.IsStatusConditionFalse(current.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) && len(current.Status.Listeners) == len(reasons)
		for _, l := range current.Status.Listeners {
			cond := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionConflicted))
			ok = ok && l.Gateway == nil && cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == reasons[l.Name]
		}
		return ok, fmt.Sprintf("%+v", current.Status)
	})
	gw := &gwv1.Gateway{}
	get(t, c, client.ObjectKey{Namespace: string(*lf.Spec.ParentRef.Namespace), Name: string(lf.Spec.ParentRef.Name)}, gw)
	for _, l := range gw.Spec.Listeners {
		for name := range reasons {
			if l.Name == v1alpha1.ListenerName(lf.Namespace, lf.Name, name) {
				t.Errorf("The Gateway carries %s, listener %s of conflicted fragment %s", l.Name, name, key)
			}
		}
	}
	t.Logf("Fragment %s is not accepted and not on the Gateway; its listeners are conflicted: %v", key, reasons)
}

// waitRouteRefused waits until Traefik refuses the route on each of its
// parentRefs with the reason given.
func waitRouteRefused(t *testing.T, c client.Client, r *gwv1.HTTPRoute, reason string) {
	t.Helper()
	key := client.ObjectKeyFromObject(r)
	waitFor(t, servedWithin, fmt.Sprintf("Traefik to refuse HTTPRoute %s on its %d parentRefs", key, len(r.Spec.ParentRefs)), func() (bool, string) {
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
				return false, fmt.Sprintf("%+v", current.Status.Parents)
			}
		}
		return true, ""
	})
	t.Logf("HTTPRoute %s: Traefik reports Accepted=False %s on each of its %d parentRefs", key, reason, len(r.Spec.ParentRefs))
}

func checkGatewayAddress(t *testing.T, c client.Client, gw *gwv1.Gateway) {
	t.Helper()
	current := &gwv1.Gateway{}
	get(t, c, client.ObjectKeyFromObject(gw), current)
	if len(current.Status.Addresses) != 1 || current.Status.Addresses[0].Value != "127.0.0.1" {
		t.Errorf("Gateway status addresses %+v, want 127.0.0.1 only", current.Status.Addresses)
	}
	if !meta.IsStatusConditionTrue(current.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
		t.Errorf("Gateway not programmed: %+v", current.Status.Conditions)
	}
}

func conditionString(cond *metav1.Condition) string {
	if cond == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s (generation %d: %q)", cond.Status, cond.Reason, cond.ObservedGeneration, cond.Message)
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// waitFor polls check until it is true, or fails the test after timeout
// with what it waited for and check's last word.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		var ok bool
		if ok, last = check(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waited %s for %s; last: %s", timeout, what, last)
		}
	}
}

// newProber sends requests to dp's entryPoints.
func newProber(t *testing.T, dp *dataplane.DataPlane) *prober {
	return &prober{t: t, dp: dp, httpPort: dp.HTTPPort, httpsPort: dp.HTTPSPort}
}

// prober sends requests to Traefik's entryPoints as a client would, by
// hostname: the Host header for HTTP, SNI and the Host header for HTTPS.
type prober struct {
	t                   *testing.T
	dp                  *dataplane.DataPlane
	httpPort, httpsPort int
}

// answer is what one request got.
type answer struct {
	status int
	body   string
	cert   *x509.Certificate // the leaf Traefik served over HTTPS, in a completed handshake
	err    error
}

func (a answer) String() string {
	var s string
	if a.err != nil {
		s = "error: " + a.err.Error()
	} else {
		s = fmt.Sprintf("%d %q", a.status, strings.TrimSpace(a.body))
	}
	if a.cert != nil {
		s += fmt.Sprintf(", certificate %s (serial %x)", describeCert(a.cert), a.cert.SerialNumber)
	}
	return s
}

func describeCert(cert *x509.Certificate) string {
	if len(cert.DNSNames) > 0 {
		return "for " + strings.Join(cert.DNSNames, ",")
	}
	return "CN=" + cert.Subject.CommonName
}

// from says whether the answer came from backend (through Traefik) with
// cert, when cert is set.
func (a answer) from(backend string, cert *x509.Certificate) bool {
	return a.err == nil && a.status == http.StatusOK && strings.HasPrefix(a.body, "backend="+backend+" ") &&
		(cert == nil || (a.cert != nil && a.cert.Equal(cert)))
}

// notFound says whether Traefik answered 404 itself, not a backend.
func (a answer) notFound() bool {
	return a.err == nil && a.status == http.StatusNotFound && !strings.HasPrefix(a.body, "backend=")
}

// certFor says whether the answer's handshake presented a certificate
// valid for host.
func (a answer) certFor(host string) bool {
	return a.cert != nil && a.cert.VerifyHostname(host) == nil
}

// refused says whether nothing took the connection.
func (a answer) refused() bool {
	return errors.Is(a.err, syscall.ECONNREFUSED)
}

// plainHTTP says whether the TLS handshake failed because the port answered
// in plain HTTP.
func (a answer) plainHTTP() bool {
	var rh tls.RecordHeaderError
	return a.cert == nil && errors.As(a.err, &rh)
}

func (p *prober) get(scheme, host, path string) answer {
	port := p.httpPort
	if scheme == "HTTPS" {
		port = p.httpsPort
	}
	return p.getAt(port, scheme, host, path)
}

// getAt sends the request to port, whatever entryPoint that is.
func (p *prober) getAt(port int, scheme, host, path string) answer {
	var a answer
	var mu sync.Mutex
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	transport := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	url := fmt.Sprintf("http://%s%s", addr, path)
	if scheme == "HTTPS" {
		url = "https://" + host + path
		transport.DialTLSContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The test compares the served certificate itself.
			conn := tls.Client(raw, &tls.Config{ServerName: host, InsecureSkipVerify: true})
			if err := conn.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			if cs := conn.ConnectionState(); len(cs.PeerCertificates) > 0 {
				mu.Lock()
				a.cert = cs.PeerCertificates[0]
				mu.Unlock()
			}
			return conn, nil
		}
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Host = host
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a.status, a.body, a.err = resp.StatusCode, string(body), err
	return a
}

func (p *prober) describeAt(port int, scheme, host, path string) string {
	if scheme == "HTTPS" {
		return fmt.Sprintf("HTTPS %s%s (SNI %s) to 127.0.0.1:%d", host, path, host, port)
	}
	return fmt.Sprintf("HTTP %s%s (Host %s) to 127.0.0.1:%d", host, path, host, port)
}

func (p *prober) describe(scheme, host, path string) string {
	if scheme == "HTTPS" {
		return p.describeAt(p.httpsPort, scheme, host, path)
	}
	return p.describeAt(p.httpPort, scheme, host, path)
}

// failRefused fails the test at once on a refused connection: an entryPoint
// is down, which no check of what Traefik serves may take for an answer.
func (p *prober) failRefused(what string, a answer) {
	p.t.Helper()
	state := "Traefik is running"
	if err := p.dp.Running(); err != nil {
		state = err.Error()
	}
	log := p.dp.Log()
	var serverErrors []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "Error while running HTTP server") {
			serverErrors = append(serverErrors, line)
		}
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	lines = lines[max(0, len(lines)-30):]
	p.t.Fatalf("%s → %s: the entryPoint refuses connections (%s). Traefik logged %d \"Error while running HTTP server\" lines:\n%s\nIts log ends:\n%s",
		what, a, state, len(serverErrors), strings.Join(serverErrors, "\n"), strings.Join(lines, "\n"))
}

// poll requests until ok accepts an answer, logging each answer that
// differs from the one before, and fails the test after servedWithin, or at
// once on a refused connection when failOnRefused is set.
func (p *prober) poll(scheme, host, path, want string, failOnRefused bool, ok func(answer) bool) {
	p.t.Helper()
	start := time.Now()
	var last string
	for {
		a := p.get(scheme, host, path)
		if s := a.String(); s != last || ok(a) {
			p.t.Logf("%s → %s [%.1fs]", p.describe(scheme, host, path), s, time.Since(start).Seconds())
			last = s
		}
		if ok(a) {
			return
		}
		if failOnRefused && a.refused() {
			p.failRefused(p.describe(scheme, host, path), a)
		}
		if time.Since(start) > servedWithin {
			p.t.Fatalf("%s: no answer %s within %s", p.describe(scheme, host, path), want, servedWithin)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServed waits until the request is answered by backend, over HTTPS
// with cert.
func (p *prober) waitServed(scheme, host, path, backend string, cert *x509.Certificate) {
	p.t.Helper()
	want := "from backend " + backend
	if cert != nil {
		want += " with the certificate " + describeCert(cert) + " of its Secret"
	}
	p.poll(scheme, host, path, want, false, func(a answer) bool { return a.from(backend, cert) })
}

// waitNotServed waits until Traefik answers that it does not serve the
// request: over HTTP a 404 of its own; over HTTPS a completed handshake with
// a certificate not for host (Traefik's default one) and, if the request
// got an answer, a 404. A refused connection fails the test at once: the
// entryPoint is down, which says nothing of what Traefik serves.
func (p *prober) waitNotServed(scheme, host, path string) {
	p.t.Helper()
	want := "404 from Traefik"
	if scheme == "HTTPS" {
		want = "of a handshake with a certificate not for " + host + ", then 404"
	}
	p.poll(scheme, host, path, want, true, func(a answer) bool {
		if scheme == "HTTPS" {
			return a.cert != nil && !a.certFor(host) && (a.err != nil || a.notFound())
		}
		return a.notFound()
	})
}

// noCertificateFor checks for two seconds that TLS handshakes with SNI host
// on port never present a certificate for host, and that the port answers:
// with a completed handshake (then 404, if the request got an answer), or
// in plain HTTP.
func (p *prober) noCertificateFor(port int, host, path string) {
	p.t.Helper()
	what := p.describeAt(port, "HTTPS", host, path)
	var a answer
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		a = p.getAt(port, "HTTPS", host, path)
		switch {
		case a.refused():
			p.failRefused(what, a)
		case a.certFor(host):
			p.t.Fatalf("%s → %s: the handshake presented a certificate for %s", what, a, host)
		case a.cert != nil && (a.err != nil || a.notFound()), a.plainHTTP():
		default:
			p.t.Fatalf("%s → %s, want a handshake with another certificate, then 404, or a plain HTTP answer", what, a)
		}
	}
	p.t.Logf("%s → %s [steady for 2s: no certificate for %s]", what, a, host)
}

// stillServed checks that requests keep getting the answer they should
// for two seconds: from backend (with cert), or 404 when backend is "".
func (p *prober) stillServed(scheme, host, path, backend string, cert *x509.Certificate) {
	p.t.Helper()
	ok := func(a answer) bool { return a.from(backend, cert) }
	if backend == "" {
		ok = func(a answer) bool { return a.err == nil && a.status == http.StatusNotFound }
	}
	var a answer
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if a = p.get(scheme, host, path); !ok(a) {
			p.t.Fatalf("%s → %s, want it answered by %q", p.describe(scheme, host, path), a, backend)
		}
	}
	p.t.Logf("%s → %s [steady for 2s]", p.describe(scheme, host, path), a)
}
