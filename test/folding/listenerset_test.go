package folding

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// The merger of these tests folds the ListenerSets of both controllers; the
// native one's class lists the ListenerSet feature, so it must be left alone.
const (
	foldedController = "gatefold.dev/test-folded"
	nativeController = "gatefold.dev/test-native"
)

// gatewayClass creates a cluster-scoped GatewayClass of controller, listing
// the given features in its status as an implementation would.
func gatewayClass(t *testing.T, controller string, features ...gwv1.FeatureName) string {
	t.Helper()
	gc := fixture.GatewayClass(controller, features...)
	status := gc.Status
	create(t, gc)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, gc) })
	gc.Status = status
	if err := env.Client.Status().Update(ctx, gc); err != nil {
		t.Fatal(err)
	}
	return gc.Name
}

var listenerSet = fixture.ListenerSet

func setListener(ls *gwv1.ListenerSet, listener string) string {
	return string(v1alpha1.ListenerSetListenerName(ls.Namespace, ls.Name, gwv1.SectionName(listener)))
}

// setGateway is the Gateway gatefold keeps beside gw for the listeners of
// gw's ListenerSets, by key.
func setGateway(gw *gwv1.Gateway) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: rules.ListenerSetGatewayName(gw.Name)}}
}

// wantSetGateway waits until the Gateway of gw's ListenerSets carries
// exactly the listeners want, and checks that it is gatefold's for gw: P's
// spec but P's listeners, controlled by P and labelled so that rules.HeadOf
// returns P.
func wantSetGateway(t *testing.T, gw *gwv1.Gateway, want ...string) *gwv1.Gateway {
	t.Helper()
	got := wantListeners(t, setGateway(gw), want...)
	parent := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(gw), parent)
	if head, ok := rules.HeadOf(got); !ok || head != client.ObjectKeyFromObject(parent) || !metav1.IsControlledBy(got, parent) || !rules.ListenerSetGateway(got) {
		t.Errorf("Gateway %s: HeadOf = %v, %v; owners %+v; want controlled by and headed by %s", got.Name, head, ok, got.OwnerReferences, parent.Name)
	}
	spec, wantSpec := got.Spec.DeepCopy(), parent.Spec.DeepCopy()
	spec.Listeners, wantSpec.Listeners = nil, nil
	if diff := cmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("Gateway %s spec but listeners, (-%s's +got):\n%s", got.Name, parent.Name, diff)
	}
	return got
}

// wantListenerSet waits until the ListenerSet's condition typ says
// status/reason at its current generation, and returns it.
func wantListenerSet(t *testing.T, ls *gwv1.ListenerSet, typ string, status metav1.ConditionStatus, reason string) *gwv1.ListenerSet {
	t.Helper()
	got := &gwv1.ListenerSet{}
	testenv.Eventually(t, settle, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ls), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("ListenerSet %s %s = %+v, want %s/%s at generation %d", ls.Name, typ, c, status, reason, got.Generation)
		}
		return nil
	})
	return got
}

func wantAttachedListenerSets(t *testing.T, gw *gwv1.Gateway, want int32) {
	t.Helper()
	wantAttachedListenerSetsWithin(t, gw, want, settle)
}

func wantAttachedListenerSetsWithin(t *testing.T, gw *gwv1.Gateway, want int32, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		got := &gwv1.Gateway{}
		get(t, client.ObjectKeyFromObject(gw), got)
		if n := got.Status.AttachedListenerSets; n == nil || *n != want {
			return fmt.Errorf("Gateway %s status.attachedListenerSets = %v, want %d", gw.Name, ptr.Deref(n, -1), want)
		}
		return nil
	})
}

