package routing

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// cluster is a route by fragment parentRef whose fragment is folded into
// Gateway infra/shared, in a fake API server; the route's status.parents
// has entries.
func cluster(t *testing.T, entries ...gwv1.RouteParentStatus) client.Client {
	t.Helper()
	gc := fixture.GatewayClass(string(impl))
	gc.Name = "example"
	gateway := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	lf := fixture.Fragment("shop", "lf", gateway, fixture.Entry("web", 80, gwv1.HTTPProtocolType, "a.example.com"))
	gateway.Spec.Listeners = append(gateway.Spec.Listeners, gwv1.Listener{Name: v1alpha1.ListenerName("shop", "lf", "web"), Port: 80, Protocol: gwv1.HTTPProtocolType})
	typed := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "route-uid", Generation: 1},
		Spec:       gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{fragment}}},
		Status:     gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: entries}},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		t.Fatal(err)
	}
	route := &unstructured.Unstructured{Object: m}
	route.SetGroupVersionKind(httpRoute)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	b := fake.NewClientBuilder().WithScheme(withoutRoutes(t)).WithObjects(gc, gateway, lf, route, ns).WithStatusSubresource(route).
		WithIndex(route, derivedOwnerIndex, derivedOwner).WithIndex(route, parentSourceIndex, parentSources).
		WithIndex(&gwv1.Gateway{}, manager.PoolIndex, manager.PoolHeadOf)
	if err := manager.IndexFragments(context.Background(), fixture.Indexer{B: b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// withoutRoutes is a scheme without Gateway API route types: the fake
// client then keeps routes as the controllers read them, unstructured.
func withoutRoutes(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: gwv1.GroupName, Version: gwv1.GroupVersion.Version}
	s.AddKnownTypes(gv, &gwv1.Gateway{}, &gwv1.GatewayList{}, &gwv1.GatewayClass{}, &gwv1.GatewayClassList{})
	metav1.AddToGroupVersion(s, gv)
	return s
}

// httpRoute is the kind the tests' reconciler serves.
var httpRoute = schema.GroupVersionKind{Group: gwv1.GroupName, Version: gwv1.GroupVersion.Version, Kind: rules.KindHTTPRoute}

func reconciler(c client.Client, fence func() error) *Reconciler {
	return &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), GVK: httpRoute, Fence: fence}
}

func TestFencedReplicaWritesNothing(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	res, err := reconciler(c, func() error { return errors.New("lease lost") }).Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != manager.FenceRetry {
		t.Fatalf("fenced Reconcile = %+v, %v; want a retry after %v", res, err, manager.FenceRetry)
	}
	r := reconciler(c, nil)
	routes := r.newRouteList()
	if err := c.List(ctx, routes); err != nil {
		t.Fatal(err)
	}
	if len(routes.Items) != 1 || routes.Items[0].GetResourceVersion() != "999" {
		t.Fatalf("a fenced replica wrote: routes %+v", routes.Items)
	}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, routes); err != nil {
		t.Fatal(err)
	}
	var derived, user []gwv1.ParentReference
	var entries []gwv1.RouteParentStatus
	for i := range routes.Items {
		spec, err := specOf(&routes.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		if routes.Items[i].GetLabels()[v1alpha1.DerivedLabel] == "true" {
			derived = spec.ParentRefs
			continue
		}
		user = spec.ParentRefs
		if entries, err = statusOf(&routes.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(derived) != 1 || ptr.Deref(derived[0].SectionName, "") != v1alpha1.ListenerName("shop", "lf", "web") {
		t.Errorf("the replica that leads made no derived route naming the folded listener: parentRefs %+v", derived)
	}
	if len(user) != 1 || len(entries) != 1 || entries[0].ControllerName != impl {
		t.Errorf("the replica that leads wrote no entry of %s: %+v", impl, entries)
	}
}

var req = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}}

