package webhook

import (
	"context"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/manager"
)

// These tests drive the claim store and the validator on a fake client, so
// that they can move this replica's clock and count every request; the
// admission tests show the same on the real API server.

const (
	claimsNS = "gatefold-system"
	grace    = 30 * time.Second
)

// store is a claim store on a fake API server whose informer cache is the
// fake itself, with a real claim informer watching the fake, a clock the
// test moves and a log of the claim requests.
type store struct {
	t      *testing.T
	c      client.WithWatch
	claims *ClaimStore
	watch  *fakeClaims
	clock  time.Time

	mu sync.Mutex
	// calls are the requests on claims: "list", "get", "create NAME",
	// "update NAME", "delete NAME". The claim informer's are not counted.
	calls []string
	// beforeDelete, when set, runs before a claim is deleted.
	beforeDelete func(c client.WithWatch, name string)
	// beforeCreate, when set, runs before a claim is created, and
	// afterCreate after it was.
	beforeCreate, afterCreate func(c client.WithWatch, name string)
	// failGet, when set, may fail a read of any object.
	failGet func(key client.ObjectKey, obj client.Object) error
}

type indexInto struct{ b *fake.ClientBuilder }

func (i indexInto) IndexField(_ context.Context, obj client.Object, field string, f client.IndexerFunc) error {
	i.b.WithIndex(obj, field, f)
	return nil
}

