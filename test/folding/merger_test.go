package folding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

var ctx = context.Background()

func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "merge-", Labels: labels}}
	create(t, ns)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
	return ns.Name
}

func get(t *testing.T, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(ctx, key, obj); err != nil {
		t.Fatalf("Reading %T %s: %v", obj, key, err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// settle is how long the merger may take to fold a change and report it.
const settle = 20 * time.Second

// listeners renders the Gateway's listeners as "name port/protocol hostname",
// in the Gateway's order.
func listeners(gw *gwv1.Gateway) []string {
	var out []string
	for _, l := range gw.Spec.Listeners {
		out = append(out, fixture.Summary(l))
	}
	return out
}

func folded(lf *v1alpha1.ListenerFragment, listener string) string {
	return string(v1alpha1.ListenerName(lf.Namespace, lf.Name, gwv1.SectionName(listener)))
}

// wantListeners waits until the Gateway has exactly want, in any order.
func wantListeners(t *testing.T, gw *gwv1.Gateway, want ...string) *gwv1.Gateway {
	t.Helper()
	got := &gwv1.Gateway{}
	slices.Sort(want)
	testenv.Eventually(t, settle, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gw), got); err != nil {
			return err
		}
		have := listeners(got)
		slices.Sort(have)
		if diff := cmp.Diff(want, have); diff != "" {
			return fmt.Errorf("Gateway %s listeners (-want +got):\n%s", gw.Name, diff)
		}
		return nil
	})
	return got
}

// updateSpec changes the fragment's spec as its route controller would,
// retrying when the merger's status write came first.
func updateSpec(t *testing.T, lf *v1alpha1.ListenerFragment, change func(*v1alpha1.ListenerFragmentSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lf), lf); err != nil {
			return err
		}
		change(&lf.Spec)
		return env.Client.Update(ctx, lf)
	})
	if err != nil {
		t.Fatalf("Updating fragment %s: %v", lf.Name, err)
	}
}

func listenerCondition(lf *v1alpha1.ListenerFragment, listener, condition string) *metav1.Condition {
	for _, l := range lf.Status.Listeners {
		if string(l.Name) == listener {
			return meta.FindStatusCondition(l.Conditions, condition)
		}
	}
	return nil
}

// removeOwnListener removes the Gateway's own listener as its owner would.
func removeOwnListener(t *testing.T, gw *gwv1.Gateway, name gwv1.SectionName) {
	t.Helper()
	current := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(gw), current)
	current.Spec.Listeners = slices.DeleteFunc(current.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == name })
	if err := env.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
}

func tcp(name string, port gwv1.PortNumber) gwv1.ListenerEntry {
	return fixture.Entry(name, port, gwv1.TCPProtocolType, "")
}

func TestFoldCreateUpdateDelete(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	lf := fixture.Fragment(shop, "checkout", gw, fixture.HTTPS("web", "checkout.example.com"))
	create(t, lf)

	got := wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS checkout.example.com")
	l := got.Spec.Listeners[slices.IndexFunc(got.Spec.Listeners, func(l gwv1.Listener) bool { return string(l.Name) == folded(lf, "web") })]
	if ns := l.TLS.CertificateRefs[0].Namespace; ns == nil || string(*ns) != shop {
		t.Errorf("Folded certificateRef namespace = %v, want the fragment's %s", ns, shop)
	}
	if rn := l.AllowedRoutes.Namespaces; *rn.From != gwv1.NamespacesFromSelector || rn.Selector.MatchLabels["kubernetes.io/metadata.name"] != shop {
		t.Errorf("Folded allowedRoutes.namespaces = %+v, want a selector of namespace %s", rn, shop)
	}
	st := testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
	want := &v1alpha1.GatewayListenerReference{Namespace: gwv1.Namespace(infra), Name: "shared", ListenerName: gwv1.SectionName(folded(lf, "web"))}
	if diff := cmp.Diff(want, st.Status.Listeners[0].Gateway); diff != "" {
		t.Errorf("Status listener gateway (-want +got):\n%s", diff)
	}

	updateSpec(t, lf, func(spec *v1alpha1.ListenerFragmentSpec) {
		spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("pay.example.com"))
	})
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS pay.example.com")
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted") // at the new generation

	if err := env.Client.Delete(ctx, lf); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "default 8080/HTTP")
}