// routes returns the routes of the fake API server by name.
func routes(t *testing.T, c client.Client) map[string]*unstructured.Unstructured {
	t.Helper()
	list := reconciler(c, nil).newRouteList()
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

// served reconciles the route of cluster once, and returns its derived
// route.
func served(t *testing.T, c client.Client) *unstructured.Unstructured {
	t.Helper()
	if _, err := reconciler(c, nil).Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	for name, r := range routes(t, c) {
		if name != "web" {
			return r
		}
	}
	t.Fatal("no derived route")
	return nil
}

// A derived route that lost its labels is adopted; an object of its name
// that the route does not control is left alone, and the route says so.
func TestDerivedRouteNameHeldByAnother(t *testing.T) {
	tests := map[string]struct {
		edit  func(d *unstructured.Unstructured)
		taken bool
	}{
		"its labels removed":         {edit: func(d *unstructured.Unstructured) { d.SetLabels(nil) }},
		"its ownerReference removed": {edit: func(d *unstructured.Unstructured) { d.SetOwnerReferences(nil) }},
		"not the route's own":        {edit: func(d *unstructured.Unstructured) { d.SetOwnerReferences(nil); d.SetLabels(nil) }, taken: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			ctx := context.Background()
			d := served(t, c)
			tc.edit(d)
			if err := c.Update(ctx, d); err != nil {
				t.Fatal(err)
			}
			rec := events.NewFakeRecorder(10)
			r := reconciler(c, nil)
			r.Recorder = rec
			res, err := r.Reconcile(ctx, req)
			got := routes(t, c)[d.GetName()]
			if !tc.taken {
				if err != nil || got.GetLabels()[v1alpha1.DerivedLabel] != "true" || metav1.GetControllerOf(got) == nil {
					t.Fatalf("Reconcile = %+v, %v; derived route labels %v, controller %v, want them put back", res, err, got.GetLabels(), metav1.GetControllerOf(got))
				}
				return
			}
			if err != nil || res.RequeueAfter != takenRetry {
				t.Errorf("Reconcile = %+v, %v; want a look again after %v: no event comes when the name is free", res, err, takenRetry)
			}
			if metav1.GetControllerOf(got) != nil || got.GetResourceVersion() != d.GetResourceVersion() {
				t.Errorf("the object holding the name was written: ownerReferences %+v", got.GetOwnerReferences())
			}
			entries, err := statusOf(routes(t, c)["web"])
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || !strings.Contains(meta.FindStatusCondition(entries[0].Conditions, string(gwv1.RouteConditionAccepted)).Message, d.GetName()) {
				t.Errorf("entries %+v, want one whose Accepted names %s", entries, d.GetName())
			}
			if e := <-rec.Events; !strings.Contains(e, reasonNameTaken) {
				t.Errorf("event %q, want a Warning %s", e, reasonNameTaken)
			}
		})
	}
}

// A user's route carrying a derived route's labels is the user's: gatefold
// neither deletes nor writes it.
func TestUsersCopyOfDerivedRouteIsLeftAlone(t *testing.T) {
	for _, name := range []string{"copy", derivedPrefix + "copy"} {
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			ctx := context.Background()
			cp := served(t, c).DeepCopy()
			cp.SetName(name)
			cp.SetResourceVersion("")
			cp.SetOwnerReferences(nil)
			if err := c.Create(ctx, cp); err != nil {
				t.Fatal(err)
			}
			if _, err := reconciler(c, nil).Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			if got, ok := routes(t, c)[name]; !ok || got.GetResourceVersion() != cp.GetResourceVersion() {
				t.Errorf("the user's route %s was deleted or written", name)
			}
		})
	}
}

