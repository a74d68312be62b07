package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/webhook"
)

// The replicas check fragments against the ListenerSets of both
// controllers' classes; the native one's class lists the ListenerSet
// feature, so its ListenerSets are not gatefold's to fold or defend.
const (
	foldedController = "gatefold.dev/test-folded"
	nativeController = "gatefold.dev/test-native"
)

// classGateway creates a GatewayClass of controller, listing features in its
// status, and Gateway ns/shared of that class, and waits until every
// replica holds both.
func classGateway(t *testing.T, ns, controller string, features ...gwv1.FeatureName) *gwv1.Gateway {
	t.Helper()
	gc := fixture.GatewayClass(controller, features...)
	status := gc.Status
	mustCreate(t, gc)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), gc) })
	gc.Status = status
	if err := env.Client.Status().Update(context.Background(), gc); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, "see the GatewayClass's features", func(c client.Reader) bool {
		got := &gwv1.GatewayClass{}
		return c.Get(context.Background(), client.ObjectKeyFromObject(gc), got) == nil && len(got.Status.SupportedFeatures) == len(features)
	})
	gw := fixture.Gateway(ns, gwv1.NamespacesFromAll)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gc.Name)
	mustCreate(t, gw)
	waitCached(t, gw)
	return gw
}

var newListenerSet = fixture.ListenerSet

func TestFragmentIsDeniedAListenerSetsHostname(t *testing.T) {
	infra, shop, blog := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	gw := classGateway(t, infra, foldedController)
	ls := newListenerSet(shop, "storefront", gw, https("web", "app.example.com"))
	mustCreate(t, ls)
	waitCached(t, ls)

	err := env.Client.Create(context.Background(), newFragment(shop, "checkout", gw, https("https", "app.example.com")))
	wantDenied(t, err, `spec.listeners[0].hostname: Duplicate value: "app.example.com"`,
		`already taken on Gateway `+infra+`/shared by listener "web" (HTTPS) of ListenerSet storefront: choose another hostname or port`)
	err = env.Client.Create(context.Background(), newFragment(blog, "home", gw, https("https", "app.example.com")))
	wantDenied(t, err, "by a listener (HTTPS) of a ListenerSet in another namespace")
	if strings.Contains(err.Error(), "storefront") {
		t.Errorf("Denial to namespace %s names the ListenerSet in %s: %v", blog, shop, err)
	}

	// ListenerSets are never denied, as upstream: a conflicting one is
	// stored, and the merger reports the conflict in its status.
	pay := newFragment(shop, "pay", gw, https("https", "pay.example.com"))
	mustCreate(t, pay)
	waitCached(t, pay)
	late := newListenerSet(shop, "late", gw, https("web", "pay.example.com"))
	mustCreate(t, late)
	waitCached(t, late)

	// The Gateway's owner is warned of the listeners an own listener shadows.
	c, w := warningClient(t)
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayHTTPS("main", "app.example.com"), gatewayHTTPS("pay", "pay.example.com"))
	if err := c.Update(context.Background(), gw); err != nil {
		t.Fatalf("Updating the Gateway must never be denied by gatefold: %v", err)
	}
	want := []string{
		`spec.listeners[1] ("main", hostname app.example.com on port 443 (HTTPS)) conflicts with 1 ListenerSet listener(s): the Gateway's own listener wins and those are reported Conflicted`,
		`spec.listeners[2] ("pay", hostname pay.example.com on port 443 (HTTPS)) conflicts with 1 ListenerFragment and 1 ListenerSet listener(s): the Gateway's own listener wins and those are reported Conflicted`,
	}
	if diff := cmp.Diff(want, w.seen); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
}

func TestFragmentIsNotCheckedAgainstANativeClassesListenerSets(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := classGateway(t, infra, nativeController, "ListenerSet")
	ls := newListenerSet(shop, "storefront", gw, https("web", "app.example.com"))
	mustCreate(t, ls)
	waitCached(t, ls)
	// The implementation orders the Gateway's listeners, folded ones
	// included, before its ListenerSets: gatefold has nothing to defend.
	mustCreate(t, newFragment(shop, "checkout", gw, https("https", "app.example.com")))
}