func newStore(t *testing.T, objs ...client.Object) *store {
	t.Helper()
	s := &store{t: t, clock: time.Unix(1_000_000, 0)}
	isClaim := func(o any) bool {
		_, lease := o.(*coordinationv1.Lease)
		_, leases := o.(*coordinationv1.LeaseList)
		return lease || leases
	}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithGlobalResourceVersionCounter()
	if err := manager.IndexFragmentParents(context.Background(), indexInto{b}); err != nil {
		t.Fatal(err)
	}
	base := b.Build()
	s.c = interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if isClaim(list) {
				s.record("list")
			}
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if isClaim(obj) {
				s.record("get")
			}
			if s.failGet != nil {
				if err := s.failGet(key, obj); err != nil {
					return err
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !isClaim(obj) {
				return c.Create(ctx, obj, opts...)
			}
			s.record("create " + obj.GetName())
			if s.beforeCreate != nil {
				s.beforeCreate(c, obj.GetName())
			}
			err := c.Create(ctx, obj, opts...)
			if err == nil && s.afterCreate != nil {
				s.afterCreate(c, obj.GetName())
			}
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if isClaim(obj) {
				s.record("update " + obj.GetName())
			}
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if isClaim(obj) {
				s.record("delete " + obj.GetName())
				del := &client.DeleteOptions{}
				del.ApplyOptions(opts)
				if del.Preconditions == nil || ptr.Deref(del.Preconditions.ResourceVersion, "") == "" {
					t.Errorf("Claim %s deleted without a resourceVersion precondition", obj.GetName())
				}
				if s.beforeDelete != nil {
					s.beforeDelete(c, obj.GetName())
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	live := interceptor.NewClient(s.c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, fragment := obj.(*v1alpha1.ListenerFragment); fragment {
				s.record("live get " + key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	s.watch = newFakeClaims(base)
	s.claims = &ClaimStore{Client: s.c, Claims: s.watch.start(t), Reader: live, Cache: s.c, Namespace: claimsNS, Grace: grace, now: func() time.Time { return s.clock }}
	return s
}

func (s *store) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

// took returns the requests since the last call, and forgets them.
func (s *store) took() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

func writes(calls []string) []string {
	var out []string
	for _, c := range calls {
		if c != "list" && c != "get" && !strings.HasPrefix(c, "live get ") {
			out = append(out, c)
		}
	}
	return out
}

// validator returns the validator, once the claim informer shows every
// claim the test wrote.
func (s *store) validator() *fragmentValidator {
	s.watch.settle(s.t)
	return &fragmentValidator{cache: s.c, claims: s.claims}
}

// create admits lf as a create and, when admitted, stores it as the API
// server would, with a UID.
func (s *store) create(lf *v1alpha1.ListenerFragment) (string, error) {
	s.t.Helper()
	if lf.UID == "" {
		lf.UID = types.UID(lf.Name + "-uid")
	}
	warnings, err := s.validator().ValidateCreate(context.Background(), lf)
	if err == nil {
		if err := s.c.Create(context.Background(), lf.DeepCopy()); err != nil {
			s.t.Fatalf("Storing %s: %v", lf.Name, err)
		}
	}
	return strings.Join(warnings, "\n"), err
}

func (s *store) mustCreate(lf *v1alpha1.ListenerFragment) {
	s.t.Helper()
	if _, err := s.create(lf); err != nil {
		s.t.Fatalf("Creating %s: %v", lf.Name, err)
	}
}

// claim returns the claim with that name, nil when there is none.
func (s *store) claim(name string) *coordinationv1.Lease {
	s.t.Helper()
	l := &coordinationv1.Lease{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: claimsNS, Name: name}, l); err != nil {
		return nil
	}
	return l
}

func (s *store) holderOf(name string) string {
	s.t.Helper()
	if l := s.claim(name); l != nil {
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	return ""
}

func (s *store) collect() Collected {
	s.t.Helper()
	s.watch.settle(s.t)
	done, err := s.claims.Collect(context.Background())
	if err != nil {
		s.t.Fatalf("Collect: %v", err)
	}
	return done
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func gateway(ns, name string, from gwv1.FromNamespaces, listeners ...gwv1.Listener) *gwv1.Gateway {
	if len(listeners) == 0 {
		listeners = []gwv1.Listener{gwListener("default", 8080, gwv1.HTTPProtocolType, "")}
	}
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{GatewayClassName: "example", Listeners: listeners,
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(from)}}},
	}
}

// onShared is fragment ns/name of Gateway infra/shared, created at second sec.
func onShared(ns, name string, sec int64, listeners ...gwv1.ListenerEntry) *v1alpha1.ListenerFragment {
	lf := fragment(ns, name, listeners...)
	lf.Spec.ParentRef.Namespace = ptr.To(gwv1.Namespace("infra"))
	lf.UID = types.UID(name + "-uid")
	lf.CreationTimestamp = metav1.Unix(sec, 0)
	return lf
}

var shared = types.NamespacedName{Namespace: "infra", Name: "shared"}

// foldedOnShared is onShared with a status that says the fold placed every
// listener: what the collector backfills claims for.
func foldedOnShared(ns, name string, sec int64, listeners ...gwv1.ListenerEntry) *v1alpha1.ListenerFragment {
	lf := onShared(ns, name, sec, listeners...)
	for _, l := range listeners {
		lf.Status.Listeners = append(lf.Status.Listeners, v1alpha1.ListenerStatus{
			Name:       l.Name,
			Gateway:    &v1alpha1.GatewayListenerReference{Namespace: "infra", Name: "shared", ListenerName: v1alpha1.ListenerName(ns, name, l.Name)},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: lf.Generation}},
		})
	}
	return lf
}

func claimName(e gwv1.ListenerEntry) string {
	return Claim{Gateway: shared, Tuple: entryOf(e).Tuple()}.Name()
}

func tenants(objs ...client.Object) []client.Object {
	return append([]client.Object{namespace("infra", nil), namespace("shop", nil), namespace("blog", nil), namespace(claimsNS, nil)}, objs...)
}

var (
	appHTTPS  = entry("https", 443, gwv1.HTTPSProtocolType, "app.example.com")
	blogHTTPS = entry("https", 443, gwv1.HTTPSProtocolType, "blog.example.com")
	pg        = entry("pg", 7000, gwv1.TCPProtocolType, "")
	web7000   = entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com")
)

func TestWants(t *testing.T) {
	gw := gateway("infra", "shared", gwv1.NamespacesFromAll)
	sameOnly := gateway("infra", "shared", gwv1.NamespacesFromSame)
	c := Claim{Gateway: shared, Tuple: entryOf(appHTTPS).Tuple()}
	lf := onShared("shop", "app", 1, appHTTPS)
	deleting := lf.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.Unix(2, 0))
	moved := onShared("shop", "app", 1, blogHTTPS)
	otherParent := lf.DeepCopy()
	otherParent.Spec.ParentRef.Name = "other"
	again := lf.DeepCopy()
	again.UID = "created-again"
	tcp := Claim{Gateway: shared, Tuple: entryOf(pg).Tuple()}
	// Beside the Gateway's own two listeners, 63 never fit; 62 do.
	crowded := gateway("infra", "shared", gwv1.NamespacesFromAll, gwListener("a", 81, gwv1.HTTPProtocolType, ""), gwListener("b", 82, gwv1.HTTPProtocolType, ""))
	many := func(n int) *v1alpha1.ListenerFragment {
		ls := []gwv1.ListenerEntry{appHTTPS}
		for i := range n - 1 {
			ls = append(ls, entry(fmt.Sprintf("l%d", i), 443, gwv1.HTTPSProtocolType, fmt.Sprintf("l%d.example.com", i)))
		}
		return onShared("shop", "many", 1, ls...)
	}
	tests := map[string]struct {
		claim *Claim
		lf    *v1alpha1.ListenerFragment
		gw    *gwv1.Gateway
		want  bool
	}{
		"the holder still has the tuple":                       {lf: lf, gw: gw, want: true},
		"the holder is gone":                                   {gw: gw},
		"the holder is being deleted":                          {lf: deleting, gw: gw},
		"the holder no longer has the tuple":                   {lf: moved, gw: gw},
		"the holder moved to another Gateway":                  {lf: otherParent, gw: gw},
		"the Gateway is gone":                                  {lf: lf},
		"the Gateway no longer admits the holder's namespace":  {lf: lf, gw: sameOnly},
		"the holder's name was created again with the tuple":   {lf: again, gw: gw, want: true},
		"a TCP listener wants its port":                        {claim: &tcp, lf: onShared("shop", "db", 1, pg), gw: gw, want: true},
		"a holder that can never fit beside the own listeners": {lf: many(63), gw: crowded},
		"a holder that fits exactly":                           {lf: many(62), gw: crowded, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := c
			if tc.claim != nil {
				claim = *tc.claim
			}
			if got := wants(claim, tc.lf, tc.gw, nil); got != tc.want {
				t.Errorf("wants = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSightingsGoStaleOnlyAfterTheGraceUnwantedAtOneVersion(t *testing.T) {
	now := time.Unix(0, 0)
	s := newSightings(grace, func() time.Time { return now })
	steps := map[string][]struct {
		after   time.Duration
		version string
		wanted  bool
		want    bool
	}{
		"unwanted for the grace at one version": {
			{0, "1", false, false},
			{grace - time.Second, "1", false, false},
			{time.Second, "1", false, true},
		},
		"a write restarts the watch": {
			{0, "1", false, false},
			{grace - time.Second, "1", false, false},
			{time.Second, "2", false, false},
			{grace - time.Second, "2", false, false},
			{time.Second, "2", false, true},
		},
		"judged wanted in between, the grace starts again": {
			{0, "1", false, false},
			{grace / 2, "1", true, false},
			{time.Second, "1", false, false},
			{grace - time.Second, "1", false, false},
			{time.Second, "1", false, true},
		},
		"an old claim unwanted for a moment is not stale": {
			{0, "1", true, false},
			{10 * grace, "1", true, false},
			{grace / 2, "1", false, false},
			{time.Second, "1", true, false},
		},
		"not judged for more than a grace, the grace starts again": {
			{0, "1", false, false},
			{grace + time.Second, "1", false, false},
			{grace, "1", false, true},
		},
	}
	for name, steps := range steps {
		t.Run(name, func(t *testing.T) {
			claim := "lfc-" + name
			for i, st := range steps {
				now = now.Add(st.after)
				if got := s.stale(claim, st.version, st.wanted); got != st.want {
					t.Fatalf("Step %d: stale at version %s, wanted %v = %v, want %v", i, st.version, st.wanted, got, st.want)
				}
			}
		})
	}
	s.keepOnly(sets.New[string]())
	now = now.Add(grace)
	if s.stale("lfc-unwanted for the grace at one version", "1", false) {
		t.Error("A claim forgotten after a full list went stale at once")
	}
}

func TestCollectorJudgesByTheVersionItSawNotTheClaimsClock(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	// A claim an hour old by its own clock, held by a fragment that never
	// was stored.
	orphan := s.claims.Lease(Claim{Gateway: shared, Tuple: entryOf(appHTTPS).Tuple()}, Holder{Namespace: "shop", Name: "ghost", UID: "never", Listener: "https", Entry: entryOf(appHTTPS)})
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	orphan.Spec.RenewTime, orphan.Spec.AcquireTime = &old, &old
	if err := s.c.Create(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	wanted := onShared("shop", "blog", 1, blogHTTPS)
	s.mustCreate(wanted)

	if done := s.collect(); done.Released != 0 {
		t.Fatalf("The first sight of an hour-old claim released %d claims", done.Released)
	}
	s.clock = s.clock.Add(grace - time.Second)
	if done := s.collect(); done.Released != 0 {
		t.Fatalf("A claim seen for less than the grace was released")
	}
	// Someone writes the claim: every replica's watch starts again.
	orphan = s.claim(orphan.Name)
	orphan.Annotations["touched"] = "yes"
	if err := s.c.Update(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	s.clock = s.clock.Add(2 * time.Second)
	if done := s.collect(); done.Released != 0 {
		t.Fatalf("A claim written %v ago was released", 2*time.Second)
	}
	// A replica that starts now has not watched it at all.
	fresh := &ClaimStore{Client: s.c, Claims: s.claims.Claims, Reader: s.c, Cache: s.c, Namespace: claimsNS, Grace: grace, now: func() time.Time { return s.clock.Add(10 * grace) }}
	if done, err := fresh.Collect(context.Background()); err != nil || done.Released != 0 {
		t.Fatalf("A replica that had not watched the claim released %d (%v)", done.Released, err)
	}
	s.clock = s.clock.Add(grace)
	if done := s.collect(); done.Released != 1 || s.claim(orphan.Name) != nil {
		t.Fatalf("After the grace at one version, released %d, want the orphan", done.Released)
	}
	s.clock = s.clock.Add(10 * grace)
	s.collect()
	if s.claim(claimName(blogHTTPS)) == nil {
		t.Error("The collector released a claim its holder wants")
	}
}

func TestCollectorReadsFromTheInformerAndWritesNothingInASteadyState(t *testing.T) {
	objs := tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))
	s := newStore(t, objs...)
	for i := range 20 {
		s.mustCreate(onShared("shop", fmt.Sprintf("f-%d", i), 1, entry("https", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("f%d.example.com", i))))
	}
	for i := range 10 {
		if err := s.c.Delete(context.Background(), &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("f-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	s.took()
	s.collect()
	if got := s.took(); len(got) != 0 {
		t.Errorf("The first round made %q, want no request", got)
	}
	s.clock = s.clock.Add(grace)
	done := s.collect()
	calls := s.took()
	if done.Released != 10 || len(calls) != 10 {
		t.Errorf("The round after the grace released %d with %q, want 10 deletes", done.Released, calls)
	}
	s.clock = s.clock.Add(grace)
	s.collect()
	if got := s.took(); len(got) != 0 {
		t.Errorf("A steady-state round made %q, want no request", got)
	}
}

func TestCollectorReleasesOnlyTheVersionItSaw(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	lf := onShared("shop", "app", 1, appHTTPS)
	s.mustCreate(lf)
	if err := s.c.Delete(context.Background(), lf); err != nil {
		t.Fatal(err)
	}
	s.collect()
	s.clock = s.clock.Add(grace)
	// Between the collector's list and its delete, the same name is
	// created again and its create takes the claim over.
	s.beforeDelete = func(c client.WithWatch, name string) {
		l := &coordinationv1.Lease{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: claimsNS, Name: name}, l); err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = ptr.To("shop/app/created-again")
		if err := c.Update(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	if done := s.collect(); done.Released != 0 {
		t.Errorf("Released %d claims that were taken over after the collector read them", done.Released)
	}
	if got := s.holderOf(claimName(appHTTPS)); got != "shop/app/created-again" {
		t.Errorf("Holder = %q, want the claim taken over by the new create", got)
	}
}

func TestCollectorBackfillsInPrecedenceOrder(t *testing.T) {
	own := gwListener("main", 443, gwv1.HTTPSProtocolType, "own.example.com")
	objs := tenants(
		namespace("quiet", map[string]string{AdmissionLabel: AdmissionDisabled}),
		gateway("infra", "shared", gwv1.NamespacesFromAll, own),
		// Stored before gatefold was installed, or while their namespace
		// had opted out: nothing claimed.
		foldedOnShared("shop", "newer", 2, appHTTPS, entry("other", 443, gwv1.HTTPSProtocolType, "other.example.com")),
		foldedOnShared("blog", "older", 1, appHTTPS),
		foldedOnShared("quiet", "repair", 1, entry("https", 443, gwv1.HTTPSProtocolType, "quiet.example.com")),
		foldedOnShared("shop", "web", 1, web7000),
		foldedOnShared("shop", "db", 2, pg),
		foldedOnShared("shop", "shadowed", 1, entry("https", 443, gwv1.HTTPSProtocolType, "own.example.com")),
		// The fold has not placed it (its namespace was admitted a moment
		// ago, say): a claim would take the tuple from whoever holds it.
		onShared("blog", "unfolded", 0, entry("https", 443, gwv1.HTTPSProtocolType, "unfolded.example.com")),
	)
	early := onShared("shop", "early", 1, entry("https", 443, gwv1.HTTPSProtocolType, "early.example.com"))
	early.Spec.ParentRef.Name = "later"
	s := newStore(t, append(objs, early)...)

	if done := s.collect(); done.Backfilled != 3 {
		t.Errorf("Backfilled %d claims, want 3", done.Backfilled)
	}
	for name, want := range map[string]string{
		claimName(appHTTPS): "blog/older/older-uid",
		claimName(entry("other", 443, gwv1.HTTPSProtocolType, "other.example.com")): "shop/newer/newer-uid",
		claimName(web7000): "shop/web/web-uid",
		// The older HTTP listener holds port 7000: TCP cannot share it.
		claimName(pg): "",
		// An opted-out namespace is not admitted, so not claimed for.
		claimName(entry("https", 443, gwv1.HTTPSProtocolType, "quiet.example.com")): "",
		// The Gateway's own listener comes first.
		claimName(entry("https", 443, gwv1.HTTPSProtocolType, "own.example.com")):      "",
		claimName(entry("https", 443, gwv1.HTTPSProtocolType, "unfolded.example.com")): "",
	} {
		if got := s.holderOf(name); got != want {
			t.Errorf("Claim %s held by %q, want %q", name, got, want)
		}
	}
	if s.claim(Claim{Gateway: types.NamespacedName{Namespace: "infra", Name: "later"}, Tuple: entryOf(early.Spec.Listeners[0]).Tuple()}.Name()) != nil {
		t.Error("A fragment of a Gateway that does not exist was given a claim")
	}
	s.took()
	if done := s.collect(); done.Backfilled != 0 || len(writes(s.took())) != 0 {
		t.Errorf("A second round backfilled %d", done.Backfilled)
	}
	_, err := s.create(onShared("shop", "late", 3, appHTTPS))
	wantErr(t, err, `spec.listeners[0].hostname: Duplicate value: "app.example.com": Hostname app.example.com on port 443 (HTTPS) is already taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace: choose another hostname or port`)
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Got error %v, want one containing %q", err, want)
	}
}

func TestAdmissionChecksEveryListenerBeforeWritingAny(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("blog", "blog", 1, blogHTTPS))
	s.took()
	_, err := s.create(onShared("shop", "many", 2, entry("a", 443, gwv1.HTTPSProtocolType, "a.example.com"), blogHTTPS, entry("c", 443, gwv1.HTTPSProtocolType, "c.example.com")))
	wantErr(t, err, `spec.listeners[1].hostname: Duplicate value: "blog.example.com": Hostname blog.example.com on port 443 (HTTPS) is already taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace`)
	if strings.Contains(err.Error(), "blog/") || strings.Contains(err.Error(), `ListenerFragment blog`) {
		t.Errorf("The denial names another tenant's fragment: %v", err)
	}
	if got := s.took(); len(got) != 0 {
		t.Errorf("A denied request made %q, want no request at all", got)
	}
}

func TestAdmissionCostsOneWritePerNewTupleAndNoRead(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.took()
	s.mustCreate(onShared("shop", "app", 1, appHTTPS, blogHTTPS))
	want := []string{"create " + claimName(appHTTPS), "create " + claimName(blogHTTPS)}
	if got := s.took(); !cmp.Equal(got, want) {
		t.Errorf("Admitting a create made %q, want %q", got, want)
	}
	// An update writes nothing for what it keeps as it is (the stored
	// fragment wants it, so no replica releases it), and creates what it
	// adds.
	lf := onShared("shop", "app", 1, appHTTPS, web7000)
	if _, err := s.validator().ValidateUpdate(context.Background(), onShared("shop", "app", 1, appHTTPS, blogHTTPS), lf); err != nil {
		t.Fatal(err)
	}
	want = []string{"create " + claimName(web7000)}
	if got := s.took(); !cmp.Equal(got, want) {
		t.Errorf("Admitting an update made %q, want %q", got, want)
	}
}

func TestAdmissionClaimsOnlyForAGatewayThatAdmitsTheFragment(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromSame))...)
	_, err := s.create(onShared("shop", "app", 1, appHTTPS))
	wantErr(t, err, "spec.parentRef: Forbidden: Gateway infra/shared does not allow listeners from namespace shop")
	early := onShared("shop", "early", 1, appHTTPS)
	early.Spec.ParentRef.Name = "later"
	warnings, err := s.create(early)
	if err != nil || !strings.Contains(warnings, "Gateway infra/later does not exist yet") {
		t.Fatalf("Create of a fragment of a missing Gateway: warnings %q, error %v", warnings, err)
	}
	if got := s.took(); len(got) != 0 {
		t.Errorf("Admission touched claims: %q", got)
	}
	// Its own listeners still must not clash.
	clash := onShared("shop", "clash", 1, pg, entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com"))
	clash.Spec.ParentRef.Name = "later"
	_, err = s.create(clash)
	wantErr(t, err, `spec.listeners[1].protocol: Invalid value: "HTTP": Port 7000 on Gateway infra/later carries listener "pg" (TCP) of ListenerFragment clash, which cannot share a port with HTTP: choose another port`)
}

func TestAdmissionOfAFragmentWhoseListenersClashWritesNothing(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	for name, listeners := range map[string][]gwv1.ListenerEntry{
		"TCP and HTTP on one port":             {pg, web7000},
		"one hostname over HTTPS and over TLS": {appHTTPS, entry("tls", 443, gwv1.TLSProtocolType, "app.example.com")},
	} {
		_, err := s.create(onShared("shop", "clash", 1, listeners...))
		wantErr(t, err, "spec.listeners[1].")
		if got := writes(s.took()); len(got) != 0 {
			t.Errorf("%s: denied with %q", name, got)
		}
	}
}

func TestCreateOfAStoredNameMovesNoClaim(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	s.took()
	again := onShared("shop", "app", 2, appHTTPS, blogHTTPS)
	again.UID = "second-attempt"
	if _, err := s.validator().ValidateCreate(context.Background(), again); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("A create of a stored name answered %v, want AlreadyExists", err)
	}
	if got := writes(s.took()); len(got) != 0 {
		t.Errorf("A create of a stored name wrote %q", got)
	}
	if got := s.holderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
		t.Errorf("Holder = %q, want the stored fragment", got)
	}
}

func TestCreateAfterAnEarlierAttemptTakesItsClaims(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	// An attempt that timed out: its claims were written, its fragment
	// never stored. The same goes for a fragment just deleted.
	attempt := onShared("shop", "app", 1, appHTTPS)
	attempt.UID = "timed-out"
	if _, err := s.validator().ValidateCreate(context.Background(), attempt); err != nil {
		t.Fatal(err)
	}
	s.took()
	if _, err := s.create(onShared("shop", "app", 1, appHTTPS)); err != nil {
		t.Fatalf("The retried create was denied: %v", err)
	}
	if got := s.took(); !cmp.Equal(got, []string{"live get app", "update " + claimName(appHTTPS)}) {
		t.Errorf("The retried create made %q, want one live read of the fragment deciding the takeover", got)
	}
	if got := s.holderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
		t.Errorf("Holder = %q, want the retried create", got)
	}
}

func TestDenialReleasesOnlyWhatTheRequestWrote(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "kept", 1, entry("kept", 7000, gwv1.UDPProtocolType, "")))
	// A racing request of another fragment, on another replica, takes HTTP
	// on port 7000 just before this one takes TCP there, after this one's
	// check: this one sees it when it checks again, although this replica's
	// informer passes each event on only after a while.
	racer := onShared("blog", "racer", 1, web7000)
	s.beforeCreate = func(c client.WithWatch, name string) {
		if name != claimName(pg) {
			return
		}
		s.beforeCreate = nil
		if err := c.Create(context.Background(), s.claims.Lease(claimsOf(racer)[0], newClaimRequest(racer, true).holders[0])); err != nil {
			t.Fatal(err)
		}
	}
	s.watch.settle(t)
	s.watch.delay.Store(int64(200 * time.Millisecond))
	s.took()
	_, err := s.create(onShared("shop", "db", 2, pg))
	wantErr(t, err, `spec.listeners[0].protocol: Invalid value: "TCP": Port 7000 on Gateway infra/shared carries a listener (HTTP) of a ListenerFragment in another namespace, which cannot share a port with TCP: choose another port`)
	if got := writes(s.took()); !cmp.Equal(got, []string{"create " + claimName(pg), "delete " + claimName(pg)}) {
		t.Errorf("The denied request wrote %q, want its claim created and released", got)
	}
	if s.claim(claimName(pg)) != nil || s.claim(claimName(web7000)) == nil {
		t.Error("The denial released the wrong claim")
	}
	if s.claim(claimName(entry("kept", 7000, gwv1.UDPProtocolType, ""))) == nil {
		t.Error("The denial released another fragment's claim")
	}
}

func TestTakeoverWaitsForTheGraceOnThisReplica(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	gone := onShared("blog", "gone", 1, appHTTPS)
	s.mustCreate(gone)
	if err := s.c.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	_, err := s.create(onShared("shop", "app", 2, appHTTPS))
	wantErr(t, err, "is still taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace, which no longer wants it: retry in about 30s")
	s.clock = s.clock.Add(grace)
	if _, err := s.create(onShared("shop", "app", 2, appHTTPS)); err != nil {
		t.Fatalf("After the grace the orphaned claim was not taken over: %v", err)
	}
	if got := s.holderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
		t.Errorf("Holder = %q, want shop/app", got)
	}
}

