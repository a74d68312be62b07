package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "adm-", Labels: labels}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("Creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	// The webhooks read namespaces as metadata.
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	waitCached(t, meta)
	return ns.Name
}

// optBackIn removes the admission opt-out label from namespace ns.
func optBackIn(t *testing.T, ns string) {
	t.Helper()
	n := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	delete(n.Labels, webhook.AdmissionLabel)
	if err := env.Client.Update(context.Background(), n); err != nil {
		t.Fatalf("Opting namespace %s back in to admission: %v", ns, err)
	}
}

// newGateway creates Gateway ns/shared and waits until every replica holds it.
func newGateway(t *testing.T, ns string, from gwv1.FromNamespaces, listeners ...gwv1.Listener) *gwv1.Gateway {
	t.Helper()
	gw := fixture.Gateway(ns, from, listeners...)
	if err := env.Client.Create(context.Background(), gw); err != nil {
		t.Fatalf("Creating Gateway: %v", err)
	}
	waitCached(t, gw)
	return gw
}

// waitCached waits until every replica's cache holds obj: the webhooks read
// Gateways, namespaces, ReferenceGrants and fragments from their caches.
func waitCached(t *testing.T, obj client.Object) {
	t.Helper()
	waitReplicas(t, fmt.Sprintf("hold %s", client.ObjectKeyFromObject(obj)), func(c client.Reader) bool {
		return c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)) == nil
	})
}

// waitCachedListeners waits until every replica sees n listeners on gw.
func waitCachedListeners(t *testing.T, gw *gwv1.Gateway, n int) {
	t.Helper()
	waitReplicas(t, fmt.Sprintf("show %d listeners on %s", n, client.ObjectKeyFromObject(gw)), func(c client.Reader) bool {
		got := &gwv1.Gateway{}
		return c.Get(context.Background(), client.ObjectKeyFromObject(gw), got) == nil && len(got.Spec.Listeners) == n
	})
}

// waitReplicas polls every replica's cache, in turn, until seen holds, for
// 10s at most.
func waitReplicas(t *testing.T, what string, seen func(client.Reader) bool) {
	t.Helper()
	next := 0
	testenv.Eventually(t, 10*time.Second, func() error {
		for ; next < len(caches); next++ {
			if !seen(caches[next]) {
				return fmt.Errorf("replica %d's cache does not %s", next, what)
			}
		}
		return nil
	})
}

var (
	https        = fixture.HTTPS
	gatewayHTTPS = fixture.GatewayHTTPS
	newFragment  = fixture.Fragment
)

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("Creating %s: %v", obj.GetName(), err)
	}
}

// wantDenied checks that err is an Invalid error whose message holds every want.
func wantDenied(t *testing.T, err error, want ...string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("Got %v, want an Invalid error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Error %q does not contain %q", err, w)
		}
	}
}

func TestDuplicateHostnameIsDenied(t *testing.T) {
	infra := newNamespace(t, nil)
	shop := newNamespace(t, nil)
	blog := newNamespace(t, nil)
	gw := newGateway(t, infra, gwv1.NamespacesFromAll)
	mustCreate(t, newFragment(shop, "checkout", gw, https("https", "app.example.com")))

	err := env.Client.Create(context.Background(), newFragment(shop, "checkout-v2", gw, https("web", "App.Example.com")))
	wantDenied(t, err,
		`ListenerFragment.gatefold.dev "checkout-v2" is invalid`,
		`spec.listeners[0].hostname: Duplicate value: "app.example.com"`,
		fmt.Sprintf(`Hostname app.example.com on port 443 (HTTPS) is already taken on Gateway %s/shared by listener "https" (HTTPS) of ListenerFragment checkout: choose another hostname or port`, infra))

	err = env.Client.Create(context.Background(), newFragment(blog, "home", gw, https("https", "app.example.com")))
	wantDenied(t, err, "by a listener (HTTPS) of a ListenerFragment in another namespace: choose another hostname or port")
	if strings.Contains(err.Error(), shop) || strings.Contains(err.Error(), "checkout") {
		t.Errorf("Denial to namespace %s leaks the holder in %s: %v", blog, shop, err)
	}

	mustCreate(t, newFragment(blog, "other-host", gw, https("https", "blog.example.com")))
}

