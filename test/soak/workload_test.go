package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// The world the workload writes, whose conventions the oracle relies on
// (see doc.go).
const (
	infraNS    = "infra"
	certsNS    = "certs"
	gatefoldNS = "gatefold-system"

	foldedClass     = "soak"
	foldedClassCtrl = "example.com/soak"
	plainClass      = "plain"
	plainClassCtrl  = "example.com/plain"

	// accessLabel on a tenant namespace is what Selector allowedListeners
	// select: "yes" admits it.
	accessLabel = "soak.gatefold.dev/access"
	// holdFinalizer keeps a deleted object until the workload lets it go.
	holdFinalizer = "soak.gatefold.dev/hold"
)

// tenants are the namespaces fragments, ListenerSets and routes live in;
// the last one may opt out of admission.
var tenants = []string{"t0", "t1", "t2", "t3", "t4", "t5"}

// optOutTenant is the tenant whose namespace flips the opt-out label.
const optOutTenant = "t5"

// The Gateways of namespace infra:
//   - shared admits every namespace and folds the ListenerSets of its class;
//   - pool is a pool head that admits the namespaces labelled access=yes;
//   - edge, of a class whose ListenerSets gatefold leaves alone, flips its
//     allowedListeners and is deleted and created again.
const (
	sharedGW = "shared"
	poolGW   = "pool"
	edgeGW   = "edge"
)

// ownHTTP is every Gateway's own listener; ownShadow is the own listener the
// workload adds to and removes from shared, over a tuple fragments want.
var (
	ownHTTP   = gwv1.Listener{Name: "own-http", Port: 80, Protocol: gwv1.HTTPProtocolType}
	ownShadow = gwv1.Listener{Name: "own-a", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To[gwv1.Hostname]("a.example.com"),
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "own-cert"}}}}
)

// fragmentNames is how many fragment names a tenant draws from: the
// population grows through a run, past one Gateway of the pool.
const fragmentNames = 40

// poolHosts is how many hostnames fragments of the pool draw from: enough
// distinct tuples that the pool grows past one Gateway.
const poolHosts = 160

// op is one operation as the log keeps it.
type op struct {
	At     time.Time
	Writer int
	What   string
	Err    string
}

func (o op) String() string {
	s := fmt.Sprintf("%s w%d %s", o.At.Format("15:04:05.000"), o.Writer, o.What)
	if o.Err != "" {
		s += ": " + o.Err
	}
	return s
}

// opLog keeps the operations of the current round.
type opLog struct {
	mu  sync.Mutex
	ops []op
}

func (l *opLog) add(o op) {
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.mu.Unlock()
}