func TestConflictsAreReportedAndResolvedInPrecedence(t *testing.T) {
	infra, a, b := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll, gwv1.Listener{Name: "db", Port: 5432, Protocol: gwv1.TCPProtocolType})
	create(t, gw)
	first := fixture.Fragment(a, "first", gw, fixture.HTTPS("web", "app.example.com"))
	create(t, first)
	first = testenv.WaitAccepted(t, env.Client, settle, first, metav1.ConditionTrue, "Accepted")
	// creationTimestamp has whole seconds; within one, namespace/name decides.
	time.Sleep(time.Until(first.CreationTimestamp.Add(time.Second)))
	second := fixture.Fragment(b, "second", gw, fixture.HTTPS("web", "app.example.com"), fixture.HTTPS("other", "other.example.com"))
	create(t, second)
	proto := fixture.Fragment(b, "proto", gw, gwv1.ListenerEntry{Name: "web", Port: 5432, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("db.example.com"))})
	create(t, proto)

	wantListeners(t, gw, "db 5432/TCP", folded(first, "web")+" 443/HTTPS app.example.com", folded(second, "other")+" 443/HTTPS other.example.com")
	st := testenv.WaitAccepted(t, env.Client, settle, second, metav1.ConditionTrue, "Accepted")
	c := listenerCondition(st, "web", "Conflicted")
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "HostnameConflict" {
		t.Errorf("Listener web Conflicted = %+v, want True/HostnameConflict", c)
	}
	// The holder is in another namespace: the message must not name it.
	if want := "by a listener (HTTPS) of a ListenerFragment in another namespace"; c != nil && !strings.Contains(c.Message, want) {
		t.Errorf("Conflict message %q does not contain %q", c.Message, want)
	}
	st = testenv.WaitAccepted(t, env.Client, settle, proto, metav1.ConditionFalse, "ListenersNotValid")
	if c := listenerCondition(st, "web", "Conflicted"); c == nil || c.Reason != "ProtocolConflict" || !strings.Contains(c.Message, `a listener of the Gateway itself (TCP)`) {
		t.Errorf("Listener web Conflicted = %+v, want ProtocolConflict with a listener of the Gateway itself", c)
	}
	wantEvent(t, second, "HostnameConflict")

	// Nothing is lost: once the winner goes, the loser is folded.
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "db 5432/TCP", folded(second, "web")+" 443/HTTPS app.example.com", folded(second, "other")+" 443/HTTPS other.example.com")
}

func wantEvent(t *testing.T, lf *v1alpha1.ListenerFragment, reason string) {
	t.Helper()
	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(lf.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == lf.Name && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event on fragment %s among %d events", reason, lf.Name, len(list.Items))
	})
}

func TestAllowedListeners(t *testing.T) {
	tests := map[string]struct {
		from     gwv1.FromNamespaces
		selector map[string]string
		sameNS   bool
		labels   map[string]string
		want     string
	}{
		"None, the default, admits no namespace":        {from: gwv1.NamespacesFromNone, sameNS: true, want: "NotAllowed"},
		"Same admits the Gateway's namespace":           {from: gwv1.NamespacesFromSame, sameNS: true, want: "Accepted"},
		"Same does not admit another namespace":         {from: gwv1.NamespacesFromSame, want: "NotAllowed"},
		"All admits another namespace":                  {from: gwv1.NamespacesFromAll, want: "Accepted"},
		"Selector admits a namespace with the labels":   {from: gwv1.NamespacesFromSelector, selector: map[string]string{"team": "shop"}, labels: map[string]string{"team": "shop"}, want: "Accepted"},
		"Selector does not admit one without the label": {from: gwv1.NamespacesFromSelector, selector: map[string]string{"team": "shop"}, want: "NotAllowed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			infra := newNamespace(t, nil)
			ns := infra
			if !tc.sameNS {
				ns = newNamespace(t, tc.labels)
			}
			gw := fixture.Gateway(infra, tc.from)
			if tc.selector != nil {
				gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: tc.selector}
			}
			create(t, gw)
			lf := fixture.Fragment(ns, "f", gw, fixture.HTTPS("web", "app.example.com"))
			create(t, lf)
			if tc.want == "Accepted" {
				testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
				wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")
				return
			}
			st := testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionFalse, "NotAllowed")
			c := meta.FindStatusCondition(st.Status.Conditions, "Accepted")
			if !strings.Contains(c.Message, "does not allow listeners from namespace "+ns) {
				t.Errorf("NotAllowed message %q does not say which namespace", c.Message)
			}
			wantListeners(t, gw, "default 8080/HTTP")
		})
	}
}