func TestListenerSetsFoldBesideFragments(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gatewayClass(t, foldedController))
	create(t, gw)

	// A ListenerSet and a fragment of one name, and a later ListenerSet
	// wanting the first one's hostname.
	first := listenerSet(shop, "app", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, first)
	lf := fixture.Fragment(shop, "app", gw, fixture.HTTPS("web", "fragment.example.com"))
	create(t, lf)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has seconds
	later := listenerSet(shop, "later", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, later)

	// The fragment's listener is the Gateway's; the ListenerSet's is on the
	// Gateway of its ListenerSets, where no route naming gw reaches it.
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS fragment.example.com")
	wantSetGateway(t, gw, setListener(first, "web")+" 443/HTTPS set.example.com")
	st := wantListenerSet(t, first, "Accepted", metav1.ConditionTrue, "Accepted")
	if l := st.Status.Listeners; len(l) != 1 || meta.FindStatusCondition(l[0].Conditions, "Accepted").Status != metav1.ConditionTrue {
		t.Errorf("ListenerSet %s listeners = %+v, want web accepted", first.Name, l)
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "into Gateway "+gw.Namespace+"/"+setGateway(gw).Name) {
		t.Errorf("ListenerSet %s Accepted message %q does not name the Gateway of the ListenerSets", first.Name, c.Message)
	}
	// No implementation runs here: the folded listener waits for one.
	wantListenerSet(t, first, "Programmed", metav1.ConditionUnknown, "Pending")
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")

	st = wantListenerSet(t, later, "Accepted", metav1.ConditionFalse, "ListenersNotValid")
	wantListenerSet(t, later, "Programmed", metav1.ConditionFalse, "ListenersNotValid")
	for _, typ := range []string{"Accepted", "Conflicted", "Programmed"} {
		c := meta.FindStatusCondition(st.Status.Listeners[0].Conditions, typ)
		if c == nil || c.Reason != string(gwv1.ListenerReasonHostnameConflict) {
			t.Errorf("Conflicted listener %s = %+v, want reason HostnameConflict", typ, c)
		}
	}
	wantAttachedListenerSets(t, gw, 1)

	// The first goes: the later one takes the hostname.
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS fragment.example.com")
	sets := wantSetGateway(t, gw, setListener(later, "web")+" 443/HTTPS set.example.com")
	wantListenerSet(t, later, "Accepted", metav1.ConditionTrue, "Accepted")

	// The implementation reports on the Gateway of the ListenerSets: the
	// ListenerSet's status reads it there.
	now := metav1.Now()
	sets.Status.Listeners = []gwv1.ListenerStatus{{
		Name: gwv1.SectionName(setListener(later, "web")), AttachedRoutes: 2, SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}},
		Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: now, ObservedGeneration: sets.Generation},
			{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", LastTransitionTime: now, ObservedGeneration: sets.Generation},
		},
	}}
	if err := env.Client.Status().Update(ctx, sets); err != nil {
		t.Fatal(err)
	}
	st = wantListenerSet(t, later, "Programmed", metav1.ConditionTrue, "Programmed")
	if l := st.Status.Listeners; len(l) != 1 || l[0].AttachedRoutes != 2 {
		t.Errorf("ListenerSet %s listeners = %+v, want attachedRoutes 2 as reported on Gateway %s", later.Name, l, sets.Name)
	}

	// The last goes: so does the Gateway of the ListenerSets.
	if err := env.Client.Delete(ctx, later); err != nil {
		t.Fatal(err)
	}
	wantAttachedListenerSets(t, gw, 0)
	wantGone(t, setGateway(gw))
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS fragment.example.com")
}

// A pool's head's ListenerSets land on the Gateway of its ListenerSets, as
// any Gateway's: never on the head nor on a sibling, and that Gateway is no
// sibling of the pool.
func TestListenerSetsOfAPoolHeadLandBesideThePool(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := fixture.PoolHead(ns, gwv1.NamespacesFromSame, fixture.Own("http", 80, gwv1.HTTPProtocolType, ""))
	gw.Spec.GatewayClassName = gwv1.ObjectName(gatewayClass(t, foldedController))
	create(t, gw)
	ls := listenerSet(ns, "app", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, ls)
	lf := fixture.Fragment(ns, "app", gw, fixture.HTTPS("web", "fragment.example.com"))
	create(t, lf)
	wantListeners(t, gw, "http 80/HTTP", folded(lf, "web")+" 443/HTTPS fragment.example.com")
	wantSetGateway(t, gw, setListener(ls, "web")+" 443/HTTPS set.example.com")
	wantListenerSet(t, ls, "Accepted", metav1.ConditionTrue, "Accepted")
	wantAttachedListenerSets(t, gw, 1)
	list := &gwv1.GatewayList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("Namespace %s holds %d Gateways, want the head and the Gateway of its ListenerSets", ns, len(list.Items))
	}
}

