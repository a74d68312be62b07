package routing

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// settle bounds every wait for gatefold.
const settle = 20 * time.Second

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "route-"}}
	create(t, ns)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
	return ns.Name
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("Reading %T %s: %v", obj, obj.GetName(), err)
	}
}

// folded is a fragment folded into a Gateway of a class of controller.
type folded struct {
	gw *gwv1.Gateway
	lf *v1alpha1.ListenerFragment
}

// fold creates a Gateway in a namespace of its own, admitting fragments
// from all, and fragment "lf" in namespace ns with listener "web" (HTTP on
// port 80 for a.example.com, allowedRoutes as given), and waits until the
// merger folded it.
func fold(t *testing.T, ns string, allowed *gwv1.AllowedRoutes) folded {
	t.Helper()
	gw := gateway(t, gwv1.NamespacesFromAll)
	web := fixture.Entry("web", 80, gwv1.HTTPProtocolType, "a.example.com")
	web.AllowedRoutes = allowed
	lf := fixture.Fragment(ns, "lf", gw, web)
	create(t, lf)
	wantListener(t, gw, v1alpha1.ListenerName(ns, lf.Name, "web"))
	return folded{gw: gw, lf: lf}
}

// gateway creates a Gateway of a new class of controller, in a namespace
// of its own, admitting listeners from the namespaces from says.
func gateway(t *testing.T, from gwv1.FromNamespaces) *gwv1.Gateway {
	t.Helper()
	gc := fixture.GatewayClass(controller)
	create(t, gc)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, gc) })
	gw := fixture.Gateway(newNamespace(t), from)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gc.Name)
	create(t, gw)
	return gw
}

// wantListener waits until Gateway gw carries a listener named name.
func wantListener(t *testing.T, gw *gwv1.Gateway, name gwv1.SectionName) {
	t.Helper()
	testenv.Eventually(t, settle, func() error {
		got := &gwv1.Gateway{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gw), got); err != nil {
			return err
		}
		if !slices.ContainsFunc(got.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == name }) {
			return fmt.Errorf("Gateway %s has no listener %s yet", gw.Name, name)
		}
		return nil
	})
}

// fragmentRef is a parentRef naming fragment lf's listener section.
func fragmentRef(lf *v1alpha1.ListenerFragment, section string) gwv1.ParentReference {
	return gwv1.ParentReference{Group: ptr.To(gwv1.Group(v1alpha1.GroupVersion.Group)), Kind: ptr.To(gwv1.Kind("ListenerFragment")),
		Namespace: ptr.To(gwv1.Namespace(lf.Namespace)), Name: gwv1.ObjectName(lf.Name), SectionName: ptr.To(gwv1.SectionName(section))}
}

// route creates HTTPRoute ns/name for a.example.com with parentRef ref and
// one backend, and returns it as stored.
func route(t *testing.T, ns, name string, ref gwv1.ParentReference) *gwv1.HTTPRoute {
	t.Helper()
	r := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{ref}},
			Hostnames:       []gwv1.Hostname{"a.example.com"},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "app", Port: ptr.To(gwv1.PortNumber(8080))}}}}}},
		},
	}
	create(t, r)
	return r
}