func TestGatewayOwnListenerIsDenied(t *testing.T) {
	infra := newNamespace(t, nil)
	gw := newGateway(t, infra, gwv1.NamespacesFromAll, gatewayHTTPS("main", "www.example.com"))
	err := env.Client.Create(context.Background(), newFragment(infra, "www", gw, https("https", "www.example.com")))
	wantDenied(t, err, `spec.listeners[0].hostname: Duplicate value: "www.example.com"`, `by a listener of the Gateway itself (HTTPS): choose another hostname or port`)
	if strings.Contains(err.Error(), `"main"`) {
		t.Errorf("The denial names the Gateway's own listener: %v", err)
	}
}

func TestProtocolConflictAcrossFragmentsIsDenied(t *testing.T) {
	infra := newNamespace(t, nil)
	gw := newGateway(t, infra, gwv1.NamespacesFromAll)
	mustCreate(t, newFragment(infra, "db", gw, gwv1.ListenerEntry{Name: "pg", Port: 5432, Protocol: gwv1.TCPProtocolType}))
	err := env.Client.Create(context.Background(), newFragment(infra, "web", gw, gwv1.ListenerEntry{
		Name: "http", Port: 5432, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("a.example.com"))}))
	wantDenied(t, err, `spec.listeners[0].protocol: Invalid value: "HTTP": Port 5432 on Gateway `+infra+`/shared carries listener "pg" (TCP) of ListenerFragment db, which cannot share a port with HTTP: choose another port`)
	mustCreate(t, newFragment(infra, "dns", gw, gwv1.ListenerEntry{Name: "dns", Port: 5432, Protocol: gwv1.UDPProtocolType}))
}

func TestCrossNamespaceCertificateNeedsReferenceGrant(t *testing.T) {
	shop := newNamespace(t, nil)
	certs := newNamespace(t, nil)
	gw := newGateway(t, shop, gwv1.NamespacesFromSame)
	l := https("https", "pay.example.com")
	l.TLS.CertificateRefs[0].Namespace = ptr.To(gwv1.Namespace(certs))
	err := env.Client.Create(context.Background(), newFragment(shop, "pay", gw, l))
	wantDenied(t, err, fmt.Sprintf("spec.listeners[0].tls.certificateRefs[0]: Forbidden: No ReferenceGrant in namespace %s lets ListenerFragments of namespace %s use Secret cert", certs, shop))

	grant := &gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: certs, Name: "fragments"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: "gatefold.dev", Kind: "ListenerFragment", Namespace: gwv1.Namespace(shop)}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}},
		},
	}
	mustCreate(t, grant)
	waitCached(t, grant)
	mustCreate(t, newFragment(shop, "pay", gw, l))
}

func TestAllowedListenersIsEnforced(t *testing.T) {
	const askOwner = ": ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway"
	infra := newNamespace(t, nil)
	shop := newNamespace(t, map[string]string{"team": "shop"})
	blog := newNamespace(t, map[string]string{"team": "blog"})
	tests := map[string]struct {
		from      gwv1.FromNamespaces
		selector  *metav1.LabelSelector
		ns        string
		wantError string
	}{
		// The Gateway's own namespace is told the rule; another only to ask.
		"None refuses every namespace":   {from: gwv1.NamespacesFromNone, ns: infra, wantError: ": allow it in spec.allowedListeners (namespaces.from is None, the default), or choose another Gateway"},
		"Same refuses another namespace": {from: gwv1.NamespacesFromSame, ns: shop, wantError: askOwner},
		"Same admits its own namespace":  {from: gwv1.NamespacesFromSame, ns: infra},
		"Selector admits a match":        {from: gwv1.NamespacesFromSelector, selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}, ns: shop},
		"Selector refuses a non-match": {from: gwv1.NamespacesFromSelector, selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}, ns: blog,
			wantError: askOwner},
		"All admits any namespace": {from: gwv1.NamespacesFromAll, ns: blog},
	}
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			gw := &gwv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: fmt.Sprintf("gw-%d", i)},
				Spec: gwv1.GatewaySpec{GatewayClassName: "example",
					Listeners:        []gwv1.Listener{{Name: "default", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
					AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(tc.from), Selector: tc.selector}}},
			}
			mustCreate(t, gw)
			waitCached(t, gw)
			err := env.Client.Create(context.Background(), newFragment(tc.ns, fmt.Sprintf("f-%d", i), gw, https("https", fmt.Sprintf("h%d.example.com", i))))
			if tc.wantError == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				return
			}
			wantDenied(t, err, fmt.Sprintf("spec.parentRef: Forbidden: Gateway %s/%s does not allow listeners from namespace %s%s", infra, gw.Name, tc.ns, tc.wantError))
		})
	}
}