// take returns the operations logged since the last take, and forgets them.
func (l *opLog) take() []op {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

// writer is one tenant-like client issuing random operations, seeded.
type writer struct {
	id  int
	c   client.Client
	rnd *rand.Rand
	log *opLog
	// released are objects the writer deleted while they held its
	// finalizer, to let go of later.
	released []client.Object
}

// weighted is an operation with how often it is picked.
type weighted struct {
	weight int
	run    func(ctx context.Context, w *writer) string
}

// operations is the mix: fragments most often, then what changes their
// fate (own listeners, grants, labels, allowedListeners, Gateways deleted),
// and the hostile tenants' moves.
var operations = []weighted{
	{30, createFragment},
	{6, raceFragments},
	{10, updateFragment},
	{8, deleteFragment},
	{3, holdAndDeleteFragment},
	{5, createListenerSet},
	{4, deleteListenerSet},
	{5, createRoute},
	{3, deleteRoute},
	{1, toggleShadow},
	{3, toggleGrant},
	{2, flipAccess},
	{1, flipOptOut},
	{1, flipEdgeAllowed},
	{1, recreateEdge},
	{1, togglePoolMark},
	{2, createTypo},
	{1, createTooBig},
}

// run issues operations until ctx ends.
func (w *writer) run(ctx context.Context) {
	total := 0
	for _, o := range operations {
		total += o.weight
	}
	for ctx.Err() == nil {
		n := w.rnd.IntN(total)
		for _, o := range operations {
			if n < o.weight {
				opCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
				what := o.run(opCtx, w)
				cancel()
				if what != "" {
					w.log.add(op{At: time.Now(), Writer: w.id, What: what})
				}
				break
			}
			n -= o.weight
		}
	}
}

// done records an operation and its outcome. An error that is no answer of
// the API server (it is restarting, or the request timed out) pauses the
// writer a little, as a client's backoff would.
func (w *writer) done(what string, err error) string {
	if err == nil {
		return what
	}
	w.log.add(op{At: time.Now(), Writer: w.id, What: what, Err: shortErr(err)})
	if !errors.As(err, new(apierrors.APIStatus)) {
		time.Sleep(200 * time.Millisecond)
	}
	return ""
}

// shortErr is an error's first 160 characters, for the log.
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func (w *writer) tenant() string { return tenants[w.rnd.IntN(len(tenants))] }

func pick[T any](w *writer, items ...T) T { return items[w.rnd.IntN(len(items))] }

// entry is one listener from the small alphabet that makes conflicts
// frequent: HTTPS over four hostnames (a wildcard among them), TLS on one
// of them, HTTP against HTTPS on 8443, TCP on 5432, HTTP on 80.
func (w *writer) entry(name string, pool bool) gwv1.ListenerEntry {
	e := gwv1.ListenerEntry{Name: gwv1.SectionName(name)}
	host := func(h string) { e.Hostname = ptr.To(gwv1.Hostname(h)) }
	tls := func() {
		ref := gwv1.SecretObjectReference{Name: "cert"}
		if w.rnd.IntN(3) == 0 {
			ref = gwv1.SecretObjectReference{Name: "shared-cert", Namespace: ptr.To[gwv1.Namespace](certsNS)}
		}
		e.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{ref}}
	}
	if pool && w.rnd.IntN(5) > 0 {
		e.Port, e.Protocol = 443, gwv1.HTTPSProtocolType
		host(fmt.Sprintf("h%d.pool.example.com", w.rnd.IntN(poolHosts)))
		tls()
		return e
	}
	switch w.rnd.IntN(8) {
	case 0, 1, 2:
		e.Port, e.Protocol = 443, gwv1.HTTPSProtocolType
		host(pick(w, "a.example.com", "b.example.com", "c.example.com", "*.example.com"))
		tls()
	case 3:
		e.Port, e.Protocol = 443, gwv1.TLSProtocolType
		host("b.example.com")
		tls()
	case 4:
		e.Port, e.Protocol = 8443, gwv1.HTTPSProtocolType
		host("c.example.com")
		tls()
	case 5:
		e.Port, e.Protocol = 8443, gwv1.HTTPProtocolType
		host(pick(w, "c.example.com", "d.example.com"))
	case 6:
		e.Port, e.Protocol = 5432, gwv1.TCPProtocolType
	default:
		e.Port, e.Protocol = 80, gwv1.HTTPProtocolType
		host(pick(w, "a.example.com", "b.example.com"))
	}
	return e
}

// entries are one to three listeners, named l0, l1, l2.
func (w *writer) entries(pool bool) []gwv1.ListenerEntry {
	var out []gwv1.ListenerEntry
	for i := range 1 + w.rnd.IntN(3) {
		out = append(out, w.entry(fmt.Sprintf("l%d", i), pool))
	}
	return out
}

func parentRef(gw string) gwv1.ParentGatewayReference {
	return gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gw), Namespace: ptr.To[gwv1.Namespace](infraNS)}
}

func createFragment(ctx context.Context, w *writer) string {
	gw := pick(w, sharedGW, poolGW, poolGW, edgeGW)
	lf := &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.tenant(), Name: fmt.Sprintf("f%d", w.rnd.IntN(fragmentNames))},
		Spec:       v1alpha1.ListenerFragmentSpec{ParentRef: parentRef(gw), Listeners: w.entries(gw == poolGW)},
	}
	return w.done("create fragment "+describe(lf.Namespace, lf.Name, gw, lf.Spec.Listeners), w.c.Create(ctx, lf))
}