// A replica that starts (no memory of its writes) removes the entries that
// carry gatefold's marker and that no parentRef of the route is served by,
// whatever they say, and no entry without the marker: an implementation
// that supports ListenerSets itself, advertised or not, keeps its entries.
func TestStaleEntriesAreGatefoldsMarkedOnes(t *testing.T) {
	at := func(ref gwv1.ParentReference, controller gwv1.GatewayController, status metav1.ConditionStatus, marked bool) gwv1.RouteParentStatus {
		conds := []metav1.Condition{{Type: string(gwv1.RouteConditionAccepted), Status: status, Reason: "R", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}}
		if marked {
			conds = append(conds, metav1.Condition{Type: v1alpha1.RouteConditionDerived, Status: metav1.ConditionTrue, Reason: v1alpha1.RouteReasonDerived,
				ObservedGeneration: 1, LastTransitionTime: metav1.Now()})
		}
		return gwv1.RouteParentStatus{ParentRef: ref, ControllerName: controller, Conditions: conds}
	}
	set := gwv1.ParentReference{Kind: ptr.To(gwv1.Kind("ListenerSet")), Name: "ls"}
	gone := gwv1.ParentReference{Group: fragment.Group, Kind: fragment.Kind, Name: "gone"}
	tests := map[string]struct {
		entry gwv1.RouteParentStatus
		kept  bool
	}{
		"another controller's entry for the fragment":               {entry: at(fragment, "example.com/other", metav1.ConditionFalse, false), kept: true},
		"an acceptance through a ListenerSet by its implementation": {entry: at(set, "example.com/native", metav1.ConditionTrue, false), kept: true},
		"an acceptance through a ListenerSet under a folded class":  {entry: at(set, impl, metav1.ConditionTrue, false), kept: true},
		"an acceptance through a gone fragment, not gatefold's":     {entry: at(gone, impl, metav1.ConditionTrue, false), kept: true},
		"gatefold's acceptance through a ListenerSet":               {entry: at(set, impl, metav1.ConditionTrue, true)},
		"gatefold's Pending through a ListenerSet":                  {entry: at(set, impl, metav1.ConditionUnknown, true)},
		"gatefold's refusal through a gone fragment":                {entry: at(gone, impl, metav1.ConditionFalse, true)},
		"gatefold's entry for the fragment under its former class":  {entry: at(fragment, "example.com/former", metav1.ConditionTrue, true)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := cluster(t, tc.entry)
			if _, err := reconciler(c, nil).Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			entries, err := statusOf(routes(t, c)["web"])
			if err != nil {
				t.Fatal(err)
			}
			kept := slices.ContainsFunc(entries, func(p gwv1.RouteParentStatus) bool {
				return p.ControllerName == tc.entry.ControllerName && reflect.DeepEqual(p.ParentRef, tc.entry.ParentRef)
			})
			if kept != tc.kept || !slices.ContainsFunc(entries, func(p gwv1.RouteParentStatus) bool {
				return p.ControllerName == impl && reflect.DeepEqual(p.ParentRef, fragment) && own(p)
			}) {
				t.Errorf("entries %+v: the stored one kept %v, want %v, and gatefold's marked one for the fragment", entries, kept, tc.kept)
			}
		})
	}
}

// A derived route names its listener alone: spec.useDefaultGateways would
// attach it to the default Gateways too.
func TestDerivedRouteTakesNoDefaultGateways(t *testing.T) {
	r := reconciler(nil, nil)
	route := r.newRoute()
	route.SetNamespace("shop")
	route.SetName("web")
	route.Object["spec"] = map[string]any{"useDefaultGateways": "All", "hostnames": []any{"a.example.com"}}
	d, err := r.derivedRoute(route, sectionOf(landing))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Object["spec"].(map[string]any)["useDefaultGateways"]; ok {
		t.Errorf("derived spec %v keeps useDefaultGateways", d.Object["spec"])
	}
}

