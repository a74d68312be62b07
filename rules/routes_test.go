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
	all := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	return &Source{
		Kind:       KindListenerSet,
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "ls"},
		Listeners: []gwv1.ListenerEntry{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("a.example.com"))},
			{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("*.example.com")), AllowedRoutes: all},
			{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType, Hostname: ptr.To(gwv1.Hostname("ignored.example.com")), AllowedRoutes: all},
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
			wantMsg: `Attached to 2 of the 3 listeners of ListenerSet infra/ls this route selects`,
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
			wantMsg: `Listener "http" of ListenerSet infra/ls does not allow routes from namespace apps (allowedRoutes: namespaces.from is Same): move the route, or ask the ListenerSet's owner to allow it`,
		},
		"hostname matches none": {
			route: httpRoute("infra", "b.example.org"), ref: gwv1.ParentReference{SectionName: section("http")}, want: gwv1.RouteReasonNoMatchingListenerHostname,
			wantMsg: `Listener "http" of ListenerSet infra/ls serves hostname a.example.com, which none of the route's hostnames matches: add one that does to spec.hostnames`,
		},
		"a selected listener that is not folded": {
			route: httpRoute("infra"), ref: gwv1.ParentReference{SectionName: section("http")}, unland: []gwv1.SectionName{"http"}, want: gwv1.RouteReasonNoMatchingParent,
			wantMsg: `Listener "http" of ListenerSet infra/ls is not folded into a Gateway: its status.listeners says why`,
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