// raceFragments creates two fragments of two tenants with one listener of
// the same tuple at the same moment: admission must deny one of them,
// whichever replica each request reaches.
func raceFragments(ctx context.Context, w *writer) string {
	gw := pick(w, sharedGW, poolGW, edgeGW)
	e := w.entry("l0", gw == poolGW)
	first := w.tenant()
	second := tenants[(slices.Index(tenants, first)+1+w.rnd.IntN(len(tenants)-1))%len(tenants)]
	var lfs [2]*v1alpha1.ListenerFragment
	var errs [2]error
	var wg sync.WaitGroup
	for i, ns := range []string{first, second} {
		lfs[i] = &v1alpha1.ListenerFragment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("f%d", w.rnd.IntN(fragmentNames))},
			Spec:       v1alpha1.ListenerFragmentSpec{ParentRef: parentRef(gw), Listeners: []gwv1.ListenerEntry{e}},
		}
		wg.Go(func() { errs[i] = w.c.Create(ctx, lfs[i]) })
	}
	wg.Wait()
	for i := range lfs {
		if what := w.done("race fragment "+describe(lfs[i].Namespace, lfs[i].Name, gw, lfs[i].Spec.Listeners), errs[i]); what != "" {
			w.log.add(op{At: time.Now(), Writer: w.id, What: what})
		}
	}
	return ""
}

// describe renders a source for the log.
func describe(ns, name, gw string, ls []gwv1.ListenerEntry) string {
	var parts []string
	for _, l := range ls {
		h := ""
		if l.Hostname != nil {
			h = " " + string(*l.Hostname)
		}
		parts = append(parts, fmt.Sprintf("%s %d/%s%s", l.Name, l.Port, l.Protocol, h))
	}
	return fmt.Sprintf("%s/%s on %s [%s]", ns, name, gw, strings.Join(parts, ", "))
}

// someFragment reads a random stored fragment of a random tenant, or nil.
func (w *writer) someFragment(ctx context.Context) *v1alpha1.ListenerFragment {
	list := &v1alpha1.ListenerFragmentList{}
	if err := w.c.List(ctx, list, client.InNamespace(w.tenant())); err != nil || len(list.Items) == 0 {
		return nil
	}
	return &list.Items[w.rnd.IntN(len(list.Items))]
}

func updateFragment(ctx context.Context, w *writer) string {
	lf := w.someFragment(ctx)
	if lf == nil {
		return ""
	}
	pool := string(lf.Spec.ParentRef.Name) == poolGW
	switch w.rnd.IntN(4) {
	case 3: // the fragment moves to another Gateway, its listeners as they are
		lf.Spec.ParentRef = parentRef(pick(w, sharedGW, poolGW, edgeGW))
	case 0: // a listener changes its tuple
		i := w.rnd.IntN(len(lf.Spec.Listeners))
		lf.Spec.Listeners[i] = w.entry(string(lf.Spec.Listeners[i].Name), pool)
	case 1: // a listener is added
		if len(lf.Spec.Listeners) < 3 {
			lf.Spec.Listeners = append(lf.Spec.Listeners, w.entry(fmt.Sprintf("l%d", len(lf.Spec.Listeners)+3), pool))
		}
	default: // a label only: never denied
		metav1.SetMetaDataLabel(&lf.ObjectMeta, "soak.gatefold.dev/touched", fmt.Sprint(w.rnd.IntN(100)))
	}
	return w.done("update fragment "+describe(lf.Namespace, lf.Name, string(lf.Spec.ParentRef.Name), lf.Spec.Listeners), w.c.Update(ctx, lf))
}