// derivedOf returns the derived routes the route controls.
func derivedOf(t *testing.T, r *gwv1.HTTPRoute) []gwv1.HTTPRoute {
	t.Helper()
	var out []gwv1.HTTPRoute
	for _, u := range derivedRoutes(t, schema.GroupVersionKind{Group: gwv1.GroupName, Version: gwv1.GroupVersion.Version, Kind: rules.KindHTTPRoute}, r) {
		var d gwv1.HTTPRoute
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// wantDerived waits until the route has exactly one derived route, which
// names listener `listener` of Gateway gw, and returns it.
func wantDerived(t *testing.T, r *gwv1.HTTPRoute, gw *gwv1.Gateway, listener gwv1.SectionName) gwv1.HTTPRoute {
	t.Helper()
	want := []gwv1.ParentReference{{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")),
		Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), Name: gwv1.ObjectName(gw.Name), SectionName: ptr.To(listener)}}
	var d gwv1.HTTPRoute
	testenv.Eventually(t, settle, func() error {
		got := derivedOf(t, r)
		if len(got) != 1 {
			return fmt.Errorf("HTTPRoute %s has %d derived routes, want 1", r.Name, len(got))
		}
		d = got[0]
		if !reflect.DeepEqual(d.Spec.ParentRefs, want) {
			return fmt.Errorf("derived route %s names %s, want Gateway %s/%s section %s", d.Name, refs(d.Spec.ParentRefs), gw.Namespace, gw.Name, listener)
		}
		if !reflect.DeepEqual(d.Spec.Rules, r.Spec.Rules) || !reflect.DeepEqual(d.Spec.Hostnames, r.Spec.Hostnames) {
			return fmt.Errorf("derived route %s has hostnames %v and rules %+v, want the user route's %v and %+v", d.Name, d.Spec.Hostnames, d.Spec.Rules, r.Spec.Hostnames, r.Spec.Rules)
		}
		return nil
	})
	return d
}

func refs(rs []gwv1.ParentReference) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s/%s section %s", ptr.Deref(r.Kind, ""), ptr.Deref(r.Namespace, ""), r.Name, ptr.Deref(r.SectionName, "")))
	}
	return strings.Join(out, ", ")
}

// entry returns r's status entry of controller for parentRef ref.
func entry(r *gwv1.HTTPRoute, controller string, ref gwv1.ParentReference) *gwv1.RouteParentStatus {
	for i, p := range r.Status.Parents {
		if string(p.ControllerName) == controller && reflect.DeepEqual(p.ParentRef, ref) {
			return &r.Status.Parents[i]
		}
	}
	return nil
}

// wantEntry waits until r's entry for ref says Accepted status/reason at
// r's generation, and returns r.
func wantEntry(t *testing.T, r *gwv1.HTTPRoute, ref gwv1.ParentReference, status metav1.ConditionStatus, reason string) *gwv1.HTTPRoute {
	t.Helper()
	got := &gwv1.HTTPRoute{}
	testenv.Eventually(t, settle, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
			return err
		}
		e := entry(got, controller, ref)
		if e == nil {
			return fmt.Errorf("HTTPRoute %s has no status entry of %s for its parentRef; entries: %+v", r.Name, controller, got.Status.Parents)
		}
		c := meta.FindStatusCondition(e.Conditions, string(gwv1.RouteConditionAccepted))
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("HTTPRoute %s Accepted = %s, want %s/%s at generation %d", r.Name, testenv.ConditionString(c), status, reason, got.Generation)
		}
		return nil
	})
	return got
}

// implement writes the derived route's status as the implementation of
// controller would: each parentRef Accepted with resolved references.
func implement(t *testing.T, d *gwv1.HTTPRoute) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, d)
		d.Status.Parents = nil
		for _, ref := range d.Spec.ParentRefs {
			d.Status.Parents = append(d.Status.Parents, gwv1.RouteParentStatus{ParentRef: ref, ControllerName: controller, Conditions: []metav1.Condition{
				{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonAccepted), ObservedGeneration: d.Generation, LastTransitionTime: metav1.Now(), Message: "Accepted"},
				{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs), ObservedGeneration: d.Generation, LastTransitionTime: metav1.Now(), Message: "Resolved"},
			}})
		}
		return env.Client.Status().Update(ctx, d)
	}); err != nil {
		t.Fatal(err)
	}
}

// served is a route by fragment parentRef "web" in a namespace of its
// own, and its derived route.
type served struct {
	folded
	ref     gwv1.ParentReference
	route   *gwv1.HTTPRoute
	derived gwv1.HTTPRoute
}