func TestRelabelledNamespaceIsAdmitted(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromSelector)
	gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
	create(t, gw)
	lf := fixture.Fragment(shop, "f", gw, fixture.HTTPS("web", "app.example.com"))
	create(t, lf)
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionFalse, "NotAllowed")

	ns := &corev1.Namespace{}
	get(t, client.ObjectKey{Name: shop}, ns)
	ns.Labels["team"] = "shop"
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")
}

func TestHumanListenerSurvivesEveryFold(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	one := fixture.Fragment(shop, "one", gw, fixture.HTTPS("web", "one.example.com"))
	create(t, one)
	wantListeners(t, gw, "default 8080/HTTP", folded(one, "web")+" 443/HTTPS one.example.com")

	// A human adds a listener with their own field manager, as kubectl edit does.
	current := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(gw), current)
	current.Spec.Listeners = append(current.Spec.Listeners, fixture.GatewayHTTPS("human", "human.example.com"))
	if err := env.Client.Update(ctx, current, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	two := fixture.Fragment(shop, "two", gw, fixture.HTTPS("web", "two.example.com"))
	create(t, two)
	wantListeners(t, gw, "default 8080/HTTP", "human 443/HTTPS human.example.com",
		folded(one, "web")+" 443/HTTPS one.example.com", folded(two, "web")+" 443/HTTPS two.example.com")
	if err := env.Client.Delete(ctx, one); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, two); err != nil {
		t.Fatal(err)
	}
	got := wantListeners(t, gw, "default 8080/HTTP", "human 443/HTTPS human.example.com")
	if diff := cmp.Diff(current.Spec.Listeners[len(current.Spec.Listeners)-1], got.Spec.Listeners[slices.IndexFunc(got.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == "human" })]); diff != "" {
		t.Errorf("The human's listener changed (-before +after):\n%s", diff)
	}
}

func TestTooManyListeners(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	var own []gwv1.Listener
	for i := range 61 {
		own = append(own, gwv1.Listener{Name: gwv1.SectionName(fmt.Sprintf("tcp-%d", i)), Port: gwv1.PortNumber(10000 + i), Protocol: gwv1.TCPProtocolType})
	}
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll, own...)
	create(t, gw)
	fits := fixture.Fragment(shop, "fits", gw, tcp("a", 20000), tcp("b", 20001))
	create(t, fits)
	testenv.WaitAccepted(t, env.Client, settle, fits, metav1.ConditionTrue, "Accepted")
	overflow := fixture.Fragment(shop, "overflow", gw, tcp("a", 20002), tcp("b", 20003))
	create(t, overflow)
	st := testenv.WaitAccepted(t, env.Client, settle, overflow, metav1.ConditionFalse, "TooManyListeners")
	if c := listenerCondition(st, "b", "Accepted"); c == nil || c.Reason != "TooManyListeners" || !strings.Contains(c.Message, "63 of its 64 listeners taken") {
		t.Errorf("Listener b Accepted = %+v, want TooManyListeners saying 63 of 64 are taken", c)
	}
	got := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(gw), got)
	if len(got.Spec.Listeners) != 63 {
		t.Errorf("Gateway has %d listeners, want 63", len(got.Spec.Listeners))
	}
	// A Gateway not marked as a pool's head never grows one.
	if gws := pool(t, gw); len(gws) != 1 {
		t.Errorf("An unmarked Gateway has %d Gateways in its pool, want itself alone", len(gws))
	}
}

// acceptedFragment creates a Gateway and a fragment in its namespace, and
// waits until the fragment is accepted.
func acceptedFragment(t *testing.T) (*gwv1.Gateway, *v1alpha1.ListenerFragment) {
	t.Helper()
	infra := newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromSame)
	create(t, gw)
	lf := fixture.Fragment(infra, "f", gw, fixture.HTTPS("web", "app.example.com"))
	create(t, lf)
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
	return gw, lf
}

func TestGatewayDeletionMarksFragmentsNotAccepted(t *testing.T) {
	gw, lf := acceptedFragment(t)
	infra := gw.Namespace
	if err := env.Client.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	st := testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionFalse, "ParentNotAccepted")
	if len(st.Status.Listeners) != 0 {
		t.Errorf("A fragment of a deleted Gateway still reports %d listeners", len(st.Status.Listeners))
	}
	// Created again, the Gateway gets the listener back.
	create(t, fixture.Gateway(infra, gwv1.NamespacesFromSame))
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")
}