func deleteFragment(ctx context.Context, w *writer) string {
	lf := w.someFragment(ctx)
	if lf == nil {
		return ""
	}
	return w.done(fmt.Sprintf("delete fragment %s/%s", lf.Namespace, lf.Name), client.IgnoreNotFound(w.c.Delete(ctx, lf)))
}

// holdAndDeleteFragment deletes a fragment that holds a finalizer, so that
// it stays being deleted for a while, or lets go of one deleted before.
func holdAndDeleteFragment(ctx context.Context, w *writer) string {
	if len(w.released) > 0 && w.rnd.IntN(2) == 0 {
		obj := w.released[0]
		w.released = w.released[1:]
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
		return w.done(fmt.Sprintf("let go of fragment %s/%s", obj.GetNamespace(), obj.GetName()), client.IgnoreNotFound(w.c.Patch(ctx, obj, patch)))
	}
	lf := w.someFragment(ctx)
	if lf == nil || lf.DeletionTimestamp != nil {
		return ""
	}
	lf.Finalizers = append(lf.Finalizers, holdFinalizer)
	if err := w.c.Update(ctx, lf); err != nil {
		return w.done(fmt.Sprintf("hold fragment %s/%s", lf.Namespace, lf.Name), err)
	}
	w.released = append(w.released, lf.DeepCopy())
	return w.done(fmt.Sprintf("delete held fragment %s/%s", lf.Namespace, lf.Name), client.IgnoreNotFound(w.c.Delete(ctx, lf)))
}

func createListenerSet(ctx context.Context, w *writer) string {
	gw := pick(w, sharedGW, poolGW)
	ls := &gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.tenant(), Name: fmt.Sprintf("s%d", w.rnd.IntN(4))},
		Spec:       gwv1.ListenerSetSpec{ParentRef: parentRef(gw), Listeners: w.entries(gw == poolGW)},
	}
	return w.done("create ListenerSet "+describe(ls.Namespace, ls.Name, gw, ls.Spec.Listeners), w.c.Create(ctx, ls))
}

func deleteListenerSet(ctx context.Context, w *writer) string {
	ls := &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.tenant(), Name: fmt.Sprintf("s%d", w.rnd.IntN(4))}}
	return w.done(fmt.Sprintf("delete ListenerSet %s/%s", ls.Namespace, ls.Name), client.IgnoreNotFound(w.c.Delete(ctx, ls)))
}

// createRoute creates an HTTPRoute that names listener l0 of a fragment or
// of a ListenerSet as its parent, which may not exist or not be HTTP(S).
func createRoute(ctx context.Context, w *writer) string {
	ns := w.tenant()
	group, kind, parent := gwv1.Group(v1alpha1.GroupVersion.Group), gwv1.Kind("ListenerFragment"), fmt.Sprintf("f%d", w.rnd.IntN(fragmentNames))
	if w.rnd.IntN(3) == 0 {
		group, kind, parent = gwv1.GroupName, "ListenerSet", fmt.Sprintf("s%d", w.rnd.IntN(4))
	}
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%d", w.rnd.IntN(6))},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Group: ptr.To(group), Kind: ptr.To(kind), Name: gwv1.ObjectName(parent), SectionName: ptr.To[gwv1.SectionName]("l0"),
			}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Name: "app", Port: ptr.To[gwv1.PortNumber](8080),
			}}}}}},
		},
	}
	return w.done(fmt.Sprintf("create route %s/%s naming %s %s", ns, route.Name, kind, parent), w.c.Create(ctx, route))
}

func deleteRoute(ctx context.Context, w *writer) string {
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: w.tenant(), Name: fmt.Sprintf("r%d", w.rnd.IntN(6))}}
	return w.done(fmt.Sprintf("delete route %s/%s", route.Namespace, route.Name), client.IgnoreNotFound(w.c.Delete(ctx, route)))
}

