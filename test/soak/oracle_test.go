package soak

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
)

// The oracle is written from docs/api.md and Gateway API, never from
// gatefold's packages: these are the names and marks the docs give.
const (
	maxListeners    = 64
	ownPrefix       = "own-" // the workload's own Gateway listeners
	setsSuffix      = "-listenersets"
	claimLabel      = "gatefold.dev/claim"
	claimAnnotation = "gatefold.dev/claim"
	optOutLabel     = "gatefold.dev/admission"
	optOutValue     = "disabled"
	managedByLabel  = "app.kubernetes.io/managed-by"
	derivedPrefix   = "gf-"
	kindFragment    = "ListenerFragment"
	kindSet         = "ListenerSet"
	kindGateway     = "Gateway"
	fragmentGroup   = "gatefold.dev"
	accepted        = "Accepted"
	pending         = "Pending"
	deletingReason  = "Deleting"
	hostnameClash   = "HostnameConflict"
	protocolClash   = "ProtocolConflict"
	refNotPermitted = "RefNotPermitted"
	tooMany         = "TooManyListeners"
	notAllowed      = "NotAllowed"
	parentMissing   = "ParentNotAccepted"
	notValid        = "ListenersNotValid"
)

// world is everything the oracle reads, as listed from the API server at one moment.
type world struct {
	Gateways     []gwv1.Gateway
	Fragments    []v1alpha1.ListenerFragment
	ListenerSets []gwv1.ListenerSet
	Namespaces   []corev1.Namespace
	Grants       []gwv1beta1.ReferenceGrant
	Claims       []coordinationv1.Lease // gatefold-system, label gatefold.dev/claim
	Routes       []gwv1.HTTPRoute       // every namespace
	// FoldedClasses are the controllerNames whose ListenerSets gatefold folds (--listenerset-controllers);
	// Classes maps a GatewayClass name to its controllerName.
	FoldedClasses []string
	Classes       map[string]string
}

// quiescent returns every way the world breaks the promises at quiescence
// (empty: none), each a sentence naming the objects, sorted: folded
// listeners equal the oracle's fold (per Gateway; pools by invariants),
// statuses are true for their source's generation, nothing of a deleted
// source is left (listener, grant, claim, derived route), and every claim is
// held by a stored source that wants it.
func quiescent(w world) []string {
	x := newIndex(&w)
	var out []string
	verdicts := map[*source]*verdict{}
	for _, gw := range x.parents() {
		f := x.fold(gw)
		out = append(out, f.out...)
		for _, v := range f.verdicts {
			verdicts[v.src] = v
		}
	}
	for _, s := range x.sources {
		if verdicts[s] == nil {
			if v := x.unfolded(s); v != nil {
				verdicts[s] = v
			}
		}
	}
	out = append(out, x.stray()...)
	for _, s := range x.sources {
		if v := verdicts[s]; v != nil {
			out = append(out, x.checkStatus(v)...)
		}
	}
	out = append(out, x.checkGrants(verdicts)...)
	out = append(out, x.checkClaims()...)
	out = append(out, x.checkRoutes(verdicts)...)
	sort.Strings(out)
	return out
}

// source is a ListenerFragment or a ListenerSet as the fold reads it.
type source struct {
	kind, namespace, name string
	uid                   types.UID
	created               metav1.Time
	generation            int64
	deleting              bool
	gatewayRef            bool // parentRef names the Gateway kind
	parent                types.NamespacedName
	listeners             []gwv1.ListenerEntry
	lf                    *v1alpha1.ListenerFragment
	ls                    *gwv1.ListenerSet
}

func (s *source) String() string { return s.kind + " " + s.namespace + "/" + s.name }

// listenerName is the Gateway listener name gatefold gives listener l.
func (s *source) listenerName(l gwv1.SectionName) gwv1.SectionName {
	if s.kind == kindSet {
		return v1alpha1.ListenerSetListenerName(s.namespace, s.name, l)
	}
	return v1alpha1.ListenerName(s.namespace, s.name, l)
}

// before is the precedence of docs/api.md: oldest creationTimestamp, then
// namespace/name, then kind (a fragment before a ListenerSet).
func (s *source) before(o *source) bool {
	if !s.created.Equal(&o.created) {
		return s.created.Before(&o.created)
	}
	if a, b := s.namespace+"/"+s.name, o.namespace+"/"+o.name; a != b {
		return a < b
	}
	return s.kind == kindFragment && o.kind == kindSet
}

func parentOf(ref gwv1.ParentGatewayReference, ns string) (types.NamespacedName, bool) {
	isGateway := ptr.Deref(ref.Group, gwv1.GroupName) == gwv1.GroupName && ptr.Deref(ref.Kind, kindGateway) == kindGateway
	return types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gwv1.Namespace(ns))), Name: string(ref.Name)}, isGateway
}

func fragmentSource(lf *v1alpha1.ListenerFragment) *source {
	parent, ok := parentOf(lf.Spec.ParentRef, lf.Namespace)
	return &source{kind: kindFragment, namespace: lf.Namespace, name: lf.Name, uid: lf.UID, created: lf.CreationTimestamp,
		generation: lf.Generation, deleting: lf.DeletionTimestamp != nil, gatewayRef: ok, parent: parent, listeners: lf.Spec.Listeners, lf: lf}
}

func setSource(ls *gwv1.ListenerSet) *source {
	parent, ok := parentOf(ls.Spec.ParentRef, ls.Namespace)
	return &source{kind: kindSet, namespace: ls.Namespace, name: ls.Name, uid: ls.UID, created: ls.CreationTimestamp,
		generation: ls.Generation, deleting: ls.DeletionTimestamp != nil, gatewayRef: ok, parent: parent, listeners: ls.Spec.Listeners, ls: ls}
}

// entry is a listener's port, protocol and hostname ("" for none).
type entry struct {
	port     gwv1.PortNumber
	protocol gwv1.ProtocolType
	hostname string
}

func entryOf(port gwv1.PortNumber, protocol gwv1.ProtocolType, hostname *gwv1.Hostname) entry {
	return entry{port: port, protocol: protocol, hostname: string(ptr.Deref(hostname, ""))}
}

func (e entry) String() string {
	if e.hostname == "" {
		return fmt.Sprintf("%d/%s", e.port, e.protocol)
	}
	return fmt.Sprintf("%d/%s %s", e.port, e.protocol, e.hostname)
}

// group is the port-sharing group of a protocol (docs: Port sharing).
func group(p gwv1.ProtocolType) string {
	switch p {
	case gwv1.HTTPProtocolType:
		return "http"
	case gwv1.HTTPSProtocolType, gwv1.TLSProtocolType:
		return "tls"
	case gwv1.TCPProtocolType:
		return "tcp"
	case gwv1.UDPProtocolType:
		return "udp"
	}
	return "other"
}

func canShare(a, b string) bool {
	return a == b || a == "udp" || b == "udp" || a == "other" || b == "other"
}

// tuple is what tells e apart from the listeners of its group on its port.
func (e entry) tuple() entry {
	t := entry{port: e.port, protocol: gwv1.ProtocolType(group(e.protocol)), hostname: e.hostname}
	switch t.protocol {
	case "other":
		t.protocol = e.protocol
	case "tcp", "udp":
		t.hostname = ""
	}
	return t
}

// clash is why e cannot be beside h on one Gateway, "" when they are distinct.
func clash(e, h entry) string {
	if e.port != h.port {
		return ""
	}
	if !canShare(group(e.protocol), group(h.protocol)) {
		return protocolClash
	}
	if e.tuple() != h.tuple() {
		return ""
	}
	if g := group(e.protocol); g == "tcp" || g == "udp" {
		return protocolClash
	}
	return hostnameClash
}

// board is the tuples taken on a Gateway, or on all the Gateways of a pool.
type board struct{ taken, reserved []held }

// held is an entry on the board; owner is its source ("" for the Gateway's own).
type held struct {
	entry
	owner string
}

// conflict is why a listener e of source owner cannot join the board, "" when it can:
// another source's reservation first, then a port another group holds, then a tuple.
func (b *board) conflict(e entry, owner string) string {
	for _, r := range b.reserved {
		if r.owner != owner {
			if c := clash(e, r.entry); c != "" {
				return c
			}
		}
	}
	for _, h := range b.taken {
		if h.port == e.port && !canShare(group(e.protocol), group(h.protocol)) {
			return protocolClash
		}
	}
	for _, h := range b.taken {
		if c := clash(e, h.entry); c != "" {
			return c
		}
	}
	return ""
}

// reserve keeps a claimed tuple for its holder; of two claims that clash, the first keeps it.
func (b *board) reserve(h held) {
	for _, r := range b.reserved {
		if r.owner != h.owner && clash(h.entry, r.entry) != "" {
			return
		}
	}
	b.reserved = append(b.reserved, h)
}