func serve(t *testing.T) served {
	t.Helper()
	app := newNamespace(t)
	f := fold(t, app, nil)
	ref := fragmentRef(f.lf, "web")
	r := route(t, app, "web", ref)
	return served{folded: f, ref: ref, route: r, derived: wantDerived(t, r, f.gw, v1alpha1.ListenerName(app, f.lf.Name, "web"))}
}

// accept has the implementation accept the derived route, and waits until
// the user route's entry says Accepted; it returns the user route.
func (s *served) accept(t *testing.T) *gwv1.HTTPRoute {
	t.Helper()
	implement(t, &s.derived)
	return wantEntry(t, s.route, s.ref, metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
}

func TestRouteByFragmentIsServedThroughDerivedRoute(t *testing.T) {
	s := serve(t)
	r, d, ref := s.route, s.derived, s.ref
	if owner := metav1.GetControllerOf(&d); owner == nil || owner.UID != r.UID || ptr.Deref(owner.BlockOwnerDeletion, true) {
		t.Errorf("Derived route %s is controlled by %+v, want HTTPRoute %s without blockOwnerDeletion", d.Name, owner, r.Name)
	}
	if !strings.HasPrefix(d.Name, "gf-") || d.Labels["app.kubernetes.io/managed-by"] != "gatefold" || d.Annotations[v1alpha1.SourceGenerationAnnotation] != "1" ||
		d.Annotations[v1alpha1.DerivedSourceAnnotation] != "HTTPRoute/web" || !strings.Contains(d.Annotations[v1alpha1.DerivedNoteAnnotation], "reverted") {
		t.Errorf("Derived route %s has labels %v and annotations %v, want the gf- prefix, managed-by gatefold, the route it comes from, source-generation 1 and a note", d.Name, d.Labels, d.Annotations)
	}
	// Until the implementation judged the derived route, the entry waits.
	wantEntry(t, r, ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
	got := s.accept(t)
	if c := meta.FindStatusCondition(entry(got, controller, ref).Conditions, string(gwv1.RouteConditionResolvedRefs)); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
		t.Errorf("HTTPRoute %s ResolvedRefs = %s, want True at generation %d", r.Name, testenv.ConditionString(c), got.Generation)
	}
}

func TestSectionNameOfNoListenerIsNoMatchingParent(t *testing.T) {
	app := newNamespace(t)
	f := fold(t, app, nil)
	ref := fragmentRef(f.lf, "nope")
	r := route(t, app, "web", ref)
	got := wantEntry(t, r, ref, metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
	if d := derivedOf(t, r); len(d) != 0 {
		t.Errorf("HTTPRoute %s has %d derived routes, want none", r.Name, len(d))
	}
	if c := meta.FindStatusCondition(entry(got, controller, ref).Conditions, string(gwv1.RouteConditionAccepted)); !strings.Contains(c.Message, "nope") {
		t.Errorf("Accepted message %q does not name sectionName nope", c.Message)
	}
}

func TestAllowedRoutesSameRefusesRouteOfAnotherNamespace(t *testing.T) {
	app, other := newNamespace(t), newNamespace(t)
	f := fold(t, app, &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}})
	ref := fragmentRef(f.lf, "web")
	r := route(t, other, "web", ref)
	wantEntry(t, r, ref, metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
	if d := derivedOf(t, r); len(d) != 0 {
		t.Errorf("HTTPRoute %s has %d derived routes, want none", r.Name, len(d))
	}
	// The fragment's own namespace is Same.
	mine := route(t, app, "mine", ref)
	wantDerived(t, mine, f.gw, v1alpha1.ListenerName(app, f.lf.Name, "web"))
}

// The fold refusing a fragment's new generation changes its status alone:
// the route that waits for it is judged again at once, not on a resync.
func TestRouteWaitingForTheFoldIsRefusedWithItsFragment(t *testing.T) {
	app := newNamespace(t)
	// The Gateway admits no listener of app: the fragment is refused.
	lf := fixture.Fragment(app, "lf", gateway(t, gwv1.NamespacesFromSame), fixture.Entry("web", 80, gwv1.HTTPProtocolType, "a.example.com"))
	create(t, lf)
	ref := fragmentRef(lf, "api")
	r := route(t, app, "web", ref)
	wantEntry(t, r, ref, metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
	// Renamed, the listener is the route's; the route waits for the fold.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, lf)
		lf.Spec.Listeners[0].Name = "api"
		return env.Client.Update(ctx, lf)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, func() error {
		got := &gwv1.HTTPRoute{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
			return err
		}
		var c *metav1.Condition
		if e := entry(got, controller, ref); e != nil {
			c = meta.FindStatusCondition(e.Conditions, string(gwv1.RouteConditionAccepted))
		}
		if c == nil || c.Reason != string(gwv1.RouteReasonNoMatchingParent) || !strings.Contains(c.Message, "is not folded") {
			return fmt.Errorf("HTTPRoute %s Accepted = %s, want False/NoMatchingParent: listener api is not folded", r.Name, testenv.ConditionString(c))
		}
		return nil
	})
}

func TestHandEditOfDerivedRouteIsPutBack(t *testing.T) {
	s := serve(t)
	d := s.derived
	d.Spec.Hostnames = []gwv1.Hostname{"evil.example.com"}
	d.Spec.ParentRefs[0].SectionName = ptr.To(gwv1.SectionName("default"))
	if err := env.Client.Update(ctx, &d); err != nil {
		t.Fatal(err)
	}
	wantDerived(t, s.route, s.gw, v1alpha1.ListenerName(s.lf.Namespace, s.lf.Name, "web"))
}

func TestDeletingRouteOrFragmentRemovesDerivedRoute(t *testing.T) {
	for what, remove := range map[string]func(s served) client.Object{
		"route":    func(s served) client.Object { return s.route },
		"fragment": func(s served) client.Object { return s.lf },
	} {
		t.Run(what, func(t *testing.T) {
			s := serve(t)
			r, d, ref := s.route, s.derived, s.ref
			wantEntry(t, r, ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
			if err := env.Client.Delete(ctx, remove(s)); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, settle, func() error {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&d), &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("derived route %s is still there (%v)", d.Name, err)
				}
				got := &gwv1.HTTPRoute{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err == nil && entry(got, controller, ref) != nil {
					return fmt.Errorf("HTTPRoute %s still has gatefold's entry for a fragment that is gone", r.Name)
				}
				return nil
			})
		})
	}
}

