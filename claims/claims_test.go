package claims_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/claims/claimstest"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// These tests drive the claim store on a fake API server (see claimstest),
// claiming as admission would once its other checks passed; the webhook's
// tests drive it through the validator.

const claimsNS, grace = claimstest.Namespace, claimstest.Grace

var (
	entry                   = fixture.Entry
	gwListener              = fixture.Own
	gateway                 = claimstest.Gateway
	onShared                = claimstest.OnShared
	claimName               = claimstest.ClaimName
	tenants                 = claimstest.Tenants
	writes                  = claimstest.Writes
	shared                  = claimstest.Shared
	appHTTPS, blogHTTPS, pg = claimstest.AppHTTPS, claimstest.BlogHTTPS, claimstest.PG
)

type store struct{ *claimstest.Store }

func newStore(t *testing.T, objs ...client.Object) *store {
	t.Helper()
	return &store{claimstest.New(t, objs...)}
}

// mustCreate claims lf's listeners as admission would once its other
// checks passed, and stores lf as the API server would.
func (s *store) mustCreate(lf *v1alpha1.ListenerFragment) {
	s.T.Helper()
	s.Watch.Settle(s.T)
	ctx := context.Background()
	plan, conflicts, err := s.Claims.Check(ctx, claims.NewRequest(lf, true, nil), nil)
	if err == nil && conflicts == nil {
		conflicts, err = s.Claims.Acquire(ctx, plan)
	}
	if err != nil || conflicts != nil {
		s.T.Fatalf("Claiming for %s: %v, %v", lf.Name, conflicts, err)
	}
	if err := s.C.Create(ctx, lf.DeepCopy()); err != nil {
		s.T.Fatalf("Storing %s: %v", lf.Name, err)
	}
}

func TestWants(t *testing.T) {
	gw := gateway("infra", "shared", gwv1.NamespacesFromAll)
	sameOnly := gateway("infra", "shared", gwv1.NamespacesFromSame)
	c := claims.Claim{Gateway: shared, Tuple: rules.EntryOf(appHTTPS.Port, appHTTPS.Protocol, appHTTPS.Hostname).Tuple()}
	lf := onShared("shop", "app", 1, appHTTPS)
	deleting := lf.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.Unix(2, 0))
	moved := onShared("shop", "app", 1, blogHTTPS)
	otherParent := lf.DeepCopy()
	otherParent.Spec.ParentRef.Name = "other"
	again := lf.DeepCopy()
	again.UID = "created-again"
	tcp := claims.Claim{Gateway: shared, Tuple: rules.EntryOf(pg.Port, pg.Protocol, pg.Hostname).Tuple()}
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
		claim *claims.Claim
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
			if got := claims.Wants(claim, tc.lf, tc.gw, nil); got != tc.want {
				t.Errorf("wants = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSightingsGoStaleOnlyAfterTheGraceUnwantedAtOneVersion(t *testing.T) {
	now := time.Unix(0, 0)
	s := claims.NewSightings(grace, func() time.Time { return now })
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
				if got := s.Stale(claim, st.version, st.wanted); got != st.want {
					t.Fatalf("Step %d: stale at version %s, wanted %v = %v, want %v", i, st.version, st.wanted, got, st.want)
				}
			}
		})
	}
	s.KeepOnly(sets.New[string]())
	now = now.Add(grace)
	if s.Stale("lfc-unwanted for the grace at one version", "1", false) {
		t.Error("A claim forgotten after a full list went stale at once")
	}
}