// A route that names no source, carries no entry for one and has no
// derived route is not looked at again on a resync.
func TestRouteNamingNoSourceIsNotRequeued(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	route := routes(t, c)["web"]
	if err := unstructured.SetNestedSlice(route.Object, []any{map[string]any{"name": "shared"}}, "spec", "parentRefs"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	r := reconciler(c, nil)
	r.Resync = time.Minute
	if res, err := r.Reconcile(ctx, req); err != nil || res != (ctrl.Result{}) {
		t.Errorf("Reconcile = %+v, %v; want no requeue", res, err)
	}
}

// While a listener moves, two Gateways carry it: the choice does not
// depend on the cache's order.
func TestLandedFirstIsDeterministic(t *testing.T) {
	on := func(name string) rules.Landing {
		return rules.Landing{Gateway: types.NamespacedName{Namespace: "infra", Name: name}}
	}
	tests := map[string]struct {
		at       []string
		reported string
		want     string
	}{
		"the Gateway the status names": {at: []string{"shared", "shared-2"}, reported: "shared-2", want: "shared-2"},
		"the head":                     {at: []string{"shared-2", "shared"}, want: "shared"},
		"the lowest pool index":        {at: []string{"shared-10", "shared-3"}, want: "shared-3"},
		"a sibling before the rest":    {at: []string{"shared-listenersets", "shared-2"}, want: "shared-2"},
		"a status naming neither":      {at: []string{"shared-3", "shared-2"}, reported: "shared-9", want: "shared-2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, order := range [][]string{tc.at, {tc.at[1], tc.at[0]}} {
				var at []rules.Landing
				for _, n := range order {
					at = append(at, on(n))
				}
				if got := landedFirst("shared", at, on(tc.reported).Gateway); got.Gateway.Name != tc.want {
					t.Errorf("landedFirst(%v) = %s, want %s", order, got.Gateway.Name, tc.want)
				}
			}
		})
	}
}

// A user's route that carries the derived label is served all the same:
// only a gf- name controlled by a route makes a derived route.
func TestUserRouteWithDerivedLabelIsServed(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	route := routes(t, c)["web"]
	route.SetLabels(map[string]string{v1alpha1.DerivedLabel: "true"})
	if err := c.Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	if _, err := reconciler(c, nil).Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := routes(t, c); len(got) != 2 {
		t.Errorf("%d routes, want the user's and its derived route", len(got))
	}
}

// A Gateway update queues the routes of the sources whose generated
// listener names came or went on it, and no other.
func TestGatewayUpdateQueuesRoutesItMoves(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	old := &gwv1.Gateway{}
	if err := c.Get(ctx, gw, old); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		edit   func(g *gwv1.Gateway)
		queued int
	}{
		"a listener's hostname": {edit: func(g *gwv1.Gateway) { g.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("b.example.com")) }},
		"another source's listener came": {edit: func(g *gwv1.Gateway) {
			g.Spec.Listeners = append(g.Spec.Listeners, gwv1.Listener{Name: "other-lf-web-hash"})
		}},
		"the route's listener went": {edit: func(g *gwv1.Gateway) { g.Spec.Listeners = g.Spec.Listeners[:1] }, queued: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next := old.DeepCopy()
			tc.edit(next)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			reconciler(c, nil).gatewayHandler().Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: next}, q)
			if q.Len() != tc.queued {
				t.Errorf("%d routes queued, want %d", q.Len(), tc.queued)
			}
		})
	}
}

// A parent that came or went queues the routes naming its sources, read
// from the side with fewer: of a parent of hundreds of fragments that one
// route names, its routes, not a lookup per fragment.
func TestParentQueuesTheRoutesNamingItsSources(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	head := &gwv1.Gateway{}
	if err := c.Get(ctx, gw, head); err != nil {
		t.Fatal(err)
	}
	other := head.DeepCopy()
	other.Name, other.ResourceVersion = "other", ""
	for _, g := range []*gwv1.Gateway{head, other} {
		for i := range manySources + 1 {
			lf := fixture.Fragment("shop", fmt.Sprintf("%s-%d", g.Name, i), g, fixture.Entry("web", 80, gwv1.HTTPProtocolType, fmt.Sprintf("m%d.example.com", i)))
			if err := c.Create(ctx, lf); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, tc := range map[string]struct {
		gw     *gwv1.Gateway
		queued int
	}{
		"the parent of the route's fragment": {gw: head, queued: 1},
		"another Gateway":                    {gw: other},
	} {
		t.Run(name, func(t *testing.T) {
			lists := 0
			counted := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists++
					return c.List(ctx, list, opts...)
				},
			})
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			reconciler(counted, nil).gatewayHandler().Create(ctx, event.CreateEvent{Object: tc.gw}, q)
			if q.Len() != tc.queued {
				t.Errorf("%d routes queued, want %d", q.Len(), tc.queued)
			}
			// The parent's fragments, then the routes naming a source.
			if lists != 2 {
				t.Errorf("%d lists, want 2: the routes' side, not one per fragment", lists)
			}
		})
	}
}