// A Gateway named like the Gateway of gw's ListenerSets that gatefold did
// not create is never taken over: the ListenerSets say so, and fold once it
// is gone.
func TestListenerSetGatewayNotGatefoldsIsLeftAlone(t *testing.T) {
	infra := newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromSame)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gatewayClass(t, foldedController))
	taken := fixture.Gateway(infra, gwv1.NamespacesFromSame, fixture.Own("mine", 9000, gwv1.HTTPProtocolType, ""))
	taken.Name = rules.ListenerSetGatewayName(gw.Name)
	create(t, taken)
	create(t, gw)
	ls := listenerSet(infra, "app", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, ls)
	st := wantListenerSet(t, ls, "Accepted", metav1.ConditionFalse, "ListenersNotValid")
	want := fmt.Sprintf("Gateway %s/%s, where gatefold folds this ListenerSet, is not gatefold's: its owner must rename or delete it", infra, taken.Name)
	if c := meta.FindStatusCondition(st.Status.Conditions, "Accepted"); !strings.Contains(c.Message, want) {
		t.Errorf("ListenerSet Accepted message %q, want it to say %q", c.Message, want)
	}
	wantListeners(t, gw, "default 8080/HTTP")
	got := &gwv1.Gateway{}
	get(t, client.ObjectKeyFromObject(taken), got)
	if l := listeners(got); len(l) != 1 || l[0] != "mine 9000/HTTP" || len(got.OwnerReferences) != 0 || len(got.Labels) != 0 || got.Generation != 1 {
		t.Errorf("The Gateway gatefold did not create was written: listeners %v, owners %+v, labels %v, generation %d", l, got.OwnerReferences, got.Labels, got.Generation)
	}

	if err := env.Client.Delete(ctx, taken); err != nil {
		t.Fatal(err)
	}
	wantSetGateway(t, gw, setListener(ls, "web")+" 443/HTTPS set.example.com")
	wantListenerSet(t, ls, "Accepted", metav1.ConditionTrue, "Accepted")
}

// When the API server refuses to create the Gateway of the ListenerSets (a
// policy against the one ListenerSet's listener; as well a quota), the
// ListenerSets say so, quoting it, and the parent's fragments still fold, on
// a Gateway as on a pool's head.
func TestRefusedGatewayOfTheListenerSetsIsReported(t *testing.T) {
	for name, pooled := range map[string]bool{"Gateway": false, "pool head": true} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t, nil)
			forbidHostname(t, ns, "set.example.com")
			gw := fixture.Gateway(ns, gwv1.NamespacesFromSame)
			if pooled {
				gw = fixture.PoolHead(ns, gwv1.NamespacesFromSame, fixture.Own("default", 8080, gwv1.HTTPProtocolType, ""))
			}
			gw.Spec.GatewayClassName = gwv1.ObjectName(gatewayClass(t, foldedController))
			create(t, gw)
			ls := listenerSet(ns, "app", gw, fixture.HTTPS("web", "set.example.com"))
			create(t, ls)
			st := wantListenerSet(t, ls, "Accepted", metav1.ConditionFalse, "ListenersNotValid")
			want := fmt.Sprintf("The API server refused to create Gateway %s/%s", ns, setGateway(gw).Name)
			if c := meta.FindStatusCondition(st.Status.Conditions, "Accepted"); !strings.Contains(c.Message, want) || !strings.Contains(c.Message, "listeners for set.example.com are not allowed here") {
				t.Errorf("ListenerSet Accepted message %q, want it to say %q and quote the API server", c.Message, want)
			}
			lf := fixture.Fragment(ns, "app", gw, fixture.HTTPS("web", "fragment.example.com"))
			create(t, lf)
			testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")
			got := wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS fragment.example.com")
			if n := ptr.Deref(got.Status.AttachedListenerSets, 0); n != 0 {
				t.Errorf("Gateway %s status.attachedListenerSets = %d, want 0", gw.Name, n)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(setGateway(gw)), &gwv1.Gateway{}); !apierrors.IsNotFound(err) {
				t.Errorf("Gateway %s: %v, want it not created", setGateway(gw).Name, err)
			}
		})
	}
}

