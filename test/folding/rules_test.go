package folding

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// These tests show that what admission checks holds on every fold, so that
// the opt-out label, a revoked grant or an admission policy cannot get
// around it.

func certGrant(ns, fromNS string) *gwv1.ReferenceGrant {
	return &gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fragments-of-" + fromNS},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.Group(v1alpha1.GroupVersion.Group), Kind: "ListenerFragment", Namespace: gwv1.Namespace(fromNS)}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret", Name: ptr.To(gwv1.ObjectName("shared-cert"))}},
		},
	}
}

// foldedWithGrantedCertificate folds fragment shop/app, whose certificate is
// Secret shared-cert in namespace certs, granted there.
func foldedWithGrantedCertificate(t *testing.T, gw *gwv1.Gateway, shop, certs string) (*gwv1.ReferenceGrant, *v1alpha1.ListenerFragment) {
	t.Helper()
	grant := certGrant(certs, shop)
	create(t, grant)
	e := fixture.HTTPS("web", "app.example.com")
	e.TLS.CertificateRefs = []gwv1.SecretObjectReference{{Name: "shared-cert", Namespace: ptr.To(gwv1.Namespace(certs))}}
	lf := fixture.Fragment(shop, "app", gw, e)
	create(t, lf)
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")
	return grant, lf
}

func TestRevokedGrantWithdrawsTheListener(t *testing.T) {
	infra, shop, certs := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	grant, lf := foldedWithGrantedCertificate(t, gw, shop, certs)

	start := time.Now()
	if err := env.Client.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "default 8080/HTTP")
	t.Logf("The revoked grant's listener left the Gateway %v after the grant was deleted", time.Since(start).Round(time.Millisecond))
	testenv.Eventually(t, settle, func() error {
		got := &v1alpha1.ListenerFragment{}
		get(t, client.ObjectKeyFromObject(lf), got)
		c := listenerCondition(got, "web", "ResolvedRefs")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RefNotPermitted" ||
			!strings.Contains(c.Message, fmt.Sprintf("No ReferenceGrant in namespace %s lets ListenerFragments of namespace %s use Secret", certs, shop)) {
			return fmt.Errorf("ResolvedRefs = %+v, want False RefNotPermitted naming the grant to create", c)
		}
		return nil
	})

	grant.ResourceVersion = ""
	create(t, grant)
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")
}

// forbidHostname installs a ValidatingAdmissionPolicy that refuses Gateways
// in namespace ns carrying a listener for host, and waits until it works.
func forbidHostname(t *testing.T, ns, host string) {
	t.Helper()
	forbid(t, ns, fmt.Sprintf("object.spec.listeners.all(l, !has(l.hostname) || l.hostname != '%s')", host),
		"listeners for "+host+" are not allowed here", fixture.GatewayHTTPS("probe", host))
}

// forbid installs a ValidatingAdmissionPolicy that refuses Gateways in
// namespace ns unless expression holds, with message, and waits until a
// Gateway with the probe listener is refused.
func forbid(t *testing.T, ns, expression, message string, probeListener gwv1.Listener) {
	t.Helper()
	name := "forbid-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{gwv1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"gateways"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: expression,
				Message:    message,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	create(t, policy)
	create(t, binding)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding); _ = env.Client.Delete(ctx, policy) })
	probe := fixture.Gateway(ns, gwv1.NamespacesFromAll, probeListener)
	probe.Name = "probe"
	testenv.Eventually(t, settle, func() error {
		if err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); err == nil || !strings.Contains(err.Error(), message) {
			return fmt.Errorf("the policy does not refuse yet: %v", err)
		}
		return nil
	})
}

func TestRefusedFragmentDoesNotFreezeTheOthers(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	forbidHostname(t, infra, "forbidden.example.com")
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	// The refused fragment comes first in precedence, and one comes after.
	bad := fixture.Fragment(shop, "bad", gw, fixture.HTTPS("web", "forbidden.example.com"))
	create(t, bad)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has a resolution of one second
	good := fixture.Fragment(shop, "good", gw, fixture.HTTPS("web", "good.example.com"))
	create(t, good)

	wantListeners(t, gw, "default 8080/HTTP", folded(good, "web")+" 443/HTTPS good.example.com")
	testenv.WaitAccepted(t, env.Client, settle, good, metav1.ConditionTrue, "Accepted")
	st := testenv.WaitAccepted(t, env.Client, settle, bad, metav1.ConditionFalse, "ListenersNotValid")
	c := meta.FindStatusCondition(st.Status.Conditions, "Accepted")
	if !strings.Contains(c.Message, "listeners for forbidden.example.com are not allowed here") {
		t.Errorf("Accepted message = %q, want the API server's", c.Message)
	}

	// Fixed by its owner, it folds.
	updateSpec(t, bad, func(spec *v1alpha1.ListenerFragmentSpec) {
		spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("fixed.example.com"))
	})
	wantListeners(t, gw, "default 8080/HTTP", folded(good, "web")+" 443/HTTPS good.example.com", folded(bad, "web")+" 443/HTTPS fixed.example.com")
}

