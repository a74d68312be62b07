package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/rules"
)

// These tests drive the validators on the claim tests' fake API server.

func selectorGateway(listeners ...gwv1.Listener) *gwv1.Gateway {
	gw := gateway("infra", "shared", gwv1.NamespacesFromSelector, listeners...)
	gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "yes"}}
	return gw
}

var tenant = map[string]string{"tenant": "yes"}

// deleting is lf with a deletionTimestamp, held back by a finalizer.
func deleting(lf *v1alpha1.ListenerFragment) *v1alpha1.ListenerFragment {
	lf.Finalizers = []string{"example.com/hold"}
	lf.DeletionTimestamp = ptr.To(metav1.Unix(5, 0))
	return lf
}

func TestAdmissionChecksStoredFragmentsThatHoldNoClaim(t *testing.T) {
	t.Run("Gateway", func(t *testing.T) { checksStoredFragmentsThatHoldNoClaim(t, selectorGateway()) })
	pool := selectorGateway()
	pool.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
	t.Run("pool's head", func(t *testing.T) { checksStoredFragmentsThatHoldNoClaim(t, pool) })
}

// checksStoredFragmentsThatHoldNoClaim is
// TestAdmissionChecksStoredFragmentsThatHoldNoClaim on Gateway gw: a pool's
// head reads only what a request can meet (rules.RelatedSources).
func checksStoredFragmentsThatHoldNoClaim(t *testing.T, gw *gwv1.Gateway) {
	host := func(h string) gwv1.ListenerEntry { return entry("https", 443, gwv1.HTTPSProtocolType, h) }
	// Stored while the Gateway did not exist, while their namespace had
	// opted out, or before gatefold was installed: none holds a claim.
	s := newStore(t,
		namespace("infra", nil), namespace(claimsNS, nil),
		namespace("shop", tenant), namespace("blog", tenant), namespace("outside", nil),
		namespace("quiet", map[string]string{"tenant": "yes", AdmissionLabel: AdmissionDisabled}),
		gw,
		onShared("blog", "a-first", 1, host("first.example.com")),
		onShared("quiet", "repair", 1, host("quiet.example.com")),
		onShared("outside", "not-admitted", 1, host("outside.example.com")),
		deleting(onShared("blog", "leaving", 1, host("leaving.example.com"))),
		onShared("shop", "app", 1, host("app.example.com")),
	)
	denied := `is already taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace`
	tests := map[string]struct {
		lf      *v1alpha1.ListenerFragment
		update  bool
		wantErr string
	}{
		"a create duplicating a fragment stored before its Gateway": {lf: onShared("shop", "c-third", 3, host("first.example.com")), wantErr: `spec.listeners[0].hostname: Duplicate value: "first.example.com": Hostname first.example.com on port 443 (HTTPS) ` + denied},
		"a create duplicating a fragment of an opted-out namespace": {lf: onShared("shop", "copy", 3, host("quiet.example.com")), wantErr: denied},
		"an update taking a stored fragment's tuple":                {lf: onShared("shop", "app", 1, host("app.example.com"), entry("more", 443, gwv1.HTTPSProtocolType, "first.example.com")), update: true, wantErr: `spec.listeners[1].hostname: Duplicate value: "first.example.com"`},
		"a fragment the Gateway does not admit takes nothing":       {lf: onShared("shop", "outside", 3, host("outside.example.com"))},
		"a fragment being deleted takes nothing":                    {lf: onShared("shop", "next", 3, host("leaving.example.com"))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.update {
				_, err = s.validator().ValidateUpdate(context.Background(), onShared("shop", "app", 1, host("app.example.com")), tc.lf)
			} else {
				_, err = s.validator().ValidateCreate(context.Background(), tc.lf)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Denied: %v", err)
				}
				return
			}
			wantErr(t, err, tc.wantErr)
			if strings.Contains(err.Error(), "a-first") || strings.Contains(err.Error(), "blog") || strings.Contains(err.Error(), "quiet/") {
				t.Errorf("The denial names another tenant's fragment: %v", err)
			}
		})
	}
}