func TestStatusMirrorsTheGatewayImplementation(t *testing.T) {
	gw, lf := acceptedFragment(t)
	got := wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")

	report := func(observed int64) {
		t.Helper()
		now := metav1.Now()
		got.Status.Listeners = []gwv1.ListenerStatus{{
			Name: gwv1.SectionName(folded(lf, "web")), AttachedRoutes: 3, SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: now, ObservedGeneration: observed},
				{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", LastTransitionTime: now, ObservedGeneration: observed},
				{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", LastTransitionTime: now, ObservedGeneration: observed},
			},
		}}
		if err := env.Client.Status().Update(ctx, got); err != nil {
			t.Fatal(err)
		}
	}
	// A report for the generation before the listener was folded (a listener
	// of the same name, since removed) says nothing about this listener.
	report(got.Generation - 1)
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		st := &v1alpha1.ListenerFragment{}
		get(t, client.ObjectKeyFromObject(lf), st)
		if p := meta.FindStatusCondition(st.Status.Conditions, "Programmed"); p == nil || p.Reason != "Pending" || st.Status.Listeners[0].AttachedRoutes != 0 {
			t.Fatalf("A report on an older generation was mirrored: %+v", st.Status)
		}
	}
	// The Gateway implementation reports the folded listener.
	report(got.Generation)
	testenv.Eventually(t, settle, func() error {
		st := &v1alpha1.ListenerFragment{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lf), st); err != nil {
			return err
		}
		p := meta.FindStatusCondition(st.Status.Conditions, "Programmed")
		if p == nil || p.Status != metav1.ConditionTrue || len(st.Status.Listeners) != 1 || st.Status.Listeners[0].AttachedRoutes != 3 ||
			listenerCondition(st, "web", "ResolvedRefs") == nil {
			return fmt.Errorf("fragment status does not mirror the Gateway's: %+v", st.Status)
		}
		return nil
	})
}

func TestReferenceGrantLifecycle(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	e := fixture.HTTPS("web", "app.example.com")
	e.TLS.CertificateRefs = []gwv1.SecretObjectReference{{Name: "app-cert"}, {Name: "app-cert-ecdsa"}}
	lf := fixture.Fragment(shop, "app", gw, e, fixture.HTTPS("api", "api.example.com"))
	create(t, lf)
	lf = testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")

	key := client.ObjectKey{Namespace: shop, Name: merger.GrantName(rules.FragmentRef(lf))}
	wantGrant := func(secrets ...string) {
		t.Helper()
		testenv.Eventually(t, settle, func() error {
			g := &gwv1.ReferenceGrant{}
			if err := env.Client.Get(ctx, key, g); err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(g); ref == nil || ref.UID != lf.UID {
				return fmt.Errorf("grant is not controlled by the fragment: %+v", g.OwnerReferences)
			}
			from := []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: gwv1.Namespace(infra)}}
			var to []gwv1.ReferenceGrantTo
			for _, s := range secrets {
				to = append(to, gwv1.ReferenceGrantTo{Group: "", Kind: "Secret", Name: ptr.To(gwv1.ObjectName(s))})
			}
			return diffErr(gwv1.ReferenceGrantSpec{From: from, To: to}, g.Spec)
		})
	}
	wantGrant("app-cert", "app-cert-ecdsa", "cert")

	// Someone deletes it: it comes back.
	if err := env.Client.Delete(ctx, &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	wantGrant("app-cert", "app-cert-ecdsa", "cert")

	// The fragment drops a listener: the grant narrows to what is still used.
	updateSpec(t, lf, func(spec *v1alpha1.ListenerFragmentSpec) { spec.Listeners = spec.Listeners[:1] })
	wantGrant("app-cert", "app-cert-ecdsa")

	// No TLS left: the grant goes.
	updateSpec(t, lf, func(spec *v1alpha1.ListenerFragmentSpec) {
		spec.Listeners = []gwv1.ListenerEntry{{Name: "web", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("app.example.com"))}}
	})
	testenv.Eventually(t, settle, func() error {
		if err := env.Client.Get(ctx, key, &gwv1.ReferenceGrant{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("unused grant still exists (%v)", err)
		}
		return nil
	})
}

func TestNoReferenceGrantInTheGatewaysNamespace(t *testing.T) {
	gw, _ := acceptedFragment(t)
	list := &gwv1.ReferenceGrantList{}
	if err := env.Client.List(ctx, list, client.InNamespace(gw.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("A fragment in the Gateway's own namespace got %d ReferenceGrants", len(list.Items))
	}
}

func diffErr(want, got any) error {
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("(-want +got):\n%s", diff)
	}
	return nil
}

