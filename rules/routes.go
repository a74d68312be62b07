package rules

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// Route kinds, all of group gateway.networking.k8s.io.
const (
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
	KindTLSRoute  = "TLSRoute"
	KindTCPRoute  = "TCPRoute"
	KindUDPRoute  = "UDPRoute"
)

// RouteParent returns the source a route's parentRef names, when it names a
// ListenerFragment (group gatefold.dev) or a ListenerSet (group
// gateway.networking.k8s.io); the namespace defaults to the route's. The
// group and kind default as the API defaults them, to a Gateway, which is no
// source.
func RouteParent(routeNamespace string, ref gwv1.ParentReference) (SourceRef, bool) {
	group, kind := gwv1.GroupName, "Gateway"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if (kind != KindListenerFragment && kind != KindListenerSet) || group != GroupOfKind(kind) {
		return SourceRef{}, false
	}
	ns := routeNamespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	return SourceRef{Kind: kind, NamespacedName: types.NamespacedName{Namespace: ns, Name: string(ref.Name)}}, true
}

// Route is what the judgement reads of a route.
type Route struct {
	// Kind is KindHTTPRoute, KindGRPCRoute, KindTLSRoute, KindTCPRoute or
	// KindUDPRoute.
	Kind      string
	Namespace string
	// NamespaceLabels are the labels of the route's namespace.
	NamespaceLabels map[string]string
	// Hostnames are the route's spec.hostnames; none for TCP and UDP routes.
	Hostnames []gwv1.Hostname
}

// Landing is one listener of a source as it was folded: the Gateway it is on
// and the Gateway listener it became (generated name; allowedRoutes as
// folded).
type Landing struct {
	Gateway  types.NamespacedName
	Listener gwv1.Listener
}

// Attachment is the verdict on one parentRef of a route.
type Attachment struct {
	// Reason is RouteReasonAccepted, RouteReasonNoMatchingParent,
	// RouteReasonNotAllowedByListeners or
	// RouteReasonNoMatchingListenerHostname.
	Reason gwv1.RouteConditionReason
	// Message says what is wrong and how to fix it, naming only the
	// route's own parent; for Accepted, which listeners the route attaches
	// to.
	Message string
	// Landings are the listeners the route attaches to through this
	// parentRef, in the source's order; empty unless Accepted.
	Landings []Landing
}

// Accepted says whether the route attaches through the parentRef.
func (a Attachment) Accepted() bool { return a.Reason == gwv1.RouteReasonAccepted }

// Attach judges parentRef ref of route against src, the source it names
// (RouteParent), whose folded listeners are landed, by the source's own
// listener name, as GEP-1713 judges a route on a ListenerSet:
//   - sectionName and port select among src's own listeners; none selected
//     is NoMatchingParent, and so is none of them folded;
//   - each selected folded listener admits the route by its allowedRoutes,
//     read in src's namespace (Same is src's namespace), and kinds (else
//     its protocol's), or refuses it with NotAllowedByListeners; then by
//     hostname, with NoMatchingListenerHostname (TCP and UDP listeners have
//     none);
//   - the route is Accepted on every listener that admits it; when none
//     does, NotAllowedByListeners goes before NoMatchingListenerHostname.
//
// The listeners are judged as src's spec declares them; a landing says only
// where one is.
func Attach(route Route, ref gwv1.ParentReference, src *Source, landed map[gwv1.SectionName]Landing) Attachment {
	selected, refused := selectListeners(ref, src)
	if refused != "" {
		return Attachment{Reason: gwv1.RouteReasonNoMatchingParent, Message: refused}
	}
	var folded []gwv1.ListenerEntry
	for _, l := range selected {
		if _, ok := landed[l.Name]; ok {
			folded = append(folded, l)
		}
	}
	if len(folded) == 0 {
		if Folding(src) {
			return Attachment{Reason: gwv1.RouteReasonPending, Message: fmt.Sprintf("Waiting for gatefold to fold the listeners of %s", src.Ref())}
		}
		return Attachment{Reason: gwv1.RouteReasonNoMatchingParent, Message: notFoldedMessage(src.Ref(), selected)}
	}
	var out Attachment
	for _, l := range folded {
		reason, msg := judgeListener(route, src, l)
		switch {
		case reason == gwv1.RouteReasonAccepted:
			out.Landings = append(out.Landings, landed[l.Name])
		case out.Reason == "" || reason == gwv1.RouteReasonNotAllowedByListeners && out.Reason != reason:
			// NotAllowedByListeners goes first: the fix to make first.
			out.Reason, out.Message = reason, listenerRefusal(src.Ref(), l.Name, len(folded), msg)
		}
	}
	if len(out.Landings) > 0 {
		return Attachment{Reason: gwv1.RouteReasonAccepted, Message: acceptedMessage(src.Ref(), folded, len(out.Landings)), Landings: out.Landings}
	}
	return out
}