// setLabels relabels namespace ns on the fake API server.
func (s *store) setLabels(ns string, labels map[string]string) {
	s.T.Helper()
	n := &corev1.Namespace{}
	if err := s.C.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
		s.T.Fatal(err)
	}
	n.Labels = labels
	if err := s.C.Update(context.Background(), n); err != nil {
		s.T.Fatal(err)
	}
}

func TestClaimOfAHolderUnwantedForAMomentIsKept(t *testing.T) {
	s := newStore(t, namespace("infra", nil), namespace(claimsNS, nil), namespace("shop", tenant), namespace("blog", tenant), selectorGateway())
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	claim := claimName(appHTTPS)
	// An old claim: the collector has seen it wanted for a long time.
	s.Collect()
	s.Clock = s.Clock.Add(10 * grace)
	s.Collect()

	// shop is relabelled and, a moment later, labelled again.
	s.setLabels("shop", nil)
	s.Clock = s.Clock.Add(grace / 3)
	if done := s.Collect(); done.Released != 0 {
		t.Fatalf("The collector released a claim unwanted for %v", grace/3)
	}
	_, err := s.create(onShared("blog", "taker", 2, appHTTPS))
	wantErr(t, err, "is still taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace, which no longer wants it: retry in about 30s")
	s.Clock = s.Clock.Add(grace / 3)
	s.Collect()
	s.setLabels("shop", tenant)
	s.Clock = s.Clock.Add(grace / 3)
	s.Collect()

	// Wanted again: a second moment starts the grace afresh.
	s.setLabels("shop", nil)
	for range 3 {
		s.Clock = s.Clock.Add(grace / 3)
		if done := s.Collect(); done.Released != 0 {
			t.Fatalf("The collector released a claim unwanted for less than the grace since it was last wanted")
		}
	}
	if got := s.HolderOf(claim); got != "shop/app/app-uid" {
		t.Fatalf("Holder = %q, want shop/app", got)
	}
	s.Clock = s.Clock.Add(grace / 3)
	if done := s.Collect(); done.Released != 1 || s.Claim(claim) != nil {
		t.Errorf("After the grace unwanted the collector released %d, want the claim", done.Released)
	}
}