func TestOtherControllersEntriesAreKept(t *testing.T) {
	s := serve(t)
	r := s.route
	other := gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")), Name: "elsewhere"},
		ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonAccepted),
			ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now(), Message: "Served by another implementation"}},
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, r)
		r.Status.Parents = append(r.Status.Parents, other)
		return env.Client.Status().Update(ctx, r)
	}); err != nil {
		t.Fatal(err)
	}
	got := s.accept(t)
	kept := entry(got, string(other.ControllerName), other.ParentRef)
	if kept == nil || kept.Conditions[0].Message != other.Conditions[0].Message {
		t.Errorf("HTTPRoute %s lost the entry of controller %s: entries %+v", r.Name, other.ControllerName, got.Status.Parents)
	}
}

// routeWrites counts the replica's writes of HTTPRoutes in ns, as the
// audit log has them.
func routeWrites(t *testing.T, ns string) int {
	t.Helper()
	events, err := testenv.ReadAuditLog(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.UserAgent == agent && e.ObjectRef.Resource == "httproutes" && e.ObjectRef.Namespace == ns {
			n++
		}
	}
	return n
}

func TestSteadyStateMakesNoRouteWrites(t *testing.T) {
	s := serve(t)
	r, d, app := s.route, s.derived, s.route.Namespace
	s.accept(t)
	time.Sleep(time.Second) // let the last events settle
	before := routeWrites(t, app)
	// Events that reconcile the route again without changing anything.
	get(t, r)
	r.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := env.Client.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	get(t, &d)
	d.Annotations["example.com/touched"] = "yes"
	if err := env.Client.Update(ctx, &d); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if n := routeWrites(t, app) - before; n != 0 {
		t.Errorf("gatefold sent %d HTTPRoute writes in a steady state", n)
	}
}