// selectListeners returns src's listeners that ref's sectionName and port
// select, or else why none is, and how to fix that.
func selectListeners(ref gwv1.ParentReference, src *Source) ([]gwv1.ListenerEntry, string) {
	var selected []gwv1.ListenerEntry
	for _, l := range src.Listeners {
		if (ref.SectionName == nil || l.Name == *ref.SectionName) && (ref.Port == nil || l.Port == *ref.Port) {
			selected = append(selected, l)
		}
	}
	if len(selected) > 0 {
		return selected, ""
	}
	s := src.Ref()
	switch {
	case len(src.Listeners) == 0:
		return nil, fmt.Sprintf("%s has no listeners: name another parent", s)
	case ref.SectionName != nil:
		if i := slices.IndexFunc(src.Listeners, func(l gwv1.ListenerEntry) bool { return l.Name == *ref.SectionName }); i >= 0 {
			return nil, fmt.Sprintf("Listener %q of %s is on port %d, not %d: set port to %d, or leave it out",
				*ref.SectionName, s, src.Listeners[i].Port, *ref.Port, src.Listeners[i].Port)
		}
		names := make([]string, len(src.Listeners))
		for i, l := range src.Listeners {
			names[i] = fmt.Sprintf("%q", l.Name)
		}
		return nil, fmt.Sprintf("%s has no listener named %q: set sectionName to %s", s, *ref.SectionName, oneOf(names))
	}
	var ports []string
	for _, l := range src.Listeners {
		if p := fmt.Sprint(l.Port); !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return nil, fmt.Sprintf("%s has no listener on port %d: set port to %s, or leave it out", s, *ref.Port, oneOf(ports))
}

// oneOf names values as a choice, the first few of many.
func oneOf(values []string) string {
	const most = 4
	if len(values) == 1 {
		return values[0]
	}
	if len(values) > most {
		return fmt.Sprintf("one of %s, … (%d in all)", strings.Join(values[:most], ", "), len(values))
	}
	return "one of " + strings.Join(values, ", ")
}

// judgeListener judges route on listener l of src: Accepted, or the reason
// it refuses the route and what is wrong and the fix, in words that follow
// the listener's name.
func judgeListener(route Route, src *Source, l gwv1.ListenerEntry) (gwv1.RouteConditionReason, string) {
	from, selector := gwv1.NamespacesFromSame, (*metav1.LabelSelector)(nil)
	if ar := l.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		selector = ar.Namespaces.Selector
	}
	if ok, rule := fromAllowed(from, selector, src.Namespace, route.Namespace, route.NamespaceLabels); !ok {
		return gwv1.RouteReasonNotAllowedByListeners, fmt.Sprintf("does not allow routes from namespace %s (allowedRoutes: %s): move the route or ask the %s's owner",
			route.Namespace, rule, src.Kind)
	}
	if kinds := routeKinds(l); !slices.Contains(kinds, route.Kind) {
		allows := "no kind of route"
		if len(kinds) > 0 {
			allows = strings.Join(kinds, ", ")
		}
		return gwv1.RouteReasonNotAllowedByListeners, fmt.Sprintf("does not allow %ss (it allows %s): use a route of a kind it allows, or another listener", route.Kind, allows)
	}
	if GroupOf(l.Protocol).usesHostname() && l.Hostname != nil && !hostnamesIntersect(string(*l.Hostname), route.Hostnames) {
		return gwv1.RouteReasonNoMatchingListenerHostname, fmt.Sprintf("serves hostname %s, which none of the route's hostnames matches: add one that does to spec.hostnames", *l.Hostname)
	}
	return gwv1.RouteReasonAccepted, ""
}

// routeKinds returns the route kinds listener l allows: its
// allowedRoutes.kinds of group gateway.networking.k8s.io that its protocol
// carries (any, for an implementation-specific protocol), else the kinds its
// protocol carries.
func routeKinds(l gwv1.ListenerEntry) []string {
	carried, known := protocolKinds(l.Protocol)
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return carried
	}
	var out []string
	for _, k := range l.AllowedRoutes.Kinds {
		kind := string(k.Kind)
		if (k.Group == nil || *k.Group == gwv1.GroupName) && (!known || slices.Contains(carried, kind)) && !slices.Contains(out, kind) {
			out = append(out, kind)
		}
	}
	return out
}