// updateGateway reads Gateway name, changes it, and writes it back, as its
// owner would (a conflict is logged, not retried).
func (w *writer) updateGateway(ctx context.Context, name, what string, change func(*gwv1.Gateway)) string {
	gw := &gwv1.Gateway{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: infraNS, Name: name}, gw); err != nil {
		return w.done(what, client.IgnoreNotFound(err))
	}
	change(gw)
	return w.done(what, w.c.Update(ctx, gw))
}

// toggleShadow adds the own listener own-a to shared, or removes it.
func toggleShadow(ctx context.Context, w *writer) string {
	return w.updateGateway(ctx, sharedGW, "toggle own listener own-a on shared", func(gw *gwv1.Gateway) {
		if i := slices.IndexFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == ownShadow.Name }); i >= 0 {
			gw.Spec.Listeners = slices.Delete(gw.Spec.Listeners, i, i+1)
		} else {
			gw.Spec.Listeners = append(gw.Spec.Listeners, ownShadow)
		}
	})
}

// toggleGrant creates or deletes the ReferenceGrant in certs that lets a
// tenant's fragments and ListenerSets use Secret shared-cert.
func toggleGrant(ctx context.Context, w *writer) string {
	ns := w.tenant()
	grant := &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: certsNS, Name: "grant-" + ns},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{
				{Group: gwv1.Group(v1alpha1.GroupVersion.Group), Kind: "ListenerFragment", Namespace: gwv1.Namespace(ns)},
				{Group: gwv1.GroupName, Kind: "ListenerSet", Namespace: gwv1.Namespace(ns)},
			},
			To: []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: ptr.To[gwv1.ObjectName]("shared-cert")}},
		},
	}
	err := w.c.Create(ctx, grant)
	if apierrors.IsAlreadyExists(err) {
		return w.done("revoke grant "+grant.Name, client.IgnoreNotFound(w.c.Delete(ctx, grant)))
	}
	return w.done("grant "+grant.Name, err)
}

// setNamespaceLabel sets or removes (value "") a label of a namespace.
func (w *writer) setNamespaceLabel(ctx context.Context, ns, key, value string) error {
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, v))
	return w.c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, patch)
}

// flipAccess flips a tenant's access label, which pool and edge select on.
func flipAccess(ctx context.Context, w *writer) string {
	ns, value := w.tenant(), pick(w, "yes", "no")
	return w.done(fmt.Sprintf("label namespace %s %s=%s", ns, accessLabel, value), w.setNamespaceLabel(ctx, ns, accessLabel, value))
}

// flipOptOut opts the last tenant out of admission, or back in.
func flipOptOut(ctx context.Context, w *writer) string {
	value := pick(w, optOutValue, "")
	return w.done(fmt.Sprintf("label namespace %s %s=%q", optOutTenant, optOutLabel, value), w.setNamespaceLabel(ctx, optOutTenant, optOutLabel, value))
}

// flipEdgeAllowed sets edge's allowedListeners to All, Same or the access
// selector.
func flipEdgeAllowed(ctx context.Context, w *writer) string {
	from := pick(w, gwv1.NamespacesFromAll, gwv1.NamespacesFromSame, gwv1.NamespacesFromSelector)
	return w.updateGateway(ctx, edgeGW, fmt.Sprintf("set edge allowedListeners from %s", from), func(gw *gwv1.Gateway) {
		gw.Spec.AllowedListeners = allowed(from)
	})
}

// allowed is allowedListeners from `from`, the access selector for Selector.
func allowed(from gwv1.FromNamespaces) *gwv1.AllowedListeners {
	a := &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(from)}}
	if from == gwv1.NamespacesFromSelector {
		a.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{accessLabel: "yes"}}
	}
	return a
}

// togglePoolMark unmarks the pool head, which stops the pool (what its
// siblings carry stays), or marks it again.
func togglePoolMark(ctx context.Context, w *writer) string {
	return w.updateGateway(ctx, poolGW, "toggle the pool mark of pool", func(gw *gwv1.Gateway) {
		if gw.Annotations[v1alpha1.PoolAnnotation] == "true" {
			delete(gw.Annotations, v1alpha1.PoolAnnotation)
		} else {
			metav1.SetMetaDataAnnotation(&gw.ObjectMeta, v1alpha1.PoolAnnotation, "true")
		}
	})
}

