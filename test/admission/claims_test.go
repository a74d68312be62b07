package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// claimWait bounds how long a claim takes to be released or backfilled: the
// grace, a few collection periods (1s here) and a cache to catch up.
const claimWait = claimGrace + 10*time.Second

// claimName is the name of the claim a listener takes on Gateway ns/gw.
func claimName(ns, gw string, l gwv1.ListenerEntry) string {
	return claims.Claim{Gateway: types.NamespacedName{Namespace: ns, Name: gw}, Tuple: rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()}.Name()
}

// claimOf returns the claim a listener takes on Gateway ns/gw, nil when
// there is none.
func claimOf(t *testing.T, ns, gw string, l gwv1.ListenerEntry) *coordinationv1.Lease {
	t.Helper()
	lease := &coordinationv1.Lease{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: claimsNamespace, Name: claimName(ns, gw, l)}, lease)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// waitClaim waits until the listener's claim on ns/gw is held by fragment
// holder ("namespace/name"), or is gone when holder is "".
func waitClaim(t *testing.T, ns, gw string, l gwv1.ListenerEntry, holder string) {
	t.Helper()
	start := time.Now()
	var got string
	testenv.Eventually(t, claimWait, func() error {
		got = holderOf(claimOf(t, ns, gw, l))
		if (holder == "" && got == "") || (holder != "" && strings.HasPrefix(got, holder+"/")) {
			return nil
		}
		return fmt.Errorf("claim of %s held by %q, want %q", *l.Hostname, got, holder)
	})
	t.Logf("Claim of %s held by %q after %v", *l.Hostname, got, time.Since(start).Round(100*time.Millisecond))
}

// neverClaimed fails t, saying why, when listener l's claim on Gateway ns/gw
// is held at any moment of two collection rounds (1s each).
func neverClaimed(t *testing.T, ns, gw string, l gwv1.ListenerEntry, why string) {
	t.Helper()
	name := claimName(ns, gw, l)
	testenv.Holds(t, env, 2*time.Second, testenv.Invariant{List: &coordinationv1.LeaseList{}, Namespace: claimsNamespace,
		Opts: []client.ListOption{client.MatchingFields{"metadata.name": name}}, Check: func(leases map[string]client.Object) error {
			if lease, held := leases[name]; held {
				return fmt.Errorf("%s: claim %s of %s is held by %q", why, name, *l.Hostname, holderOf(lease.(*coordinationv1.Lease)))
			}
			return nil
		}})
}

// forgeClaim writes the claim that a create of ns/name with uid would have
// left for listener l on Gateway ns/gw.
func forgeClaim(t *testing.T, ns, gw, name string, uid types.UID, l gwv1.ListenerEntry) {
	t.Helper()
	store := &claims.Store{Namespace: claimsNamespace, Grace: claimGrace}
	e := rules.EntryOf(l.Port, l.Protocol, l.Hostname)
	c := claims.Claim{Gateway: types.NamespacedName{Namespace: ns, Name: gw}, Tuple: e.Tuple()}
	if err := env.Client.Create(context.Background(), store.Lease(c, claims.Holder{Namespace: ns, Name: name, UID: uid, Listener: string(l.Name), Entry: e})); err != nil {
		t.Fatal(err)
	}
}

func TestGatewayCreatedAfterItsFragmentsGetsThemClaimed(t *testing.T) {
	ns := newNamespace(t, nil)
	later := notYet(ns)
	l := https("https", "early.example.com")
	mustCreate(t, newFragment(ns, "a-first", later, l))
	mustCreate(t, newFragment(ns, "b-second", later, l))
	if holderOf(claimOf(t, ns, later.Name, l)) != "" {
		t.Fatal("A fragment of a missing Gateway took a claim")
	}
	newGateway(t, ns, gwv1.NamespacesFromSame)
	// Both were stored; the fold gives the tuple to the first in precedence,
	// and the collector backfills the claim for the listener it placed.
	neverClaimed(t, ns, later.Name, l, "A claim was backfilled for a listener the fold has not placed")
	reportFolded(t, ns, "a-first", later.Name)
	waitClaim(t, ns, later.Name, l, ns+"/a-first")
	err := env.Client.Create(context.Background(), newFragment(ns, "c-third", later, l))
	wantDenied(t, err, `Duplicate value: "early.example.com"`, `by listener "https" (HTTPS) of ListenerFragment a-first`)
}