func TestUpdateChecksOnlyTheTuplesTheStoredFragmentLacked(t *testing.T) {
	shadowed := entry("a", 443, gwv1.HTTPSProtocolType, "own.example.com")
	b := entry("b", 443, gwv1.HTTPSProtocolType, "b.example.com")
	b.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}
	// The Gateway's owner added main after shop/app took own.example.com;
	// shop/old took blog.example.com while its namespace had opted out.
	gw := gateway("infra", "shared", gwv1.NamespacesFromAll,
		gwListener("main", 443, gwv1.HTTPSProtocolType, "own.example.com"), gwListener("other", 443, gwv1.HTTPSProtocolType, "other.example.com"))
	stored := onShared("shop", "app", 1, shadowed, b)
	old := onShared("shop", "old", 1, blogHTTPS, entry("c", 443, gwv1.HTTPSProtocolType, "c.example.com"))
	blog := onShared("blog", "blog", 2, blogHTTPS)
	s := newStore(t, tenants(gw, stored, old, blog)...)
	if err := s.C.Create(context.Background(), s.LeaseFor(blog, 0)); err != nil {
		t.Fatal(err)
	}

	rotated := stored.DeepCopy()
	rotated.Spec.Listeners[1].TLS.CertificateRefs[0].Name = "cert-2"
	renamed := stored.DeepCopy()
	renamed.Spec.Listeners[0].Name = "renamed"
	tests := map[string]struct {
		old, lf *v1alpha1.ListenerFragment
		wantErr string
	}{
		"another listener's Secret rotated":                {old: stored, lf: rotated},
		"the shadowed listener renamed, its tuple kept":    {old: stored, lf: renamed},
		"a tuple another fragment's claim holds, kept":     {old: old, lf: onShared("shop", "old", 1, blogHTTPS, entry("c", 443, gwv1.HTTPSProtocolType, "c2.example.com"))},
		"a tuple of the Gateway's own listener, new":       {old: stored, lf: onShared("shop", "app", 1, shadowed, b, entry("d", 443, gwv1.HTTPSProtocolType, "other.example.com")), wantErr: `spec.listeners[2].hostname: Duplicate value: "other.example.com": Hostname other.example.com on port 443 (HTTPS) is already taken on Gateway infra/shared by a listener of the Gateway itself (HTTPS)`},
		"a kept tuple still may not clash with a new one":  {old: stored, lf: onShared("shop", "app", 1, entry("tls", 443, gwv1.TLSProtocolType, "b.example.com"), b), wantErr: `spec.listeners[1].hostname: Duplicate value: "b.example.com"`},
		"a tuple moved to another listener is still kept":  {old: stored, lf: onShared("shop", "app", 1, b, entry("again", 443, gwv1.HTTPSProtocolType, "own.example.com"))},
		"a tuple another fragment's claim holds, new here": {old: stored, lf: onShared("shop", "app", 1, shadowed, b, entry("e", 443, gwv1.HTTPSProtocolType, "blog.example.com")), wantErr: `spec.listeners[2].hostname: Duplicate value: "blog.example.com"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.validator().ValidateUpdate(context.Background(), tc.old, tc.lf)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Denied: %v", err)
				}
				return
			}
			wantErr(t, err, tc.wantErr)
		})
	}
	if got := s.HolderOf(claimName(blogHTTPS)); got != "blog/blog/blog-uid" {
		t.Errorf("The claim of blog.example.com moved to %q", got)
	}
	if got := s.HolderOf(claimName(shadowed)); got != "" {
		t.Errorf("An update claimed the tuple of the Gateway's own listener for %q", got)
	}
}

func TestUpdateLeavesAKeptTupleToTheOlderStoredFragment(t *testing.T) {
	older := entry("https", 443, gwv1.HTTPSProtocolType, "older.example.com")
	// Neither holds a claim yet; shop/newer was stored while its namespace
	// had opted out.
	newer := onShared("shop", "newer", 3, older, entry("c", 443, gwv1.HTTPSProtocolType, "c.example.com"))
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll), foldedOnShared("blog", "older", 1, older), newer)...)
	changed := newer.DeepCopy()
	changed.Spec.Listeners[1].Hostname = ptr.To(gwv1.Hostname("c2.example.com"))
	if _, err := s.validator().ValidateUpdate(context.Background(), newer, changed); err != nil {
		t.Fatalf("The update of the newer fragment's other listener was denied: %v", err)
	}
	if got := s.HolderOf(claimName(older)); got != "" {
		t.Errorf("The update claimed older.example.com, which the older fragment comes first for, for %q", got)
	}
	if got := s.HolderOf(claimName(changed.Spec.Listeners[1])); got != "shop/newer/newer-uid" {
		t.Errorf("The changed listener's claim is held by %q", got)
	}
	s.Collect()
	if got := s.HolderOf(claimName(older)); got != "blog/older/older-uid" {
		t.Errorf("The backfill gave older.example.com to %q, want the older fragment", got)
	}
}

func TestCreateOfAStoredNameTouchesNoClaim(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("blog", "blog", 1, blogHTTPS))
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	s.Took()
	for name, lf := range map[string]*v1alpha1.ListenerFragment{
		"a new tuple":                  onShared("shop", "app", 2, entry("new", 443, gwv1.HTTPSProtocolType, "new.example.com")),
		"a tuple another fragment has": onShared("shop", "app", 2, blogHTTPS),
	} {
		lf.UID = "never-stored"
		if _, err := s.validator().ValidateCreate(context.Background(), lf); !apierrors.IsAlreadyExists(err) {
			t.Errorf("A create of a stored name with %s answered %v, want AlreadyExists", name, err)
		}
		if got := s.Took(); !cmp.Equal(got, []string{"live get app"}) {
			t.Errorf("A create of a stored name with %s made %q, want one live read of the fragment and no claim read or write", name, got)
		}
	}
	if s.Claim(claims.Claim{Gateway: shared, Tuple: entryOf(entry("new", 443, gwv1.HTTPSProtocolType, "new.example.com")).Tuple()}.Name()) != nil {
		t.Error("A create of a stored name claimed a tuple for an object that is never stored")
	}
}

func TestInternalErrorsNameNoOtherTenant(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("blog", "secret-holder", 1, blogHTTPS))
	s.Collect()
	s.Clock = s.Clock.Add(grace)
	s.FailGet = func(key client.ObjectKey, obj client.Object) error {
		if _, ok := obj.(*v1alpha1.ListenerFragment); ok && key.Name == "secret-holder" {
			return errors.New(`listenerfragments "secret-holder" in namespace "blog": the cache timed out`)
		}
		return nil
	}
	var logged strings.Builder
	ctx := logf.IntoContext(context.Background(), funcr.New(func(prefix, args string) { fmt.Fprintln(&logged, prefix, args) }, funcr.Options{}))
	_, err := s.validator().ValidateCreate(ctx, onShared("shop", "app", 2, blogHTTPS))
	if !apierrors.IsInternalError(err) {
		t.Fatalf("Got %v, want an internal error", err)
	}
	if msg := err.Error(); strings.Contains(msg, "secret-holder") || strings.Contains(msg, `"blog"`) || strings.Contains(msg, "blog/") {
		t.Errorf("The internal error names another tenant's fragment: %v", err)
	}
	if !strings.Contains(err.Error(), claimName(blogHTTPS)) {
		t.Errorf("The internal error does not name the claim %s: %v", claimName(blogHTTPS), err)
	}
	for _, want := range []string{`"fragment"={"name"="secret-holder" "namespace"="blog"}`, "the cache timed out", "Refusing a ListenerFragment admission request", `"fragment"={"name"="app" "namespace"="shop"}`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("The log lacks %q:\n%s", want, logged.String())
		}
	}
}

func TestGatewayWarningsCountOnlyFragmentsTheFoldPlaces(t *testing.T) {
	host := func(h string) gwv1.ListenerEntry { return entry("https", 443, gwv1.HTTPSProtocolType, h) }
	gw := selectorGateway(gwListener("main", 443, gwv1.HTTPSProtocolType, "app.example.com"))
	s := newStore(t,
		namespace("infra", nil), namespace("shop", tenant), namespace("outside", nil), gw,
		onShared("shop", "app", 1, host("app.example.com")),
		onShared("outside", "app", 1, host("app.example.com")),
		deleting(onShared("shop", "leaving", 1, host("app.example.com"))),
	)
	got, err := (&gatewayValidator{cache: s.C}).ValidateUpdate(context.Background(), gw, gw)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`spec.listeners[0] ("main", hostname app.example.com on port 443 (HTTPS)) conflicts with 1 ListenerFragment listener(s): the Gateway's own listener wins and those are reported Conflicted`}
	if !cmp.Equal([]string(got), want) {
		t.Errorf("Warnings = %q, want %q", got, want)
	}
}

// informer is an informer that has synced or not.
type informer struct{ synced bool }

func (i *informer) HasSynced() bool { return i.synced }

func TestInformersSyncedIsNotReadyUntilEveryInformerSynced(t *testing.T) {
	gateways, namespaces := &informer{synced: true}, &informer{}
	check := informersSynced(map[string]syncer{"Gateways": gateways, "namespaces": namespaces})
	req, _ := http.NewRequest(http.MethodGet, "/readyz", nil)
	if err := check(req); err == nil || err.Error() != "the informers of namespaces have not synced" {
		t.Errorf("Before namespaces synced: %v", err)
	}
	namespaces.synced = true
	if err := check(req); err != nil {
		t.Errorf("Once all synced: %v", err)
	}
}

// TestPoolHeadChecksEveryStoredFragment: a pool's head holds a tuple once
// for all its Gateways, so a stored fragment past the head's own 64
// listeners (on a sibling) still denies its tuple; on a Gateway that heads
// no pool, such a fragment is TooManyListeners and blocks nothing.
func TestPoolHeadChecksEveryStoredFragment(t *testing.T) {
	host := func(i int) gwv1.ListenerEntry {
		return entry("https", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("h%02d.example.com", i))
	}
	for name, tc := range map[string]struct {
		pool    bool
		wantErr string
	}{
		"pool head":     {pool: true, wantErr: `spec.listeners[0].hostname: Duplicate value: "h66.example.com"`},
		"unmarked head": {},
	} {
		t.Run(name, func(t *testing.T) {
			gw := selectorGateway(gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType})
			if tc.pool {
				gw.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
			}
			// Stored while their namespace had opted out: none holds a claim.
			objs := []client.Object{namespace("infra", nil), namespace(claimsNS, nil), namespace("shop", tenant),
				namespace("quiet", map[string]string{"tenant": "yes", AdmissionLabel: AdmissionDisabled}), gw}
			for i := range 70 {
				objs = append(objs, onShared("quiet", fmt.Sprintf("r%02d", i), int64(i), host(i)))
			}
			s := newStore(t, objs...)
			_, err := s.validator().ValidateCreate(context.Background(), onShared("shop", "again", 100, host(66)))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Denied: %v", err)
				}
				return
			}
			wantErr(t, err, tc.wantErr)
		})
	}
}

