package routing

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// cluster is a route by fragment parentRef whose fragment is folded into
// Gateway infra/shared, in a fake API server.
func cluster(t *testing.T) client.Client {
	t.Helper()
	gc := fixture.GatewayClass(string(impl))
	gc.Name = "example"
	gateway := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	lf := fixture.Fragment("shop", "lf", gateway, fixture.Entry("web", 80, gwv1.HTTPProtocolType, "a.example.com"))
	gateway.Spec.Listeners = append(gateway.Spec.Listeners, gwv1.Listener{Name: v1alpha1.ListenerName("shop", "lf", "web"), Port: 80, Protocol: gwv1.HTTPProtocolType})
	typed := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "route-uid", Generation: 1},
		Spec:       gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{fragment}}},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		t.Fatal(err)
	}
	route := &unstructured.Unstructured{Object: m}
	route.SetGroupVersionKind(httpRoute)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	return fake.NewClientBuilder().WithScheme(withoutRoutes(t)).WithObjects(gc, gateway, lf, route, ns).WithStatusSubresource(route).Build()
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
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}}
	res, err := reconciler(c, func() error { return errors.New("lease lost") }).Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != fenceRetry {
		t.Fatalf("fenced Reconcile = %+v, %v; want a retry after %v", res, err, fenceRetry)
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