// mergerWrites counts the merger's writes of Gateways, ReferenceGrants and
// ListenerFragments in the namespaces.
func mergerWrites(t *testing.T, namespaces ...string) int {
	t.Helper()
	return mergerWritesOf(t, func(e testenv.AuditEvent) bool { return slices.Contains(namespaces, e.ObjectRef.Namespace) })
}

// mergerWritesOf counts the merger's writes that match, as the API server's
// audit log has them: sent, whether or not they changed anything.
func mergerWritesOf(t *testing.T, match func(testenv.AuditEvent) bool) int {
	t.Helper()
	events, err := testenv.ReadAuditLog(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.UserAgent == mergerAgent && match(e) {
			n++
		}
	}
	return n
}

func TestSteadyStateMakesNoWrites(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, map[string]string{"team": "shop"})
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	for i := range 3 {
		lf := fixture.Fragment(shop, fmt.Sprintf("f%d", i), gw, fixture.HTTPS("web", fmt.Sprintf("f%d.example.com", i)))
		create(t, lf)
		testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
	}
	time.Sleep(time.Second) // let the last events settle
	fragments := unwritten(t, &v1alpha1.ListenerFragmentList{}, shop)
	writes := mergerWrites(t, infra, shop)

	// Events that make the merger fold the Gateway again without changing
	// anything, one at a time: the merger folds a burst of events once.
	key := client.ObjectKeyFromObject(gw)
	foldedAgain := func(since int) int {
		t.Helper()
		testenv.Eventually(t, settle, func() error {
			if n := folds.of(key); n <= since {
				return fmt.Errorf("the merger did not fold Gateway %s again", key)
			}
			return nil
		})
		return folds.of(key)
	}
	before := folds.of(key)
	current := &gwv1.Gateway{}
	get(t, key, current)
	current.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := env.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	n := foldedAgain(before)
	ns := &corev1.Namespace{}
	get(t, client.ObjectKey{Name: shop}, ns)
	ns.Labels["touched"] = "yes"
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	foldedAgain(n)
	testenv.Holds(t, env, time.Second, fragments, unchanged(&gwv1.GatewayList{}, infra, map[string]string{gw.Name: current.ResourceVersion}))
	if n := mergerWrites(t, infra, shop); n != writes {
		t.Errorf("The merger sent %d writes in a steady state", n-writes)
	}
}

func TestLastListenerIsKeptAndReported(t *testing.T) {
	gw, lf := acceptedFragment(t)
	// The Gateway's owner removes its own listener: only gatefold's is left.
	removeOwnListener(t, gw, "default")
	if err := env.Client.Delete(ctx, lf); err != nil {
		t.Fatal(err)
	}
	// A Gateway needs a listener: the API server refuses the fold, which the
	// Gateway's owner sees as an event.
	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(gw.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Gateway" && e.Reason == "ApplyFailed" && strings.Contains(e.Note, "spec.listeners") {
				return nil
			}
		}
		return fmt.Errorf("no ApplyFailed event on Gateway %s", gw.Name)
	})
	wantListeners(t, gw, folded(lf, "web")+" 443/HTTPS app.example.com")
}

// A burst of fragments for one Gateway is folded once its events go quiet:
// one or two Gateway writes in all, not one per fragment.
func TestBurstOfFragmentsCostsOneOrTwoGatewayWrites(t *testing.T) {
	gw, _ := acceptedFragment(t)
	before := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(gw), before)

	// A route controller creates them as its routes come, a little apart:
	// one fold per event would write the Gateway up to once each.
	const burst = 40
	want := []string{fixture.Summary(before.Spec.Listeners[0]), fixture.Summary(before.Spec.Listeners[1])}
	for i := range burst {
		lf := fixture.Fragment(gw.Namespace, fmt.Sprintf("f%d", i), gw, fixture.HTTPS("web", fmt.Sprintf("f%d.example.com", i)))
		want = append(want, fmt.Sprintf("%s 443/HTTPS f%d.example.com", folded(lf, "web"), i))
		create(t, lf)
		time.Sleep(30 * time.Millisecond)
	}
	after := wantListeners(t, gw, want...)
	if writes := after.Generation - before.Generation; writes > 2 {
		t.Errorf("The merger wrote the Gateway %d times for a burst of %d fragments, want at most 2", writes, burst)
	}
}