func TestCollectorJudgesByTheVersionItSawNotTheClaimsClock(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	// A claim an hour old by its own clock, held by a fragment that never
	// was stored.
	orphan := s.Claims.Lease(claims.Claim{Gateway: shared, Tuple: rules.EntryOf(appHTTPS.Port, appHTTPS.Protocol, appHTTPS.Hostname).Tuple()}, claims.Holder{Namespace: "shop", Name: "ghost", UID: "never", Listener: "https", Entry: rules.EntryOf(appHTTPS.Port, appHTTPS.Protocol, appHTTPS.Hostname)})
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	orphan.Spec.RenewTime, orphan.Spec.AcquireTime = &old, &old
	if err := s.C.Create(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	wanted := onShared("shop", "blog", 1, blogHTTPS)
	s.mustCreate(wanted)

	if done := s.Collect(); done.Released != 0 {
		t.Fatalf("The first sight of an hour-old claim released %d claims", done.Released)
	}
	s.Clock = s.Clock.Add(grace - time.Second)
	if done := s.Collect(); done.Released != 0 {
		t.Fatalf("A claim seen for less than the grace was released")
	}
	// Someone writes the claim: every replica's watch starts again.
	orphan = s.Claim(orphan.Name)
	orphan.Annotations["touched"] = "yes"
	if err := s.C.Update(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	s.Clock = s.Clock.Add(2 * time.Second)
	if done := s.Collect(); done.Released != 0 {
		t.Fatalf("A claim written %v ago was released", 2*time.Second)
	}
	// A replica that starts now has not watched it at all.
	fresh := &claims.Store{Client: s.C, Claims: s.Claims.Claims, Reader: s.C, Cache: s.C, Namespace: claimsNS, Grace: grace, Now: func() time.Time { return s.Clock.Add(10 * grace) }}
	if done, err := fresh.Collect(context.Background()); err != nil || done.Released != 0 {
		t.Fatalf("A replica that had not watched the claim released %d (%v)", done.Released, err)
	}
	s.Clock = s.Clock.Add(grace)
	if done := s.Collect(); done.Released != 1 || s.Claim(orphan.Name) != nil {
		t.Fatalf("After the grace at one version, released %d, want the orphan", done.Released)
	}
	s.Clock = s.Clock.Add(10 * grace)
	s.Collect()
	if s.Claim(claimName(blogHTTPS)) == nil {
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
		if err := s.C.Delete(context.Background(), &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("f-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Took()
	s.Collect()
	if got := s.Took(); len(got) != 0 {
		t.Errorf("The first round made %q, want no request", got)
	}
	s.Clock = s.Clock.Add(grace)
	done := s.Collect()
	calls := s.Took()
	if done.Released != 10 || len(calls) != 10 {
		t.Errorf("The round after the grace released %d with %q, want 10 deletes", done.Released, calls)
	}
	s.Clock = s.Clock.Add(grace)
	s.Collect()
	if got := s.Took(); len(got) != 0 {
		t.Errorf("A steady-state round made %q, want no request", got)
	}
}

func TestCollectorReleasesOnlyTheVersionItSaw(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	lf := onShared("shop", "app", 1, appHTTPS)
	s.mustCreate(lf)
	if err := s.C.Delete(context.Background(), lf); err != nil {
		t.Fatal(err)
	}
	s.Collect()
	s.Clock = s.Clock.Add(grace)
	// Between the collector's list and its delete, the same name is
	// created again and its create takes the claim over.
	s.BeforeDelete = func(c client.WithWatch, name string) {
		l := &coordinationv1.Lease{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: claimsNS, Name: name}, l); err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = ptr.To("shop/app/created-again")
		if err := c.Update(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	if done := s.Collect(); done.Released != 0 {
		t.Errorf("Released %d claims that were taken over after the collector read them", done.Released)
	}
	if got := s.HolderOf(claimName(appHTTPS)); got != "shop/app/created-again" {
		t.Errorf("Holder = %q, want the claim taken over by the new create", got)
	}
}

func TestCollectorLabelsClaimsAnEarlierVersionWrote(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	// An earlier version labelled claims by port and group, not Gateway.
	l := s.Claim(claimName(appHTTPS))
	delete(l.Labels, "gatefold.dev/gateway")
	l.Labels["gatefold.dev/port"] = "whatever"
	if err := s.C.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	// The merger reads claims by the label, and admission reserves as it.
	onGateway := func() int {
		s.Watch.Settle(t)
		on, err := s.Claims.HoldersNow(context.Background(), shared)
		if err != nil {
			t.Fatal(err)
		}
		reserved, err := s.Claims.Holders(shared, []rules.Tuple{rules.EntryOf(appHTTPS.Port, appHTTPS.Protocol, appHTTPS.Hostname).Tuple()})
		if err != nil {
			t.Fatal(err)
		}
		if len(reserved) != len(on) {
			t.Errorf("Admission reserves %d claims, the merger reads %d", len(reserved), len(on))
		}
		return len(on)
	}
	if n := onGateway(); n != 0 {
		t.Fatalf("The merger lists %d claims on the Gateway before the relabel, want none", n)
	}
	s.Took()
	if done := s.Collect(); done.Relabelled != 1 || done.Released != 0 || done.Backfilled != 0 {
		t.Errorf("Collected %+v, want the claim relabelled", done)
	}
	if got := writes(s.Took()); !cmp.Equal(got, []string{"update " + claimName(appHTTPS)}) {
		t.Errorf("The relabelling round wrote %q", got)
	}
	if n := onGateway(); n != 1 {
		t.Errorf("The merger lists %d claims on the Gateway after the relabel, want 1", n)
	}
	s.Collect()
	if got := writes(s.Took()); len(got) != 0 {
		t.Errorf("The next round wrote %q", got)
	}
}

// A request meets the claims of every listener it conflicts with: of its
// tuple, and of a group that cannot share its port, whatever the hostname.
func TestCheckMeetsClaimsOfItsTupleAndOfExcludingGroups(t *testing.T) {
	tests := map[string]struct {
		held, asked gwv1.ListenerEntry
		want        gwv1.ListenerConditionReason // "" for no conflict
	}{
		"TCP against HTTP on its port":      {held: entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com"), asked: entry("db", 7000, gwv1.TCPProtocolType, ""), want: gwv1.ListenerReasonProtocolConflict},
		"HTTPS against HTTP on its port":    {held: entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com"), asked: entry("tls", 7000, gwv1.HTTPSProtocolType, "b.example.com"), want: gwv1.ListenerReasonProtocolConflict},
		"TLS against HTTPS of one hostname": {held: entry("web", 443, gwv1.HTTPSProtocolType, "a.example.com"), asked: entry("tls", 443, gwv1.TLSProtocolType, "a.example.com"), want: gwv1.ListenerReasonHostnameConflict},
		"HTTP of another hostname":          {held: entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com"), asked: entry("web", 7000, gwv1.HTTPProtocolType, "b.example.com")},
		"UDP beside HTTPS":                  {held: entry("web", 443, gwv1.HTTPSProtocolType, "a.example.com"), asked: entry("quic", 443, gwv1.UDPProtocolType, "")},
		"TCP on another port":               {held: entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com"), asked: entry("db", 7001, gwv1.TCPProtocolType, "")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
			s.mustCreate(onShared("shop", "held", 1, tc.held))
			s.Watch.Settle(t)
			_, conflicts, err := s.Claims.Check(context.Background(), claims.NewRequest(onShared("blog", "asked", 2, tc.asked), true, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got gwv1.ListenerConditionReason
			if conflicts != nil && conflicts[0] != nil {
				got = conflicts[0].Reason
			}
			if got != tc.want {
				t.Errorf("Conflict = %q, want %q", got, tc.want)
			}
		})
	}
}