func TestForeignReferenceGrantIsNeverOverwritten(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	lf := fixture.Fragment(shop, "app", gw, fixture.HTTPS("web", "app.example.com"))
	theirs := &gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: merger.GrantName(rules.FragmentRef(lf))},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "elsewhere"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Service"}},
		},
	}
	create(t, theirs)
	create(t, lf)
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(shop)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == lf.Name && e.Reason == "ReferenceGrantNotOwned" {
				return nil
			}
		}
		return fmt.Errorf("no ReferenceGrantNotOwned event on the fragment")
	})
	got := &gwv1.ReferenceGrant{}
	get(t, client.ObjectKeyFromObject(theirs), got)
	if err := diffErr(theirs.Spec, got.Spec); err != nil || len(got.OwnerReferences) != 0 {
		t.Errorf("Someone else's ReferenceGrant was changed: %v, owners %v", err, got.OwnerReferences)
	}
}

// Two refused fragments want one tuple: leaving out the first gives it to
// the second, which the next round leaves out too; a good fragment after
// them folds.
func TestRefusedFragmentsSharingATupleDoNotFreezeTheOthers(t *testing.T) {
	infra, shop, other := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	forbidHostname(t, infra, "dup.example.com")
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	x := fixture.Fragment(other, "x", gw, fixture.HTTPS("web", "dup.example.com"))
	create(t, x)
	time.Sleep(1100 * time.Millisecond)
	y := fixture.Fragment(other, "y", gw, fixture.HTTPS("web", "dup.example.com"))
	create(t, y)
	time.Sleep(1100 * time.Millisecond)
	z := fixture.Fragment(shop, "z", gw, fixture.HTTPS("web", "good.example.com"))
	create(t, z)
	wantListeners(t, gw, "default 8080/HTTP", folded(z, "web")+" 443/HTTPS good.example.com")
	testenv.WaitAccepted(t, env.Client, settle, x, metav1.ConditionFalse, "ListenersNotValid")
	testenv.WaitAccepted(t, env.Client, settle, y, metav1.ConditionFalse, "ListenersNotValid")
	testenv.WaitAccepted(t, env.Client, settle, z, metav1.ConditionTrue, "Accepted")
}

// Refused fragments never keep a revoked grant's listener on the Gateway.
func TestRevokedGrantWithdrawsTheListenerBesideRefusedFragments(t *testing.T) {
	infra, shop, certs := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	forbid(t, infra, "object.spec.listeners.all(l, !has(l.hostname) || !l.hostname.endsWith('.forbidden.example.com'))",
		"forbidden hostnames", fixture.GatewayHTTPS("probe", "a.forbidden.example.com"))
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	grant, lf := foldedWithGrantedCertificate(t, gw, shop, certs)
	for _, name := range []string{"bad-1", "bad-2"} {
		create(t, fixture.Fragment(shop, name, gw, fixture.HTTPS("web", name+".forbidden.example.com")))
	}
	testenv.WaitAccepted(t, env.Client, settle, &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "bad-2"}}, metav1.ConditionFalse, "ListenersNotValid")
	if err := env.Client.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "default 8080/HTTP")
	testenv.Eventually(t, settle, func() error {
		got := &v1alpha1.ListenerFragment{}
		get(t, client.ObjectKeyFromObject(lf), got)
		if c := listenerCondition(got, "web", "ResolvedRefs"); c == nil || c.Reason != "RefNotPermitted" {
			return fmt.Errorf("ResolvedRefs = %+v, want RefNotPermitted", c)
		}
		return nil
	})
}

// A policy against the Gateway's own listener is its owner's to resolve: no
// fragment is blamed, the owner gets an event, and the fragment's status says
// its listener did not land.
func TestRefusalOfTheGatewaysOwnListenerBlamesNoFragment(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll, gwv1.Listener{Name: "legacy", Port: 8080, Protocol: gwv1.HTTPProtocolType})
	create(t, gw)
	forbid(t, infra, "object.spec.listeners.all(l, l.name != 'legacy')", "the listener named legacy must be renamed",
		gwv1.Listener{Name: "legacy", Port: 80, Protocol: gwv1.HTTPProtocolType})
	lf := fixture.Fragment(shop, "app", gw, fixture.HTTPS("web", "app.example.com"))
	create(t, lf)
	st := testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionFalse, "ListenersNotValid")
	if c := meta.FindStatusCondition(st.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "which its owner must resolve") {
		t.Errorf("Accepted message = %q, want it to say the Gateway's owner must resolve the refusal", c.Message)
	}
	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(infra)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Gateway" && e.Reason == "ApplyFailed" && strings.Contains(e.Note, "the listener named legacy must be renamed") {
				return nil
			}
		}
		return fmt.Errorf("no ApplyFailed event on Gateway %s", gw.Name)
	})
}