// TestNamespaceNotAdmittedLearnsOnlyThat: a namespace the Gateway does not
// admit is told so and to ask the Gateway's owner; not the Gateway's rule,
// its listeners, the tuples taken on it, nor the head of its pool.
func TestNamespaceNotAdmittedLearnsOnlyThat(t *testing.T) {
	gw := selectorGateway(gwListener("main", 443, gwv1.HTTPSProtocolType, "app.example.com"))
	sibling := selectorGateway()
	sibling.Name = rules.SiblingName("shared", 2)
	sibling.Labels = map[string]string{v1alpha1.PoolLabel: rules.PoolLabelValue("shared")}
	sibling.OwnerReferences = []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: "shared", UID: "shared-uid", Controller: ptr.To(true)}}
	s := newStore(t, namespace("infra", nil), namespace(claimsNS, nil), namespace("shop", tenant), namespace("outside", map[string]string{"team": "outside"}),
		gw, sibling, onShared("shop", "app", 1, blogHTTPS))
	onSibling := onShared("outside", "b", 3, blogHTTPS)
	onSibling.Spec.ParentRef.Name = gwv1.ObjectName(sibling.Name)
	tests := map[string]struct {
		lf   *v1alpha1.ListenerFragment
		want string
	}{
		"the Gateway's own tuple and a stored fragment's": {
			lf:   onShared("outside", "a", 2, entry("own", 443, gwv1.HTTPSProtocolType, "app.example.com"), blogHTTPS),
			want: "spec.parentRef: Forbidden: Gateway infra/shared does not allow listeners from namespace outside: ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway",
		},
		"a sibling of a pool": {
			lf:   onSibling,
			want: "spec.parentRef: Forbidden: Gateway infra/shared-2 does not allow listeners from namespace outside: ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.validator().ValidateCreate(context.Background(), tc.lf)
			wantErr(t, err, tc.want)
			var status apierrors.APIStatus
			if !errors.As(err, &status) || len(status.Status().Details.Causes) != 1 {
				t.Errorf("Denial %v has more than the one cause", err)
			}
			for _, leak := range []string{"main", "selector", "tenant", "Duplicate", "taken", "pool"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("The denial to a namespace the Gateway does not admit says %q: %v", leak, err)
				}
			}
		})
	}
}