// TestDuplicateOfAFragmentStoredBeforeItsGatewayIsDenied creates a duplicate
// right after the Gateway, before the collector's backfill can have claimed
// the stored fragment's tuple: admission reads the stored fragment itself.
// Without that the duplicate took the claim, and claims and the fold
// disagreed for good.
func TestDuplicateOfAFragmentStoredBeforeItsGatewayIsDenied(t *testing.T) {
	for round := range 3 {
		ns := newNamespace(t, nil)
		l := https("https", fmt.Sprintf("first-%d.example.com", round))
		first := newFragment(ns, "a-first", notYet(ns), l)
		mustCreate(t, first)
		waitCached(t, first)
		newGateway(t, ns, gwv1.NamespacesFromSame)
		err := env.Client.Create(context.Background(), newFragment(ns, "c-third", notYet(ns), l))
		wantDenied(t, err, fmt.Sprintf(`Duplicate value: %q`, *l.Hostname), `by listener "https" (HTTPS) of ListenerFragment a-first`)
	}
}

// TestDuplicateOfAFragmentOfAnOptedOutNamespaceIsDenied: a fragment stored
// while admission was off for its namespace holds no claim, and the
// collector gives it none while the namespace stays opted out; the fold
// still places it, so a duplicate from another namespace is denied.
func TestDuplicateOfAFragmentOfAnOptedOutNamespaceIsDenied(t *testing.T) {
	infra := newNamespace(t, nil)
	quiet := newNamespace(t, map[string]string{webhook.AdmissionLabel: webhook.AdmissionDisabled})
	shop := newNamespace(t, nil)
	gw := newGateway(t, infra, gwv1.NamespacesFromAll)
	if err := wantDuplicateOfQuietDenied(t, quiet, shop, gw); strings.Contains(err.Error(), quiet) {
		t.Errorf("The denial names namespace %s: %v", quiet, err)
	}
}

// wantDuplicateOfQuietDenied stores a fragment of namespace quiet, opted
// out of admission, on gw, and checks that a duplicate of it from namespace
// shop is denied; it returns the denial.
func wantDuplicateOfQuietDenied(t *testing.T, quiet, shop string, gw *gwv1.Gateway) error {
	t.Helper()
	l := https("https", "quiet.example.com")
	repair := newFragment(quiet, "repair", gw, l)
	mustCreate(t, repair)
	waitCached(t, repair)
	err := env.Client.Create(context.Background(), newFragment(shop, "copy", gw, l))
	wantDenied(t, err, `Duplicate value: "quiet.example.com"`, "by a listener (HTTPS) of a ListenerFragment in another namespace")
	return err
}

// notYet is the Gateway ns/shared before it exists.
func notYet(ns string) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
}

func TestNamespaceOptedBackInHasItsFragmentsClaimed(t *testing.T) {
	ns := newNamespace(t, map[string]string{webhook.AdmissionLabel: webhook.AdmissionDisabled})
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	l := https("https", "repaired.example.com")
	mustCreate(t, newFragment(ns, "repaired", gw, l))
	reportFolded(t, ns, "repaired", gw.Name)
	neverClaimed(t, ns, gw.Name, l, "A fragment of an opted-out namespace was given a claim")

	optBackIn(t, ns)
	waitClaim(t, ns, gw.Name, l, ns+"/repaired")
	err := env.Client.Create(context.Background(), newFragment(ns, "copy", gw, l))
	wantDenied(t, err, `Duplicate value: "repaired.example.com"`, `by listener "https" (HTTPS) of ListenerFragment repaired`)
}