// A ListenerSet is stored whatever it conflicts with; only what the fold
// places may deny a fragment, or any tenant could block a port for others
// with a ListenerSet that never folds.
func TestListenerSetsUnfoldedListenersDenyNothing(t *testing.T) {
	infra, shop, blog := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	gw := classGateway(t, infra, foldedController) // its own listener: HTTP on 8080
	tcp := newListenerSet(blog, "db", gw, gwv1.ListenerEntry{Name: "pg", Port: 8080, Protocol: gwv1.TCPProtocolType})
	ungranted := https("web", "secret.example.com")
	ungranted.TLS.CertificateRefs[0].Namespace = ptr.To(gwv1.Namespace(infra))
	refs := newListenerSet(blog, "refs", gw, ungranted)
	for _, ls := range []*gwv1.ListenerSet{tcp, refs} {
		mustCreate(t, ls)
		waitCached(t, ls)
	}
	mustCreate(t, newFragment(shop, "web", gw, gwv1.ListenerEntry{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("web.example.com"))}))
	mustCreate(t, newFragment(shop, "secret", gw, https("https", "secret.example.com")))
}

// ListenerSets fold onto the Gateway of their ListenerSets, whose 64
// listeners are their own: admission counts them there, as the fold does, so
// a Gateway's ListenerSets never crowd a stored fragment off the Gateway's
// board, and its tuples stay defended.
func TestListenerSetsTakeNoRoomOfTheGateway(t *testing.T) {
	infra, blog, shop := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	quiet := newNamespace(t, map[string]string{webhook.AdmissionLabel: webhook.AdmissionDisabled})
	gw := classGateway(t, infra, foldedController) // its own listener: HTTP on 8080
	var many []gwv1.ListenerEntry
	for i := range 63 {
		many = append(many, https(fmt.Sprintf("web-%d", i), fmt.Sprintf("set-%d.example.com", i)))
	}
	big := newListenerSet(blog, "big", gw, many...)
	mustCreate(t, big)
	waitCached(t, big)
	// Younger than the ListenerSet, stored without a claim: the fold places
	// it on the Gateway, beside the Gateway's own listener.
	wantDuplicateOfQuietDenied(t, quiet, shop, gw)
}

// The Gateway of the ListenerSets decides, as for the fold, what they hold:
// while a Gateway gatefold did not create has its name, no ListenerSet
// folds, so none denies a fragment; a listener someone added to gatefold's
// holds its tuple against every source of the parent.
func TestGatewayOfTheListenerSetsDecidesWhatTheyHold(t *testing.T) {
	tests := map[string]struct {
		gatefolds bool
		// noSets leaves the parent without ListenerSets.
		noSets bool
		want   string // the denial of a fragment wanting added.example.com; "" for none
	}{
		"not gatefold's: its ListenerSets deny nothing": {},
		"gatefold's: what someone added there holds its tuple": {gatefolds: true,
			want: "already taken on Gateway %s/shared by a listener (HTTPS) someone added to Gateway %[1]s/shared-listenersets"},
		"gatefold's, its ListenerSets gone: what someone added there still holds": {gatefolds: true, noSets: true,
			want: "already taken on Gateway %s/shared by a listener (HTTPS) someone added to Gateway %[1]s/shared-listenersets"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			infra, shop, blog := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
			gw := classGateway(t, infra, foldedController)
			sets := fixture.Gateway(infra, gwv1.NamespacesFromAll, gatewayHTTPS("mine", "added.example.com"))
			sets.Name = rules.ListenerSetGatewayName(gw.Name)
			if tc.gatefolds {
				sets.Labels = map[string]string{v1alpha1.PoolLabel: rules.PoolLabelValue(gw.Name)}
				sets.OwnerReferences = []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID, Controller: ptr.To(true)}}
			}
			mustCreate(t, sets)
			waitCached(t, sets)
			if !tc.noSets {
				ls := newListenerSet(shop, "storefront", gw, https("web", "app.example.com"))
				mustCreate(t, ls)
				waitCached(t, ls)
			}

			err := env.Client.Create(context.Background(), newFragment(blog, "added", gw, https("https", "added.example.com")))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Creating a fragment wanting a listener of another's Gateway: %v", err)
				}
				mustCreate(t, newFragment(blog, "home", gw, https("https", "app.example.com")))
				return
			}
			wantDenied(t, err, fmt.Sprintf(tc.want, infra))
			if tc.noSets {
				return
			}
			err = env.Client.Create(context.Background(), newFragment(blog, "home", gw, https("https", "app.example.com")))
			wantDenied(t, err, "by a listener (HTTPS) of a ListenerSet in another namespace")
		})
	}
}