// warnings collects the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func TestMissingGatewayIsAllowedWithWarning(t *testing.T) {
	ns := newNamespace(t, nil)
	c, w := warningClient(t)
	lf := newFragment(ns, "early", &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"}}, https("https", "early.example.com"))
	if err := c.Create(context.Background(), lf); err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := fmt.Sprintf("Gateway %s/later does not exist yet: the listeners are claimed and folded once it is created", ns)
	if len(w.seen) != 1 || w.seen[0] != want {
		t.Errorf("Warnings = %q, want [%q]", w.seen, want)
	}
	if l := claimOf(t, ns, "later", https("https", "early.example.com")); l != nil {
		t.Errorf("A fragment of a missing Gateway took claim %s", l.Name)
	}
}

// TestDefaultsAreStored shows, through the API server, the defaults only
// the mutating webhook sets: the CRD schema defaults the parentRef's group
// and kind, tls.mode and allowedRoutes itself, and rejects a hostname with
// capitals or a trailing dot.
func TestDefaultsAreStored(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	noParentNamespace := newFragment(ns, "no-parent-namespace", gw, https("https", "parent.example.com"))
	noParentNamespace.Spec.ParentRef.Namespace = nil
	tests := map[string]struct {
		lf     *v1alpha1.ListenerFragment
		field  string
		stored func(*v1alpha1.ListenerFragment) string
		want   string
	}{
		"a hostname is lowercased and loses its trailing dot": {
			lf:    newFragment(ns, "mixed-case", gw, https("https", "App.Example.COM.")),
			field: "spec.listeners[0].hostname",
			stored: func(lf *v1alpha1.ListenerFragment) string {
				return string(ptr.Deref(lf.Spec.Listeners[0].Hostname, ""))
			},
			want: "app.example.com",
		},
		"parentRef.namespace is the fragment's own": {
			lf:     noParentNamespace,
			field:  "spec.parentRef.namespace",
			stored: func(lf *v1alpha1.ListenerFragment) string { return string(ptr.Deref(lf.Spec.ParentRef.Namespace, "")) },
			want:   ns,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mustCreate(t, tc.lf)
			got := &v1alpha1.ListenerFragment{}
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(tc.lf), got); err != nil {
				t.Fatal(err)
			}
			if v := tc.stored(got); v != tc.want {
				t.Errorf("Stored %s = %q, want %q", tc.field, v, tc.want)
			}
		})
	}
}

