package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestRouteParent(t *testing.T) {
	group := func(g string) *gwv1.Group { return ptr.To(gwv1.Group(g)) }
	kind := func(k string) *gwv1.Kind { return ptr.To(gwv1.Kind(k)) }
	tests := map[string]struct {
		ref    gwv1.ParentReference
		want   SourceRef
		wantOK bool
	}{
		"a ListenerSet in the route's namespace": {
			ref:  gwv1.ParentReference{Kind: kind(KindListenerSet), Name: "ls"},
			want: SourceRef{Kind: KindListenerSet, NamespacedName: types.NamespacedName{Namespace: "apps", Name: "ls"}}, wantOK: true,
		},
		"a ListenerSet of group gateway.networking.k8s.io in another namespace": {
			ref:  gwv1.ParentReference{Group: group(gwv1.GroupName), Kind: kind(KindListenerSet), Namespace: ptr.To(gwv1.Namespace("infra")), Name: "ls"},
			want: SourceRef{Kind: KindListenerSet, NamespacedName: types.NamespacedName{Namespace: "infra", Name: "ls"}}, wantOK: true,
		},
		"an empty namespace is the route's": {
			ref:  gwv1.ParentReference{Group: group("gatefold.dev"), Kind: kind(KindListenerFragment), Namespace: ptr.To(gwv1.Namespace("")), Name: "lf"},
			want: SourceRef{Kind: KindListenerFragment, NamespacedName: types.NamespacedName{Namespace: "apps", Name: "lf"}}, wantOK: true,
		},
		"a fragment of group gatefold.dev": {
			ref:  gwv1.ParentReference{Group: group("gatefold.dev"), Kind: kind(KindListenerFragment), Namespace: ptr.To(gwv1.Namespace("infra")), Name: "lf"},
			want: SourceRef{Kind: KindListenerFragment, NamespacedName: types.NamespacedName{Namespace: "infra", Name: "lf"}}, wantOK: true,
		},
		"a Gateway, by default, is no source":          {ref: gwv1.ParentReference{Name: "gw"}},
		"a Gateway named explicitly is no source":      {ref: gwv1.ParentReference{Group: group(gwv1.GroupName), Kind: kind("Gateway"), Name: "gw"}},
		"a fragment without group gatefold.dev":        {ref: gwv1.ParentReference{Kind: kind(KindListenerFragment), Name: "lf"}},
		"a fragment of the core group":                 {ref: gwv1.ParentReference{Group: group(""), Kind: kind(KindListenerFragment), Name: "lf"}},
		"a ListenerSet of group gatefold.dev":          {ref: gwv1.ParentReference{Group: group("gatefold.dev"), Kind: kind(KindListenerSet), Name: "ls"}},
		"a ListenerSet of another group":               {ref: gwv1.ParentReference{Group: group("example.com"), Kind: kind(KindListenerSet), Name: "ls"}},
		"a Service is no source":                       {ref: gwv1.ParentReference{Group: group(""), Kind: kind("Service"), Name: "svc"}},
		"kinds are case-sensitive: listenerset is not": {ref: gwv1.ParentReference{Kind: kind("listenerset"), Name: "ls"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := RouteParent("apps", tc.ref)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("RouteParent = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// routeSource is ListenerSet infra/ls with listeners:
//   - "http" on 80, HTTP, hostname a.example.com, allowedRoutes default (Same)
//   - "https" on 443, HTTPS, hostname *.example.com, allowedRoutes All
//   - "tcp" on 9000, TCP, hostname ignored.example.com, allowedRoutes All
func routeSource() *Source {
	return &Source{
		Kind:       KindListenerSet,
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "ls"},
		Listeners: []gwv1.ListenerEntry{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("a.example.com"))},
			{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("*.example.com")), AllowedRoutes: fromNS(gwv1.NamespacesFromAll, nil)},
			{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType, Hostname: ptr.To(gwv1.Hostname("ignored.example.com")), AllowedRoutes: fromNS(gwv1.NamespacesFromAll, nil)},
		},
	}
}

// landAll lands every listener of src on Gateway infra/gw.
func landAll(src *Source) map[gwv1.SectionName]Landing {
	out := map[gwv1.SectionName]Landing{}
	for _, l := range src.Listeners {
		out[l.Name] = Landing{Gateway: types.NamespacedName{Namespace: "infra", Name: "gw"}, Listener: gwv1.Listener{Name: GatewayListenerName(src.Ref(), l.Name), Port: l.Port, Protocol: l.Protocol}}
	}
	return out
}

func TestAttach(t *testing.T) {
	section := func(s string) *gwv1.SectionName { return ptr.To(gwv1.SectionName(s)) }
	port := func(p gwv1.PortNumber) *gwv1.PortNumber { return &p }
	httpRoute := func(ns string, hosts ...gwv1.Hostname) Route {
		return Route{Kind: KindHTTPRoute, Namespace: ns, Hostnames: hosts}
	}
	tests := map[string]struct {
		route Route
		ref   gwv1.ParentReference
		// edit changes the source before the judgement.
		edit func(*Source)
		// unland leaves these listeners out of landed.
		unland []gwv1.SectionName
		want   gwv1.RouteConditionReason
		// wantOn are the source's listeners the route attaches to.
		wantOn []gwv1.SectionName
		// wantMsg is the message, or a part of it.
		wantMsg string
	}{
		"no sectionName: every listener that allows the route": {
			route: httpRoute("infra"), want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http", "https"},
			wantMsg: `Attached to 2 of the 3 folded listeners of ListenerSet infra/ls this route selects`,
		},
		"sectionName selects one listener": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("https")}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
			wantMsg: `Attached to listener "https" of ListenerSet infra/ls`,
		},
		"sectionName names no listener": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("foo")}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `ListenerSet infra/ls has no listener named "foo": set sectionName to one of "http", "https", "tcp"`,
		},
		"port selects the listeners on it": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{Port: port(443)}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"port selects no listener": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{Port: port(8443)}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `ListenerSet infra/ls has no listener on port 8443: set port to one of 80, 443, 9000, or leave it out`,
		},
		"Same is the source's namespace: another namespace is refused": {
			route: httpRoute("apps"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNotAllowedByListeners,
			wantMsg: `Listener "http" of ListenerSet infra/ls does not allow routes from namespace apps (allowedRoutes: namespaces.from is Same): move the route or ask the ListenerSet's owner`,
		},
		"hostname matches none": {
			route: httpRoute("infra", "b.example.org"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNoMatchingListenerHostname,
			wantMsg: `Listener "http" of ListenerSet infra/ls serves hostname a.example.com, which none of the route's hostnames matches: add one that does to spec.hostnames`,
		},
		"sectionName and port select the listener with both": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("https"), Port: port(443)}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"sectionName on another port than port": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("https"), Port: port(80)}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `Listener "https" of ListenerSet infra/ls is on port 443, not 80: set port to 443, or leave it out`,
		},
		"sectionName names no listener, with a port": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("foo"), Port: port(80)}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `ListenerSet infra/ls has no listener named "foo": set sectionName to one of`,
		},
		"many listeners are named by the first few": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("foo")}, want: gwv1.RouteReasonNoMatchingParent,
			edit: func(s *Source) {
				for _, n := range []gwv1.SectionName{"d", "e"} {
					s.Listeners = append(s.Listeners, gwv1.ListenerEntry{Name: n, Port: 80, Protocol: gwv1.HTTPProtocolType})
				}
			},
			wantMsg: `ListenerSet infra/ls has no listener named "foo": set sectionName to one of "http", "https", "tcp", "d", … (5 in all)`,
		},
		"a source without listeners": {
			route: httpRoute("infra"), want: gwv1.RouteReasonNoMatchingParent, edit: func(s *Source) { s.Listeners = nil },
			wantMsg: `ListenerSet infra/ls has no listeners: name another parent`,
		},
		"a source the fold has not judged yet": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, unland: []gwv1.SectionName{"http"}, want: gwv1.RouteReasonPending,
			edit: func(s *Source) {
				s.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionUnknown, Reason: "Pending"}}
			},
			wantMsg: `Waiting for gatefold to fold the listeners of ListenerSet infra/ls`,
		},
		"a source the fold judged at an older generation": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, unland: []gwv1.SectionName{"http"}, want: gwv1.RouteReasonPending,
			edit: func(s *Source) {
				s.Generation = 2
				s.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, ObservedGeneration: 1}}
			},
		},
		"a selected listener that is not folded": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, unland: []gwv1.SectionName{"http"}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `Listener "http" of ListenerSet infra/ls is not folded into a Gateway: its status.listeners says why`,
		},
		"none of the selected listeners is folded": {
			route: httpRoute("infra"), unland: []gwv1.SectionName{"http", "https", "tcp"}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `None of the 3 listeners of ListenerSet infra/ls this route selects is folded into a Gateway: its status.listeners says why`,
		},
		"only folded listeners attach": {
			route: httpRoute("infra"), unland: []gwv1.SectionName{"http"}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"a listener that is not folded is not judged": {
			route: httpRoute("apps"), ref: gwv1.ParentReference{Port: port(443)}, unland: []gwv1.SectionName{"http"}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"Same admits the source's namespace": {
			route: httpRoute("team"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http"},
			edit: func(s *Source) { s.Namespace = "team" }, wantMsg: `Attached to listener "http" of ListenerSet team/ls`,
		},
		"Same refuses the Gateway's namespace": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit: func(s *Source) { s.Namespace = "team" }, wantMsg: `Listener "http" of ListenerSet team/ls does not allow routes from namespace infra`,
		},
		"Same set explicitly": {
			route: httpRoute("apps"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit:    func(s *Source) { s.Listeners[0].AllowedRoutes = fromNS(gwv1.NamespacesFromSame, nil) },
			wantMsg: "(allowedRoutes: namespaces.from is Same)",
		},
		"Selector admits a namespace with its labels": {
			route: Route{Kind: KindHTTPRoute, Namespace: "apps", NamespaceLabels: map[string]string{"routes": "yes"}}, ref: gwv1.ParentReference{SectionName: section("http")},
			edit: func(s *Source) {
				s.Listeners[0].AllowedRoutes = fromNS(gwv1.NamespacesFromSelector, map[string]string{"routes": "yes"})
			},
			want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http"},
		},
		"Selector refuses a namespace without its labels, the source's own too": {
			route: Route{Kind: KindHTTPRoute, Namespace: "infra", NamespaceLabels: map[string]string{"routes": "no"}}, ref: gwv1.ParentReference{SectionName: section("http")},
			edit: func(s *Source) {
				s.Listeners[0].AllowedRoutes = fromNS(gwv1.NamespacesFromSelector, map[string]string{"routes": "yes"})
			},
			want:    gwv1.RouteReasonNotAllowedByListeners,
			wantMsg: `Listener "http" of ListenerSet infra/ls does not allow routes from namespace infra (allowedRoutes: the namespace's labels do not match namespaces.selector)`,
		},
		"Selector without a selector refuses all": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit:    func(s *Source) { s.Listeners[0].AllowedRoutes = fromNS(gwv1.NamespacesFromSelector, nil) },
			wantMsg: "(allowedRoutes: namespaces.from is Selector with no selector)",
		},
		"All admits any namespace": {
			route: httpRoute("elsewhere"), want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"HTTP carries GRPCRoutes by default": {
			route: Route{Kind: KindGRPCRoute, Namespace: "infra"}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http", "https"},
		},
		"TCP carries TCPRoutes by default, and ignores hostnames": {
			route: Route{Kind: KindTCPRoute, Namespace: "infra", Hostnames: []gwv1.Hostname{"other.example.org"}}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"tcp"},
		},
		"HTTP carries no TCPRoute": {
			route: Route{Kind: KindTCPRoute, Namespace: "infra"}, ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNotAllowedByListeners,
			wantMsg: `Listener "http" of ListenerSet infra/ls does not allow TCPRoutes (it allows HTTPRoute, GRPCRoute): use a route of a kind it allows, or another listener`,
		},
		"TLS carries TLSRoutes by default": {
			route: Route{Kind: KindTLSRoute, Namespace: "infra", Hostnames: []gwv1.Hostname{"t.example.com"}},
			edit: func(s *Source) {
				s.Listeners[1].Protocol = gwv1.TLSProtocolType
			},
			want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"a TLS listener's hostname judges a TLSRoute's": {
			route: Route{Kind: KindTLSRoute, Namespace: "infra", Hostnames: []gwv1.Hostname{"t.example.org"}}, ref: gwv1.ParentReference{SectionName: section("https")},
			edit: func(s *Source) {
				s.Listeners[1].Protocol = gwv1.TLSProtocolType
			},
			want: gwv1.RouteReasonNoMatchingListenerHostname, wantMsg: `Listener "https" of ListenerSet infra/ls serves hostname *.example.com`,
		},
		"UDP carries UDPRoutes by default": {
			route: Route{Kind: KindUDPRoute, Namespace: "infra"},
			edit:  func(s *Source) { s.Listeners[2].Protocol = gwv1.UDPProtocolType },
			want:  gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"tcp"},
		},
		"explicit kinds leave out the others": {
			route: Route{Kind: KindGRPCRoute, Namespace: "infra"}, ref: gwv1.ParentReference{SectionName: section("https")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit: func(s *Source) {
				s.Listeners[1].AllowedRoutes.Kinds = []gwv1.RouteGroupKind{{Kind: KindHTTPRoute}}
			},
			wantMsg: `does not allow GRPCRoutes (it allows HTTPRoute):`,
		},
		"explicit kinds of group gateway.networking.k8s.io": {
			route: Route{Kind: KindGRPCRoute, Namespace: "infra"}, ref: gwv1.ParentReference{SectionName: section("https")}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
			edit: func(s *Source) {
				s.Listeners[1].AllowedRoutes.Kinds = []gwv1.RouteGroupKind{{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: KindGRPCRoute}}
			},
		},
		"an explicit kind of another group is not the route's": {
			route: Route{Kind: KindHTTPRoute, Namespace: "infra"}, ref: gwv1.ParentReference{SectionName: section("https")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit: func(s *Source) {
				s.Listeners[1].AllowedRoutes.Kinds = []gwv1.RouteGroupKind{{Group: ptr.To(gwv1.Group("example.com")), Kind: KindHTTPRoute}}
			},
			wantMsg: "does not allow HTTPRoutes (it allows no kind of route):",
		},
		"an explicit kind the protocol cannot carry is left out": {
			route: Route{Kind: KindTCPRoute, Namespace: "infra"}, ref: gwv1.ParentReference{SectionName: section("https")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit: func(s *Source) {
				s.Listeners[1].AllowedRoutes.Kinds = []gwv1.RouteGroupKind{{Kind: KindTCPRoute}}
			},
			wantMsg: "does not allow TCPRoutes (it allows no kind of route):",
		},
		"an implementation-specific protocol carries the kinds it lists, no default": {
			route: Route{Kind: KindTCPRoute, Namespace: "infra"}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"tcp"},
			edit: func(s *Source) {
				s.Listeners[1].Protocol = "example.com/x"
				s.Listeners[2].Protocol = "example.com/x"
				s.Listeners[2].AllowedRoutes.Kinds = []gwv1.RouteGroupKind{{Kind: KindTCPRoute}}
			},
		},
		"a wildcard listener matches a route's name below it": {
			route: httpRoute("infra", "b.example.org", "x.y.example.com"), want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"https"},
		},
		"a route's wildcard matches a listener's name below it": {
			route: httpRoute("infra", "*.example.com"), want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http", "https"},
		},
		"a route without hostnames matches every listener": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http"},
		},
		"a listener without hostname matches every route": {
			route: httpRoute("infra", "anything.example.org"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonAccepted, wantOn: []gwv1.SectionName{"http"},
			edit: func(s *Source) { s.Listeners[0].Hostname = nil },
		},
		"a wildcard matches no name at its suffix": {
			route: httpRoute("infra", "example.com"), ref: gwv1.ParentReference{SectionName: section("https")}, want: gwv1.RouteReasonNoMatchingListenerHostname,
			wantMsg: `Listener "https" of ListenerSet infra/ls serves hostname *.example.com, which none of the route's hostnames matches`,
		},
		"NotAllowedByListeners goes before NoMatchingListenerHostname": {
			// http refuses the namespace; https the hostname; tcp the kind.
			route: Route{Kind: KindHTTPRoute, Namespace: "apps", Hostnames: []gwv1.Hostname{"example.org"}}, want: gwv1.RouteReasonNotAllowedByListeners,
			wantMsg: `No listener of ListenerSet infra/ls accepts this route; listener "http" does not allow routes from namespace apps`,
		},
		"NotAllowedByListeners goes first whatever the listeners' order": {
			route: Route{Kind: KindHTTPRoute, Namespace: "apps", Hostnames: []gwv1.Hostname{"example.org"}}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit:    func(s *Source) { s.Listeners[0], s.Listeners[1] = s.Listeners[1], s.Listeners[0] },
			wantMsg: `No listener of ListenerSet infra/ls accepts this route; listener "http" does not allow routes from namespace apps`,
		},
		"NoMatchingListenerHostname when every listener refuses the hostname": {
			route: httpRoute("infra", "example.org"), ref: gwv1.ParentReference{Port: port(443)}, want: gwv1.RouteReasonNoMatchingListenerHostname,
			wantMsg: `Listener "https" of ListenerSet infra/ls serves hostname *.example.com`,
		},
		"a fragment is named as one": {
			route: httpRoute("apps"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNotAllowedByListeners,
			edit:    func(s *Source) { s.Kind = KindListenerFragment },
			wantMsg: `Listener "http" of ListenerFragment infra/ls does not allow routes from namespace apps (allowedRoutes: namespaces.from is Same): move the route or ask the ListenerFragment's owner`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := routeSource()
			if tc.edit != nil {
				tc.edit(src)
			}
			landed := landAll(src)
			for _, n := range tc.unland {
				delete(landed, n)
			}
			ref := tc.ref
			ref.Kind, ref.Name = ptr.To(gwv1.Kind(KindListenerSet)), "ls"
			ref.Namespace = ptr.To(gwv1.Namespace("infra"))
			got := Attach(tc.route, ref, src, landed)
			if got.Reason != tc.want {
				t.Errorf("Reason = %s (%s); want %s", got.Reason, got.Message, tc.want)
			}
			if !strings.Contains(got.Message, tc.wantMsg) {
				t.Errorf("Message = %q; want it to contain %q", got.Message, tc.wantMsg)
			}
			var want []Landing
			for _, n := range tc.wantOn {
				want = append(want, landed[n])
			}
			if diff := cmp.Diff(want, got.Landings); diff != "" {
				t.Errorf("Landings (-want +got):\n%s", diff)
			}
		})
	}
}

func fromNS(from gwv1.FromNamespaces, matchLabels map[string]string) *gwv1.AllowedRoutes {
	rn := &gwv1.RouteNamespaces{From: &from}
	if matchLabels != nil {
		rn.Selector = &metav1.LabelSelector{MatchLabels: matchLabels}
	}
	return &gwv1.AllowedRoutes{Namespaces: rn}
}

func TestRouteKindsProblem(t *testing.T) {
	kinds := func(p gwv1.ProtocolType, ks ...gwv1.RouteGroupKind) gwv1.ListenerEntry {
		return gwv1.ListenerEntry{Name: "l", Port: 443, Protocol: p, AllowedRoutes: &gwv1.AllowedRoutes{Kinds: ks}}
	}
	gw := func(k gwv1.Kind) gwv1.RouteGroupKind {
		return gwv1.RouteGroupKind{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: k}
	}
	tests := map[string]struct {
		l    gwv1.ListenerEntry
		want string
	}{
		"no kinds: the protocol's":           {l: kinds(gwv1.TLSProtocolType)},
		"one kind the protocol carries":      {l: kinds(gwv1.TLSProtocolType, gw("HTTPRoute"), gw("TLSRoute"))},
		"none the protocol carries":          {l: kinds(gwv1.TLSProtocolType, gw("HTTPRoute")), want: "allowedRoutes.kinds lists HTTPRoute, which protocol TLS cannot carry: list TLSRoute"},
		"group left to its default":          {l: kinds(gwv1.HTTPSProtocolType, gwv1.RouteGroupKind{Kind: "TCPRoute"}), want: "allowedRoutes.kinds lists TCPRoute, which protocol HTTPS cannot carry: list one of HTTPRoute, GRPCRoute"},
		"another group's kind is not judged": {l: kinds(gwv1.TLSProtocolType, gw("HTTPRoute"), gwv1.RouteGroupKind{Group: ptr.To(gwv1.Group("traefik.io")), Kind: "IngressRouteTCP"})},
		"an implementation's protocol":       {l: kinds("example.com/udp", gw("HTTPRoute"))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RouteKindsProblem(tc.l); got != tc.want {
				t.Errorf("RouteKindsProblem = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestHostnameIntersects(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want bool
	}{
		"equal names":                            {a: "a.example.com", b: "a.example.com", want: true},
		"names differ":                           {a: "a.example.com", b: "b.example.com"},
		"names differ in case only":              {a: "A.example.com", b: "a.example.com", want: true},
		"a wildcard matches a name below it":     {a: "*.example.com", b: "a.example.com", want: true},
		"a wildcard matches two levels below it": {a: "*.example.com", b: "a.b.example.com", want: true},
		"a wildcard does not match its suffix":   {a: "*.example.com", b: "example.com"},
		"a wildcard needs a whole label":         {a: "*.example.com", b: "aexample.com"},
		"a wildcard matches no other domain":     {a: "*.example.com", b: "a.example.org"},
		"equal wildcards":                        {a: "*.example.com", b: "*.example.com", want: true},
		"a wildcard within a wildcard":           {a: "*.example.com", b: "*.a.example.com", want: true},
		"wildcards of other domains":             {a: "*.example.com", b: "*.example.org"},
		"a wildcard and a longer suffix's label": {a: "*.example.com", b: "*.aexample.com"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := hostnameIntersects(tc.a, tc.b); got != tc.want {
				t.Errorf("hostnameIntersects(%q, %q) = %v; want %v", tc.a, tc.b, got, tc.want)
			}
			if got := hostnameIntersects(tc.b, tc.a); got != tc.want {
				t.Errorf("hostnameIntersects(%q, %q) = %v; want %v", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

// FuzzAttach checks Attach's invariants on sources, routes, parentRefs and
// landings built from the fuzzer's bytes: it never panics; it always says
// why; it accepts exactly when it attaches somewhere; and every landing is
// that of a listener the parentRef's sectionName and port select.
func FuzzAttach(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, uint8(0), uint8(0), uint8(0xff))
	f.Add([]byte{3, 3, 3, 3, 1, 1, 1, 1}, uint8(1), uint8(2), uint8(0x0f))
	f.Fuzz(func(t *testing.T, spec []byte, section, port, land uint8) {
		names := []gwv1.SectionName{"a", "b", "c"}
		protocols := []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType, "example.com/x"}
		hosts := []gwv1.Hostname{"", "a.example.com", "*.example.com", "*.a.example.com", "example.com", "*.example.org"}
		ports := []gwv1.PortNumber{80, 443}
		kinds := []string{KindHTTPRoute, KindGRPCRoute, KindTLSRoute, KindTCPRoute, KindUDPRoute}
		at := func(i int) int {
			if i < len(spec) {
				return int(spec[i])
			}
			return 0
		}
		src := &Source{Kind: KindListenerSet, ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "ls"}}
		for i := 0; i+3 < len(spec) && len(src.Listeners) < 4; i += 4 {
			l := gwv1.ListenerEntry{Name: names[at(i)%len(names)], Protocol: protocols[at(i+1)%len(protocols)], Port: ports[at(i+2)%len(ports)]}
			if h := hosts[at(i+3)%len(hosts)]; h != "" {
				l.Hostname = &h
			}
			switch at(i+1) / len(protocols) % 5 {
			case 1:
				l.AllowedRoutes = fromNS(gwv1.NamespacesFromAll, nil)
			case 2:
				l.AllowedRoutes = fromNS(gwv1.NamespacesFromSelector, map[string]string{"routes": "yes"})
			case 3:
				l.AllowedRoutes = fromNS(gwv1.NamespacesFromSelector, nil)
			case 4:
				l.AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: gwv1.Kind(kinds[at(i+2)%len(kinds)])}}}
			}
			src.Listeners = append(src.Listeners, l)
		}
		route := Route{Kind: kinds[int(section)%len(kinds)], Namespace: []string{"infra", "apps"}[int(port)%2]}
		if port&2 != 0 {
			route.NamespaceLabels = map[string]string{"routes": "yes"}
		}
		for i, h := range hosts[1:] {
			if land>>(4+i%4)&1 != 0 {
				route.Hostnames = append(route.Hostnames, h)
			}
		}
		var ref gwv1.ParentReference
		if s := section / 8 % 5; s < 4 {
			ref.SectionName = &[]gwv1.SectionName{"a", "b", "c", "x"}[s]
		}
		if p := port / 4 % 4; p < 3 {
			ref.Port = &[]gwv1.PortNumber{80, 443, 8080}[p]
		}
		landed := map[gwv1.SectionName]Landing{}
		for i, n := range names {
			if land>>i&1 != 0 {
				landed[n] = Landing{Gateway: types.NamespacedName{Namespace: "infra", Name: "gw"}, Listener: gwv1.Listener{Name: GatewayListenerName(src.Ref(), n)}}
			}
		}

		got := Attach(route, ref, src, landed)

		switch got.Reason {
		case gwv1.RouteReasonAccepted, gwv1.RouteReasonNoMatchingParent, gwv1.RouteReasonNotAllowedByListeners, gwv1.RouteReasonNoMatchingListenerHostname, gwv1.RouteReasonPending:
		default:
			t.Fatalf("Reason = %q", got.Reason)
		}
		if got.Message == "" {
			t.Errorf("%s without a message", got.Reason)
		}
		if got.Accepted() != (len(got.Landings) > 0) {
			t.Errorf("Reason %s with %d landings", got.Reason, len(got.Landings))
		}
		for _, l := range got.Landings {
			ok := false
			for _, sl := range src.Listeners {
				want, landedHere := landed[sl.Name]
				selected := (ref.SectionName == nil || sl.Name == *ref.SectionName) && (ref.Port == nil || sl.Port == *ref.Port)
				ok = ok || (selected && landedHere && want == l)
			}
			if !ok {
				t.Errorf("landing %v is no landed listener that sectionName %v and port %v select", l, ref.SectionName, ref.Port)
			}
		}
	})
}