// reportFolded writes the status the merger writes for fragment ns/name
// when it folds all its listeners into Gateway ns/gw: no merger runs here,
// and the collector backfills claims only for listeners the fold placed.
func reportFolded(t *testing.T, ns, name, gw string) {
	t.Helper()
	lf := &v1alpha1.ListenerFragment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, lf); err != nil {
		t.Fatal(err)
	}
	lf.Status = fixture.FoldedStatus(lf, gwv1.ObjectName(gw))
	if err := env.Client.Status().Update(context.Background(), lf); err != nil {
		t.Fatalf("Reporting fragment %s/%s folded: %v", ns, name, err)
	}
}

// claimedOnSharedGateway creates fragment shop/app taking host on Gateway
// infra/shared, which admits every namespace, and waits for its claim.
func claimedOnSharedGateway(t *testing.T, host string) (infra string, gw *gwv1.Gateway, l gwv1.ListenerEntry) {
	t.Helper()
	infra = newNamespace(t, nil)
	shop := newNamespace(t, nil)
	gw = newGateway(t, infra, gwv1.NamespacesFromAll)
	l = https("https", host)
	mustCreate(t, newFragment(shop, "app", gw, l))
	waitClaim(t, infra, gw.Name, l, shop+"/app")
	return infra, gw, l
}

// setAllowedFrom sets which namespaces Gateway gw admits.
func setAllowedFrom(t *testing.T, gw *gwv1.Gateway, from gwv1.FromNamespaces) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(gw), gw); err != nil {
		t.Fatal(err)
	}
	gw.Spec.AllowedListeners.Namespaces.From = ptr.To(from)
	if err := env.Client.Update(context.Background(), gw); err != nil {
		t.Fatal(err)
	}
}

func TestFragmentTheGatewayNoLongerAdmitsStopsHoldingItsTuples(t *testing.T) {
	infra, gw, l := claimedOnSharedGateway(t, "admitted.example.com")
	setAllowedFrom(t, gw, gwv1.NamespacesFromSame)
	waitClaim(t, infra, gw.Name, l, "")
	mustCreate(t, newFragment(infra, "own-team", gw, l))
}

// TestFlapOfAllowedListenersKeepsTheClaim: a Gateway that stops admitting a
// fragment's namespace for a moment, shorter than the grace, leaves its old
// claim where it is; the collector used to release it at once.
func TestFlapOfAllowedListenersKeepsTheClaim(t *testing.T) {
	infra, gw, l := claimedOnSharedGateway(t, "flap.example.com")
	claim := claimOf(t, infra, gw.Name, l)
	// An old claim: the replicas have judged it wanted for the grace.
	time.Sleep(claimGrace + time.Second)

	setAllowedFrom(t, gw, gwv1.NamespacesFromSame)
	flapped := time.Now()
	// Several collection periods (1s), well inside the grace.
	time.Sleep(claimGrace / 2)
	setAllowedFrom(t, gw, gwv1.NamespacesFromAll)
	t.Logf("The Gateway admitted only its own namespace for %v", time.Since(flapped).Round(10*time.Millisecond))
	key := client.ObjectKey{Namespace: claimsNamespace, Name: claimName(infra, gw.Name, l)}
	testenv.Holds(t, env, claimGrace+2*time.Second, testenv.ObjectHolds(&coordinationv1.LeaseList{}, key, func(now client.Object) error {
		if now.GetUID() != claim.UID {
			return fmt.Errorf("after the flap the claim is %s, want the one held before (%s)", now.GetUID(), claim.UID)
		}
		return nil
	}))
	err := env.Client.Create(context.Background(), newFragment(infra, "own-team", gw, l))
	wantDenied(t, err, `Duplicate value: "flap.example.com"`)
}

