package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// TestTraefikServesAPoolsSiblings runs gatefold as installed with Traefik
// as the implementation of a pool head's class, and follows the pool as a
// route controller does: 64 one-listener fragments fill the head (63 beside
// its own listener) and the 64th lands on sibling shared-2; routes attach
// where each fragment's status says it landed. Real requests check that
// Traefik serves them, the sibling's included, and the head's own listener
// as the sibling carries it; Traefik's status of the sibling reaches the
// sibling's fragment; a deleted fragment's hostname stops being served,
// while the fragment on the sibling stays there when the head frees room.
func TestTraefikServesAPoolsSiblings(t *testing.T) {
	env, dp, _ := startTraefik(t, "own", "own-2", "app00", "app62", "app63")
	c := env.Client
	ctx := context.Background()
	httpPort := gwv1.PortNumber(dp.HTTPPort)
	for _, ns := range []string{"infra", "apps"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}

	head := fixture.PoolHead("infra", gwv1.NamespacesFromAll, fixture.Own("own", httpPort, gwv1.HTTPProtocolType, "own.example.com"))
	head.Spec.GatewayClassName = gwv1.ObjectName(dp.GatewayClass)
	create(t, c, head)
	siblingKey := client.ObjectKey{Namespace: head.Namespace, Name: rules.SiblingName(head.Name, 2)}

	// Created one after another, as a route controller would: the last is
	// the youngest, so placement in precedence order puts it, alone, on the
	// sibling.
	app := func(i int) *v1alpha1.ListenerFragment {
		return fixture.Fragment("apps", fmt.Sprintf("app%02d", i), head,
			fixture.Entry("http", httpPort, gwv1.HTTPProtocolType, fmt.Sprintf("app%02d.example.com", i)))
	}
	const apps = rules.MaxListeners
	for i := range apps {
		create(t, c, app(i))
	}
	onSibling := waitPoolLanded(t, c, "apps", apps)[siblingKey.Name]
	if want := []string{"app63"}; !slices.Equal(onSibling, want) {
		t.Fatalf("Fragments on Gateway %s: %v, want %v (the head holds %d besides its own listener)", siblingKey, onSibling, want, rules.MaxListeners-1)
	}
	checkSibling(t, c, head, siblingKey, 1)

	// The routes follow the fragments' statuses, as docs/api.md tells a
	// route controller to; the head's own listener is served on both
	// Gateways, by a route each.
	create(t, c, route("infra", "own", "", "own", "own"))
	create(t, c, routeTo("infra", "own-2", "/sibling", "own-2",
		landedParent(v1alpha1.GatewayListenerReference{Namespace: "infra", Name: gwv1.ObjectName(siblingKey.Name), ListenerName: "own"})))
	for _, i := range []int{0, 62, 63} {
		lf := app(i)
		landed := waitLanded(t, c, lf, "http")["http"]
		create(t, c, routeTo(lf.Namespace, lf.Name, "", lf.Name, landedParent(landed)))
	}

	p := newProber(t, dp)
	for _, name := range []string{"app00", "app62", "app63"} {
		p.waitServed("HTTP", name+".example.com", "/", name, nil)
	}
	p.waitServed("HTTP", "own.example.com", "/", "own", nil)
	p.waitServed("HTTP", "own.example.com", "/sibling", "own-2", nil)
	p.waitNotServed("HTTP", "app01.example.com", "/") // folded, but no route

	// Traefik's status of each Gateway reaches the fragments on it, the
	// sibling's included.
	for _, i := range []int{0, 62, 63} {
		waitProgrammed(t, c, app(i), map[gwv1.SectionName]int32{"http": 1})
	}
	for _, key := range []client.ObjectKey{client.ObjectKeyFromObject(head), siblingKey} {
		waitOwnListenerProgrammed(t, c, key, "own", 1)
		checkGatewayAddress(t, c, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	}

	// Room freed on the head does not pull the sibling's fragment back: its
	// route stays attached and served.
	if err := c.Delete(ctx, app(0)); err != nil {
		t.Fatal(err)
	}
	p.waitNotServed("HTTP", "app00.example.com", "/")
	p.stillServed("HTTP", "app63.example.com", "/", "app63", nil)
	if landed := waitLanded(t, c, app(63), "http")["http"]; string(landed.Name) != siblingKey.Name {
		t.Errorf("Fragment apps/app63 landed on Gateway %s once apps/app00 freed room on the head, want %s where it was", landed.Name, siblingKey.Name)
	}
	checkSibling(t, c, head, siblingKey, 1)

	// The sibling's fragment deleted, its hostname is no longer served; the
	// rest are, the head's own listener on the sibling too (an empty
	// sibling stays for --pool-sibling-grace, 5 minutes).
	if err := c.Delete(ctx, app(63)); err != nil {
		t.Fatal(err)
	}
	p.waitNotServed("HTTP", "app63.example.com", "/")
	p.stillServed("HTTP", "app62.example.com", "/", "app62", nil)
	p.stillServed("HTTP", "own.example.com", "/", "own", nil)
	p.stillServed("HTTP", "own.example.com", "/sibling", "own-2", nil)
	checkSibling(t, c, head, siblingKey, 0)
}

// waitPoolLanded waits until each of the want one-listener fragments of
// namespace ns is Accepted at its generation with its listener folded, and
// returns their names by the Gateway they landed on.
func waitPoolLanded(t *testing.T, c client.Client, ns string, want int) map[string][]string {
	t.Helper()
	var on map[string][]string
	testenv.Eventually(t, servedWithin, func() error {
		list := &v1alpha1.ListenerFragmentList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatalf("Listing the fragments of namespace %s: %v", ns, err)
		}
		on = map[string][]string{}
		var waiting []string
		for _, lf := range list.Items {
			cond := meta.FindStatusCondition(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != lf.Generation ||
				len(lf.Status.Listeners) != 1 || lf.Status.Listeners[0].Gateway == nil {
				waiting = append(waiting, fmt.Sprintf("%s (Accepted %s)", lf.Name, testenv.ConditionString(cond)))
				continue
			}
			gw := string(lf.Status.Listeners[0].Gateway.Name)
			on[gw] = append(on[gw], lf.Name)
		}
		if len(list.Items) == want && len(waiting) == 0 {
			return nil
		}
		return fmt.Errorf("waiting for the %d fragments of namespace %s to land; last: %d fragments, %d not landed, e.g. %v", want, ns, len(list.Items), len(waiting), waiting[:min(3, len(waiting))])
	})
	var counts []string
	for gw, names := range on {
		slices.Sort(names)
		counts = append(counts, fmt.Sprintf("%s: %d", gw, len(names)))
	}
	slices.Sort(counts)
	t.Logf("The %d fragments of namespace %s landed on Gateways %s", want, ns, strings.Join(counts, ", "))
	return on
}

// checkSibling checks that the Gateway at key is a sibling in head's pool
// (head as created: its own listeners only), of the head's class, carrying
// the head's own listeners as the head has them, and folded ones besides.
func checkSibling(t *testing.T, c client.Client, head *gwv1.Gateway, key client.ObjectKey, folded int) {
	t.Helper()
	sib := &gwv1.Gateway{}
	get(t, c, key, sib)
	if of, ok := rules.HeadOf(sib); !ok || of != client.ObjectKeyFromObject(head) || !metav1.IsControlledBy(sib, head) {
		t.Errorf("Gateway %s is not a sibling controlled by %s: labels %v, ownerReferences %+v", key, client.ObjectKeyFromObject(head), sib.Labels, sib.OwnerReferences)
	}
	if sib.Spec.GatewayClassName != head.Spec.GatewayClassName {
		t.Errorf("Gateway %s has class %s, its head %s", key, sib.Spec.GatewayClassName, head.Spec.GatewayClassName)
	}
	var carried []string
	for _, own := range head.Spec.Listeners {
		i := slices.IndexFunc(sib.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == own.Name })
		if i < 0 || !equality.Semantic.DeepEqual(sib.Spec.Listeners[i], own) {
			t.Errorf("Gateway %s does not carry its head's own listener %s as the head has it: %+v", key, fixture.Summary(own), sib.Spec.Listeners)
			continue
		}
		carried = append(carried, fixture.Summary(own))
	}
	if got := len(sib.Spec.Listeners) - len(carried); got != folded {
		t.Errorf("Gateway %s has %d listeners besides its head's own, want %d folded: %+v", key, got, folded, sib.Spec.Listeners)
	}
	t.Logf("Gateway %s: a sibling of %s carrying its own listeners %v and %d folded", key, head.Name, carried, folded)
}