// RouteKindsProblem says what is wrong when listener l lists route kinds of
// Gateway API's group in allowedRoutes.kinds and its protocol carries none of
// them, so that no route could ever attach; empty when it is not so.
func RouteKindsProblem(l gwv1.ListenerEntry) string {
	carried, known := protocolKinds(l.Protocol)
	if !known || l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 || len(routeKinds(l)) > 0 {
		return ""
	}
	listed := make([]string, len(l.AllowedRoutes.Kinds))
	for i, k := range l.AllowedRoutes.Kinds {
		if k.Group != nil && *k.Group != gwv1.GroupName {
			return "" // another group's kind is the implementation's to judge
		}
		listed[i] = string(k.Kind)
	}
	return fmt.Sprintf("allowedRoutes.kinds lists %s, which protocol %s cannot carry: list %s", strings.Join(listed, ", "), l.Protocol, oneOf(carried))
}

// protocolKinds returns the route kinds a core protocol carries, and false
// for an implementation-specific protocol.
func protocolKinds(p gwv1.ProtocolType) ([]string, bool) {
	switch p {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
		return []string{KindHTTPRoute, KindGRPCRoute}, true
	case gwv1.TLSProtocolType:
		return []string{KindTLSRoute}, true
	case gwv1.TCPProtocolType:
		return []string{KindTCPRoute}, true
	case gwv1.UDPProtocolType:
		return []string{KindUDPRoute}, true
	}
	return nil, false
}

// hostnamesIntersect says whether a listener's hostname and a route's
// hostnames intersect as Gateway API defines it: a route without hostnames
// matches every listener, and a wildcard (*.example.com) on either side
// matches the names below its suffix, never the suffix itself.
func hostnamesIntersect(listener string, route []gwv1.Hostname) bool {
	if len(route) == 0 {
		return true
	}
	return slices.ContainsFunc(route, func(h gwv1.Hostname) bool { return hostnameIntersects(listener, string(h)) })
}

// hostnameIntersects says whether hostnames a and b, each perhaps a
// wildcard, have a name in common.
func hostnameIntersects(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	aWild, bWild := strings.HasPrefix(a, "*."), strings.HasPrefix(b, "*.")
	// A wildcard's suffix keeps its leading dot: *.example.com matches
	// a.example.com, never example.com.
	aSuffix, bSuffix := strings.TrimPrefix(a, "*"), strings.TrimPrefix(b, "*")
	switch {
	case aWild && bWild:
		return strings.HasSuffix(aSuffix, bSuffix) || strings.HasSuffix(bSuffix, aSuffix)
	case aWild:
		return strings.HasSuffix(b, aSuffix)
	case bWild:
		return strings.HasSuffix(a, bSuffix)
	}
	return a == b
}

// listenerRefusal is the message of a refusal by listener name of src, one
// of n listeners judged.
func listenerRefusal(src SourceRef, name gwv1.SectionName, n int, msg string) string {
	if n == 1 {
		return fmt.Sprintf("Listener %q of %s %s", name, src, msg)
	}
	return fmt.Sprintf("No listener of %s accepts this route; listener %q %s", src, name, msg)
}

// Folding says whether the fold has yet to judge src as it is now: its
// Accepted condition is Unknown, or of an older generation. A route made
// with its parent then waits instead of being refused first.
func Folding(src *Source) bool {
	c := meta.FindStatusCondition(src.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
	return c != nil && (c.Status == metav1.ConditionUnknown || c.ObservedGeneration < src.Generation)
}

// notFoldedMessage tells a route that none of the selected listeners of src
// is folded into a Gateway.
func notFoldedMessage(src SourceRef, selected []gwv1.ListenerEntry) string {
	if len(selected) == 1 {
		return fmt.Sprintf("Listener %q of %s is not folded into a Gateway: its status.listeners says why", selected[0].Name, src)
	}
	return fmt.Sprintf("None of the %d listeners of %s this route selects is folded into a Gateway: its status.listeners says why", len(selected), src)
}

// acceptedMessage says which of the folded listeners of src the route
// attaches to.
func acceptedMessage(src SourceRef, folded []gwv1.ListenerEntry, n int) string {
	if len(folded) == 1 {
		return fmt.Sprintf("Attached to listener %q of %s", folded[0].Name, src)
	}
	return fmt.Sprintf("Attached to %d of the %d folded listeners of %s this route selects", n, len(folded), src)
}