func TestCreateOfAnExistingNameAnswersAlreadyExists(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	l := https("https", "once.example.com")
	lf := newFragment(ns, "once", gw, l)
	mustCreate(t, lf)
	taken := https("https", "taken.example.com")
	mustCreate(t, newFragment(ns, "other", gw, taken))
	fresh := https("fresh", "fresh.example.com")
	waitCached(t, lf)
	holder := holderOf(claimOf(t, ns, gw.Name, l))

	for name, again := range map[string]*v1alpha1.ListenerFragment{
		"the same spec":                  newFragment(ns, "once", gw, l),
		"another listener":               newFragment(ns, "once", gw, l, https("more", "more.example.com")),
		"only a new tuple":               newFragment(ns, "once", gw, fresh),
		"a tuple another fragment holds": newFragment(ns, "once", gw, taken),
	} {
		if err := env.Client.Create(context.Background(), again); !apierrors.IsAlreadyExists(err) {
			t.Errorf("Create again with %s: got %v, want AlreadyExists", name, err)
		}
	}
	if got := holderOf(claimOf(t, ns, gw.Name, l)); got != holder || !strings.HasSuffix(got, "/"+string(lf.UID)) {
		t.Errorf("The claim moved from %q to %q", holder, got)
	}
	for _, l := range []gwv1.ListenerEntry{fresh, https("more", "more.example.com")} {
		if c := claimOf(t, ns, gw.Name, l); c != nil {
			t.Errorf("A create of a stored name claimed %s for an object never stored: %s held by %q", *l.Hostname, c.Name, holderOf(c))
		}
	}
}

func TestDeleteThenCreateAgainAtOnceIsAdmitted(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	l := https("https", "again.example.com")
	for i := range 3 {
		lf := newFragment(ns, "again", gw, l)
		if err := env.Client.Create(context.Background(), lf); err != nil {
			t.Fatalf("Create %d right after the delete: %v", i, err)
		}
		if got := holderOf(claimOf(t, ns, gw.Name, l)); got != ns+"/again/"+string(lf.UID) {
			t.Errorf("Create %d: claim held by %q, want the new object", i, got)
		}
		if err := env.Client.Delete(context.Background(), lf); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateRetriedAfterATimeoutIsAdmitted(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	l := https("https", "retried.example.com")
	// The first attempt's webhook wrote the claim; the API server never
	// stored the fragment.
	forgeClaim(t, ns, gw.Name, "retried", "first-attempt", l)
	lf := newFragment(ns, "retried", gw, l)
	if err := env.Client.Create(context.Background(), lf); err != nil {
		t.Fatalf("The retried create: %v", err)
	}
	if got := holderOf(claimOf(t, ns, gw.Name, l)); got != ns+"/retried/"+string(lf.UID) {
		t.Errorf("Claim held by %q, want the stored fragment", got)
	}
}

func TestFragmentWhoseListenersClashIsDenied(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	tcp := gwv1.ListenerEntry{Name: "db", Port: 7443, Protocol: gwv1.TCPProtocolType}
	tls := https("tls", "clash.example.com")
	tls.Protocol, tls.TLS.Mode = gwv1.TLSProtocolType, ptr.To(gwv1.TLSModePassthrough)
	tls.TLS.CertificateRefs = nil
	tests := map[string]struct {
		listeners []gwv1.ListenerEntry
		want      string
	}{
		"TCP and HTTP on one port": {
			listeners: []gwv1.ListenerEntry{tcp, {Name: "web", Port: 7443, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("clash.example.com"))}},
			want:      fmt.Sprintf(`spec.listeners[1].protocol: Invalid value: "HTTP": Port 7443 on Gateway %s/shared carries listener "db" (TCP) of ListenerFragment clash, which cannot share a port with HTTP: choose another port`, ns),
		},
		"one hostname over HTTPS and TLS": {
			listeners: []gwv1.ListenerEntry{https("https", "clash.example.com"), tls},
			want:      fmt.Sprintf(`spec.listeners[1].hostname: Duplicate value: "clash.example.com": Hostname clash.example.com on port 443 (TLS) is already taken on Gateway %s/shared by listener "https" (HTTPS) of ListenerFragment clash`, ns),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), newFragment(ns, "clash", gw, tc.listeners...))
			wantDenied(t, err, tc.want)
			for _, l := range tc.listeners {
				if c := claimOf(t, ns, gw.Name, l); c != nil {
					t.Errorf("The denied fragment left claim %s", c.Name)
				}
			}
		})
	}
}