// foldedListenerSet creates a Gateway of a class gatefold folds and a
// ListenerSet in another namespace, with a certificate in its own, and waits
// until gatefold folded it, counted it and granted its Secret.
func foldedListenerSet(t *testing.T) (*gwv1.GatewayClass, *gwv1.Gateway, *gwv1.ListenerSet, *gwv1.ReferenceGrant) {
	t.Helper()
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	gc := &gwv1.GatewayClass{}
	get(t, client.ObjectKey{Name: gatewayClass(t, foldedController)}, gc)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gc.Name)
	create(t, gw)
	ls := listenerSet(shop, "app", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, ls)
	wantListeners(t, gw, "default 8080/HTTP")
	wantSetGateway(t, gw, setListener(ls, "web")+" 443/HTTPS set.example.com")
	wantListenerSet(t, ls, "Accepted", metav1.ConditionTrue, "Accepted")
	wantAttachedListenerSets(t, gw, 1)
	// The Gateway reads the ListenerSet's Secret in its namespace through
	// the grant gatefold keeps, owned by the ListenerSet.
	grant := &gwv1.ReferenceGrant{}
	testenv.Eventually(t, settle, func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: shop, Name: "gatefold.listenerset.app"}, grant)
	})
	if owner := metav1.GetControllerOf(grant); owner == nil || owner.Kind != "ListenerSet" || owner.APIVersion != gwv1.GroupVersion.String() || owner.Name != "app" {
		t.Errorf("Grant %s is controlled by %+v, want ListenerSet app", grant.Name, owner)
	}
	return gc, gw, ls, grant
}

// wantGone waits until obj no longer exists.
func wantGone(t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, settle, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s is still there (%v)", obj, obj.GetName(), err)
		}
		return nil
	})
}

// When a class stops being folded and no implementation writes its
// ListenerSets' statuses (here: it is deleted), gatefold takes back
// everything it wrote for them, then writes nothing; folded again, the count
// comes back at once.
func TestListenerSetsOfAClassNoLongerFoldedAreReleased(t *testing.T) {
	gc, gw, ls, grant := foldedListenerSet(t)
	testenv.Holds(t, env, 2*time.Second, unwritten(t, &gwv1.GatewayList{}, gw.Namespace))

	if err := env.Client.Delete(ctx, gc); err != nil {
		t.Fatal(err)
	}
	got := wantListeners(t, gw, "default 8080/HTTP")
	wantGone(t, setGateway(gw))
	testenv.Eventually(t, settle, func() error {
		get(t, client.ObjectKeyFromObject(gw), got)
		if got.Status.AttachedListenerSets != nil {
			return fmt.Errorf("Gateway status.attachedListenerSets = %d, want it released", *got.Status.AttachedListenerSets)
		}
		stored := &gwv1.ListenerSet{}
		get(t, client.ObjectKeyFromObject(ls), stored)
		// Released, the CRD's default says no controller has reported.
		if c := meta.FindStatusCondition(stored.Status.Conditions, "Accepted"); c == nil || c.Reason != "Pending" || len(stored.Status.Listeners) != 0 {
			return fmt.Errorf("ListenerSet status = %+v, want gatefold's conditions and listeners released", stored.Status)
		}
		return nil
	})
	wantGone(t, grant)
	testenv.Holds(t, env, 2*time.Second, unwritten(t, &gwv1.GatewayList{}, gw.Namespace), unwritten(t, &gwv1.ListenerSetList{}, ls.Namespace))

	again := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gc.Name}, Spec: gc.Spec}
	create(t, again)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, again) })
	wantListenerSet(t, ls, "Accepted", metav1.ConditionTrue, "Accepted")
	wantAttachedListenerSets(t, gw, 1)
}

