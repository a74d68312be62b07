package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// accessLabel admits a namespace to Gateway infra/future.
var accessLabel = map[string]string{"gateway-access": "future"}

// TestTenantsCannotTakeOrBreakOthersListeners runs gatefold as installed
// and Traefik, and plays the adversarial tenants of issue 21: a squatter
// admitted late takes no live listener, one tenant's listener that Traefik
// refuses does not turn the shared Gateway Accepted=False, a deleted
// fragment's tuple is free at once, and a fragment being deleted says its
// listeners were withdrawn.
func TestTenantsCannotTakeOrBreakOthersListeners(t *testing.T) {
	env, dp, _ := startTraefik(t, "own", "victim", "squatter", "held", "heir")
	c := env.Client
	ctx := context.Background()
	httpPort, httpsPort := gwv1.PortNumber(dp.HTTPPort), gwv1.PortNumber(dp.HTTPSPort)
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "infra"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: accessLabel}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tenant-c", Labels: accessLabel}},
		{ObjectMeta: metav1.ObjectMeta{Name: "certs"}},
		// Admission skips it: what it stores only the merger and Traefik judge.
		{ObjectMeta: metav1.ObjectMeta{Name: "optout", Labels: map[string]string{"gateway-access": "future", webhook.AdmissionLabel: webhook.AdmissionDisabled}}},
	} {
		create(t, c, ns)
	}
	victimHost := "victim.example.com"
	gwRef := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "future"}}

	// 1. Tenant B claims the hostname for a Gateway that does not exist yet.
	squat := fixture.Fragment("tenant-b", "squat", gwRef, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, victimHost))
	create(t, c, squat)
	// 2. The Gateway comes, admitting labelled namespaces only.
	gw := fixture.Gateway("infra", gwv1.NamespacesFromSelector, fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "own.example.com"))
	gw.Name = "future"
	gw.Spec.GatewayClassName = gwv1.ObjectName(dp.GatewayClass)
	gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: accessLabel}
	create(t, c, gw)
	testenv.WaitAccepted(t, c, servedWithin, squat, metav1.ConditionFalse, string(v1alpha1.FragmentReasonNotAllowed))
	// 3. Tenant A takes it and serves it.
	time.Sleep(time.Until(squat.CreationTimestamp.Add(1100 * time.Millisecond))) // the squatter is the older
	victim := fixture.Fragment("tenant-a", "victim", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, victimHost))
	create(t, c, victim)
	create(t, c, routeTo("tenant-a", "victim", "", "victim", landedParent(waitLanded(t, c, victim, "http")["http"])))
	p := newProber(t, dp)
	p.waitServed("HTTP", victimHost, "/", "victim", nil)
	// 4. Tenant B's namespace is admitted: the older squatter is Conflicted,
	// and the victim keeps its listener, its claim and its traffic.
	labelNamespace(t, c, "tenant-b", accessLabel)
	waitConflicted(t, c, squat, map[gwv1.SectionName]string{"http": string(gwv1.ListenerReasonHostnameConflict)})
	create(t, c, routeTo("tenant-b", "squat", "", "squatter", gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace("infra")), Name: "future",
		SectionName: ptr.To(v1alpha1.ListenerName("tenant-b", "squat", "http"))}))
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		p.stillServed("HTTP", victimHost, "/", "victim", nil)
		wantFragmentAccepted(t, c, victim, metav1.ConditionTrue, string(v1alpha1.FragmentReasonAccepted))
	}
	if held := claimsHeldBy(t, c, "tenant-a/victim/"); len(held) == 0 {
		t.Errorf("No claim names tenant-a/victim any more")
	}

	// A protocol typo stored past admission is never folded.
	typo := fixture.Fragment("optout", "typo", gw, fixture.Entry("http", httpPort, "http", "typo.example.com"))
	create(t, c, typo)
	testenv.Eventually(t, servedWithin, func() error {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, client.ObjectKeyFromObject(typo), current)
		if len(current.Status.Listeners) == 0 {
			return fmt.Errorf("waiting for fragment optout/typo to report its protocol typo; last: %+v", current.Status)
		}
		l := current.Status.Listeners[0]
		a := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionAccepted))
		if a == nil || a.Reason != string(gwv1.ListenerReasonUnsupportedProtocol) || !strings.Contains(a.Message, "did you mean HTTP?") || l.Gateway != nil {
			return fmt.Errorf("waiting for fragment optout/typo to report its protocol typo; last: %s", testenv.ConditionString(a))
		}
		return nil
	})
	// One tenant's listener that Traefik refuses (a port it has no
	// entryPoint for) is withdrawn and reported on its own fragment; the
	// shared Gateway stays Accepted.
	noPort := fixture.Fragment("tenant-a", "noport", gw, fixture.Entry("http", 9, gwv1.HTTPProtocolType, "noport.example.com"))
	create(t, c, noPort)
	waitWithdrawn(t, env, noPort, "http", string(gwv1.ListenerReasonPortUnavailable), "")
	// A certificate in a namespace that grants ListenerFragments but not the
	// Gateway: gatefold admits it, Traefik cannot read it.
	ca, err := dataplane.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := tlsSecret(t, ca, "certs", "ungranted-tls", "ungranted.example.com")
	create(t, c, secret)
	create(t, c, secretGrant("certs", "fragments", v1alpha1.GroupVersion.Group, "ListenerFragment", "tenant-a"))
	ungranted := fixture.Entry("https", httpsPort, gwv1.HTTPSProtocolType, "ungranted.example.com")
	ungranted.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "ungranted-tls", Namespace: ptr.To(gwv1.Namespace("certs"))}}}
	refused := fixture.Fragment("tenant-a", "ungranted", gw, ungranted)
	create(t, c, refused)
	waitWithdrawn(t, env, refused, "https", string(gwv1.ListenerReasonRefNotPermitted), string(gwv1.ListenerConditionResolvedRefs))
	waitGatewayAccepted(t, env, gw)
	p.stillServed("HTTP", victimHost, "/", "victim", nil)

	// A fragment being deleted says its listeners were withdrawn.
	held := fixture.Fragment("tenant-a", "held", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "held.example.com"))
	held.Finalizers = []string{"example.com/hold"}
	create(t, c, held)
	create(t, c, routeTo("tenant-a", "held", "", "held", landedParent(waitLanded(t, c, held, "http")["http"])))
	p.waitServed("HTTP", "held.example.com", "/", "held", nil)
	if err := c.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, servedWithin, func() error {
		current := &v1alpha1.ListenerFragment{}
		get(t, c, client.ObjectKeyFromObject(held), current)
		a := meta.FindStatusCondition(current.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
		ok := a != nil && a.Status == metav1.ConditionFalse && a.Reason == string(v1alpha1.FragmentReasonDeleting) &&
			len(current.Status.Listeners) == 1 && current.Status.Listeners[0].Gateway == nil
		if ok {
			return nil
		}
		return fmt.Errorf("waiting for fragment tenant-a/held, being deleted, to say its listeners were withdrawn; last: %+v", current.Status)
	})
	p.waitNotServed("HTTP", "held.example.com", "/")
	current := &v1alpha1.ListenerFragment{}
	get(t, c, client.ObjectKeyFromObject(held), current)
	current.Finalizers = nil
	if err := c.Update(ctx, current); err != nil {
		t.Fatal(err)
	}

	// A deleted fragment's tuple is free at once, not after the claim grace.
	leaver := fixture.Fragment("tenant-a", "leaver", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "leaver.example.com"))
	create(t, c, leaver)
	waitLanded(t, c, leaver, "http")
	if err := c.Delete(ctx, leaver); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	heir := fixture.Fragment("tenant-c", "heir", gw, fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, "leaver.example.com"))
	// Every 200ms: each try is an admission request.
	err = testenv.Poll(10*time.Second, 200*time.Millisecond, func() error {
		if err := c.Create(ctx, heir.DeepCopy()); err != nil {
			return fmt.Errorf("tenant-a/leaver was deleted, its hostname is still taken: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("After 10s: %v", err)
	}
	t.Logf("tenant-c/heir was admitted %v after tenant-a/leaver was deleted", time.Since(deleted).Round(100*time.Millisecond))
	create(t, c, routeTo("tenant-c", "heir", "", "heir", landedParent(waitLanded(t, c, heir, "http")["http"])))
	p.waitServed("HTTP", "leaver.example.com", "/", "heir", nil)

	// The victim gone, the squatter is next in line for its hostname.
	if err := c.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	testenv.WaitAccepted(t, c, servedWithin, squat, metav1.ConditionTrue, string(v1alpha1.FragmentReasonAccepted))
	p.waitServed("HTTP", victimHost, "/", "squatter", nil)
}

// labelNamespace sets the namespace's labels.
func labelNamespace(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{}
	get(t, c, client.ObjectKey{Name: name}, ns)
	ns.Labels = labels
	if err := c.Update(context.Background(), ns); err != nil {
		t.Fatalf("Labelling namespace %s: %v", name, err)
	}
}

func fragmentAccepted(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment) (*metav1.Condition, int64) {
	t.Helper()
	current := &v1alpha1.ListenerFragment{}
	get(t, c, client.ObjectKeyFromObject(lf), current)
	return meta.FindStatusCondition(current.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)), current.Generation
}

// wantFragmentAccepted checks the fragment's Accepted condition now.
func wantFragmentAccepted(t *testing.T, c client.Client, lf *v1alpha1.ListenerFragment, status metav1.ConditionStatus, reason string) {
	t.Helper()
	if cond, _ := fragmentAccepted(t, c, lf); cond == nil || cond.Status != status || cond.Reason != reason {
		t.Fatalf("Fragment %s/%s Accepted = %s, want %s/%s", lf.Namespace, lf.Name, testenv.ConditionString(cond), status, reason)
	}
}

// waitWithdrawn waits until the fragment reports its listener refused by
// Traefik with reason (in condition also, when set) and withdrawn, and the
// Gateway no longer carries it; then checks that it stays so for 3s.
func waitWithdrawn(t *testing.T, env *devenv.Env, lf *v1alpha1.ListenerFragment, listener gwv1.SectionName, reason, also string) {
	t.Helper()
	key := client.ObjectKeyFromObject(lf)
	gwKey := client.ObjectKey{Namespace: string(*lf.Spec.ParentRef.Namespace), Name: string(lf.Spec.ParentRef.Name)}
	name := v1alpha1.ListenerName(lf.Namespace, lf.Name, listener)
	gatewayLacks := func(gw *gwv1.Gateway) error {
		if slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == name }) {
			return fmt.Errorf("the Gateway carries %s", name)
		}
		return nil
	}
	reported := func(current *v1alpha1.ListenerFragment) error {
		for _, l := range current.Status.Listeners {
			if l.Name != listener {
				continue
			}
			a := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionAccepted))
			p := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionProgrammed))
			ok := a != nil && a.Status == metav1.ConditionFalse && a.Reason == reason && a.ObservedGeneration == current.Generation &&
				strings.Contains(a.Message, "withdrew it") && p != nil && p.Reason == string(v1alpha1.FragmentReasonWithdrawn) && l.Gateway == nil
			if also != "" {
				cond := meta.FindStatusCondition(l.Conditions, also)
				ok = ok && cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == reason
			}
			if !ok {
				return fmt.Errorf("Accepted %s, Programmed %s", testenv.ConditionString(a), testenv.ConditionString(p))
			}
			return nil
		}
		return fmt.Errorf("no status of listener %s: %+v", listener, current.Status)
	}
	testenv.Eventually(t, servedWithin, func() error {
		current, gw := &v1alpha1.ListenerFragment{}, &gwv1.Gateway{}
		get(t, env.Client, key, current)
		get(t, env.Client, gwKey, gw)
		if err := errors.Join(gatewayLacks(gw), reported(current)); err != nil {
			return fmt.Errorf("waiting for fragment %s to report listener %s refused by Traefik (%s) and withdrawn; last: %w", key, listener, reason, err)
		}
		return nil
	})
	cameBack := func(err error) error {
		if err != nil {
			return fmt.Errorf("fragment %s listener %s, withdrawn, came back: %w", key, listener, err)
		}
		return nil
	}
	testenv.Holds(t, env, 3*time.Second,
		testenv.ObjectHolds(&gwv1.GatewayList{}, gwKey, func(o client.Object) error { return cameBack(gatewayLacks(o.(*gwv1.Gateway))) }),
		testenv.ObjectHolds(&v1alpha1.ListenerFragmentList{}, key, func(o client.Object) error { return cameBack(reported(o.(*v1alpha1.ListenerFragment))) }))
	t.Logf("Fragment %s: listener %s refused by Traefik (%s), withdrawn, and reported", key, listener, reason)
}

// waitGatewayAccepted waits until Traefik reports the Gateway Accepted at
// its generation, then checks that it stays so for 3s.
func waitGatewayAccepted(t *testing.T, env *devenv.Env, gw *gwv1.Gateway) {
	t.Helper()
	key := client.ObjectKeyFromObject(gw)
	accepted := func(current *gwv1.Gateway) error {
		cond := meta.FindStatusCondition(current.Status.Conditions, string(gwv1.GatewayConditionAccepted))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != current.Generation {
			return fmt.Errorf("Gateway %s Accepted %s", key, testenv.ConditionString(cond))
		}
		return nil
	}
	testenv.Eventually(t, servedWithin, func() error {
		current := &gwv1.Gateway{}
		get(t, env.Client, key, current)
		return accepted(current)
	})
	testenv.Holds(t, env, 3*time.Second, testenv.ObjectHolds(&gwv1.GatewayList{}, key, func(o client.Object) error {
		if err := accepted(o.(*gwv1.Gateway)); err != nil {
			return fmt.Errorf("Gateway %s is no longer Accepted: %w", key, err)
		}
		return nil
	}))
}