// A sibling gatefold creates or deletes queues the routes of the sources
// whose listeners it carries, not the pool's thousands.
func TestSiblingQueuesOnlyTheRoutesOfItsListeners(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	head := &gwv1.Gateway{}
	if err := c.Get(ctx, gw, head); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		listener gwv1.SectionName
		queued   int
	}{
		"carrying the route's listener": {listener: v1alpha1.ListenerName("shop", "lf", "web"), queued: 1},
		"carrying another source's":     {listener: v1alpha1.ListenerName("shop", "other", "web")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sibling := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: head.Namespace, Name: rules.SiblingName(head.Name, 2),
				Labels:          map[string]string{v1alpha1.PoolLabel: rules.PoolLabelValue(head.Name)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: head.Name, UID: head.UID, Controller: ptr.To(true)}}},
				Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{{Name: tc.listener, Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
			for _, send := range []func(workqueue.TypedRateLimitingInterface[reconcile.Request]){
				func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
					reconciler(c, nil).gatewayHandler().Create(ctx, event.CreateEvent{Object: sibling}, q)
				},
				func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
					reconciler(c, nil).gatewayHandler().Delete(ctx, event.DeleteEvent{Object: sibling}, q)
				},
			} {
				q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
				send(q)
				if q.Len() != tc.queued {
					t.Errorf("%d routes queued, want %d", q.Len(), tc.queued)
				}
				q.ShutDown()
			}
		})
	}
}

// The fold's judgement of a source's new generation, which may change its
// status alone, queues the source's routes: they wait for it. Other status
// changes do not.
func TestFoldJudgingASourceQueuesItsRoutes(t *testing.T) {
	accepted := func(status metav1.ConditionStatus, observed int64) []metav1.Condition {
		return []metav1.Condition{{Type: string(v1alpha1.FragmentConditionAccepted), Status: status, ObservedGeneration: observed}}
	}
	fragmentAt := func(conds ...metav1.Condition) client.Object {
		return &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: v1alpha1.ListenerFragmentStatus{Conditions: conds}}
	}
	setAt := func(conds ...metav1.Condition) client.Object {
		return &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: gwv1.ListenerSetStatus{Conditions: conds}}
	}
	programmed := metav1.Condition{Type: string(v1alpha1.FragmentConditionProgrammed), Status: metav1.ConditionFalse, ObservedGeneration: 2}
	tests := map[string]struct {
		old, new client.Object
		queued   bool
	}{
		"a fragment refused at its new generation":   {old: fragmentAt(accepted(metav1.ConditionFalse, 1)...), new: fragmentAt(accepted(metav1.ConditionFalse, 2)...), queued: true},
		"a ListenerSet judged at its new generation": {old: setAt(accepted(metav1.ConditionTrue, 1)...), new: setAt(accepted(metav1.ConditionFalse, 2)...), queued: true},
		"a fragment no longer judged":                {old: fragmentAt(accepted(metav1.ConditionTrue, 2)...), new: fragmentAt(accepted(metav1.ConditionUnknown, 2)...), queued: true},
		"a fragment's Programmed condition": {old: fragmentAt(accepted(metav1.ConditionFalse, 2)...),
			new: fragmentAt(append(accepted(metav1.ConditionFalse, 2), programmed)...)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := foldJudged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.queued {
				t.Errorf("queued %v, want %v", got, tc.queued)
			}
		})
	}
}