// When the implementation comes to support ListenerSets itself, it writes
// their statuses, and gatefold, which no longer folds them, must not write
// over it, however the implementation writes.
func TestListenerSetsOfAClassTurnedNativeAreLeftToTheImplementation(t *testing.T) {
	gc, gw, ls, grant := foldedListenerSet(t)
	// The implementation, upgraded, reports first, with an update as many
	// do, then lists the feature.
	native := &gwv1.ListenerSet{}
	get(t, client.ObjectKeyFromObject(ls), native)
	for i := range native.Status.Conditions {
		native.Status.Conditions[i].Message = "native"
	}
	if err := env.Client.Status().Update(ctx, native); err != nil {
		t.Fatal(err)
	}
	gc.Status.SupportedFeatures = []gwv1.SupportedFeature{{Name: "ListenerSet"}}
	if err := env.Client.Status().Update(ctx, gc); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "default 8080/HTTP")
	wantGone(t, setGateway(gw))
	wantGone(t, grant)
	testenv.Holds(t, env, 2*time.Second, testenv.Invariant{List: &gwv1.ListenerSetList{}, Namespace: ls.Namespace, Check: func(sets map[string]client.Object) error {
		stored, ok := sets[ls.Name].(*gwv1.ListenerSet)
		if !ok {
			return fmt.Errorf("ListenerSet %s is gone", ls.Name)
		}
		for _, c := range stored.Status.Conditions {
			if c.Message != "native" {
				return fmt.Errorf("gatefold changed the status the implementation now writes: %s is %s/%s %q", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		return nil
	}})
}

// A ListenerSet moved to a parent that is no Gateway is not folded, and
// gatefold takes back what it wrote for it.
func TestListenerSetMovedToAnotherKindOfParentIsReleased(t *testing.T) {
	_, gw, ls, grant := foldedListenerSet(t)
	moved := &gwv1.ListenerSet{}
	get(t, client.ObjectKeyFromObject(ls), moved)
	moved.Spec.ParentRef.Group, moved.Spec.ParentRef.Kind = ptr.To(gwv1.Group("example.com")), ptr.To(gwv1.Kind("XGateway"))
	if err := env.Client.Update(ctx, moved); err != nil {
		t.Fatal(err)
	}
	wantListeners(t, gw, "default 8080/HTTP")
	wantGone(t, setGateway(gw))
	wantAttachedListenerSets(t, gw, 0)
	wantGone(t, grant)
	testenv.Eventually(t, settle, func() error {
		stored := &gwv1.ListenerSet{}
		get(t, client.ObjectKeyFromObject(ls), stored)
		if c := meta.FindStatusCondition(stored.Status.Conditions, "Accepted"); c == nil || c.Reason != "Pending" {
			return fmt.Errorf("ListenerSet Accepted = %+v, want gatefold's status released", c)
		}
		return nil
	})
}

func TestListenerSetOfADeletedGatewayIsParentNotAccepted(t *testing.T) {
	infra := newNamespace(t, nil)
	gw := fixture.Gateway(infra, gwv1.NamespacesFromSame)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gatewayClass(t, foldedController))
	create(t, gw)
	ls := listenerSet(infra, "app", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, ls)
	wantListenerSet(t, ls, "Accepted", metav1.ConditionTrue, "Accepted")
	if err := env.Client.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	wantListenerSet(t, ls, "Accepted", metav1.ConditionFalse, "ParentNotAccepted")
	wantListenerSet(t, ls, "Programmed", metav1.ConditionFalse, "ParentNotAccepted")
}

func TestListenerSetsOfANativeClassAreLeftAlone(t *testing.T) {
	infra, shop := newNamespace(t, nil), newNamespace(t, nil)
	class := gatewayClass(t, nativeController, "ListenerSet")
	gw := fixture.Gateway(infra, gwv1.NamespacesFromAll)
	gw.Spec.GatewayClassName = gwv1.ObjectName(class)
	create(t, gw)
	ls := listenerSet(shop, "app", gw, fixture.HTTPS("web", "set.example.com"))
	create(t, ls)
	// A fragment still folds for every class: once it has, the merger has
	// folded the Gateway with the ListenerSet in the cache.
	lf := fixture.Fragment(shop, "app", gw, fixture.HTTPS("web", "fragment.example.com"))
	create(t, lf)
	wantListeners(t, gw, "default 8080/HTTP", folded(lf, "web")+" 443/HTTPS fragment.example.com")
	testenv.WaitAccepted(t, env.Client, settle, lf, metav1.ConditionTrue, "Accepted")

	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "GatewayClass" && e.Regarding.Name == class && e.Reason == "ListenerSetsLeftAlone" {
				return nil
			}
		}
		return fmt.Errorf("no ListenerSetsLeftAlone event on GatewayClass %s", class)
	})
	// A steady state, not the first seconds: folded again and again, the
	// Gateway never gets the ListenerSet's listener, nor a count of
	// ListenerSets, and the ListenerSet keeps the status the API server
	// defaulted.
	want := []string{"default 8080/HTTP", folded(lf, "web") + " 443/HTTPS fragment.example.com"}
	testenv.Holds(t, env, 2*time.Second, testenv.Invariant{List: &gwv1.GatewayList{}, Namespace: infra, Check: func(gws map[string]client.Object) error {
		got, ok := gws[gw.Name].(*gwv1.Gateway)
		switch {
		case !ok:
			return fmt.Errorf("Gateway %s is gone", gw.Name)
		case got.Status.AttachedListenerSets != nil:
			return fmt.Errorf("gatefold set status.attachedListenerSets = %d on a Gateway whose implementation supports ListenerSets", *got.Status.AttachedListenerSets)
		}
		have := listeners(got)
		slices.Sort(have)
		return diffErr(want, have)
	}}, testenv.Invariant{List: &gwv1.ListenerSetList{}, Namespace: shop, Check: func(sets map[string]client.Object) error {
		stored, ok := sets[ls.Name].(*gwv1.ListenerSet)
		if !ok {
			return fmt.Errorf("ListenerSet %s is gone", ls.Name)
		}
		if c := meta.FindStatusCondition(stored.Status.Conditions, "Accepted"); c == nil || c.Reason != "Pending" || len(stored.Status.Listeners) != 0 {
			return fmt.Errorf("gatefold wrote the status of a ListenerSet it must leave alone: %+v", stored.Status)
		}
		return nil
	}})
}