func TestAHolderProvablyDoneWithItsClaimFreesItAtOnce(t *testing.T) {
	other := entry("https", 443, gwv1.HTTPSProtocolType, "other.example.com")
	tests := map[string]struct {
		// leave changes or deletes the holder, as its owner would.
		leave func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment)
		free  bool
	}{
		"deleted, as this replica's informer saw": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				if err := s.c.Delete(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
				s.claims.FragmentDeleted(holder.UID)
			},
			free: true,
		},
		"deleted, and created again without the tuple": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				if err := s.c.Delete(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
				again := onShared("blog", "holder", 3, other)
				again.UID = "again-uid"
				s.mustCreate(again)
			},
			free: true,
		},
		"its listener changed to another hostname": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				holder.Spec.Listeners = []gwv1.ListenerEntry{other}
				if err := s.c.Update(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
			},
			free: true,
		},
		"moved to another Gateway": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				holder.Spec.ParentRef.Name = "elsewhere"
				if err := s.c.Update(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
			},
			free: true,
		},
		"created again, the create still in flight": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				// The old object, without the tuple, is stored before the new
				// create rewrites the claim.
				holder.Spec.Listeners = []gwv1.ListenerEntry{other}
				if err := s.c.Update(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
				l := s.claim(claimName(appHTTPS))
				l.Spec.HolderIdentity = ptr.To("blog/holder/again-uid")
				if err := s.c.Update(context.Background(), l); err != nil {
					t.Fatal(err)
				}
			},
		},
		"gone from the cache, unseen: perhaps a create still in flight": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				if err := s.c.Delete(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
			s.mustCreate(onShared("blog", "holder", 1, appHTTPS))
			holder := &v1alpha1.ListenerFragment{}
			if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: "blog", Name: "holder"}, holder); err != nil {
				t.Fatal(err)
			}
			tc.leave(t, s, holder)
			_, err := s.create(onShared("shop", "app", 2, appHTTPS))
			if !tc.free {
				wantErr(t, err, "which no longer wants it: retry in about 30s")
				return
			}
			if err != nil {
				t.Fatalf("The tuple is still taken within the grace: %v", err)
			}
			if got := s.holderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
				t.Errorf("Holder = %q, want shop/app", got)
			}
		})
	}
}