func claimCount(t *testing.T) int {
	t.Helper()
	list := &coordinationv1.LeaseList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(claimsNamespace)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestDryRunHasNoSideEffects(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	before := claimCount(t)
	if err := env.Client.Create(context.Background(), newFragment(ns, "dry", gw, https("https", "dry.example.com")), client.DryRunAll); err != nil {
		t.Fatalf("Dry-run create: %v", err)
	}
	if after := claimCount(t); after != before {
		t.Errorf("Dry-run create changed the claims from %d to %d", before, after)
	}
	mustCreate(t, newFragment(ns, "wet", gw, https("https", "dry.example.com")))
	err := env.Client.Create(context.Background(), newFragment(ns, "dry2", gw, https("https", "dry.example.com")), client.DryRunAll)
	wantDenied(t, err, `Duplicate value: "dry.example.com"`, `ListenerFragment wet`)
}

func TestFreedTupleIsReusable(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	first := newFragment(ns, "first", gw, https("https", "moving.example.com"))
	mustCreate(t, first)

	t.Run("update moves the claim", func(t *testing.T) {
		first.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("moved.example.com"))
		if err := env.Client.Update(context.Background(), first); err != nil {
			t.Fatalf("Update: %v", err)
		}
		err := env.Client.Create(context.Background(), newFragment(ns, "squatter", gw, https("https", "moved.example.com")))
		wantDenied(t, err, `Duplicate value: "moved.example.com"`)
		eventuallyCreated(t, newFragment(ns, "second", gw, https("https", "moving.example.com")))
	})
	t.Run("delete frees the claim", func(t *testing.T) {
		if err := env.Client.Delete(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		eventuallyCreated(t, newFragment(ns, "third", gw, https("https", "moved.example.com")))
	})
}

// eventuallyCreated retries a create that a released claim will allow,
// every 500ms as each is an admission request, and fails when that takes
// longer than the 60s a user is promised.
func eventuallyCreated(t *testing.T, lf *v1alpha1.ListenerFragment) {
	t.Helper()
	start := time.Now()
	err := testenv.Poll(60*time.Second, 500*time.Millisecond, func() error {
		err := env.Client.Create(context.Background(), lf.DeepCopy())
		if err != nil && !apierrors.IsInvalid(err) {
			t.Fatalf("Creating %s: %v", lf.Name, err)
		}
		if err != nil {
			return fmt.Errorf("creating %s: %w", lf.Name, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("After 60s: %v", err)
	}
	t.Logf("Created %s %v after the tuple was freed", lf.Name, time.Since(start).Round(100*time.Millisecond))
}

func TestOrphanedClaimIsTakenOver(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	// A claim whose fragment create failed after the webhook allowed it.
	forgeClaim(t, ns, gw.Name, "ghost", "never-stored", https("https", "ghost.example.com"))
	// Within the grace period the claim protects a create still in flight.
	err := env.Client.Create(context.Background(), newFragment(ns, "real", gw, https("https", "ghost.example.com")))
	wantDenied(t, err, `Duplicate value: "ghost.example.com"`)
	eventuallyCreated(t, newFragment(ns, "real", gw, https("https", "ghost.example.com")))
}

func TestTenantsCannotWriteClaims(t *testing.T) {
	ns := newNamespace(t, nil)
	// Every right in its own namespace; none elsewhere.
	mustCreate(t, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admin"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	})
	mustCreate(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	})
	tenant, err := testenv.ClientAs(env, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	// The tenant may write Leases in its own namespace: impersonation and RBAC are live.
	if err := tenant.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lfc-mine"}}); err != nil {
		t.Fatalf("Tenant cannot write its own namespace, so this test proves nothing: %v", err)
	}
	if err := tenant.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: claimsNamespace, Name: "lfc-forged"}}); !apierrors.IsForbidden(err) {
		t.Errorf("Tenant creating a claim in %s: got %v, want Forbidden", claimsNamespace, err)
	}
	if err := tenant.DeleteAllOf(context.Background(), &coordinationv1.Lease{}, client.InNamespace(claimsNamespace)); !apierrors.IsForbidden(err) {
		t.Errorf("Tenant deleting claims in %s: got %v, want Forbidden", claimsNamespace, err)
	}
}

func TestOptedOutNamespaceSkipsAdmission(t *testing.T) {
	ns := newNamespace(t, map[string]string{"gatefold.dev/admission": "disabled"})
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	mustCreate(t, newFragment(ns, "one", gw, https("https", "repair.example.com")))
	// With admission off a duplicate is stored; the merger reports it Conflicted.
	two := newFragment(ns, "two", gw, https("https", "repair.example.com"))
	two.Spec.ParentRef.Namespace = nil
	mustCreate(t, two)
	got := &v1alpha1.ListenerFragment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "two"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ParentRef.Namespace != nil {
		t.Errorf("The mutating webhook defaulted a fragment in an opted-out namespace: parentRef.namespace = %v", *got.Spec.ParentRef.Namespace)
	}
}

// A listener stored past admission (an opted-out namespace's) that the fold
// reports Conflicted is on no Gateway: it must not block an older
// fragment's update on its port.
func TestUnfoldedListenerOfAnOptedOutFragmentBlocksNothing(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	optOut := newNamespace(t, map[string]string{"gatefold.dev/admission": "disabled"})
	gw := newGateway(t, infra, gwv1.NamespacesFromAll) // its own listener: HTTP on 8080
	checkout := newFragment(shop, "checkout", gw, https("https", "checkout.example.com"))
	mustCreate(t, checkout)
	// HTTPS on the Gateway's HTTP port: ProtocolConflict, never folded.
	squatter := newFragment(optOut, "squatter", gw, gwv1.ListenerEntry{Name: "https", Port: 8080, Protocol: gwv1.HTTPSProtocolType,
		Hostname: ptr.To(gwv1.Hostname("squat.example.com")), TLS: https("x", "squat.example.com").TLS})
	mustCreate(t, squatter)
	waitCached(t, squatter)

	stored := &v1alpha1.ListenerFragment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(checkout), stored); err != nil {
		t.Fatal(err)
	}
	stored.Spec.Listeners = append(stored.Spec.Listeners, gwv1.ListenerEntry{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("checkout.example.com"))})
	if err := env.Client.Update(context.Background(), stored); err != nil {
		t.Errorf("Adding an HTTP listener on the Gateway's HTTP port was denied because of a listener the fold never places: %v", err)
	}
}
