package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/claims/claimstest"
)

// These tests drive the validator and its claim store on a fake API server
// (see claimstest), so that they can move this replica's clock and count
// every request; the admission tests show the same on the real API server.

const claimsNS, grace = claimstest.Namespace, claimstest.Grace

var (
	namespace                        = claimstest.Namespaced
	gateway                          = claimstest.Gateway
	onShared                         = claimstest.OnShared
	foldedOnShared                   = claimstest.FoldedOnShared
	claimName                        = claimstest.ClaimName
	tenants                          = claimstest.Tenants
	writes                           = claimstest.Writes
	shared                           = claimstest.Shared
	appHTTPS, blogHTTPS, pg, web7000 = claimstest.AppHTTPS, claimstest.BlogHTTPS, claimstest.PG, claimstest.Web7000
)

// store is a claim store on a fake API server, whose namespaces opt out of
// admission as gatefold's do.
type store struct{ *claimstest.Store }

func newStore(t *testing.T, objs ...client.Object) *store {
	t.Helper()
	s := &store{claimstest.New(t, objs...)}
	s.Claims.OptedOut = optedOut
	return s
}

// validator returns the validator, once the claim informer shows every
// claim the test wrote.
func (s *store) validator() *fragmentValidator {
	s.Watch.Settle(s.T)
	return &fragmentValidator{cache: s.C, claims: s.Claims}
}

// create admits lf as a create and, when admitted, stores it as the API
// server would, with a UID.
func (s *store) create(lf *v1alpha1.ListenerFragment) (string, error) {
	s.T.Helper()
	if lf.UID == "" {
		lf.UID = types.UID(lf.Name + "-uid")
	}
	warnings, err := s.validator().ValidateCreate(context.Background(), lf)
	if err == nil {
		if err := s.C.Create(context.Background(), lf.DeepCopy()); err != nil {
			s.T.Fatalf("Storing %s: %v", lf.Name, err)
		}
	}
	return strings.Join(warnings, "\n"), err
}