// An implementation that replaces gatefold's entry after every write (as
// Traefik v3.6.12 does on a route that also names one of its Gateways)
// gets a few writes back, a Warning event and a backoff, not a loop.
func TestReplacedEntryIsWrittenAgainWithBackoff(t *testing.T) {
	s := serve(t)
	r, ref, app := s.route, s.ref, s.route.Namespace
	s.accept(t)
	before := routeWrites(t, app)
	deadline := time.Now().Add(8 * time.Second)
	replaced := 0
	for time.Now().Before(deadline) {
		got := &gwv1.HTTPRoute{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
			t.Fatal(err)
		}
		e := entry(got, controller, ref)
		if c := meta.FindStatusCondition(e.Conditions, string(gwv1.RouteConditionAccepted)); c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&e.Conditions, metav1.Condition{Type: c.Type, Status: metav1.ConditionFalse, Reason: string(gwv1.RouteReasonNoMatchingParent),
				ObservedGeneration: got.Generation, Message: "No listener of the Gateway matches"})
			if err := env.Client.Status().Update(ctx, got); err == nil {
				replaced++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Backoffs of 1s, 2s and 4s in 8s: at most 4 writes back.
	if n := routeWrites(t, app) - before; n < 1 || n > 4 {
		t.Errorf("gatefold wrote the route's status %d times back in 8s against a writer replacing it %d times, want 1 to 4", n, replaced)
	}
	testenv.Eventually(t, settle, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(app)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == r.Name && e.Reason == "ParentStatusOverwritten" && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no ParentStatusOverwritten Warning on HTTPRoute %s", r.Name)
	})
}

// A ListenerSet's listeners land on the Gateway gatefold keeps beside its
// parent: the derived route names that Gateway.
func TestRouteByListenerSetIsServedOnItsGateway(t *testing.T) {
	app := newNamespace(t)
	gw := gateway(t, gwv1.NamespacesFromAll)
	ls := fixture.ListenerSet(app, "ls", gw, fixture.Entry("web", 80, gwv1.HTTPProtocolType, "a.example.com"))
	create(t, ls)
	landed := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: rules.ListenerSetGatewayName(gw.Name)}}
	listener := v1alpha1.ListenerSetListenerName(app, ls.Name, "web")
	wantListener(t, landed, listener)
	ref := gwv1.ParentReference{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("ListenerSet")), Name: "ls", SectionName: ptr.To(gwv1.SectionName("web"))}
	r := route(t, app, "web", ref)
	d := wantDerived(t, r, landed, listener)
	wantEntry(t, r, ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
	implement(t, &d)
	wantEntry(t, r, ref, metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
}

// A route refused by an allowedRoutes selector is served once its
// namespace gets the label: no resync is needed.
func TestRelabelledNamespaceAdmitsRoute(t *testing.T) {
	app, other := newNamespace(t), newNamespace(t)
	f := fold(t, app, &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}}})
	ref := fragmentRef(f.lf, "web")
	r := route(t, other, "web", ref)
	wantEntry(t, r, ref, metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}
	get(t, ns)
	ns.Labels["team"] = "shop"
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	wantDerived(t, r, f.gw, v1alpha1.ListenerName(app, f.lf.Name, "web"))
	wantEntry(t, r, ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
}

