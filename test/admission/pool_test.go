package admission

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// newPoolHead creates Gateway ns/shared marked as a pool's head.
func newPoolHead(t *testing.T, ns string) *gwv1.Gateway {
	t.Helper()
	gw := fixture.PoolHead(ns, gwv1.NamespacesFromAll)
	mustCreate(t, gw)
	waitCached(t, gw)
	return gw
}

// TestFragmentNamingASiblingIsDenied: a pool's Gateways are gatefold's to
// choose; a fragment names the head. A Gateway that only carries the label,
// with no ownerReference from the head, is no sibling.
func TestFragmentNamingASiblingIsDenied(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	head := newPoolHead(t, infra)
	sibling := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	sibling.Name = rules.SiblingName(head.Name, 2)
	sibling.Labels = map[string]string{v1alpha1.PoolLabel: head.Name}
	sibling.OwnerReferences = []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: head.Name, UID: head.UID, Controller: ptr.To(true)}}
	mustCreate(t, sibling)
	waitCached(t, sibling)

	err := env.Client.Create(context.Background(), newFragment(shop, "checkout", sibling, https("web", "checkout.example.com")))
	wantDenied(t, err, fmt.Sprintf(`spec.parentRef.name: Invalid value: "shared-2": Gateway %s/shared-2 is one gatefold created for the pool of Gateway %s/shared: set spec.parentRef.name to shared`, infra, infra))

	lookalike := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	lookalike.Name, lookalike.Labels = "lookalike", map[string]string{v1alpha1.PoolLabel: head.Name}
	mustCreate(t, lookalike)
	waitCached(t, lookalike)
	mustCreate(t, newFragment(shop, "blog", lookalike, https("web", "blog.example.com")))
}

// TestFragmentThatCanNeverBePlacedIsDenied: a pool head with two own
// listeners leaves 62 on every Gateway of the pool, so a fragment of 63 can
// never land: it is denied, and holds no claim a tenant would be denied for.
func TestFragmentThatCanNeverBePlacedIsDenied(t *testing.T) {
	infra, shop, blog := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	head := fixture.PoolHead(infra, gwv1.NamespacesFromAll,
		gwv1.Listener{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType},
		gwv1.Listener{Name: "admin", Port: 9090, Protocol: gwv1.HTTPProtocolType})
	mustCreate(t, head)
	waitCached(t, head)
	var big []gwv1.ListenerEntry
	for i := range 63 {
		big = append(big, https(fmt.Sprintf("l%02d", i), fmt.Sprintf("big-%02d.example.com", i)))
	}
	err := env.Client.Create(context.Background(), newFragment(shop, "big", head, big...))
	wantDenied(t, err, fmt.Sprintf(`spec.listeners: Too many: 63: This ListenerFragment needs 63 listeners, and a Gateway of the pool of %s/shared holds at most 62 besides the head's 2 own: split it into ListenerFragments of at most 62`, infra))
	mustCreate(t, newFragment(blog, "small", head, https("web", "big-00.example.com")))
	mustCreate(t, newFragment(shop, "fits", head, big[1:]...))
}

// TestPoolTakesATupleOnce: admission never denies for room, and a pool head
// keeps every hostname its fragments hold, past its own 64 listeners.
func TestPoolTakesATupleOnce(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	head := newPoolHead(t, infra)
	for i := range 70 {
		mustCreate(t, newFragment(shop, fmt.Sprintf("r%02d", i), head, https("web", fmt.Sprintf("r%02d.example.com", i))))
	}
	err := env.Client.Create(context.Background(), newFragment(shop, "again", head, https("web", "r66.example.com")))
	wantDenied(t, err, `spec.listeners[0].hostname: Duplicate value: "r66.example.com"`,
		fmt.Sprintf(`is already taken on Gateway %s/shared by listener "web" (HTTPS) of ListenerFragment r66`, infra))
}

// TestMistypedPoolMarkGetsAWarning: a pool mark gatefold does not read is
// said so to kubectl, not silently ignored.
func TestMistypedPoolMarkGetsAWarning(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := fixture.Gateway(ns, gwv1.NamespacesFromAll)
	gw.Annotations = map[string]string{v1alpha1.PoolAnnotation: "yes"}
	c, w := warningClient(t)
	if err := c.Create(context.Background(), gw); err != nil {
		t.Fatalf("Creating the Gateway must never be denied by gatefold: %v", err)
	}
	want := `metadata.annotations[gatefold.dev/pool] is "yes": only "true" makes this Gateway the head of a pool, so gatefold treats it as unmarked`
	if len(w.seen) != 1 || w.seen[0] != want {
		t.Errorf("Warnings = %q, want [%q]", w.seen, want)
	}
}