// TestRacingClaimBacksOffFromAStoredHolderThatRewroteItsClaim: a stored
// fragment's claim that its own later request rewrote is newer than a
// racing request's conflicting claim, yet was there first: the racer backs
// off. Were the newer version to win, both would be stored.
func TestRacingClaimBacksOffFromAStoredHolderThatRewroteItsClaim(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	racer := onShared("blog", "racer", 2, pg)
	once := false
	s.beforeCreate = func(_ client.WithWatch, name string) {
		if name != claimName(pg) || once {
			return
		}
		once = true
		// The first fragment is admitted and stored between the racer's
		// check and its claim.
		s.mustCreate(onShared("shop", "first", 1, web7000))
	}
	s.afterCreate = func(c client.WithWatch, name string) {
		if name != claimName(pg) {
			return
		}
		// The first fragment's own update rewrites its claim.
		l := &coordinationv1.Lease{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: claimsNS, Name: claimName(web7000)}, l); err != nil {
			t.Fatal(err)
		}
		l.Annotations["rewritten"] = "yes"
		if err := c.Update(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		// The racer's replica sees the rewrite when it checks again.
		if err := s.claims.Claims.caughtUp(context.Background(), l.ResourceVersion); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.create(racer)
	wantErr(t, err, "cannot share a port with TCP")
	if got := s.holderOf(claimName(pg)); got != "" {
		t.Errorf("The denied racer still holds its claim: %q", got)
	}
}

func TestCollectorLabelsClaimsAnEarlierVersionWrote(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	// An earlier version labelled claims by port and group, not Gateway.
	l := s.claim(claimName(appHTTPS))
	delete(l.Labels, claimGatewayLabel)
	l.Labels["gatefold.dev/port"] = "whatever"
	if err := s.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	onGateway := func() int {
		s.watch.settle(t)
		claims, err := s.claims.Claims.onGateway(shared)
		if err != nil {
			t.Fatal(err)
		}
		return len(claims)
	}
	if n := onGateway(); n != 0 {
		t.Fatalf("Admission lists %d claims on the Gateway before the relabel, want none", n)
	}
	s.took()
	if done := s.collect(); done.Relabelled != 1 || done.Released != 0 || done.Backfilled != 0 {
		t.Errorf("Collected %+v, want the claim relabelled", done)
	}
	if got := writes(s.took()); !cmp.Equal(got, []string{"update " + claimName(appHTTPS)}) {
		t.Errorf("The relabelling round wrote %q", got)
	}
	if n := onGateway(); n != 1 {
		t.Errorf("Admission lists %d claims on the Gateway after the relabel, want 1", n)
	}
	s.collect()
	if got := writes(s.took()); len(got) != 0 {
		t.Errorf("The next round wrote %q", got)
	}
}