// applyAsGatefold adds listeners to the Gateway as the merger would, with
// server-side apply under gatefold's field manager.
func applyAsGatefold(t *testing.T, gw *gwv1.Gateway, listeners ...gwv1.Listener) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("Gateway")
	u.SetNamespace(gw.Namespace)
	u.SetName(gw.Name)
	var items []any
	for _, l := range listeners {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&l)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, obj)
	}
	if err := unstructured.SetNestedSlice(u.Object, items, "spec", "listeners"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
		t.Fatalf("Applying listeners as gatefold: %v", err)
	}
}

func TestListenerFoldedForAnotherFragmentIsNotTheGatewaysOwn(t *testing.T) {
	infra := newNamespace(t, nil)
	shop := newNamespace(t, nil)
	blog := newNamespace(t, nil)
	gw := newGateway(t, infra, gwv1.NamespacesFromAll)
	folded := func(ns, fragment, host string) gwv1.Listener {
		return gatewayHTTPS(string(v1alpha1.ListenerName(ns, fragment, "https")), host)
	}
	live := https("https", "live.example.com")
	mustCreate(t, newFragment(shop, "live", gw, live))
	// gatefold folded shop/live, and earlier shop/gone, since deleted.
	applyAsGatefold(t, gw, folded(shop, "live", "live.example.com"), folded(shop, "gone", "gone.example.com"))
	waitCachedListeners(t, gw, 3)

	// The listener of a deleted fragment is not the Gateway's own: its
	// tuple is free.
	mustCreate(t, newFragment(blog, "reuse", gw, https("https", "gone.example.com")))

	// The listener of another tenant's live fragment is that fragment's:
	// the denial does not name it, nor its namespace.
	err := env.Client.Create(context.Background(), newFragment(blog, "copy", gw, live))
	wantDenied(t, err, `by a listener (HTTPS) of a ListenerFragment in another namespace`)
	if strings.Contains(err.Error(), shop) || strings.Contains(err.Error(), "live-https") || strings.Contains(err.Error(), "own listener") {
		t.Errorf("The denial to %s names %s's listener: %v", blog, shop, err)
	}
}

func TestDefaultingNeverWidens(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	root := https("https", ".")
	emptyGroup := newFragment(ns, "empty-group", gw, https("https", "group.example.com"))
	emptyGroup.Spec.ParentRef.Group = ptr.To(gwv1.Group(""))
	tests := map[string]struct {
		lf   *v1alpha1.ListenerFragment
		want string
	}{
		"a root hostname is not every hostname": {lf: newFragment(ns, "root", gw, root),
			want: `ListenerFragment.gatefold.dev "root" is invalid: spec.listeners[0].hostname: Invalid value: ".": without its trailing dots the hostname is empty, which is not every hostname: set the hostname served, or leave hostname out for every hostname`},
		"an empty parentRef group is not the Gateway group": {lf: emptyGroup,
			want: `spec.parentRef.group: Invalid value: "": an empty group is the core API group, which has no Gateway: set group to gateway.networking.k8s.io, or leave it out`},
		"a Kelvin sign is not taken for a k": {lf: newFragment(ns, "kelvin", gw, https("https", "\u212a.example.com")),
			want: "spec.listeners[0].hostname: Invalid value: \"\u212a.example.com\": a hostname must be ASCII: write it in its IDNA (punycode) form, \"k.example.com\""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantDenied(t, env.Client.Create(context.Background(), tc.lf), tc.want)
		})
	}
}