// waitOwnListenerProgrammed waits until Traefik reports the Gateway's
// listener Accepted and Programmed at the Gateway's generation, with
// attached routes.
func waitOwnListenerProgrammed(t *testing.T, c client.Client, key client.ObjectKey, listener gwv1.SectionName, attached int32) {
	t.Helper()
	testenv.Eventually(t, servedWithin, func() error {
		gw := &gwv1.Gateway{}
		get(t, c, key, gw)
		i := slices.IndexFunc(gw.Status.Listeners, func(l gwv1.ListenerStatus) bool { return l.Name == listener })
		if i < 0 {
			return fmt.Errorf("waiting for Traefik to report listener %s of Gateway %s programmed with %d routes; last: no %s in status.listeners %+v", listener, key, attached, listener, gw.Status.Listeners)
		}
		l := gw.Status.Listeners[i]
		for _, typ := range []gwv1.ListenerConditionType{gwv1.ListenerConditionAccepted, gwv1.ListenerConditionProgrammed} {
			cond := meta.FindStatusCondition(l.Conditions, string(typ))
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != gw.Generation {
				return fmt.Errorf("waiting for Traefik to report listener %s of Gateway %s programmed with %d routes; last: %s %s at generation %d", listener, key, attached, typ, testenv.ConditionString(cond), gw.Generation)
			}
		}
		if l.AttachedRoutes == attached {
			return nil
		}
		return fmt.Errorf("waiting for Traefik to report listener %s of Gateway %s programmed with %d routes; last: attachedRoutes %d", listener, key, attached, l.AttachedRoutes)
	})
	t.Logf("Gateway %s: Traefik reports its listener %s Programmed with %d attached routes", key, listener, attached)
}