// dropAttachedListenerSets writes the Gateway's whole status without
// status.attachedListenerSets, as Traefik v3.6 does (its status built from
// Gateway API v1.4 types, then an update of the status subresource), when it
// has one, and says whether it had. A conflict with gatefold's own apply
// reads the Gateway again and retries.
func dropAttachedListenerSets(key client.ObjectKey) (bool, error) {
	dropped := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		gw := &gwv1.Gateway{}
		if err := env.Client.Get(ctx, key, gw); err != nil || gw.Status.AttachedListenerSets == nil {
			dropped = false
			return err
		}
		gw.Status.AttachedListenerSets = nil
		dropped = true
		return env.Client.Status().Update(ctx, gw)
	})
	return dropped && err == nil, err
}

// statusWrites counts the merger's writes of the Gateway's status between
// from and to.
func statusWrites(t *testing.T, key client.ObjectKey, from, to time.Time) int {
	t.Helper()
	return mergerWritesOf(t, func(e testenv.AuditEvent) bool {
		o := e.ObjectRef
		return o.Resource == "gateways" && o.Subresource == "status" && o.Namespace == key.Namespace && o.Name == key.Name &&
			!e.StageTimestamp.Before(from) && !e.StageTimestamp.After(to)
	})
}

// An implementation that writes the Gateway's whole status drops the count
// gatefold applied: gatefold applies it again within seconds, however long
// its resync period (a minute here, ten by default).
func TestAttachedListenerSetsDroppedByAnotherWriterComeBack(t *testing.T) {
	_, gw, _, _ := foldedListenerSet(t)
	if dropped, err := dropAttachedListenerSets(client.ObjectKeyFromObject(gw)); err != nil || !dropped {
		t.Fatalf("Dropping the Gateway's status.attachedListenerSets: dropped %v, %v", dropped, err)
	}
	wantAttachedListenerSetsWithin(t, gw, 1, 5*time.Second)
}

// An implementation that drops the count at each of its status writes, and
// writes again after each of gatefold's, costs a few applies of the count,
// their backoff doubling (1, 2, 4, 8 s), not one per its writes; once it
// stops, the count comes back.
func TestAttachedListenerSetsFoughtOverCostAFewWrites(t *testing.T) {
	_, gw, _, _ := foldedListenerSet(t)
	key := client.ObjectKeyFromObject(gw)
	const window, most = 20 * time.Second, 6
	start := time.Now()
	drops := 0
	for time.Since(start) < window {
		switch dropped, err := dropAttachedListenerSets(key); {
		case apierrors.IsConflict(err):
		case err != nil:
			t.Fatal(err)
		case dropped:
			drops++
		}
		time.Sleep(50 * time.Millisecond)
	}
	writes := statusWrites(t, key, start, time.Now())
	t.Logf("In %v the other writer dropped the count %d times; gatefold applied it %d times", window, drops, writes)
	if writes < 2 || writes > most {
		t.Errorf("gatefold applied the count %d times in %v against a writer dropping it after each, want 2 to %d", writes, window, most)
	}
	wantAttachedListenerSets(t, gw, 1)
}