// A refused fragment that comes first on a Gateway holding only gatefold's
// listeners is still blamed once a later fragment is accepted without it:
// the order of the fragments never decides whose fault a refusal is.
func TestRefusedFirstFragmentIsBlamedOnAGatewayOfOnlyFoldedListeners(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	bad := fixture.Fragment(shop, "bad", gw, fixture.HTTPS("web", "bad.example.com"))
	create(t, bad)
	wantListeners(t, gw, "default 8080/HTTP", folded(bad, "web")+" 443/HTTPS bad.example.com")
	removeOwnListener(t, gw, "default")
	forbidHostname(t, infra, "bad.example.com")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has a resolution of one second
	good := fixture.Fragment(shop, "good", gw, fixture.HTTPS("web", "good.example.com"))
	create(t, good)
	wantListeners(t, gw, folded(good, "web")+" 443/HTTPS good.example.com")
	testenv.WaitAccepted(t, env.Client, settle, good, metav1.ConditionTrue, "Accepted")
	testenv.WaitAccepted(t, env.Client, settle, bad, metav1.ConditionFalse, "ListenersNotValid")
}

// While the API server refuses the Gateway for its owner's doing, a
// fragment's listener stays on the Gateway as it was, and so does the
// ReferenceGrant that lets the Gateway read its certificate.
func TestGatewayRefusalKeepsTheGrantsOfTheListenersThatStay(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll, gwv1.Listener{Name: "legacy", Port: 8080, Protocol: gwv1.HTTPProtocolType})
	create(t, gw)
	lf := fixture.Fragment(shop, "app", gw, fixture.HTTPS("web", "app.example.com"))
	create(t, lf)
	wantListeners(t, gw, "legacy 8080/HTTP", folded(lf, "web")+" 443/HTTPS app.example.com")
	lf = testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
	grant := client.ObjectKey{Namespace: shop, Name: merger.GrantName(rules.FragmentRef(lf))}
	testenv.Eventually(t, settle, func() error { return env.Client.Get(ctx, grant, &gwv1.ReferenceGrant{}) })

	forbid(t, infra, "object.spec.listeners.all(l, l.name != 'legacy')", "the listener named legacy must be renamed",
		gwv1.Listener{Name: "legacy", Port: 80, Protocol: gwv1.HTTPProtocolType})
	updateSpec(t, lf, func(spec *v1alpha1.ListenerFragmentSpec) {
		spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("moved.example.com"))
	})
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionFalse, "ListenersNotValid")
	want := []string{"legacy 8080/HTTP", folded(lf, "web") + " 443/HTTPS app.example.com"}
	wantListeners(t, gw, want...)
	// Folded again after the refusal, still: a fold's write is debounced,
	// and a changed one is looked at again a second later.
	testenv.Holds(t, env, 2*time.Second, testenv.Invariant{List: &gwv1.GatewayList{}, Namespace: infra, Check: func(gws map[string]client.Object) error {
		got, ok := gws[gw.Name].(*gwv1.Gateway)
		if !ok {
			return fmt.Errorf("Gateway %s is gone", gw.Name)
		}
		have := listeners(got)
		slices.Sort(have)
		return diffErr(want, have)
	}}, testenv.Invariant{List: &gwv1.ReferenceGrantList{}, Namespace: shop, Check: func(grants map[string]client.Object) error {
		if _, ok := grants[grant.Name]; !ok {
			return fmt.Errorf("the grant of a listener still on the Gateway is gone")
		}
		return nil
	}})
}

// The Gateway never carries a folded listener whose certificate Secret its
// namespace may not read yet: the grant is written before the Gateway.
func TestGrantIsWrittenBeforeTheListenerLands(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	create(t, gw)
	w, err := watcher.Watch(ctx, &gwv1.GatewayList{}, client.InNamespace(infra))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	lf := fixture.Fragment(shop, "app", gw, fixture.HTTPS("web", "app.example.com"))
	create(t, lf)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-w.ResultChan():
			got, ok := e.Object.(*gwv1.Gateway)
			if !ok || !slices.ContainsFunc(got.Spec.Listeners, func(l gwv1.Listener) bool { return string(l.Name) == folded(lf, "web") }) {
				continue
			}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: shop, Name: merger.GrantName(rules.FragmentRef(lf))}, &gwv1.ReferenceGrant{}); err != nil {
				t.Fatalf("The Gateway carries the folded listener before its ReferenceGrant exists: %v", err)
			}
			return
		case <-deadline:
			t.Fatal("The listener was not folded within 20s")
		}
	}
}