var customProtocol = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9-]+$`)

// invalid says whether Gateway API disallows a value of l, which the fold
// then never folds (docs: stored past admission).
func invalid(l gwv1.ListenerEntry) bool {
	switch l.Protocol {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType:
	default:
		if !customProtocol.MatchString(string(l.Protocol)) {
			return true
		}
	}
	if h := string(ptr.Deref(l.Hostname, "")); h != "" && strings.Trim(h, "0123456789.") == "" {
		return true
	}
	if l.TLS != nil {
		for _, ref := range l.TLS.CertificateRefs {
			if k := string(ptr.Deref(ref.Kind, "Secret")); k != "Secret" && strings.EqualFold(k, "Secret") && ptr.Deref(ref.Group, "") == "" {
				return true
			}
		}
	}
	return uncarriedKinds(l)
}

// routeKinds are the Gateway API route kinds each protocol carries.
var routeKinds = map[gwv1.ProtocolType][]gwv1.Kind{
	gwv1.HTTPProtocolType:  {"HTTPRoute", "GRPCRoute"},
	gwv1.HTTPSProtocolType: {"HTTPRoute", "GRPCRoute"},
	gwv1.TLSProtocolType:   {"TLSRoute"},
	gwv1.TCPProtocolType:   {"TCPRoute"},
	gwv1.UDPProtocolType:   {"UDPRoute"},
}

// uncarriedKinds says whether l's allowedRoutes.kinds list only Gateway API
// route kinds its protocol cannot carry.
func uncarriedKinds(l gwv1.ListenerEntry) bool {
	carried, core := routeKinds[l.Protocol]
	if !core || l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return false
	}
	for _, k := range l.AllowedRoutes.Kinds {
		if ptr.Deref(k.Group, gwv1.GroupName) != gwv1.GroupName || slices.Contains(carried, k.Kind) || !knownRouteKind(k.Kind) {
			return false
		}
	}
	return true
}

func knownRouteKind(k gwv1.Kind) bool {
	for _, kinds := range routeKinds {
		if slices.Contains(kinds, k) {
			return true
		}
	}
	return false
}

// claim is a Lease of admission's, as docs/architecture.md describes it.
type claim struct {
	lease   *coordinationv1.Lease
	gateway types.NamespacedName
	entry   entry
	holder  types.UID
	holderN string // namespace/name of the holder
	ok      bool   // decoded
}

func readClaim(l *coordinationv1.Lease) claim {
	c := claim{lease: l}
	var rec struct {
		Claim struct {
			Gateway struct{ Namespace, Name string } `json:"gateway"`
		} `json:"claim"`
		Listener string `json:"listener"`
		Entry    struct {
			Port     int32
			Protocol string
			Hostname string
		} `json:"entry"`
	}
	parts := strings.SplitN(ptr.Deref(l.Spec.HolderIdentity, ""), "/", 3)
	if json.Unmarshal([]byte(l.Annotations[claimAnnotation]), &rec) != nil || len(parts) != 3 {
		return c
	}
	c.gateway = types.NamespacedName{Namespace: rec.Claim.Gateway.Namespace, Name: rec.Claim.Gateway.Name}
	c.entry = entry{port: gwv1.PortNumber(rec.Entry.Port), protocol: gwv1.ProtocolType(rec.Entry.Protocol), hostname: rec.Entry.Hostname}
	c.holder, c.holderN, c.ok = types.UID(parts[2]), parts[0]+"/"+parts[1], true
	return c
}

// index is the world by key.
type index struct {
	w          *world
	gateways   map[types.NamespacedName]*gwv1.Gateway
	namespaces map[string]*corev1.Namespace
	grants     map[string][]*gwv1beta1.ReferenceGrant
	sources    []*source // in precedence order
	byUID      map[types.UID]*source
	byName     map[string]*source // by String()
	claims     []claim
}

func newIndex(w *world) *index {
	x := &index{w: w, gateways: map[types.NamespacedName]*gwv1.Gateway{}, namespaces: map[string]*corev1.Namespace{},
		grants: map[string][]*gwv1beta1.ReferenceGrant{}, byUID: map[types.UID]*source{}, byName: map[string]*source{}}
	for i := range w.Gateways {
		gw := &w.Gateways[i]
		x.gateways[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}] = gw
	}
	for i := range w.Namespaces {
		x.namespaces[w.Namespaces[i].Name] = &w.Namespaces[i]
	}
	for i := range w.Grants {
		x.grants[w.Grants[i].Namespace] = append(x.grants[w.Grants[i].Namespace], &w.Grants[i])
	}
	for i := range w.Fragments {
		x.sources = append(x.sources, fragmentSource(&w.Fragments[i]))
	}
	for i := range w.ListenerSets {
		x.sources = append(x.sources, setSource(&w.ListenerSets[i]))
	}
	sort.SliceStable(x.sources, func(i, j int) bool { return x.sources[i].before(x.sources[j]) })
	for _, s := range x.sources {
		x.byUID[s.uid], x.byName[s.String()] = s, s
	}
	for i := range w.Claims {
		x.claims = append(x.claims, readClaim(&w.Claims[i]))
	}
	return x
}

// madeBy returns the head that a Gateway gatefold made (a pool sibling or the
// Gateway of the ListenerSets) belongs to: it carries the pool-head label and
// a Gateway as its controller.
func madeBy(gw *gwv1.Gateway) (string, bool) {
	if _, ok := gw.Labels[v1alpha1.PoolLabel]; !ok {
		return "", false
	}
	if o := metav1.GetControllerOf(gw); o != nil && o.Kind == kindGateway {
		return o.Name, true
	}
	return "", false
}

// parents are the Gateways sources may name, by name.
func (x *index) parents() []*gwv1.Gateway {
	var out []*gwv1.Gateway
	for i := range x.w.Gateways {
		if _, made := madeBy(&x.w.Gateways[i]); !made {
			out = append(out, &x.w.Gateways[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// foldsSets says whether gatefold folds the ListenerSets of gw's class.
func (x *index) foldsSets(gw *gwv1.Gateway) bool {
	c, ok := x.w.Classes[string(gw.Spec.GatewayClassName)]
	return ok && slices.Contains(x.w.FoldedClasses, c)
}

// admits says whether gw's allowedListeners admit namespace ns
// (None, the default; Same; All; Selector on the namespace's labels).
func (x *index) admits(gw *gwv1.Gateway, ns string) bool {
	n, ok := x.namespaces[ns]
	if !ok {
		return allows(gw, ns, nil, false)
	}
	return allows(gw, ns, n.Labels, true)
}

// allows is admits for namespace ns with labels nsLabels (known: the namespace is stored).
func allows(gw *gwv1.Gateway, ns string, nsLabels map[string]string, known bool) bool {
	var from gwv1.FromNamespaces = gwv1.NamespacesFromNone
	var sel *metav1.LabelSelector
	if a := gw.Spec.AllowedListeners; a != nil && a.Namespaces != nil {
		from, sel = ptr.Deref(a.Namespaces.From, gwv1.NamespacesFromNone), a.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == gw.Namespace
	case gwv1.NamespacesFromSelector:
		s, err := metav1.LabelSelectorAsSelector(sel)
		return known && sel != nil && err == nil && s.Matches(labels.Set(nsLabels))
	}
	return false
}

// granted says whether s may use the Secret ref names (docs: ReferenceGrants
// for certificates; for a ListenerSet): a ref into s's own namespace always,
// another one when a grant there allows s's kind from s's namespace.
func (x *index) granted(s *source, ref gwv1.SecretObjectReference) bool {
	ns := string(ptr.Deref(ref.Namespace, gwv1.Namespace(s.namespace)))
	if ns == s.namespace {
		return true
	}
	fromGroup := gwv1.Group(fragmentGroup)
	if s.kind == kindSet {
		fromGroup = gwv1.GroupName
	}
	for _, g := range x.grants[ns] {
		from := slices.ContainsFunc(g.Spec.From, func(f gwv1beta1.ReferenceGrantFrom) bool {
			return f.Group == fromGroup && string(f.Kind) == s.kind && string(f.Namespace) == s.namespace
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gwv1beta1.ReferenceGrantTo) bool {
			return t.Group == "" && t.Kind == "Secret" && (t.Name == nil || *t.Name == ref.Name)
		})
		if from && to {
			return true
		}
	}
	return false
}

func (x *index) allGranted(s *source, l gwv1.ListenerEntry) bool {
	if l.TLS == nil {
		return true
	}
	for _, ref := range l.TLS.CertificateRefs {
		if !x.granted(s, ref) {
			return false
		}
	}
	return true
}

// outcome is what became of one listener of a source.
type outcome struct {
	reason  string          // accepted when folded; "" when invalid (any reason)
	gateway gwv1.ObjectName // the Gateway carrying it, when folded and known
}

func (o outcome) folded() bool { return o.reason == accepted }

// verdict is the oracle's judgment of a source.
type verdict struct {
	src *source
	// reason is the Accepted condition's; "" when either Pending or ParentNotAccepted is right.
	reason string
	// alt is another reason the docs leave room for, "" for none.
	alt      string
	outcomes []outcome // by spec listener; nil when no listener was considered
	parent   *gwv1.Gateway
}

// unfolded judges a source that names no parent Gateway: nil when gatefold does not report on it.
func (x *index) unfolded(s *source) *verdict {
	if !s.gatewayRef {
		return nil
	}
	gw := x.gateways[s.parent]
	switch {
	case s.deleting:
		if s.kind == kindSet {
			return nil
		}
		// The docs do not say which a fragment being deleted reports when
		// its Gateway is gone, or is one gatefold made.
		if gw == nil {
			return &verdict{src: s, reason: deletingReason, alt: parentMissing}
		}
		return &verdict{src: s, reason: deletingReason, alt: notAllowed}
	case gw == nil && s.kind == kindSet:
		return &verdict{src: s}
	case gw == nil:
		return &verdict{src: s, reason: parentMissing}
	case s.kind == kindFragment:
		// It names a Gateway gatefold made (docs: NotAllowed, name the head).
		return &verdict{src: s, reason: notAllowed}
	}
	return nil
}

// folding is the oracle's fold of one parent Gateway and what it carries.
type folding struct {
	x        *index
	head     *gwv1.Gateway
	own      []gwv1.Listener
	siblings []*gwv1.Gateway
	sets     *gwv1.Gateway // <head>-listenersets as stored
	foreign  bool          // a Gateway of that name that gatefold did not make
	marked   bool          // the head carries the pool annotation
	pooled   bool          // marked, or siblings left from a pool
	board    board
	count    map[gwv1.ObjectName]int
	carried  map[gwv1.SectionName]gwv1.ObjectName // gatefold's listeners on the pool's Gateways, where they are
	want     map[gwv1.ObjectName]map[gwv1.SectionName]want
	verdicts []*verdict
	out      []string
}

// want is a listener the oracle expects on a Gateway.
type want struct {
	src *source
	l   gwv1.ListenerEntry
}

func (f *folding) fail(format string, args ...any) {
	f.out = append(f.out, fmt.Sprintf(format, args...))
}

func (x *index) fold(head *gwv1.Gateway) *folding {
	f := &folding{x: x, head: head, marked: head.Annotations[v1alpha1.PoolAnnotation] == "true",
		count: map[gwv1.ObjectName]int{}, carried: map[gwv1.SectionName]gwv1.ObjectName{}, want: map[gwv1.ObjectName]map[gwv1.SectionName]want{}}
	for _, l := range head.Spec.Listeners {
		if strings.HasPrefix(string(l.Name), ownPrefix) {
			f.own = append(f.own, l)
			f.board.taken = append(f.board.taken, held{entry: entryOf(l.Port, l.Protocol, l.Hostname)})
		}
	}
	setsName := head.Name + setsSuffix
	if gw := x.gateways[types.NamespacedName{Namespace: head.Namespace, Name: setsName}]; gw != nil {
		owner, made := madeBy(gw)
		f.sets, f.foreign = gw, !made || owner != head.Name
	}
	for i := range x.w.Gateways {
		gw := &x.w.Gateways[i]
		if owner, made := madeBy(gw); made && owner == head.Name && gw.Namespace == head.Namespace && gw.Name != setsName {
			f.siblings = append(f.siblings, gw)
		}
	}
	sort.Slice(f.siblings, func(i, j int) bool { return f.siblings[i].Name < f.siblings[j].Name })
	f.pooled = f.marked || len(f.siblings) > 0
	for _, gw := range append([]*gwv1.Gateway{head}, f.siblings...) {
		for _, l := range gw.Spec.Listeners {
			if !strings.HasPrefix(string(l.Name), ownPrefix) {
				f.carried[l.Name] = gwv1.ObjectName(gw.Name)
			}
		}
	}
	f.count[gwv1.ObjectName(head.Name)] = len(f.own)
	for _, s := range f.siblings {
		f.count[gwv1.ObjectName(s.Name)] = len(f.own)
	}
	placeable := f.judge()
	f.reserveClaims(placeable)
	for _, v := range placeable {
		f.place(v)
	}
	f.compare()
	return f
}

// judge gives every source of the head a verdict, and returns those the fold places, in precedence order.
func (f *folding) judge() []*verdict {
	var placeable []*verdict
	for _, s := range f.x.sources {
		if !s.gatewayRef || s.parent.Namespace != f.head.Namespace || s.parent.Name != f.head.Name {
			continue
		}
		if s.kind == kindSet && !f.x.foldsSets(f.head) {
			continue
		}
		v := &verdict{src: s, parent: f.head}
		switch {
		case s.deleting && s.kind == kindSet:
			continue
		case s.deleting:
			v.reason = deletingReason
		case !f.x.admits(f.head, s.namespace):
			v.reason = notAllowed
		case s.kind == kindSet && f.foreign:
			v.reason = notValid
		default:
			placeable = append(placeable, v)
		}
		f.verdicts = append(f.verdicts, v)
	}
	return placeable
}

// reserveClaims reserves the tuples that admission's claims hold for their holders.
func (f *folding) reserveClaims(placeable []*verdict) {
	claimed := map[entry]*source{}
	for _, c := range f.x.claims {
		if s := f.x.holder(c); s != nil && c.gateway.Namespace == f.head.Namespace && c.gateway.Name == f.head.Name {
			claimed[c.entry.tuple()] = s
		}
	}
	for _, v := range placeable {
		for _, l := range v.src.listeners {
			e := entryOf(l.Port, l.Protocol, l.Hostname)
			if claimed[e.tuple()] == v.src {
				f.board.reserve(held{entry: e, owner: v.src.String()})
			}
		}
	}
}

// holder is the stored fragment that holds claim c, not being deleted,
// naming c's Gateway, with a listener of c's tuple: the fold reserves the
// tuple for it, whether or not it fits. A claim of an earlier object of the
// holder's name counts for the fragment stored under that name, as the
// claims' own judgment does.
func (x *index) holder(c claim) *source {
	if !c.ok {
		return nil
	}
	s := x.byUID[c.holder]
	if s == nil {
		s = x.byName[kindFragment+" "+c.holderN]
	}
	if s == nil || s.kind != kindFragment || s.deleting || s.parent != c.gateway || !s.gatewayRef {
		return nil
	}
	for _, l := range s.listeners {
		if entryOf(l.Port, l.Protocol, l.Hostname).tuple() == c.entry.tuple() {
			return s
		}
	}
	return nil
}

// claimant is the holder of claim c if it still wants it: c's Gateway
// exists, admits its namespace, and has room for it beside its own listeners.
func (x *index) claimant(c claim) *source {
	s := x.holder(c)
	gw := x.gateways[c.gateway]
	if s == nil || gw == nil || !x.admits(gw, s.namespace) {
		return nil
	}
	if _, made := madeBy(gw); made {
		return nil
	}
	own := 0
	for _, l := range gw.Spec.Listeners {
		if strings.HasPrefix(string(l.Name), ownPrefix) {
			own++
		}
	}
	if len(s.listeners) > maxListeners-own {
		return nil
	}
	return s
}

// place decides each listener of a placeable source, and where the source lands.
func (f *folding) place(v *verdict) {
	s := v.src
	v.outcomes = make([]outcome, len(s.listeners))
	var fits []int
	var mine board
	for i, l := range s.listeners {
		e := entryOf(l.Port, l.Protocol, l.Hostname)
		switch {
		case invalid(l):
			continue
		case !f.x.allGranted(s, l):
			v.outcomes[i].reason = refNotPermitted
		default:
			c := f.board.conflict(e, s.String())
			if c == "" {
				c = mine.conflict(e, s.String())
			}
			if c != "" {
				v.outcomes[i].reason = c
				continue
			}
			mine.taken = append(mine.taken, held{entry: e, owner: s.String()})
			fits = append(fits, i)
		}
	}
	gw, placed := f.room(v, fits)
	for _, i := range fits {
		if !slices.Contains(placed, i) {
			v.outcomes[i].reason = tooMany
			continue
		}
		l := s.listeners[i]
		v.outcomes[i] = outcome{reason: accepted, gateway: gw}
		f.board.taken = append(f.board.taken, held{entry: entryOf(l.Port, l.Protocol, l.Hostname), owner: s.String()})
		f.count[gw]++
		if f.want[gw] == nil {
			f.want[gw] = map[gwv1.SectionName]want{}
		}
		f.want[gw][s.listenerName(l.Name)] = want{src: s, l: l}
	}
	switch {
	case len(placed) > 0:
		v.reason = accepted
	case len(fits) == len(s.listeners) && s.kind == kindFragment:
		v.reason = tooMany
	default:
		// Some listener is not folded for another reason than room, or it is
		// a ListenerSet, whose reasons are upstream's.
		v.reason = notValid
	}
}

// room returns the Gateway that takes the listeners fits of v's source, and
// those of fits it takes. A pool's placement is sticky and depends on
// history, so there the oracle takes the Gateway the source is on and only
// checks that it could be: a folded source stays where it is, and what it
// adds that has no room there is TooManyListeners.
func (f *folding) room(v *verdict, fits []int) (gwv1.ObjectName, []int) {
	s := v.src
	if len(fits) == 0 {
		return "", nil
	}
	if s.kind == kindSet {
		gw := gwv1.ObjectName(f.head.Name + setsSuffix)
		if len(fits) > maxListeners-f.count[gw] {
			return "", nil
		}
		return gw, fits
	}
	head := gwv1.ObjectName(f.head.Name)
	if !f.pooled {
		if len(fits) > maxListeners-f.count[head] {
			return "", nil
		}
		return head, fits
	}
	where := map[gwv1.ObjectName][]int{}
	for _, i := range fits {
		if gw, ok := f.carried[s.listenerName(s.listeners[i].Name)]; ok {
			where[gw] = append(where[gw], i)
		}
	}
	switch {
	case len(where) == 1:
		for gw, on := range where {
			if len(on) < len(fits) && f.noRoom(gw, len(fits)-len(on)) {
				return gw, on // sticky: the new listeners have no room where the others are
			}
			return gw, fits
		}
	case len(where) > 1:
		f.fail("%s has its listeners on %d Gateways of the pool of %s, expected all on one", s, len(where), key(f.head))
		return "", fits
	case len(s.listeners) > maxListeners-len(f.own):
		return "", nil // a new one that can never be placed: "split it"
	case !f.marked && len(fits) > maxListeners-f.count[head]:
		return "", nil // an unmarked head takes nothing new on its siblings
	}
	return "", fits
}

// noRoom says whether Gateway gw of the pool, as stored, has no room for more listeners.
func (f *folding) noRoom(gw gwv1.ObjectName, more int) bool {
	for _, g := range append([]*gwv1.Gateway{f.head}, f.siblings...) {
		if gwv1.ObjectName(g.Name) == gw {
			return len(g.Spec.Listeners)+more > maxListeners
		}
	}
	return false
}

// compare checks the Gateways as stored against the fold.
func (f *folding) compare() {
	gws := append([]*gwv1.Gateway{f.head}, f.siblings...)
	if f.pooled {
		// Placement is the Gateways' own: compare the pool as one, the wanted
		// listeners whose Gateway the oracle could not tell included.
		all := map[gwv1.SectionName]want{}
		for _, g := range gws {
			maps := f.want[gwv1.ObjectName(g.Name)]
			for n, w := range maps {
				all[n] = w
			}
		}
		for n, w := range f.want[""] {
			all[n] = w
		}
		var have []gwv1.Listener
		for _, g := range gws {
			have = append(have, gatefolds(g)...)
		}
		f.compareListeners("the pool of Gateway "+key(f.head), have, all)
		f.checkPool()
	} else {
		f.compareListeners("Gateway "+key(f.head), gatefolds(f.head), f.want[gwv1.ObjectName(f.head.Name)])
	}
	for _, g := range gws {
		if n := len(g.Spec.Listeners); n > maxListeners {
			f.fail("Gateway %s carries %d listeners, more than %d", key(g), n, maxListeners)
		}
	}
	setsName := gwv1.ObjectName(f.head.Name + setsSuffix)
	switch wanted := f.want[setsName]; {
	case f.foreign:
	case f.sets == nil && len(wanted) > 0:
		f.fail("Gateway %s/%s does not exist, expected it to carry the %d folded listeners of the ListenerSets of %s", f.head.Namespace, setsName, len(wanted), key(f.head))
	case f.sets != nil && len(wanted) == 0 && f.sets.DeletionTimestamp == nil:
		f.fail("Gateway %s exists, expected it deleted: no ListenerSet listener of %s is folded", key(f.sets), key(f.head))
	case f.sets != nil:
		f.compareListeners("Gateway "+key(f.sets), f.sets.Spec.Listeners, wanted)
	}
}

// gatefolds are the listeners of gw that are not the workload's own.
func gatefolds(gw *gwv1.Gateway) []gwv1.Listener {
	var out []gwv1.Listener
	for _, l := range gw.Spec.Listeners {
		if !strings.HasPrefix(string(l.Name), ownPrefix) {
			out = append(out, l)
		}
	}
	return out
}

// compareListeners checks that have (gatefold's listeners on where) are exactly wanted, rewritten as the docs say.
func (f *folding) compareListeners(where string, have []gwv1.Listener, wanted map[gwv1.SectionName]want) {
	seen := map[gwv1.SectionName]bool{}
	for _, l := range have {
		seen[l.Name] = true
		w, ok := wanted[l.Name]
		got := entryOf(l.Port, l.Protocol, l.Hostname)
		if !ok {
			f.fail("%s carries listener %s (%s), which the oracle folds for no stored source", where, l.Name, got)
			continue
		}
		if exp := entryOf(w.l.Port, w.l.Protocol, w.l.Hostname); got != exp {
			f.fail("%s carries listener %s of %s as %s, expected %s", where, l.Name, w.src, got, exp)
		}
		f.checkRewrite(where, l, w)
	}
	names := make([]gwv1.SectionName, 0, len(wanted))
	for n := range wanted {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !seen[n] {
			w := wanted[n]
			f.fail("%s lacks listener %s of %s (listener %q, %s), expected it folded", where, n, w.src, w.l.Name, entryOf(w.l.Port, w.l.Protocol, w.l.Hostname))
		}
	}
}

// checkRewrite checks the docs' rewriting: allowedRoutes Same (or unset)
// becomes a selector of the source's namespace, certificateRefs without a
// namespace get the source's.
func (f *folding) checkRewrite(where string, l gwv1.Listener, w want) {
	if routesFrom(w.l.AllowedRoutes) == gwv1.NamespacesFromSame {
		var sel *metav1.LabelSelector
		if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil {
			sel = l.AllowedRoutes.Namespaces.Selector
		}
		if routesFrom(l.AllowedRoutes) != gwv1.NamespacesFromSelector || sel == nil || len(sel.MatchExpressions) > 0 ||
			!mapsEqual(sel.MatchLabels, map[string]string{corev1.LabelMetadataName: w.src.namespace}) {
			f.fail("%s carries listener %s of %s with allowedRoutes %s, expected a selector of namespace %s", where, l.Name, w.src, routesFrom(l.AllowedRoutes), w.src.namespace)
		}
	}
	if w.l.TLS == nil || l.TLS == nil {
		return
	}
	for i, ref := range w.l.TLS.CertificateRefs {
		exp := ptr.Deref(ref.Namespace, gwv1.Namespace(w.src.namespace))
		if i >= len(l.TLS.CertificateRefs) || ptr.Deref(l.TLS.CertificateRefs[i].Namespace, gwv1.Namespace(f.head.Namespace)) != exp {
			f.fail("%s carries listener %s of %s without certificateRef %s/%s", where, l.Name, w.src, exp, ref.Name)
		}
	}
}

// routesFrom is allowedRoutes.namespaces.from, Same when unset.
func routesFrom(a *gwv1.AllowedRoutes) gwv1.FromNamespaces {
	if a == nil || a.Namespaces == nil {
		return gwv1.NamespacesFromSame
	}
	return ptr.Deref(a.Namespaces.From, gwv1.NamespacesFromSame)
}

// checkPool checks a pool's invariants: every sibling carries the head's own
// listeners, is labelled with and controlled by the head, and every folded
// source is whole on one Gateway.
func (f *folding) checkPool() {
	own := map[gwv1.SectionName]entry{}
	for _, l := range f.own {
		own[l.Name] = entryOf(l.Port, l.Protocol, l.Hostname)
	}
	for _, s := range f.siblings {
		got := map[gwv1.SectionName]entry{}
		for _, l := range s.Spec.Listeners {
			if strings.HasPrefix(string(l.Name), ownPrefix) {
				got[l.Name] = entryOf(l.Port, l.Protocol, l.Hostname)
			}
		}
		if !mapsEqual(got, own) {
			f.fail("sibling Gateway %s carries own listeners %v, expected the head %s's %v", key(s), got, key(f.head), own)
		}
		if s.Labels[v1alpha1.PoolLabel] != f.head.Name {
			f.fail("sibling Gateway %s is labelled %s=%q, expected %q", key(s), v1alpha1.PoolLabel, s.Labels[v1alpha1.PoolLabel], f.head.Name)
		}
		if s.Spec.GatewayClassName != f.head.Spec.GatewayClassName {
			f.fail("sibling Gateway %s has class %s, expected the head %s's %s", key(s), s.Spec.GatewayClassName, key(f.head), f.head.Spec.GatewayClassName)
		}
	}
	for _, v := range f.verdicts {
		on := map[gwv1.ObjectName]bool{}
		for _, l := range v.src.listeners {
			if gw, ok := f.carried[v.src.listenerName(l.Name)]; ok {
				on[gw] = true
			}
		}
		if len(on) > 1 {
			f.fail("%s is on %d Gateways of the pool of %s, expected whole on one", v.src, len(on), key(f.head))
		}
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// stray reports gatefold's listeners on Gateways that no parent's fold
// covers: those of a Gateway gatefold made whose head is gone.
func (x *index) stray() []string {
	var out []string
	for i := range x.w.Gateways {
		gw := &x.w.Gateways[i]
		head, made := madeBy(gw)
		if !made || gw.DeletionTimestamp != nil {
			continue
		}
		if h := x.gateways[types.NamespacedName{Namespace: gw.Namespace, Name: head}]; h == nil {
			out = append(out, fmt.Sprintf("Gateway %s is left from deleted head %s/%s, expected it garbage-collected", key(gw), gw.Namespace, head))
		}
	}
	return out
}

// checkStatus checks a source's status against its verdict at its generation.
func (x *index) checkStatus(v *verdict) []string {
	s := v.src
	var out []string
	fail := func(format string, args ...any) {
		out = append(out, s.String()+": "+fmt.Sprintf(format, args...))
	}
	var conds []metav1.Condition
	if s.lf != nil {
		conds = s.lf.Status.Conditions
	} else {
		conds = s.ls.Status.Conditions
	}
	acc := meta.FindStatusCondition(conds, accepted)
	switch {
	case v.reason == "":
		// A ListenerSet whose Gateway is missing: the CRD's Pending, or
		// ParentNotAccepted if gatefold folded it before.
		if acc != nil && acc.Reason != pending && acc.Reason != parentMissing {
			fail("Accepted is %s/%s, expected Unknown/Pending or False/ParentNotAccepted", acc.Status, acc.Reason)
		}
	case acc == nil:
		fail("has no Accepted condition, expected %s", v.reason)
	default:
		want := metav1.ConditionFalse
		if v.reason == accepted {
			want = metav1.ConditionTrue
		}
		if acc.Status != want || acc.Reason != v.reason && (v.alt == "" || acc.Reason != v.alt) {
			fail("Accepted is %s/%s, expected %s/%s", acc.Status, acc.Reason, want, v.reason)
		}
		if acc.ObservedGeneration != s.generation {
			fail("Accepted is at generation %d, expected %d", acc.ObservedGeneration, s.generation)
		}
		out = append(out, x.checkProgrammed(v, conds)...)
	}
	return append(out, x.checkListenerStatus(v)...)
}

// checkProgrammed checks Programmed lightly: no implementation runs, so a
// folded source is Unknown, and one not accepted False with the Accepted reason.
func (x *index) checkProgrammed(v *verdict, conds []metav1.Condition) []string {
	p := meta.FindStatusCondition(conds, "Programmed")
	if p == nil {
		return nil
	}
	if v.reason == accepted && p.Status != metav1.ConditionUnknown {
		return []string{fmt.Sprintf("%s: Programmed is %s/%s, expected Unknown: no Gateway implementation runs", v.src, p.Status, p.Reason)}
	}
	if v.reason != accepted && (p.Status != metav1.ConditionFalse || p.Reason != v.reason && (v.alt == "" || p.Reason != v.alt)) {
		return []string{fmt.Sprintf("%s: Programmed is %s/%s, expected False/%s", v.src, p.Status, p.Reason, v.reason)}
	}
	return nil
}

// checkListenerStatus checks status.listeners: the Gateway a fragment's listener
// names is set exactly for folded ones, naming where it is; Accepted says the
// outcome at the source's generation.
func (x *index) checkListenerStatus(v *verdict) []string {
	s := v.src
	var out []string
	type listenerStatus struct {
		gateway *v1alpha1.GatewayListenerReference
		conds   []metav1.Condition
	}
	statuses := map[gwv1.SectionName]listenerStatus{}
	if s.lf != nil {
		for _, l := range s.lf.Status.Listeners {
			statuses[l.Name] = listenerStatus{gateway: l.Gateway, conds: l.Conditions}
		}
	} else {
		for _, l := range s.ls.Status.Listeners {
			statuses[l.Name] = listenerStatus{conds: l.Conditions}
		}
	}
	for i, l := range s.listeners {
		st, ok := statuses[l.Name]
		if v.outcomes == nil {
			if st.gateway != nil {
				out = append(out, fmt.Sprintf("%s: listener %q names Gateway %s/%s, expected none: the source is %s", s, l.Name, st.gateway.Namespace, st.gateway.Name, v.reason))
			}
			continue
		}
		o := v.outcomes[i]
		if !ok {
			out = append(out, fmt.Sprintf("%s: listener %q has no status, expected %s", s, l.Name, orInvalid(o.reason)))
			continue
		}
		if s.lf != nil {
			out = append(out, landing(s, l.Name, st.gateway, v.parent, o)...)
		}
		acc := meta.FindStatusCondition(st.conds, accepted)
		switch {
		case acc == nil:
			out = append(out, fmt.Sprintf("%s: listener %q has no Accepted condition, expected %s", s, l.Name, orInvalid(o.reason)))
		case acc.ObservedGeneration != s.generation:
			out = append(out, fmt.Sprintf("%s: listener %q Accepted is at generation %d, expected %d", s, l.Name, acc.ObservedGeneration, s.generation))
		case o.folded() && acc.Status != metav1.ConditionTrue,
			!o.folded() && acc.Status != metav1.ConditionFalse,
			o.reason != "" && acc.Reason != o.reason && !(o.folded() && acc.Status == metav1.ConditionTrue):
			out = append(out, fmt.Sprintf("%s: listener %q Accepted is %s/%s, expected %s", s, l.Name, acc.Status, acc.Reason, orInvalid(o.reason)))
		}
	}
	return out
}

func orInvalid(reason string) string {
	if reason == "" {
		return "not folded (a value Gateway API disallows)"
	}
	if reason == accepted {
		return "True/Accepted"
	}
	return "False/" + reason
}

// landing checks status.listeners[].gateway of a fragment's listener.
func landing(s *source, name gwv1.SectionName, got *v1alpha1.GatewayListenerReference, parent *gwv1.Gateway, o outcome) []string {
	switch {
	case !o.folded() && got != nil:
		return []string{fmt.Sprintf("%s: listener %q names Gateway %s/%s, expected none: it is %s", s, name, got.Namespace, got.Name, orInvalid(o.reason))}
	case o.folded() && got == nil:
		return []string{fmt.Sprintf("%s: listener %q names no Gateway, expected the one that carries it", s, name)}
	case !o.folded():
		return nil
	}
	var out []string
	if string(got.Namespace) != parent.Namespace || (o.gateway != "" && got.Name != o.gateway) {
		out = append(out, fmt.Sprintf("%s: listener %q names Gateway %s/%s, expected %s/%s, which carries it", s, name, got.Namespace, got.Name, parent.Namespace, o.gateway))
	}
	if exp := s.listenerName(name); got.ListenerName != exp {
		out = append(out, fmt.Sprintf("%s: listener %q names Gateway listener %s, expected %s", s, name, got.ListenerName, exp))
	}
	return out
}

// checkGrants checks the ReferenceGrants gatefold keeps: one per source that
// has folded listeners reading Secrets of its own namespace from a Gateway of
// another, named gatefold-<fragment> (gatefold.listenerset.<name>) in the
// source's namespace, allowing exactly those Secrets; none for anything else.
func (x *index) checkGrants(verdicts map[*source]*verdict) []string {
	var out []string
	type grantKey struct{ ns, name string }
	expected := map[grantKey]*verdict{}
	for s, v := range verdicts {
		if v.parent != nil && v.parent.Namespace != s.namespace && len(secretsOf(v)) > 0 {
			expected[grantKey{s.namespace, grantName(s)}] = v
		}
	}
	for i := range x.w.Grants {
		g := &x.w.Grants[i]
		if !strings.HasPrefix(g.Name, "gatefold-") && !strings.HasPrefix(g.Name, "gatefold.listenerset.") || g.Labels[managedByLabel] != "gatefold" {
			continue
		}
		v, ok := expected[grantKey{g.Namespace, g.Name}]
		delete(expected, grantKey{g.Namespace, g.Name})
		if !ok {
			if !x.deletingOwner(g) {
				out = append(out, fmt.Sprintf("ReferenceGrant %s is left, expected none: no stored source has folded listeners that need it", key(g)))
			}
			continue
		}
		var names []string
		for _, t := range g.Spec.To {
			names = append(names, string(ptr.Deref(t.Name, "*")))
		}
		slices.Sort(names)
		if want := secretsOf(v); !slices.Equal(names, want) {
			out = append(out, fmt.Sprintf("ReferenceGrant %s allows Secrets %v, expected %v for %s", key(g), names, want, v.src))
		}
		if !slices.ContainsFunc(g.Spec.From, func(f gwv1beta1.ReferenceGrantFrom) bool {
			return f.Kind == kindGateway && string(f.Namespace) == v.parent.Namespace
		}) {
			out = append(out, fmt.Sprintf("ReferenceGrant %s does not allow Gateways of namespace %s, expected it to for %s", key(g), v.parent.Namespace, v.src))
		}
	}
	for k, v := range expected {
		out = append(out, fmt.Sprintf("ReferenceGrant %s/%s does not exist, expected it for the folded listeners of %s (Secrets %v)", k.ns, k.name, v.src, secretsOf(v)))
	}
	return out
}

// deletingOwner says whether the grant's owner is being deleted (the garbage collector's to finish).
func (x *index) deletingOwner(g *gwv1beta1.ReferenceGrant) bool {
	for _, o := range g.OwnerReferences {
		if s := x.byUID[o.UID]; s != nil && s.deleting {
			return true
		}
	}
	return false
}

func grantName(s *source) string {
	if s.kind == kindSet {
		return "gatefold.listenerset." + s.name
	}
	return "gatefold-" + s.name
}

// secretsOf are the Secrets of its own namespace that v's folded listeners read, sorted.
func secretsOf(v *verdict) []string {
	var out []string
	for i, o := range v.outcomes {
		l := v.src.listeners[i]
		if !o.folded() || l.TLS == nil {
			continue
		}
		for _, ref := range l.TLS.CertificateRefs {
			if string(ptr.Deref(ref.Namespace, gwv1.Namespace(v.src.namespace))) == v.src.namespace && !slices.Contains(out, string(ref.Name)) {
				out = append(out, string(ref.Name))
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkClaims checks that every claim is held by a stored source that wants it.
func (x *index) checkClaims() []string {
	var out []string
	for _, c := range x.claims {
		if c.lease.Labels[claimLabel] == "" {
			continue
		}
		if x.claimant(c) == nil {
			out = append(out, fmt.Sprintf("claim %s (Gateway %s, %s) is held by %s (uid %s), which is not stored or no longer wants it", key(c.lease), c.gateway, c.entry, c.holderN, c.holder))
		}
	}
	return out
}

// checkRoutes checks the derived routes: one for each listener a user's
// HTTPRoute is accepted on through a fragment or ListenerSet parentRef,
// naming the Gateway that carries it and its listener name, controlled by
// the user's route; no other.
func (x *index) checkRoutes(verdicts map[*source]*verdict) []string {
	type derived struct {
		route          types.UID
		gw, listenerNm string
	}
	users := map[types.UID]*gwv1.HTTPRoute{}
	have := map[derived]string{}
	var out []string
	for i := range x.w.Routes {
		r := &x.w.Routes[i]
		owner := metav1.GetControllerOf(r)
		if !strings.HasPrefix(r.Name, derivedPrefix) || owner == nil || owner.Kind != "HTTPRoute" {
			users[r.UID] = r
			continue
		}
		if len(r.Spec.ParentRefs) != 1 {
			out = append(out, fmt.Sprintf("derived HTTPRoute %s has %d parentRefs, expected one", key(r), len(r.Spec.ParentRefs)))
			continue
		}
		p := r.Spec.ParentRefs[0]
		d := derived{owner.UID, string(ptr.Deref(p.Namespace, gwv1.Namespace(r.Namespace))) + "/" + string(p.Name), string(ptr.Deref(p.SectionName, ""))}
		have[d] = key(r)
	}
	expected, unsure := map[derived]string{}, map[derived]bool{}
	bySource := map[string]*source{}
	for s := range verdicts {
		bySource[s.kind+"/"+s.namespace+"/"+s.name] = s
	}
	for _, r := range sortedRoutes(users) {
		for _, p := range r.Spec.ParentRefs {
			s := bySource[refKind(p)+"/"+string(ptr.Deref(p.Namespace, gwv1.Namespace(r.Namespace)))+"/"+string(p.Name)]
			if s == nil {
				continue
			}
			v := verdicts[s]
			if v.outcomes == nil {
				continue
			}
			for i, l := range s.listeners {
				if !v.outcomes[i].folded() || !selects(p, l) || !x.routeAllowed(r, s, l) {
					continue
				}
				d := derived{r.UID, v.parent.Namespace + "/" + string(v.outcomes[i].gateway), string(s.listenerName(l.Name))}
				if v.outcomes[i].gateway == "" {
					unsure[derived{route: r.UID, listenerNm: d.listenerNm}] = true // a pool's placement the oracle could not tell
					continue
				}
				expected[d] = fmt.Sprintf("HTTPRoute %s has no derived route for listener %q of %s, expected one naming Gateway %s listener %s", key(r), l.Name, s, d.gw, d.listenerNm)
			}
		}
	}
	for d, msg := range expected {
		if _, ok := have[d]; !ok {
			out = append(out, msg)
		}
		delete(have, d)
	}
	for d, name := range have {
		if unsure[derived{route: d.route, listenerNm: d.listenerNm}] {
			continue
		}
		if u, ok := users[d.route]; ok {
			out = append(out, fmt.Sprintf("derived HTTPRoute %s names Gateway %s listener %s, which route %s is not accepted on: expected it deleted", name, d.gw, d.listenerNm, key(u)))
		} else {
			out = append(out, fmt.Sprintf("derived HTTPRoute %s is left from a deleted route, expected it deleted", name))
		}
	}
	return out
}

func sortedRoutes(m map[types.UID]*gwv1.HTTPRoute) []*gwv1.HTTPRoute {
	out := make([]*gwv1.HTTPRoute, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// refKind is the kind of source a route's parentRef names, "" for another.
func refKind(p gwv1.ParentReference) string {
	g, k := ptr.Deref(p.Group, gwv1.GroupName), ptr.Deref(p.Kind, kindGateway)
	switch {
	case g == fragmentGroup && k == kindFragment:
		return kindFragment
	case g == gwv1.GroupName && k == kindSet:
		return kindSet
	}
	return ""
}

// selects says whether parentRef p selects listener l by sectionName and port.
func selects(p gwv1.ParentReference, l gwv1.ListenerEntry) bool {
	return (p.SectionName == nil || *p.SectionName == l.Name) && (p.Port == nil || *p.Port == l.Port)
}

// routeAllowed says whether listener l of s admits HTTPRoute r: by
// allowedRoutes read in s's namespace, by kind, and by hostname.
func (x *index) routeAllowed(r *gwv1.HTTPRoute, s *source, l gwv1.ListenerEntry) bool {
	var sel *metav1.LabelSelector
	var kinds []gwv1.RouteGroupKind
	if a := l.AllowedRoutes; a != nil {
		kinds = a.Kinds
		if a.Namespaces != nil {
			sel = a.Namespaces.Selector
		}
	}
	switch routesFrom(l.AllowedRoutes) {
	case gwv1.NamespacesFromSame:
		if r.Namespace != s.namespace {
			return false
		}
	case gwv1.NamespacesFromSelector:
		n, ok := x.namespaces[r.Namespace]
		ls, err := metav1.LabelSelectorAsSelector(sel)
		if !ok || sel == nil || err != nil || !ls.Matches(labels.Set(n.Labels)) {
			return false
		}
	case gwv1.NamespacesFromAll:
	default:
		return false
	}
	if len(kinds) > 0 {
		if !slices.ContainsFunc(kinds, func(k gwv1.RouteGroupKind) bool {
			return ptr.Deref(k.Group, gwv1.GroupName) == gwv1.GroupName && k.Kind == "HTTPRoute"
		}) {
			return false
		}
	} else if !slices.Contains(routeKinds[l.Protocol], "HTTPRoute") {
		return false
	}
	return hostnamesMeet(l.Hostname, r.Spec.Hostnames)
}

// hostnamesMeet says whether a listener's hostname and one of a route's
// intersect; a wildcard on either side matches names below it.
func hostnamesMeet(listener *gwv1.Hostname, route []gwv1.Hostname) bool {
	if listener == nil || len(route) == 0 {
		return true
	}
	for _, h := range route {
		if wildcardMatch(string(*listener), string(h)) || wildcardMatch(string(h), string(*listener)) {
			return true
		}
	}
	return false
}

// wildcardMatch says whether pattern a matches name b: equal, or a is
// *.suffix and b has at least one label before .suffix.
func wildcardMatch(a, b string) bool {
	if a == b {
		return true
	}
	suffix, ok := strings.CutPrefix(a, "*")
	return ok && strings.HasSuffix(b, suffix) && len(b) > len(suffix)
}

// The builders below write worlds as gatefold would leave them at
// quiescence, from each source's outcomes, for the table tests.

var epoch = metav1.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// src is a source of a table test: outcomes says, per listener, the Gateway
// it is folded on or the reason it is not; accepted is the Accepted reason
// when none is folded ("" then means ListenersNotValid).
type src struct {
	ns, name  string
	age       int // seconds after epoch
	set       bool
	parent    string // Gateway name in infra; "shared" when empty
	listeners []gwv1.ListenerEntry
	outcomes  []string
	accepted  string
}

func soakGateway(name string, own ...gwv1.Listener) gwv1.Gateway {
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll, own...)
	gw.Name, gw.UID, gw.Spec.GatewayClassName = name, types.UID("gw-"+name), "soak"
	if len(own) == 0 {
		gw.Spec.Listeners = nil
	}
	return *gw
}

// build writes w's sources with their statuses, and their folded listeners
// onto w's Gateways (creating <shared>-listenersets and siblings as needed).
func build(w world, srcs ...src) world {
	w.Classes = map[string]string{"soak": "example.com/soak", "plain": "example.com/plain"}
	w.FoldedClasses = []string{"example.com/soak"}
	for _, n := range []string{"infra", "certs", "t0", "t1", "t2", "t3", "t4", "t5"} {
		if !slices.ContainsFunc(w.Namespaces, func(ns corev1.Namespace) bool { return ns.Name == n }) {
			w.Namespaces = append(w.Namespaces, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/metadata.name": n}}})
		}
	}
	for _, s := range srcs {
		meta := metav1.ObjectMeta{Namespace: s.ns, Name: s.name, UID: types.UID(s.ns + "/" + s.name), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(s.age) * time.Second))}
		parent := cmp.Or(s.parent, "shared")
		ref := gwv1.ParentGatewayReference{Name: gwv1.ObjectName(parent), Namespace: ptr.To(gwv1.Namespace("infra"))}
		accept, folded := statusOf(s)
		if s.set {
			ls := gwv1.ListenerSet{ObjectMeta: meta, Spec: gwv1.ListenerSetSpec{ParentRef: ref, Listeners: s.listeners}}
			ls.Status.Conditions = []metav1.Condition{accept}
			for i, l := range s.listeners {
				ls.Status.Listeners = append(ls.Status.Listeners, gwv1.ListenerEntryStatus{Name: l.Name, Conditions: []metav1.Condition{listenerCondition(s.outcomes[i])}})
			}
			w.ListenerSets = append(w.ListenerSets, ls)
		} else {
			lf := v1alpha1.ListenerFragment{ObjectMeta: meta, Spec: v1alpha1.ListenerFragmentSpec{ParentRef: ref, Listeners: s.listeners}}
			lf.Status.Conditions = []metav1.Condition{accept}
			for i, l := range s.listeners {
				st := v1alpha1.ListenerStatus{Name: l.Name, Conditions: []metav1.Condition{listenerCondition(s.outcomes[i])}}
				if folded[i] {
					st.Gateway = &v1alpha1.GatewayListenerReference{Namespace: "infra", Name: gwv1.ObjectName(s.outcomes[i]), ListenerName: v1alpha1.ListenerName(s.ns, s.name, l.Name)}
				}
				lf.Status.Listeners = append(lf.Status.Listeners, st)
			}
			w.Fragments = append(w.Fragments, lf)
		}
		granted := false
		for i, l := range s.listeners {
			if folded[i] {
				w.Gateways = carry(w.Gateways, s, parent, s.outcomes[i], l)
				granted = granted || l.TLS != nil && l.TLS.CertificateRefs[0].Namespace == nil
			}
		}
		if granted {
			g := managedGrant(s.ns, s.name)
			if s.set {
				g.Name = "gatefold.listenerset." + s.name
			}
			w.Grants = append(w.Grants, g)
		}
	}
	return w
}

// statusOf is the Accepted condition of s, and which of its listeners are folded.
func statusOf(s src) (metav1.Condition, []bool) {
	folded := make([]bool, len(s.listeners))
	c := metav1.Condition{Type: accepted, Status: metav1.ConditionFalse, Reason: cmp.Or(s.accepted, notValid), ObservedGeneration: 1}
	for i, o := range s.outcomes {
		if folded[i] = strings.HasPrefix(o, "shared"); folded[i] {
			c.Status, c.Reason = metav1.ConditionTrue, accepted
		}
	}
	return c, folded
}

func listenerCondition(outcome string) metav1.Condition {
	c := metav1.Condition{Type: accepted, Status: metav1.ConditionFalse, Reason: outcome, ObservedGeneration: 1}
	if _, folded := statusOf(src{listeners: make([]gwv1.ListenerEntry, 1), outcomes: []string{outcome}}); folded[0] {
		c.Status, c.Reason = metav1.ConditionTrue, accepted
	}
	return c
}

// carry puts listener l of s on Gateway name (made as a sibling of parent, or
// its Gateway of the ListenerSets, when missing), rewritten as gatefold does.
func carry(gws []gwv1.Gateway, s src, parent, name string, l gwv1.ListenerEntry) []gwv1.Gateway {
	i := slices.IndexFunc(gws, func(gw gwv1.Gateway) bool { return gw.Name == name })
	if i < 0 {
		head := gws[slices.IndexFunc(gws, func(gw gwv1.Gateway) bool { return gw.Name == parent })]
		gw := soakGateway(name)
		gw.Labels = map[string]string{v1alpha1.PoolLabel: parent}
		gw.OwnerReferences = []metav1.OwnerReference{{Kind: kindGateway, Name: parent, UID: head.UID, Controller: ptr.To(true)}}
		if !strings.HasSuffix(name, setsSuffix) {
			gw.Spec.Listeners = slices.DeleteFunc(slices.Clone(head.Spec.Listeners), func(l gwv1.Listener) bool { return !strings.HasPrefix(string(l.Name), ownPrefix) })
		}
		gws, i = append(gws, gw), len(gws)
	}
	name = string(v1alpha1.ListenerName(s.ns, s.name, l.Name))
	if s.set {
		name = string(v1alpha1.ListenerSetListenerName(s.ns, s.name, l.Name))
	}
	gl := gwv1.Listener{Name: gwv1.SectionName(name), Port: l.Port, Protocol: l.Protocol, Hostname: l.Hostname, TLS: l.TLS,
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSelector),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": s.ns}}}}}
	if l.TLS != nil {
		gl.TLS = l.TLS.DeepCopy()
		for j := range gl.TLS.CertificateRefs {
			if gl.TLS.CertificateRefs[j].Namespace == nil {
				gl.TLS.CertificateRefs[j].Namespace = ptr.To(gwv1.Namespace(s.ns))
			}
		}
	}
	gws[i].Spec.Listeners = append(gws[i].Spec.Listeners, gl)
	return gws
}

// claimOf is admission's claim for listener (HTTPS on 443, host) of fragment ns/name on Gateway infra/shared.
func claimOf(ns, name, listener, host string) coordinationv1.Lease {
	rec := fmt.Sprintf(`{"claim":{"gateway":{"Namespace":"infra","Name":"shared"}},"listener":%q,"entry":{"Port":443,"Protocol":"HTTPS","Hostname":%q}}`,
		listener, host)
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gatefold-system", Name: "lfc-" + ns + "-" + name + "-" + listener,
			Labels: map[string]string{claimLabel: "listener"}, Annotations: map[string]string{claimAnnotation: rec}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(ns + "/" + name + "/" + ns + "/" + name)},
	}
}

func certsGrant(tenant string) gwv1beta1.ReferenceGrant {
	return gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "grant-" + tenant},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: fragmentGroup, Kind: kindFragment, Namespace: gwv1.Namespace(tenant)}},
			To:   []gwv1beta1.ReferenceGrantTo{{Kind: "Secret"}},
		},
	}
}

func sharedCert(name string, host string) gwv1.ListenerEntry {
	l := fixture.HTTPS(name, host)
	l.TLS.CertificateRefs[0] = gwv1.SecretObjectReference{Name: "shared-cert", Namespace: ptr.To(gwv1.Namespace("certs"))}
	return l
}

// managedGrant is the grant gatefold keeps for fragment ns/name reading Secret cert.
func managedGrant(ns, name string) gwv1beta1.ReferenceGrant {
	return gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gatefold-" + name, Labels: map[string]string{managedByLabel: "gatefold"}},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: kindGateway, Namespace: "infra"}},
			To:   []gwv1beta1.ReferenceGrantTo{{Kind: "Secret", Name: ptr.To(gwv1.ObjectName("cert"))}},
		},
	}
}

func userRoute(ns, name string, parent gwv1.ParentReference) gwv1.HTTPRoute {
	return gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("route-" + name)},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}}}}
}

func derivedRoute(ns, name string, owner types.UID, gw string, section gwv1.SectionName) gwv1.HTTPRoute {
	r := userRoute(ns, name, gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace("infra")), Name: gwv1.ObjectName(gw), SectionName: ptr.To(section)})
	r.OwnerReferences = []metav1.OwnerReference{{Kind: "HTTPRoute", Name: "user", UID: owner, Controller: ptr.To(true)}}
	return r
}

func fragmentRef(name string, section gwv1.SectionName) gwv1.ParentReference {
	return gwv1.ParentReference{Group: ptr.To(gwv1.Group(fragmentGroup)), Kind: ptr.To(gwv1.Kind(kindFragment)), Name: gwv1.ObjectName(name), SectionName: ptr.To(section)}
}

func ownListeners(n int) []gwv1.Listener {
	var out []gwv1.Listener
	for i := range n {
		out = append(out, fixture.Own(fmt.Sprintf("own-%d", i), gwv1.PortNumber(10000+i), gwv1.TCPProtocolType, ""))
	}
	return out
}

func TestQuiescent(t *testing.T) {
	https := func(host string) []gwv1.ListenerEntry { return []gwv1.ListenerEntry{fixture.HTTPS("https", host)} }
	pool := func(w world) world {
		head := soakGateway("shared", ownListeners(62)...)
		head.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
		w.Gateways = []gwv1.Gateway{head}
		return w
	}
	two := []gwv1.ListenerEntry{fixture.HTTPS("a", "a.example.com"), fixture.HTTPS("b", "b.example.com")}
	three := []gwv1.ListenerEntry{fixture.HTTPS("c", "c.example.com"), fixture.HTTPS("d", "d.example.com")}
	for name, tc := range map[string]struct {
		world  func(world) world // before build; the Gateway infra/shared (class soak, All) when nil
		srcs   []src
		after  func(*world) // after build
		report []string     // substrings of the violations, in order; none when empty
	}{
		"older fragment holds the tuple": {
			srcs: []src{{ns: "t0", name: "a", age: 0, listeners: https("x.example.com"), outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: https("x.example.com"), outcomes: []string{hostnameClash}}},
		},
		"younger fragment holds the tuple": {
			srcs: []src{{ns: "t0", name: "a", age: 0, listeners: https("x.example.com"), outcomes: []string{hostnameClash}},
				{ns: "t1", name: "b", age: 1, listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			report: []string{"Gateway infra/shared carries listener t1-b-https", "Gateway infra/shared lacks listener t0-a-https",
				"ListenerFragment t0/a: Accepted is False/ListenersNotValid, expected True/Accepted", "ListenerFragment t0/a: listener \"https\" Accepted is False/HostnameConflict", "t0/a: listener \"https\" names no Gateway",
				"ListenerFragment t1/b: Accepted is True/Accepted, expected False/ListenersNotValid", "ListenerFragment t1/b: listener \"https\" Accepted is True/Accepted, expected False/HostnameConflict",
				"ListenerFragment t1/b: listener \"https\" names Gateway infra/shared, expected none",
				"ReferenceGrant t0/gatefold-a does not exist", "ReferenceGrant t1/gatefold-b is left"},
		},
		"one second: by namespace/name": {
			srcs: []src{{ns: "t1", name: "a", listeners: https("x.example.com"), outcomes: []string{hostnameClash}},
				{ns: "t0", name: "b", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
		},
		"one second, the later name holds it": {
			srcs: []src{{ns: "t1", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}},
				{ns: "t0", name: "b", listeners: https("x.example.com"), outcomes: []string{hostnameClash}}},
			report: []string{"carries listener t1-a-https", "lacks listener t0-b-https", "t0/b: Accepted", "t0/b: listener", "t0/b: listener", "t1/a: Accepted", "t1/a: listener", "t1/a: listener",
				"ReferenceGrant t0/gatefold-b does not exist", "ReferenceGrant t1/gatefold-a is left"},
		},
		"claim holder wins over an older fragment": {
			srcs: []src{{ns: "t0", name: "old", age: 0, listeners: https("x.example.com"), outcomes: []string{hostnameClash}},
				{ns: "t1", name: "new", age: 5, listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after: func(w *world) { w.Claims = append(w.Claims, claimOf("t1", "new", "https", "x.example.com")) },
		},
		"no claim: the older fragment wins": {
			srcs: []src{{ns: "t0", name: "old", age: 0, listeners: https("x.example.com"), outcomes: []string{hostnameClash}},
				{ns: "t1", name: "new", age: 5, listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after: func(w *world) { w.Claims = append(w.Claims, claimOf("t1", "new", "https", "other.example.com")) },
			report: []string{"carries listener t1-new-https", "lacks listener t0-old-https", "t0/old: Accepted", "t0/old: listener", "t0/old: listener", "t1/new: Accepted", "t1/new: listener", "t1/new: listener",
				"ReferenceGrant t0/gatefold-old does not exist", "ReferenceGrant t1/gatefold-new is left", "claim gatefold-system/lfc-t1-new-https"},
		},
		"own listener shadows a fragment": {
			world: func(w world) world {
				w.Gateways = []gwv1.Gateway{soakGateway("shared", fixture.GatewayHTTPS("own-https", "x.example.com"))}
				return w
			},
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{hostnameClash}}},
		},
		"own listener shadowed, the fragment folded anyway": {
			world: func(w world) world {
				w.Gateways = []gwv1.Gateway{soakGateway("shared", fixture.GatewayHTTPS("own-https", "x.example.com"))}
				return w
			},
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			report: []string{"carries listener t0-a-https", "t0/a: Accepted is True/Accepted, expected False/ListenersNotValid", "expected False/HostnameConflict", "names Gateway infra/shared, expected none",
				"ReferenceGrant t0/gatefold-a is left"},
		},
		"HTTP and HTTPS never share a port": {
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: []gwv1.ListenerEntry{fixture.Entry("http", 443, gwv1.HTTPProtocolType, "y.example.com")}, outcomes: []string{protocolClash}}},
		},
		"HTTP folded beside HTTPS on one port": {
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: []gwv1.ListenerEntry{fixture.Entry("http", 443, gwv1.HTTPProtocolType, "y.example.com")}, outcomes: []string{"shared"}}},
			report: []string{"carries listener t1-b-http", "t1/b: Accepted is True", "t1/b: listener \"http\" Accepted is True/Accepted, expected False/ProtocolConflict", "t1/b: listener \"http\" names Gateway"},
		},
		"TCP: one a port, UDP beside it": {
			srcs: []src{{ns: "t0", name: "a", listeners: []gwv1.ListenerEntry{fixture.Entry("db", 5432, gwv1.TCPProtocolType, "")}, outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: []gwv1.ListenerEntry{fixture.Entry("db", 5432, gwv1.TCPProtocolType, ""), fixture.Entry("dns", 5432, gwv1.UDPProtocolType, "")}, outcomes: []string{protocolClash, "shared"}}},
		},
		"TCP: two on one port": {
			srcs: []src{{ns: "t0", name: "a", listeners: []gwv1.ListenerEntry{fixture.Entry("db", 5432, gwv1.TCPProtocolType, "")}, outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: []gwv1.ListenerEntry{fixture.Entry("db", 5432, gwv1.TCPProtocolType, "")}, outcomes: []string{"shared"}}},
			report: []string{"carries listener t1-b-db", "t1/b: Accepted is True", "expected False/ProtocolConflict", "names Gateway"},
		},
		"wildcard and exact hostnames are distinct": {
			srcs: []src{{ns: "t0", name: "a", listeners: https("*.example.com"), outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: https("x.example.com"), outcomes: []string{"shared"}},
				{ns: "t2", name: "c", age: 2, listeners: []gwv1.ListenerEntry{fixture.Entry("https", 443, gwv1.HTTPSProtocolType, "")}, outcomes: []string{"shared"}}},
		},
		"wildcard taken as if it were the exact name": {
			srcs: []src{{ns: "t0", name: "a", listeners: https("*.example.com"), outcomes: []string{"shared"}},
				{ns: "t1", name: "b", age: 1, listeners: https("x.example.com"), outcomes: []string{hostnameClash}}},
			report: []string{"lacks listener t1-b-https", "t1/b: Accepted is False/ListenersNotValid, expected True/Accepted", "t1/b: listener \"https\" Accepted is False/HostnameConflict, expected True/Accepted", "names no Gateway",
				"ReferenceGrant t1/gatefold-b does not exist"},
		},
		"a certificateRef into another namespace without a grant": {
			srcs: []src{{ns: "t0", name: "a", listeners: []gwv1.ListenerEntry{sharedCert("https", "x.example.com")}, outcomes: []string{refNotPermitted}}},
		},
		"a revoked grant, the listener still folded": {
			srcs:   []src{{ns: "t0", name: "a", listeners: []gwv1.ListenerEntry{sharedCert("https", "x.example.com")}, outcomes: []string{"shared"}}},
			report: []string{"carries listener t0-a-https", "t0/a: Accepted is True/Accepted, expected False/ListenersNotValid", "expected False/RefNotPermitted", "names Gateway"},
		},
		"a granted certificateRef": {
			srcs:  []src{{ns: "t0", name: "a", listeners: []gwv1.ListenerEntry{sharedCert("https", "x.example.com")}, outcomes: []string{"shared"}}},
			after: func(w *world) { w.Grants = append(w.Grants, certsGrant("t0")) },
		},
		"the grant gatefold keeps, for the wrong Secret": {
			srcs:   []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after:  func(w *world) { w.Grants[0].Spec.To[0].Name = ptr.To(gwv1.ObjectName("other")) },
			report: []string{"ReferenceGrant t0/gatefold-a allows Secrets [other], expected [cert]"},
		},
		"a grant gatefold kept for a deleted fragment": {
			after:  func(w *world) { w.Grants = append(w.Grants, managedGrant("t0", "gone")) },
			report: []string{"ReferenceGrant t0/gatefold-gone is left"},
		},
		"a namespace not admitted": {
			world: func(w world) world {
				gw := soakGateway("shared")
				gw.Spec.AllowedListeners.Namespaces = &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSelector),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"soak.gatefold.dev/access": "yes"}}}
				w.Gateways = []gwv1.Gateway{gw}
				return w
			},
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{notAllowed}, accepted: notAllowed}},
		},
		"an opted-out namespace is folded, and precedes": {
			srcs: []src{{ns: "t5", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}},
				{ns: "t0", name: "b", age: 1, listeners: https("x.example.com"), outcomes: []string{hostnameClash}}},
			after: func(w *world) {
				w.Namespaces = append(w.Namespaces, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t5", Labels: map[string]string{optOutLabel: optOutValue}}})
			},
		},
		"a missing Gateway": {
			world: func(w world) world { w.Gateways = nil; return w },
			srcs:  []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{parentMissing}, accepted: parentMissing}},
		},
		"status at an old generation": {
			srcs:   []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after:  func(w *world) { w.Fragments[0].Generation = 2 },
			report: []string{"t0/a: Accepted is at generation 1, expected 2", "t0/a: listener \"https\" Accepted is at generation 1, expected 2"},
		},
		"a deleted fragment's listener left on the Gateway": {
			srcs:   []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after:  func(w *world) { w.Fragments = nil },
			report: []string{"Gateway infra/shared carries listener t0-a-https", "ReferenceGrant t0/gatefold-a is left"},
		},
		"a fragment being deleted": {
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{deletingReason}, accepted: deletingReason}},
			after: func(w *world) {
				w.Fragments[0].DeletionTimestamp = ptr.To(epoch)
			},
		},
		"a fragment too big for a plain Gateway": {
			world: func(w world) world { w.Gateways = []gwv1.Gateway{soakGateway("shared", ownListeners(63)...)}; return w },
			srcs:  []src{{ns: "t0", name: "a", listeners: two, outcomes: []string{tooMany, tooMany}, accepted: tooMany}},
		},
		"a claim of a fragment too big to place reserves its tuple until released": {
			world: func(w world) world { w.Gateways = []gwv1.Gateway{soakGateway("shared", ownListeners(63)...)}; return w },
			srcs: []src{{ns: "t0", name: "old", listeners: https("a.example.com"), outcomes: []string{hostnameClash}},
				{ns: "t1", name: "big", age: 1, listeners: two, outcomes: []string{tooMany, tooMany}, accepted: tooMany}},
			after:  func(w *world) { w.Claims = append(w.Claims, claimOf("t1", "big", "a", "a.example.com")) },
			report: []string{"claim gatefold-system/lfc-t1-big-a (Gateway infra/shared, 443/HTTPS a.example.com) is held by t1/big"},
		},
		"a pool with two Gateways": {
			world: pool,
			srcs: []src{{ns: "t0", name: "a", listeners: two, outcomes: []string{"shared", "shared"}},
				{ns: "t1", name: "b", age: 1, listeners: three, outcomes: []string{"shared-2", "shared-2"}}},
		},
		"a pool's folded fragment with no room beside it for a new listener": {
			world: pool,
			srcs:  []src{{ns: "t0", name: "a", listeners: append(slices.Clone(two), fixture.HTTPS("c", "c.example.com")), outcomes: []string{"shared", "shared", tooMany}}},
		},
		"a pool that does not grow": {
			world: pool,
			srcs: []src{{ns: "t0", name: "a", listeners: two, outcomes: []string{"shared", "shared"}},
				{ns: "t1", name: "b", age: 1, listeners: three, outcomes: []string{tooMany, tooMany}, accepted: tooMany}},
			report: []string{"t1/b: Accepted is False/TooManyListeners, expected True/Accepted", "t1/b: listener \"c\" Accepted is False/TooManyListeners, expected True/Accepted",
				"t1/b: listener \"c\" names no Gateway", "t1/b: listener \"d\" Accepted", "t1/b: listener \"d\" names no Gateway",
				"ReferenceGrant t1/gatefold-b does not exist", "the pool of Gateway infra/shared lacks listener t1-b-c", "the pool of Gateway infra/shared lacks listener t1-b-d"},
		},
		"a pool's source split over two Gateways": {
			world: pool,
			srcs: []src{{ns: "t0", name: "a", listeners: two, outcomes: []string{"shared", "shared"}},
				{ns: "t1", name: "b", age: 1, listeners: three, outcomes: []string{"shared", "shared-2"}}},
			report: []string{"Gateway infra/shared carries 65 listeners", "ListenerFragment t1/b has its listeners on 2 Gateways", "ListenerFragment t1/b is on 2 Gateways"},
		},
		"a pool sibling without the head's own listeners": {
			world: pool,
			srcs: []src{{ns: "t0", name: "a", listeners: two, outcomes: []string{"shared", "shared"}},
				{ns: "t1", name: "b", age: 1, listeners: three, outcomes: []string{"shared-2", "shared-2"}}},
			after: func(w *world) {
				w.Gateways[1].Spec.Listeners = w.Gateways[1].Spec.Listeners[1:]
			},
			report: []string{"sibling Gateway infra/shared-2 carries own listeners"},
		},
		"a ListenerSet on the Gateway of the ListenerSets": {
			srcs: []src{{ns: "t0", name: "a", set: true, listeners: https("x.example.com"), outcomes: []string{"shared" + setsSuffix}},
				{ns: "t1", name: "b", age: 1, listeners: https("x.example.com"), outcomes: []string{hostnameClash}}},
		},
		"a ListenerSet on the Gateway itself": {
			srcs:   []src{{ns: "t0", name: "a", set: true, listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			report: []string{"Gateway infra/shared carries listener ls-t0-a-https", "Gateway infra/shared-listenersets does not exist"},
		},
		"a ListenerSet needs a grant to ListenerSets, not to fragments": {
			srcs:  []src{{ns: "t0", name: "a", set: true, listeners: []gwv1.ListenerEntry{sharedCert("https", "x.example.com")}, outcomes: []string{refNotPermitted}}},
			after: func(w *world) { w.Grants = append(w.Grants, certsGrant("t0")) },
		},
		"a folded listener whose allowedRoutes were not rewritten": {
			srcs:   []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after:  func(w *world) { w.Gateways[0].Spec.Listeners[0].AllowedRoutes = nil },
			report: []string{"Gateway infra/shared carries listener t0-a-https-cgujdrvhwuoxgidq of ListenerFragment t0/a with allowedRoutes Same, expected a selector of namespace t0"},
		},
		"a fragment naming a sibling": {
			world: pool,
			srcs: []src{{ns: "t0", name: "a", listeners: two, outcomes: []string{"shared", "shared"}},
				{ns: "t1", name: "b", age: 1, listeners: three, outcomes: []string{"shared-2", "shared-2"}},
				{ns: "t2", name: "c", age: 2, parent: "shared-2", listeners: https("z.example.com"), outcomes: []string{notAllowed}, accepted: notAllowed}},
		},
		"a claim of a deleted fragment": {
			after:  func(w *world) { w.Claims = append(w.Claims, claimOf("t0", "gone", "https", "x.example.com")) },
			report: []string{"claim gatefold-system/lfc-t0-gone-https (Gateway infra/shared, 443/HTTPS x.example.com) is held by t0/gone"},
		},
		"a derived route of a route through a fragment": {
			srcs: []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after: func(w *world) {
				w.Routes = append(w.Routes, userRoute("t0", "user", fragmentRef("a", "https")),
					derivedRoute("t0", "gf-1", "route-user", "shared", v1alpha1.ListenerName("t0", "a", "https")))
			},
		},
		"a route through a fragment without its derived route": {
			srcs:   []src{{ns: "t0", name: "a", listeners: https("x.example.com"), outcomes: []string{"shared"}}},
			after:  func(w *world) { w.Routes = append(w.Routes, userRoute("t0", "user", fragmentRef("a", "https"))) },
			report: []string{"HTTPRoute t0/user has no derived route for listener \"https\" of ListenerFragment t0/a"},
		},
		"a derived route left from a deleted route": {
			after:  func(w *world) { w.Routes = append(w.Routes, derivedRoute("t0", "gf-1", "route-gone", "shared", "x")) },
			report: []string{"derived HTTPRoute t0/gf-1 is left from a deleted route"},
		},
		"a derived route left from a deleted fragment": {
			after: func(w *world) {
				w.Routes = append(w.Routes, userRoute("t0", "user", fragmentRef("a", "https")),
					derivedRoute("t0", "gf-1", "route-user", "shared", v1alpha1.ListenerName("t0", "a", "https")))
			},
			report: []string{"derived HTTPRoute t0/gf-1 names Gateway infra/shared listener t0-a-https"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := world{Gateways: []gwv1.Gateway{soakGateway("shared")}}
			if tc.world != nil {
				w = tc.world(w)
			}
			w = build(w, tc.srcs...)
			if tc.after != nil {
				tc.after(&w)
			}
			got := quiescent(w)
			if len(got) != len(tc.report) {
				t.Fatalf("quiescent reported %d violations, want %d:\n%s", len(got), len(tc.report), strings.Join(got, "\n"))
			}
			for i, want := range tc.report {
				if !strings.Contains(got[i], want) {
					t.Errorf("violation %d is %q, want it to contain %q", i, got[i], want)
				}
			}
		})
	}
}