// recreateEdge deletes edge, or creates it when it is gone: its fragments
// stay, naming a Gateway that does not exist for a while.
func recreateEdge(ctx context.Context, w *writer) string {
	err := w.c.Create(ctx, gateway(edgeGW, plainClass, gwv1.NamespacesFromAll, false))
	if apierrors.IsAlreadyExists(err) {
		return w.done("delete Gateway edge", client.IgnoreNotFound(w.c.Delete(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: edgeGW}})))
	}
	return w.done("create Gateway edge", err)
}

// createTypo creates a fragment whose protocol is a typo: denied, except in
// a namespace that opted out of admission.
func createTypo(ctx context.Context, w *writer) string {
	ns := pick(w, w.tenant(), optOutTenant)
	lf := &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("typo%d", w.rnd.IntN(2))},
		Spec: v1alpha1.ListenerFragmentSpec{ParentRef: parentRef(sharedGW), Listeners: []gwv1.ListenerEntry{
			{Name: "l0", Port: 8080, Protocol: "HTPP", Hostname: ptr.To[gwv1.Hostname]("typo.example.com")},
		}},
	}
	err := w.c.Create(ctx, lf)
	if apierrors.IsAlreadyExists(err) {
		err = client.IgnoreNotFound(w.c.Delete(ctx, lf))
		return w.done(fmt.Sprintf("delete typo fragment %s/%s", ns, lf.Name), err)
	}
	return w.done(fmt.Sprintf("create typo fragment %s/%s", ns, lf.Name), err)
}

// createTooBig creates a fragment of 64 listeners on shared, which carries
// an own listener: it can never be placed.
func createTooBig(ctx context.Context, w *writer) string {
	ns := pick(w, w.tenant(), optOutTenant)
	lf := &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-big"}, Spec: v1alpha1.ListenerFragmentSpec{ParentRef: parentRef(sharedGW)}}
	for i := range 64 {
		lf.Spec.Listeners = append(lf.Spec.Listeners, gwv1.ListenerEntry{Name: gwv1.SectionName(fmt.Sprintf("l%d", i)), Port: 9000,
			Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname(fmt.Sprintf("big%d.example.com", i)))})
	}
	err := w.c.Create(ctx, lf)
	if apierrors.IsAlreadyExists(err) {
		return w.done(fmt.Sprintf("delete too-big fragment %s", ns), client.IgnoreNotFound(w.c.Delete(ctx, lf)))
	}
	return w.done(fmt.Sprintf("create too-big fragment %s", ns), err)
}

// gateway is Gateway infra/name of class, with the own listener own-http.
func gateway(name, class string, from gwv1.FromNamespaces, pool bool) *gwv1.Gateway {
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(class),
			Listeners:        []gwv1.Listener{ownHTTP},
			AllowedListeners: allowed(from),
		},
	}
	if pool {
		gw.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
	}
	return gw
}

// seedWorld creates the namespaces, classes and Gateways the workload
// starts from.
func seedWorld(ctx context.Context, c client.Client) error {
	var objs []client.Object
	for _, ns := range append([]string{infraNS, certsNS}, tenants...) {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{accessLabel: "yes"}}})
	}
	objs = append(objs,
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: foldedClass}, Spec: gwv1.GatewayClassSpec{ControllerName: foldedClassCtrl}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: plainClass}, Spec: gwv1.GatewayClassSpec{ControllerName: plainClassCtrl}},
		gateway(sharedGW, foldedClass, gwv1.NamespacesFromAll, false),
		gateway(poolGW, foldedClass, gwv1.NamespacesFromSelector, true),
		gateway(edgeGW, plainClass, gwv1.NamespacesFromAll, false),
	)
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