// GRPCRoutes are served as HTTPRoutes are.
func TestGRPCRouteByFragmentGetsDerivedGRPCRoute(t *testing.T) {
	app := newNamespace(t)
	f := fold(t, app, nil)
	r := &gwv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "grpc"},
		Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{fragmentRef(f.lf, "web")}},
			Hostnames:       []gwv1.Hostname{"a.example.com"},
			Rules: []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "app", Port: ptr.To(gwv1.PortNumber(9090))}}}}}},
		},
	}
	create(t, r)
	listener := v1alpha1.ListenerName(app, f.lf.Name, "web")
	testenv.Eventually(t, settle, func() error {
		list := &gwv1.GRPCRouteList{}
		if err := env.Client.List(ctx, list, client.InNamespace(app), client.MatchingLabels{v1alpha1.DerivedLabel: "true"}); err != nil {
			return err
		}
		if len(list.Items) != 1 || !metav1.IsControlledBy(&list.Items[0], r) {
			return fmt.Errorf("GRPCRoute %s has %d derived GRPCRoutes, want 1 it controls", r.Name, len(list.Items))
		}
		d := list.Items[0]
		if len(d.Spec.ParentRefs) != 1 || ptr.Deref(d.Spec.ParentRefs[0].SectionName, "") != listener || string(d.Spec.ParentRefs[0].Name) != f.gw.Name ||
			!reflect.DeepEqual(d.Spec.Rules, r.Spec.Rules) {
			return fmt.Errorf("derived GRPCRoute %s names %s with rules %+v, want Gateway %s section %s and the user's rules", d.Name, refs(d.Spec.ParentRefs), d.Spec.Rules, f.gw.Name, listener)
		}
		return nil
	})
}

// An edit of the user's route reaches the derived route, and the entry
// waits for the implementation's verdict on the edit before it says
// Accepted at the new generation.
func TestEditedRouteIsJudgedAgain(t *testing.T) {
	s := serve(t)
	s.accept(t)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, s.route)
		s.route.Spec.Rules[0].BackendRefs[0].Port = ptr.To(gwv1.PortNumber(9090))
		return env.Client.Update(ctx, s.route)
	}); err != nil {
		t.Fatal(err)
	}
	d := wantDerived(t, s.route, s.gw, v1alpha1.ListenerName(s.lf.Namespace, s.lf.Name, "web"))
	if d.Annotations[v1alpha1.SourceGenerationAnnotation] != "2" {
		t.Errorf("derived route %s copies generation %s of the route, want 2", d.Name, d.Annotations[v1alpha1.SourceGenerationAnnotation])
	}
	wantEntry(t, s.route, s.ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
	s.derived = d
	s.accept(t)
}

// A derived route whose labels someone removed is still gatefold's: the
// labels are put back, and the route keeps being served.
func TestDerivedRouteWithoutLabelsIsAdopted(t *testing.T) {
	s := serve(t)
	d := s.derived
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, &d)
		delete(d.Labels, v1alpha1.DerivedLabel)
		delete(d.Labels, v1alpha1.DerivedFromLabel)
		return env.Client.Update(ctx, &d)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, func() error {
		get(t, &d)
		if d.Labels[v1alpha1.DerivedLabel] != "true" || d.Labels[v1alpha1.DerivedFromLabel] == "" {
			return fmt.Errorf("derived route %s has labels %v, want gatefold's back", d.Name, d.Labels)
		}
		return nil
	})
	s.derived = d
	s.accept(t)
}

// A route that stops naming its fragment loses its derived route and
// gatefold's entry.
func TestRouteNoLongerNamingFragmentIsLeft(t *testing.T) {
	s := serve(t)
	wantEntry(t, s.route, s.ref, metav1.ConditionUnknown, string(gwv1.RouteReasonPending))
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, s.route)
		s.route.Spec.ParentRefs = []gwv1.ParentReference{{Name: "elsewhere"}}
		return env.Client.Update(ctx, s.route)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, func() error {
		if d := derivedOf(t, s.route); len(d) != 0 {
			return fmt.Errorf("HTTPRoute %s still has %d derived routes", s.route.Name, len(d))
		}
		get(t, s.route)
		if entry(s.route, controller, s.ref) != nil {
			return fmt.Errorf("HTTPRoute %s still has gatefold's entry for the fragment it no longer names", s.route.Name)
		}
		return nil
	})
}