func (s *store) mustCreate(lf *v1alpha1.ListenerFragment) {
	s.T.Helper()
	if _, err := s.create(lf); err != nil {
		s.T.Fatalf("Creating %s: %v", lf.Name, err)
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

	if done := s.Collect(); done.Backfilled != 3 {
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
		if got := s.HolderOf(name); got != want {
			t.Errorf("Claim %s held by %q, want %q", name, got, want)
		}
	}
	if s.Claim(claims.Claim{Gateway: types.NamespacedName{Namespace: "infra", Name: "later"}, Tuple: entryOf(early.Spec.Listeners[0]).Tuple()}.Name()) != nil {
		t.Error("A fragment of a Gateway that does not exist was given a claim")
	}
	s.Took()
	if done := s.Collect(); done.Backfilled != 0 || len(writes(s.Took())) != 0 {
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
	s.Took()
	_, err := s.create(onShared("shop", "many", 2, entry("a", 443, gwv1.HTTPSProtocolType, "a.example.com"), blogHTTPS, entry("c", 443, gwv1.HTTPSProtocolType, "c.example.com")))
	wantErr(t, err, `spec.listeners[1].hostname: Duplicate value: "blog.example.com": Hostname blog.example.com on port 443 (HTTPS) is already taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace`)
	if strings.Contains(err.Error(), "blog/") || strings.Contains(err.Error(), `ListenerFragment blog`) {
		t.Errorf("The denial names another tenant's fragment: %v", err)
	}
	if got := s.Took(); len(got) != 0 {
		t.Errorf("A denied request made %q, want no request at all", got)
	}
}

func TestAdmissionCostsOneWritePerNewTupleAndNoRead(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.Took()
	s.mustCreate(onShared("shop", "app", 1, appHTTPS, blogHTTPS))
	want := []string{"create " + claimName(appHTTPS), "create " + claimName(blogHTTPS)}
	if got := s.Took(); !cmp.Equal(got, want) {
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
	if got := s.Took(); !cmp.Equal(got, want) {
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
	if got := s.Took(); len(got) != 0 {
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
		if got := writes(s.Took()); len(got) != 0 {
			t.Errorf("%s: denied with %q", name, got)
		}
	}
}

func TestCreateOfAStoredNameMovesNoClaim(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	s.Took()
	again := onShared("shop", "app", 2, appHTTPS, blogHTTPS)
	again.UID = "second-attempt"
	if _, err := s.validator().ValidateCreate(context.Background(), again); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("A create of a stored name answered %v, want AlreadyExists", err)
	}
	if got := writes(s.Took()); len(got) != 0 {
		t.Errorf("A create of a stored name wrote %q", got)
	}
	if got := s.HolderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
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
	s.Took()
	if _, err := s.create(onShared("shop", "app", 1, appHTTPS)); err != nil {
		t.Fatalf("The retried create was denied: %v", err)
	}
	if got := s.Took(); !cmp.Equal(got, []string{"live get app", "update " + claimName(appHTTPS)}) {
		t.Errorf("The retried create made %q, want one live read of the fragment deciding the takeover", got)
	}
	if got := s.HolderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
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
	s.BeforeCreate = func(c client.WithWatch, name string) {
		if name != claimName(pg) {
			return
		}
		s.BeforeCreate = nil
		if err := c.Create(context.Background(), s.LeaseFor(racer, 0)); err != nil {
			t.Fatal(err)
		}
	}
	s.Watch.Settle(t)
	s.Watch.Delay.Store(int64(200 * time.Millisecond))
	s.Took()
	_, err := s.create(onShared("shop", "db", 2, pg))
	wantErr(t, err, `spec.listeners[0].protocol: Invalid value: "TCP": Port 7000 on Gateway infra/shared carries a listener (HTTP) of a ListenerFragment in another namespace, which cannot share a port with TCP: choose another port`)
	if got := writes(s.Took()); !cmp.Equal(got, []string{"create " + claimName(pg), "delete " + claimName(pg)}) {
		t.Errorf("The denied request wrote %q, want its claim created and released", got)
	}
	if s.Claim(claimName(pg)) != nil || s.Claim(claimName(web7000)) == nil {
		t.Error("The denial released the wrong claim")
	}
	if s.Claim(claimName(entry("kept", 7000, gwv1.UDPProtocolType, ""))) == nil {
		t.Error("The denial released another fragment's claim")
	}
}

func TestTakeoverWaitsForTheGraceOnThisReplica(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	gone := onShared("blog", "gone", 1, appHTTPS)
	s.mustCreate(gone)
	if err := s.C.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	_, err := s.create(onShared("shop", "app", 2, appHTTPS))
	wantErr(t, err, "is still taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace, which no longer wants it: retry in about 30s")
	s.Clock = s.Clock.Add(grace)
	if _, err := s.create(onShared("shop", "app", 2, appHTTPS)); err != nil {
		t.Fatalf("After the grace the orphaned claim was not taken over: %v", err)
	}
	if got := s.HolderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
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
				if err := s.C.Delete(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
				s.Claims.FragmentDeleted(holder.UID)
			},
			free: true,
		},
		"deleted, and created again without the tuple": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				if err := s.C.Delete(context.Background(), holder); err != nil {
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
				if err := s.C.Update(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
			},
			free: true,
		},
		"moved to another Gateway": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				holder.Spec.ParentRef.Name = "elsewhere"
				if err := s.C.Update(context.Background(), holder); err != nil {
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
				if err := s.C.Update(context.Background(), holder); err != nil {
					t.Fatal(err)
				}
				l := s.Claim(claimName(appHTTPS))
				l.Spec.HolderIdentity = ptr.To("blog/holder/again-uid")
				if err := s.C.Update(context.Background(), l); err != nil {
					t.Fatal(err)
				}
			},
		},
		"gone from the cache, unseen: perhaps a create still in flight": {
			leave: func(t *testing.T, s *store, holder *v1alpha1.ListenerFragment) {
				if err := s.C.Delete(context.Background(), holder); err != nil {
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
			if err := s.C.Get(context.Background(), client.ObjectKey{Namespace: "blog", Name: "holder"}, holder); err != nil {
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
			if got := s.HolderOf(claimName(appHTTPS)); got != "shop/app/app-uid" {
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
	s.BeforeCreate = func(_ client.WithWatch, name string) {
		if name != claimName(pg) || once {
			return
		}
		once = true
		// The first fragment is admitted and stored between the racer's
		// check and its claim.
		s.mustCreate(onShared("shop", "first", 1, web7000))
	}
	s.AfterCreate = func(c client.WithWatch, name string) {
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
		if err := s.Claims.Claims.CaughtUp(context.Background(), l.ResourceVersion); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.create(racer)
	wantErr(t, err, "cannot share a port with TCP")
	if got := s.HolderOf(claimName(pg)); got != "" {
		t.Errorf("The denied racer still holds its claim: %q", got)
	}
}

func TestRequestWhoseClaimTheInformerDoesNotSeeInTimeFails(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	v := s.validator()
	s.Watch.Delay.Store(int64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := v.ValidateCreate(ctx, onShared("shop", "app", 1, appHTTPS))
	wantErr(t, err, "for this replica's claims informer to see the claims written up to resourceVersion")
	wantErr(t, err, "context deadline exceeded")
}

func TestRequestFailsOnceTheInformerStopped(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	v := s.validator()
	s.Watch.Stop()
	s.Took()
	_, err := v.ValidateCreate(context.Background(), onShared("shop", "app", 1, appHTTPS))
	wantErr(t, err, "this replica's claims informer has stopped")
	if got := writes(s.Took()); !cmp.Equal(got, []string{"create " + claimName(appHTTPS), "delete " + claimName(appHTTPS)}) {
		t.Errorf("The failed request wrote %q, want its claim created and released", got)
	}
}
