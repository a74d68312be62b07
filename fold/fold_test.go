package fold

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	entry = fixture.Entry
	own   = fixture.Own
)

// fragment is ns/name created `age` seconds after the epoch.
func fragment(ns, name string, created int, ls ...gwv1.ListenerEntry) rules.Source {
	return rules.FromFragment(&v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(created) * time.Second))},
		Spec:       v1alpha1.ListenerFragmentSpec{ParentRef: gwv1.ParentGatewayReference{Name: "shared", Namespace: ptr.To(gwv1.Namespace("infra"))}, Listeners: ls},
	})
}

func gateway(from gwv1.FromNamespaces, ls ...gwv1.Listener) *gwv1.Gateway {
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"},
		Spec: gwv1.GatewaySpec{
			Listeners:        ls,
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(from)}},
		},
	}
}

// outcomes renders what became of every listener as "ns/fragment/listener:
// Reason", with "ListenerSet " before a ListenerSet's.
func outcomes(r Result) []string {
	var out []string
	for _, o := range r.Outcomes {
		src := o.Fragment.NamespacedName.String()
		if o.Fragment.Kind == rules.KindListenerSet {
			src = o.Fragment.String()
		}
		out = append(out, fmt.Sprintf("%s/%s: %s", src, o.Listener, o.Reason))
	}
	return out
}

func accepted(r Result, ns, name string) string {
	c := meta.FindStatusCondition(r.Statuses[fragmentKey(ns, name)].Conditions, "Accepted")
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

func TestFoldPrecedenceAndConflicts(t *testing.T) {
	https := func(name, host string) gwv1.ListenerEntry { return entry(name, 443, gwv1.HTTPSProtocolType, host) }
	tests := map[string]struct {
		gateway   *gwv1.Gateway
		fragments []rules.Source
		// claims are admission's claims: tuple → holder "ns/name".
		claims   map[rules.Tuple]types.NamespacedName
		want     []string
		accepted map[string]string // "ns/name" → Accepted status/reason
	}{
		"the holder of a tuple's claim keeps it against an older fragment admitted later": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("b", "squat", 0, entry("http", 8000, gwv1.HTTPProtocolType, "victim.example.com")),
				fragment("a", "victim", 5, entry("http", 8000, gwv1.HTTPProtocolType, "victim.example.com")),
			},
			claims: map[rules.Tuple]types.NamespacedName{
				rules.EntryOf(8000, gwv1.HTTPProtocolType, ptr.To(gwv1.Hostname("victim.example.com"))).Tuple(): {Namespace: "a", Name: "victim"},
			},
			want:     []string{"b/squat/http: HostnameConflict", "a/victim/http: Accepted"},
			accepted: map[string]string{"a/victim": "True/Accepted", "b/squat": "False/ListenersNotValid"},
		},
		"a claimed tuple blocks another protocol group on its port": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("b", "old", 0, entry("tcp", 8000, gwv1.TCPProtocolType, "")),
				fragment("a", "holder", 5, entry("http", 8000, gwv1.HTTPProtocolType, "victim.example.com")),
			},
			claims: map[rules.Tuple]types.NamespacedName{
				rules.EntryOf(8000, gwv1.HTTPProtocolType, ptr.To(gwv1.Hostname("victim.example.com"))).Tuple(): {Namespace: "a", Name: "holder"},
			},
			want: []string{"b/old/tcp: ProtocolConflict", "a/holder/http: Accepted"},
		},
		"of two claims that cannot share a port, the first in precedence keeps it": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("b", "x", 0, entry("tcp", 8000, gwv1.TCPProtocolType, "")),
				fragment("a", "y", 5, entry("http", 8000, gwv1.HTTPProtocolType, "y.example.com")),
			},
			claims: map[rules.Tuple]types.NamespacedName{
				rules.EntryOf(8000, gwv1.TCPProtocolType, nil).Tuple():                                     {Namespace: "b", Name: "x"},
				rules.EntryOf(8000, gwv1.HTTPProtocolType, ptr.To(gwv1.Hostname("y.example.com"))).Tuple(): {Namespace: "a", Name: "y"},
			},
			want: []string{"b/x/tcp: Accepted", "a/y/http: ProtocolConflict"},
		},
		"a claim whose holder the Gateway does not admit reserves nothing": {
			gateway: gateway(gwv1.NamespacesFromSame),
			fragments: []rules.Source{
				fragment("infra", "f", 5, https("web", "app.example.com")),
				fragment("shop", "gone", 0, https("web", "app.example.com")),
			},
			claims: map[rules.Tuple]types.NamespacedName{
				rules.EntryOf(443, gwv1.HTTPSProtocolType, ptr.To(gwv1.Hostname("app.example.com"))).Tuple(): {Namespace: "shop", Name: "gone"},
			},
			want: []string{"infra/f/web: Accepted"},
		},
		"values Gateway API disallows, stored past admission, are not folded": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{fragment("a", "f", 0,
				entry("typo", 80, "http", "a.example.com"),
				entry("ip", 80, gwv1.HTTPProtocolType, "1.2.3.4"),
				withKinds(entry("tls", 443, gwv1.TLSProtocolType, "c.example.com"), "HTTPRoute"),
				withKinds(entry("http", 80, gwv1.HTTPProtocolType, "d.example.com"), "HTTPRoute", "TCPRoute"),
				entry("ok", 80, gwv1.HTTPProtocolType, "b.example.com"))},
			want:     []string{"a/f/typo: UnsupportedProtocol", "a/f/ip: Invalid", "a/f/tls: InvalidRouteKinds", "a/f/http: Accepted", "a/f/ok: Accepted"},
			accepted: map[string]string{"a/f": "True/Accepted"},
		},
		"the Gateway's own listener beats a claim": {
			gateway:   gateway(gwv1.NamespacesFromAll, own("main", 443, gwv1.HTTPSProtocolType, "app.example.com")),
			fragments: []rules.Source{fragment("a", "f", 0, https("web", "app.example.com"))},
			claims: map[rules.Tuple]types.NamespacedName{
				rules.EntryOf(443, gwv1.HTTPSProtocolType, ptr.To(gwv1.Hostname("app.example.com"))).Tuple(): {Namespace: "a", Name: "f"},
			},
			want: []string{"a/f/web: HostnameConflict"},
		},
		"older fragment wins the tuple, later one is a hostname conflict": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("b", "late", 5, https("web", "app.example.com")),
				fragment("a", "early", 1, https("web", "app.example.com")),
			},
			want:     []string{"a/early/web: Accepted", "b/late/web: HostnameConflict"},
			accepted: map[string]string{"a/early": "True/Accepted", "b/late": "False/ListenersNotValid"},
		},
		"equal creation times fall back to namespace/name": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("b", "x", 1, https("web", "app.example.com")),
				fragment("a", "z", 1, https("web", "app.example.com")),
			},
			want: []string{"a/z/web: Accepted", "b/x/web: HostnameConflict"},
		},
		"the Gateway's own listener beats an older fragment": {
			gateway:   gateway(gwv1.NamespacesFromAll, own("main", 443, gwv1.HTTPSProtocolType, "app.example.com")),
			fragments: []rules.Source{fragment("a", "f", 0, https("web", "app.example.com"))},
			want:      []string{"a/f/web: HostnameConflict"},
		},
		"HTTP on an HTTPS port is a protocol conflict, whatever the hostname": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("a", "f", 0, https("web", "app.example.com")),
				fragment("a", "g", 1, entry("web", 443, gwv1.HTTPProtocolType, "app.example.com")),
			},
			want: []string{"a/f/web: Accepted", "a/g/web: ProtocolConflict"},
		},
		"UDP beside HTTPS is folded (HTTP/3)": {
			gateway: gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{
				fragment("a", "f", 0, https("web", "app.example.com")),
				fragment("a", "g", 1, entry("h3", 443, gwv1.UDPProtocolType, "")),
			},
			want: []string{"a/f/web: Accepted", "a/g/h3: Accepted"},
		},
		"HTTP on a TCP port is a protocol conflict": {
			gateway:   gateway(gwv1.NamespacesFromAll, own("db", 5432, gwv1.TCPProtocolType, "")),
			fragments: []rules.Source{fragment("a", "f", 0, entry("web", 5432, gwv1.HTTPProtocolType, "app.example.com"))},
			want:      []string{"a/f/web: ProtocolConflict"},
		},
		"TCP and UDP share a port, a second TCP listener does not": {
			gateway: gateway(gwv1.NamespacesFromAll, own("dns", 53, gwv1.UDPProtocolType, "")),
			fragments: []rules.Source{
				fragment("a", "f", 0, entry("dns", 53, gwv1.TCPProtocolType, "")),
				fragment("a", "g", 1, entry("dns", 53, gwv1.TCPProtocolType, "")),
			},
			want: []string{"a/f/dns: Accepted", "a/g/dns: ProtocolConflict"},
		},
		"a missing hostname differs from a set one": {
			gateway:   gateway(gwv1.NamespacesFromAll, own("catch-all", 443, gwv1.HTTPSProtocolType, "")),
			fragments: []rules.Source{fragment("a", "f", 0, https("web", "app.example.com"))},
			want:      []string{"a/f/web: Accepted"},
		},
		"within a fragment the earlier listener wins and the fragment is still accepted": {
			gateway:   gateway(gwv1.NamespacesFromAll),
			fragments: []rules.Source{fragment("a", "f", 0, https("one", "app.example.com"), entry("two", 443, gwv1.TLSProtocolType, "app.example.com"))},
			want:      []string{"a/f/one: Accepted", "a/f/two: HostnameConflict"},
			accepted:  map[string]string{"a/f": "True/Accepted"},
		},
		"a listener gatefold applied for a deleted fragment does not block a new one": {
			gateway: func() *gwv1.Gateway {
				gw := gateway(gwv1.NamespacesFromAll, own(string(v1alpha1.ListenerName("a", "gone", "web")), 443, gwv1.HTTPSProtocolType, "app.example.com"))
				return gw
			}(),
			fragments: []rules.Source{fragment("a", "new", 9, https("web", "app.example.com"))},
			want:      []string{"a/new/web: Accepted"},
		},
		"from None, the default, admits nobody": {
			gateway:   gateway(gwv1.NamespacesFromNone),
			fragments: []rules.Source{fragment("infra", "f", 0, https("web", "a.example.com"))},
			accepted:  map[string]string{"infra/f": "False/NotAllowed"},
		},
		"from Same admits only the Gateway's namespace": {
			gateway: gateway(gwv1.NamespacesFromSame),
			fragments: []rules.Source{
				fragment("infra", "f", 0, https("web", "a.example.com")),
				fragment("shop", "f", 0, https("web", "b.example.com")),
			},
			want:     []string{"infra/f/web: Accepted"},
			accepted: map[string]string{"infra/f": "True/Accepted", "shop/f": "False/NotAllowed"},
		},
		"from Selector admits namespaces whose labels match": {
			gateway: func() *gwv1.Gateway {
				gw := gateway(gwv1.NamespacesFromSelector)
				gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"gateway-access": "shared"}}
				return gw
			}(),
			fragments: []rules.Source{
				fragment("shop", "f", 0, https("web", "a.example.com")),
				fragment("blog", "f", 0, https("web", "b.example.com")),
			},
			want:     []string{"shop/f/web: Accepted"},
			accepted: map[string]string{"shop/f": "True/Accepted", "blog/f": "False/NotAllowed"},
		},
		"a fragment that does not fit whole is too many, a smaller later one fits": {
			gateway: func() *gwv1.Gateway {
				var ls []gwv1.Listener
				for i := range 62 {
					ls = append(ls, own(fmt.Sprintf("own-%d", i), gwv1.PortNumber(10000+i), gwv1.TCPProtocolType, ""))
				}
				return gateway(gwv1.NamespacesFromAll, ls...)
			}(),
			fragments: []rules.Source{
				fragment("a", "big", 0, https("one", "a.example.com"), https("two", "b.example.com"), https("three", "c.example.com")),
				fragment("a", "small", 1, https("one", "d.example.com"), https("two", "e.example.com")),
				fragment("a", "late", 2, https("one", "f.example.com")),
			},
			want: []string{
				"a/big/one: TooManyListeners", "a/big/two: TooManyListeners", "a/big/three: TooManyListeners",
				"a/small/one: Accepted", "a/small/two: Accepted", "a/late/one: TooManyListeners",
			},
			accepted: map[string]string{"a/big": "False/TooManyListeners", "a/small": "True/Accepted", "a/late": "False/TooManyListeners"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := Input{
				Gateway:         tc.gateway,
				Managed:         sets.New(v1alpha1.ListenerName("a", "gone", "web")),
				Sources:         tc.fragments,
				NamespaceLabels: map[string]map[string]string{"shop": {"gateway-access": "shared"}, "blog": {}},
				Claims:          tc.claims,
			}
			r := Fold(in)
			if diff := cmp.Diff(tc.want, outcomes(r)); diff != "" {
				t.Errorf("Outcomes (-want +got):\n%s", diff)
			}
			for key, want := range tc.accepted {
				ns, n, _ := strings.Cut(key, "/")
				if got := accepted(r, ns, n); got != want {
					t.Errorf("Fragment %s Accepted = %s, want %s", key, got, want)
				}
			}
			checkInvariants(t, in, r)
		})
	}
}

func TestFoldWithoutGateway(t *testing.T) {
	r := Fold(Input{Sources: []rules.Source{fragment("a", "f", 0, entry("web", 80, gwv1.HTTPProtocolType, ""))}})
	if len(r.Listeners) != 0 {
		t.Errorf("Folded %d listeners into a missing Gateway", len(r.Listeners))
	}
	c := meta.FindStatusCondition(r.Statuses[fragmentKey("a", "f")].Conditions, "Accepted")
	if c == nil || c.Reason != "ParentNotAccepted" || c.Message != "Gateway infra/shared does not exist" {
		t.Errorf("Accepted = %+v, want ParentNotAccepted naming the Gateway", c)
	}
}

func TestFoldedListener(t *testing.T) {
	e := entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com")
	e.TLS = &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{
		{Name: "app-cert"},
		{Name: "shared-cert", Namespace: ptr.To(gwv1.Namespace("certs"))},
	}}
	e.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}
	lf := fragment("shop", "checkout", 0, e)

	got := Listener(&lf, e)
	want := gwv1.Listener{
		Name:     v1alpha1.ListenerName("shop", "checkout", "web"),
		Hostname: e.Hostname, Port: 443, Protocol: gwv1.HTTPSProtocolType,
		TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{
			{Name: "app-cert", Namespace: ptr.To(gwv1.Namespace("shop"))},
			{Name: "shared-cert", Namespace: ptr.To(gwv1.Namespace("certs"))},
		}},
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{
			From:     ptr.To(gwv1.NamespacesFromSelector),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Folded listener (-want +got):\n%s", diff)
	}
	if lf.Listeners[0].TLS.CertificateRefs[0].Namespace != nil {
		t.Errorf("Folding changed the fragment's own spec")
	}
}

func TestFoldStatusMirrorsGateway(t *testing.T) {
	lf := fragment("shop", "checkout", 0, entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com"))
	lf.Generation = 3
	name := v1alpha1.ListenerName("shop", "checkout", "web")
	folded := Listener(&lf, lf.Listeners[0])
	reported := func(observed int64) []gwv1.ListenerStatus {
		return []gwv1.ListenerStatus{{
			Name:           name,
			AttachedRoutes: 2,
			Conditions: []metav1.Condition{
				{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: observed, LastTransitionTime: metav1.NewTime(epoch)},
				{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "InvalidCertificateRef", ObservedGeneration: observed, Message: "Secret shop/app-cert not found"},
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: observed},
			},
		}}
	}
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 3, Message: fmt.Sprintf("Folded into Gateway infra/shared as listener %q", name)}
	noConflicts := metav1.Condition{Type: "Conflicted", Status: metav1.ConditionFalse, Reason: "NoConflicts", ObservedGeneration: 3, Message: "No conflicts"}
	mirrored := v1alpha1.ListenerStatus{
		Name: "web", Gateway: &v1alpha1.GatewayListenerReference{Namespace: "infra", Name: "shared", ListenerName: name}, AttachedRoutes: 2,
		Conditions: []metav1.Condition{accepted, noConflicts,
			{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: 3},
			{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "InvalidCertificateRef", ObservedGeneration: 3, Message: "Secret shop/app-cert not found"},
		},
	}
	pending := v1alpha1.ListenerStatus{
		Name: "web", Gateway: mirrored.Gateway,
		Conditions: []metav1.Condition{accepted, noConflicts,
			{Type: "Programmed", Status: metav1.ConditionUnknown, Reason: "Pending", ObservedGeneration: 3, Message: "Waiting for the Gateway implementation"}},
	}
	refusalOnly := *pending.DeepCopy()
	refusalOnly.Conditions = append(refusalOnly.Conditions, mirrored.Conditions[3])
	changed := folded.DeepCopy()
	changed.Port = 8443
	tests := map[string]struct {
		spec     []gwv1.Listener
		since    int64
		observed int64
		want     v1alpha1.ListenerStatus
	}{
		"the implementation reports the generation that carries the listener": {spec: []gwv1.Listener{folded}, since: 6, observed: 7, want: mirrored},
		"the implementation reports the first generation that carried it":     {spec: []gwv1.Listener{folded}, since: 6, observed: 6, want: mirrored},
		"the report predates the listener":                                    {spec: []gwv1.Listener{folded}, since: 7, observed: 6, want: pending},
		"a report without observedGeneration: only its refusal counts":        {spec: []gwv1.Listener{folded}, since: 7, observed: 0, want: refusalOnly},
		"the Gateway does not carry the listener yet":                         {since: 7, observed: 7, want: pending},
		"the Gateway carries an older listener of that name":                  {spec: []gwv1.Listener{*changed}, since: 7, observed: 7, want: pending},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gw := gateway(gwv1.NamespacesFromAll, tc.spec...)
			gw.Generation = 7
			gw.Status.Listeners = reported(tc.observed)
			in := Input{Gateway: gw, Sources: []rules.Source{lf}, Managed: sets.New(folded.Name), CarriedSince: map[gwv1.SectionName]int64{folded.Name: tc.since}}
			st := Fold(in).Statuses[fragmentKey("shop", "checkout")]
			if diff := cmp.Diff([]v1alpha1.ListenerStatus{tc.want}, st.Listeners); diff != "" {
				t.Errorf("Listener status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFoldWithdrawsListenersTheImplementationRefuses(t *testing.T) {
	lf := fragment("shop", "checkout", 0, entry("web", 8000, gwv1.HTTPProtocolType, "a.example.com"), entry("api", 8000, gwv1.HTTPProtocolType, "b.example.com"))
	lf.UID, lf.Generation = "u1", 2
	web, api := Listener(&lf, lf.Listeners[0]), Listener(&lf, lf.Listeners[1])
	key := withdrawalKey(&lf, "web")
	withdrawnMsg := "The implementation of Gateway infra/shared refused it (UnsupportedProtocol: Unsupported listener protocol), so gatefold withdrew it"
	unsupported := metav1.Condition{Type: "Accepted", Reason: "UnsupportedProtocol", Message: withdrawnMsg}
	// Traefik writes UnsupportedProtocol and DuplicateListener without
	// observedGeneration.
	refusal := gwv1.ListenerStatus{Name: web.Name, Conditions: []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "UnsupportedProtocol", Message: "Unsupported listener protocol"},
	}}
	duplicate := gwv1.ListenerStatus{Name: web.Name, Conditions: []metav1.Condition{
		{Type: "Conflicted", Status: metav1.ConditionTrue, Reason: "DuplicateListener", Message: "A listener with same protocol, port and hostname already exists"},
	}}
	programmed := gwv1.ListenerStatus{Name: api.Name, Conditions: []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 4},
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: 4},
	}}
	missingSecret := gwv1.ListenerStatus{Name: web.Name, Conditions: []metav1.Condition{
		{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "InvalidCertificateRef", ObservedGeneration: 4, Message: "Error while retrieving certificate: secret not found"},
		{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Invalid", ObservedGeneration: 4},
	}}
	ownRefused := gwv1.ListenerStatus{Name: "own", Conditions: []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "PortUnavailable", ObservedGeneration: 4},
	}}
	notAccepted := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "ListenersNotValid", ObservedGeneration: 4}}
	tests := map[string]struct {
		carried  []gwv1.Listener
		reported []gwv1.ListenerStatus
		// gateway are the implementation's conditions of the Gateway.
		gateway   []metav1.Condition
		withdrawn map[WithdrawalKey]Withdrawal
		// status is the fragment's stored status, a new leader's only memory.
		status     *v1alpha1.ListenerFragmentStatus
		wantWeb    string // Accepted/Programmed reasons of listener web
		wantFolded []gwv1.SectionName
		wantMemo   *Withdrawal
	}{
		"a carried listener refused with the Gateway not accepted is withdrawn at once": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{refusal, programmed}, gateway: notAccepted,
			wantWeb: "UnsupportedProtocol/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: unsupported, Attempts: 1},
		},
		"a refusal as Conflicted=True is withdrawn too": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{duplicate, programmed}, gateway: notAccepted,
			wantWeb: "DuplicateListener/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: metav1.Condition{Type: "Conflicted", Reason: "DuplicateListener"}, Attempts: 1},
		},
		"a Gateway the implementation keeps accepted keeps the listener, its verdict mirrored": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{refusal, programmed},
			wantWeb: "UnsupportedProtocol/Pending", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
		},
		"a Gateway not accepted for its own listener's sake withdraws no tenant's": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{refusal, programmed, ownRefused}, gateway: notAccepted,
			wantWeb: "UnsupportedProtocol/Pending", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
		},
		"a Gateway refused as a whole withdraws no tenant's": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{refusal, {Name: api.Name, Conditions: refusal.Conditions}}, gateway: notAccepted,
			wantWeb: "UnsupportedProtocol/Pending", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
		},
		"a listener refused for a Secret that does not exist yet stays while cert-manager may issue it": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{missingSecret, programmed}, gateway: notAccepted,
			wantWeb: "Accepted/Invalid", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: metav1.Condition{Type: "ResolvedRefs", Reason: "InvalidCertificateRef"}, Waiting: true},
		},
		"a Secret still missing after the grace withdraws the listener": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{missingSecret, programmed}, gateway: notAccepted,
			withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch.Add(-SecretGrace), Condition: metav1.Condition{Type: "ResolvedRefs", Reason: "InvalidCertificateRef"}, Waiting: true}},
			wantWeb:   "InvalidCertificateRef/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: metav1.Condition{Type: "ResolvedRefs", Reason: "InvalidCertificateRef"}, Attempts: 1},
		},
		"a Secret that came within the grace ends the wait": {
			carried:   []gwv1.Listener{web, api},
			withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch.Add(-SecretGrace / 2), Condition: metav1.Condition{Type: "ResolvedRefs", Reason: "InvalidCertificateRef"}, Waiting: true}},
			wantWeb:   "Accepted/Pending", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
		},
		"a withdrawn listener stays out until the retry is due": {
			carried:   []gwv1.Listener{api},
			withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch.Add(-WithdrawRetry / 2), Condition: unsupported, Attempts: 1}},
			wantWeb:   "UnsupportedProtocol/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch.Add(-WithdrawRetry / 2), Condition: unsupported, Attempts: 1},
		},
		"a second refusal in a row waits twice as long": {
			carried:   []gwv1.Listener{api},
			withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch.Add(-WithdrawRetry), Condition: unsupported, Attempts: 2}},
			wantWeb:   "UnsupportedProtocol/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch.Add(-WithdrawRetry), Condition: unsupported, Attempts: 2},
		},
		"a due retry folds it again": {
			carried:   []gwv1.Listener{api},
			withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch.Add(-WithdrawRetry), Condition: unsupported, Attempts: 1}},
			wantWeb:   "Accepted/Pending", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
			wantMemo: &Withdrawal{Since: epoch.Add(-WithdrawRetry), Condition: unsupported, Attempts: 1, Retrying: true},
		},
		"a retried listener refused again is withdrawn anew, for twice as long": {
			carried: []gwv1.Listener{web, api}, reported: []gwv1.ListenerStatus{refusal, programmed}, gateway: notAccepted,
			withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch.Add(-WithdrawRetry), Condition: unsupported, Attempts: 1, Retrying: true}},
			wantWeb:   "UnsupportedProtocol/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: unsupported, Attempts: 2},
		},
		"a new leader keeps what the status says was withdrawn": {
			carried: []gwv1.Listener{api},
			status: &v1alpha1.ListenerFragmentStatus{Listeners: []v1alpha1.ListenerStatus{{Name: "web", Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "UnsupportedProtocol", ObservedGeneration: 2, Message: withdrawnMsg},
				{Type: "Conflicted", Status: metav1.ConditionFalse, Reason: "NoConflicts", ObservedGeneration: 2},
				{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Withdrawn", ObservedGeneration: 2},
			}}}},
			wantWeb: "UnsupportedProtocol/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: unsupported, Attempts: 1},
		},
		"a new leader keeps a Conflicted withdrawal as Conflicted": {
			carried: []gwv1.Listener{api},
			status: &v1alpha1.ListenerFragmentStatus{Listeners: []v1alpha1.ListenerStatus{{Name: "web", Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "DuplicateListener", ObservedGeneration: 2, Message: "refused it (DuplicateListener: ...), so gatefold withdrew it"},
				{Type: "Conflicted", Status: metav1.ConditionTrue, Reason: "DuplicateListener", ObservedGeneration: 2},
				{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Withdrawn", ObservedGeneration: 2},
			}}}},
			wantWeb: "DuplicateListener/Withdrawn", wantFolded: []gwv1.SectionName{"own", api.Name},
			wantMemo: &Withdrawal{Since: epoch, Condition: metav1.Condition{Type: "Conflicted", Reason: "DuplicateListener"}, Attempts: 1},
		},
		"a withdrawal of an earlier generation is forgotten: the spec changed": {
			carried: []gwv1.Listener{api},
			status: &v1alpha1.ListenerFragmentStatus{Listeners: []v1alpha1.ListenerStatus{{Name: "web", Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "UnsupportedProtocol", ObservedGeneration: 1},
				{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Withdrawn", ObservedGeneration: 1},
			}}}},
			wantWeb: "Accepted/Pending", wantFolded: []gwv1.SectionName{"own", web.Name, api.Name},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gw := gateway(gwv1.NamespacesFromAll, append([]gwv1.Listener{own("own", 9000, gwv1.HTTPProtocolType, "")}, tc.carried...)...)
			gw.Generation = 4
			gw.Status.Listeners, gw.Status.Conditions = tc.reported, tc.gateway
			lf := lf
			if tc.status != nil {
				lf.Status = *tc.status
			}
			// As the merger recalls them: its memory, then what the status records.
			withdrawn := map[WithdrawalKey]Withdrawal{}
			maps.Copy(withdrawn, tc.withdrawn)
			for k, w := range WithdrawalsInStatus(&lf, epoch) {
				if _, known := withdrawn[k]; !known {
					withdrawn[k] = w
				}
			}
			in := Input{Gateway: gw, Sources: []rules.Source{lf}, Managed: sets.New(web.Name, api.Name),
				Withdrawn: withdrawn, Now: epoch}
			res := Fold(in)
			names := []gwv1.SectionName{"own"}
			for _, l := range res.Listeners {
				names = append(names, l.Name)
			}
			if diff := cmp.Diff(tc.wantFolded, names); diff != "" {
				t.Errorf("Folded listeners (-want +got):\n%s", diff)
			}
			st := res.Statuses[fragmentKey("shop", "checkout")]
			a, p := listenerCondition(st, "web", "Accepted"), listenerCondition(st, "web", "Programmed")
			if got := a.Reason + "/" + p.Reason; got != tc.wantWeb {
				t.Errorf("Listener web Accepted/Programmed reasons = %s, want %s (%s)", got, tc.wantWeb, a.Message)
			}
			if strings.HasSuffix(tc.wantWeb, "/Withdrawn") && (!strings.Contains(a.Message, "refused it (") || !strings.Contains(a.Message, "withdrew it")) {
				t.Errorf("Listener web Accepted message = %q, want the implementation's refusal and the withdrawal", a.Message)
			}
			if c := listenerCondition(st, "web", "Conflicted"); strings.HasPrefix(tc.wantWeb, "DuplicateListener/") && c.Status != metav1.ConditionTrue {
				t.Errorf("Listener web Conflicted = %+v, want True as the implementation said", c)
			}
			got, ok := res.Withdrawn[key]
			switch {
			case tc.wantMemo == nil && ok:
				t.Errorf("Withdrawn = %+v, want none", got)
			case tc.wantMemo != nil && (!ok || !got.Since.Equal(tc.wantMemo.Since) || got.Retrying != tc.wantMemo.Retrying || got.Waiting != tc.wantMemo.Waiting || got.Attempts != tc.wantMemo.Attempts ||
				got.Condition.Reason != tc.wantMemo.Condition.Reason || got.Condition.Type != tc.wantMemo.Condition.Type):
				t.Errorf("Withdrawn = %+v (%v), want %+v", got, ok, *tc.wantMemo)
			}
		})
	}
}

func TestFoldKeepsAWithdrawnListenersTupleWhileItWaits(t *testing.T) {
	withdrawn := fragment("shop", "first", 0, entry("web", 8000, gwv1.HTTPProtocolType, "a.example.com"))
	withdrawn.UID = "u1"
	later := fragment("blog", "later", 5, entry("web", 8000, gwv1.HTTPProtocolType, "a.example.com"))
	key := withdrawalKey(&withdrawn, "web")
	res := Fold(Input{Gateway: gateway(gwv1.NamespacesFromAll), Sources: []rules.Source{withdrawn, later}, Now: epoch,
		Withdrawn: map[WithdrawalKey]Withdrawal{key: {Since: epoch, Condition: metav1.Condition{Type: "Accepted", Reason: "PortUnavailable", Message: "refused"}, Attempts: 1}}})
	if diff := cmp.Diff([]string{"shop/first/web: PortUnavailable", "blog/later/web: HostnameConflict"}, outcomes(res)); diff != "" {
		t.Errorf("Outcomes (-want +got):\n%s", diff)
	}
}

func listenerCondition(st v1alpha1.ListenerFragmentStatus, listener, typ string) *metav1.Condition {
	for _, l := range st.Listeners {
		if string(l.Name) == listener {
			if c := meta.FindStatusCondition(l.Conditions, typ); c != nil {
				return c
			}
		}
	}
	return &metav1.Condition{Reason: "<none>"}
}

func TestFoldReportsDeletingSources(t *testing.T) {
	gone := fragment("shop", "gone", 0, entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com"))
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(epoch))
	res := Fold(Input{Gateway: gateway(gwv1.NamespacesFromAll), Deleting: []rules.Source{gone}})
	if len(res.Listeners) != 0 {
		t.Errorf("Folded %d listeners of a fragment being deleted", len(res.Listeners))
	}
	st := res.Statuses[fragmentKey("shop", "gone")]
	if c := meta.FindStatusCondition(st.Conditions, "Accepted"); c == nil || c.Reason != "Deleting" || !strings.Contains(c.Message, "withdrew its listeners from Gateway infra/shared") {
		t.Errorf("Accepted = %+v, want Deleting naming the Gateway", c)
	}
	if len(st.Listeners) != 1 || st.Listeners[0].Gateway != nil || listenerCondition(st, "web", "Programmed").Reason != "Deleting" {
		t.Errorf("Listeners = %+v, want web with no Gateway and Programmed=False/Deleting", st.Listeners)
	}
}

func TestFoldConflictMessageKeepsOtherTenantsPrivate(t *testing.T) {
	r := Fold(Input{Gateway: gateway(gwv1.NamespacesFromAll), Sources: []rules.Source{
		fragment("bank", "secret-project", 0, entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com")),
		fragment("shop", "checkout", 1, entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com")),
	}})
	msg := r.Outcomes[1].Message
	want := "Hostname app.example.com on port 443 (HTTPS) is already taken on Gateway infra/shared by a listener (HTTPS) of a ListenerFragment in another namespace: choose another hostname or port"
	if msg != want {
		t.Errorf("Message = %q, want %q", msg, want)
	}
}

// checkInvariants holds for every fold: the Gateway CEL would reject a
// whole write that broke one of them.
func checkInvariants(t *testing.T, in Input, r Result) {
	t.Helper()
	if in.Gateway == nil || in.Head != nil {
		if len(r.Listeners) != 0 || len(r.Siblings) != 0 || r.ListenerSetGateway != nil {
			t.Fatalf("Folded listeners into a missing Gateway or a sibling")
		}
		return
	}
	ownLs := rules.OwnListeners(in.Gateway, in.Managed, in.Sources)
	if in.Pool == nil && len(r.Siblings) > 0 {
		t.Fatalf("A Gateway that heads no pool got %d siblings", len(r.Siblings))
	}
	// A tuple is taken once in the whole pool; room is counted per Gateway.
	names := sets.New[gwv1.SectionName]()
	var held []rules.Holder
	for _, l := range ownLs {
		names.Insert(l.Name)
		held = append(held, rules.Holder{Listener: l.Name, Entry: rules.EntryOf(l.Port, l.Protocol, l.Hostname)})
	}
	gateways := map[string][]gwv1.Listener{in.Gateway.Name: r.Listeners}
	extra := map[string]int{}
	if in.Pool != nil {
		for _, s := range in.Pool.Siblings {
			for _, l := range rules.OwnListeners(s.Gateway, s.Managed, in.Sources) {
				extra[s.Gateway.Name]++
				held = append(held, rules.Holder{Listener: l.Name, Entry: rules.EntryOf(l.Port, l.Protocol, l.Hostname)})
			}
		}
	}
	for _, s := range r.Siblings {
		gateways[s.Name] = s.Listeners
	}
	// ListenerSets land on their own Gateway, which carries none of the
	// Gateway's own listeners and no fragment's (GEP-1713: a route naming
	// the Gateway never reaches a ListenerSet's listener).
	setGateway := rules.ListenerSetGatewayName(in.Gateway.Name)
	kinds := map[gwv1.SectionName]string{}
	for i := range in.Sources {
		for _, l := range in.Sources[i].Listeners {
			kinds[rules.GatewayListenerName(in.Sources[i].Ref(), l.Name)] = in.Sources[i].Kind
		}
	}
	if s := in.ListenerSetGateway; s != nil {
		for _, l := range rules.OwnListeners(s.Gateway, s.Managed, in.Sources) {
			extra[setGateway]++
			held = append(held, rules.Holder{Listener: l.Name, Entry: rules.EntryOf(l.Port, l.Protocol, l.Hostname)})
		}
	}
	if s := r.ListenerSetGateway; s != nil {
		if s.Name != setGateway {
			t.Fatalf("The Gateway of the ListenerSets is named %s, want %s", s.Name, setGateway)
		}
		if s.Gateway == nil && len(s.Listeners) == 0 {
			t.Fatalf("The fold would create Gateway %s without a listener", s.Name)
		}
		gateways[s.Name] = s.Listeners
		extra[s.Name] -= len(ownLs) // it does not carry the Gateway's own
	} else if in.ListenerSetGateway != nil {
		t.Fatalf("The fold forgot Gateway %s, which exists", setGateway)
	}
	for name, ls := range gateways {
		for _, l := range ls {
			if onSets := name == setGateway; onSets != (kinds[l.Name] == rules.KindListenerSet) {
				t.Fatalf("Listener %q of a %s was folded into Gateway %s", l.Name, kinds[l.Name], name)
			}
		}
	}
	folded := 0
	for name, ls := range gateways {
		folded += len(ls)
		if n := len(ownLs) + extra[name] + len(ls); len(ls) > 0 && n > rules.MaxListeners {
			t.Fatalf("Gateway %s would hold %d listeners", name, n)
		}
		for _, l := range ls {
			if names.Has(l.Name) {
				t.Fatalf("Listener name %q is repeated", l.Name)
			}
			names.Insert(l.Name)
			e := rules.EntryOf(l.Port, l.Protocol, l.Hostname)
			for _, h := range held {
				if c := rules.ConflictOf(e, h); c != nil {
					t.Fatalf("Listener %q (%s) was folded despite a %s with %q (%s)", l.Name, e, c.Reason, h.Listener, h.Entry)
				}
			}
			held = append(held, rules.Holder{Listener: l.Name, Entry: e})
		}
	}
	for _, lf := range in.Sources {
		if _, ok := r.Statuses[lf.Ref()]; !ok {
			t.Fatalf("Fragment %s/%s has no status", lf.Namespace, lf.Name)
		}
	}
	on := map[rules.SourceRef]string{}
	n := 0
	for _, o := range r.Outcomes {
		if !o.Folded() {
			continue
		}
		n++
		if g, ok := on[o.Fragment]; ok && g != o.Gateway {
			t.Fatalf("%s was split between Gateways %s and %s", o.Fragment, g, o.Gateway)
		}
		on[o.Fragment] = o.Gateway
	}
	if n != folded {
		t.Fatalf("%d outcomes say folded, %d listeners were folded", n, folded)
	}
}

// fuzzInput builds a Gateway and fragments from bytes: small sets of ports,
// protocols, hostnames and namespaces so that conflicts are frequent.
// byteReader returns the bytes of data one at a time, then zeros.
func byteReader(data []byte) func() int {
	return func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
}

func fuzzInput(data []byte) Input {
	next := byteReader(data)
	ports := []gwv1.PortNumber{80, 443, 53}
	protocols := []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType, "example.com/x"}
	hosts := []string{"", "a.example.com", "b.example.com", "*.example.com"}
	namespaces := []string{"infra", "shop", "blog"}
	listener := func(name string) gwv1.ListenerEntry {
		p := protocols[next()%len(protocols)]
		host := hosts[next()%len(hosts)]
		if g := rules.GroupOf(p); g == rules.GroupTCP || g == rules.GroupUDP {
			host = ""
		}
		return entry(name, ports[next()%len(ports)]+gwv1.PortNumber(next()%24), p, host)
	}
	froms := []gwv1.FromNamespaces{gwv1.NamespacesFromAll, gwv1.NamespacesFromSame, gwv1.NamespacesFromNone}
	gw := gateway(froms[next()%len(froms)])
	in := Input{Gateway: gw, Managed: sets.New[gwv1.SectionName]()}
	// The Gateway CEL keeps own listeners' (port, protocol, hostname) unique;
	// within that, they may take what fragments want.
	seen := sets.New[string]()
	for i := range next() % 70 {
		e := listener(fmt.Sprintf("own-%d", i))
		l := gwv1.Listener{Name: e.Name, Port: e.Port, Protocol: e.Protocol, Hostname: e.Hostname}
		if key := fixture.Summary(gwv1.Listener{Port: l.Port, Protocol: l.Protocol, Hostname: l.Hostname}); seen.Has(key) {
			l.Hostname = ptr.To(gwv1.Hostname(fmt.Sprintf("own-%d.example.com", i)))
		} else {
			seen.Insert(key)
		}
		gw.Spec.Listeners = append(gw.Spec.Listeners, l)
		if next()%5 == 0 {
			in.Managed.Insert(l.Name) // left behind by a deleted fragment
		}
	}
	if next()%5 == 0 {
		in.Gateway = nil
	}
	for i := range next() % 40 {
		var ls []gwv1.ListenerEntry
		for j := range 1 + next()%4 {
			ls = append(ls, listener(fmt.Sprintf("l%d", j)))
		}
		src := fragment(namespaces[next()%len(namespaces)], fmt.Sprintf("f%d", i), next()%4, ls...)
		if next()%4 == 0 {
			src = listenerSet(src.Namespace, src.Name, next()%4, ls...)
		}
		in.Sources = append(in.Sources, src)
	}
	if in.Gateway != nil && next()%3 == 0 {
		// A pool whose sibling carries some fragments' listeners, as an
		// earlier fold left them, and whose head may carry others.
		in.Pool = &Pool{Names: sets.New(in.Gateway.Name)}
		sib := gateway(gwv1.NamespacesFromAll)
		sib.Name = rules.SiblingName(in.Gateway.Name, 2)
		managed := sets.New[gwv1.SectionName]()
		for _, lf := range in.Sources {
			for _, l := range lf.Listeners {
				switch next() % 4 {
				case 0:
					sib.Spec.Listeners = append(sib.Spec.Listeners, Listener(&lf, l))
					managed.Insert(rules.GatewayListenerName(lf.Ref(), l.Name))
				case 1:
					in.Gateway.Spec.Listeners = append(in.Gateway.Spec.Listeners, Listener(&lf, l))
					in.Managed.Insert(rules.GatewayListenerName(lf.Ref(), l.Name))
				}
			}
		}
		in.Pool.Siblings = []Sibling{{Gateway: sib, Managed: managed}}
		in.Pool.Names.Insert(sib.Name)
		if next()%2 == 0 {
			in.Pool.NoGrowth = "refused"
		}
	}
	switch {
	case in.Gateway == nil:
	case next()%3 == 0:
		// The Gateway of the ListenerSets, carrying some of their listeners
		// as an earlier fold left them, and maybe one someone else added.
		gw := gateway(gwv1.NamespacesFromAll)
		gw.Name = rules.ListenerSetGatewayName(in.Gateway.Name)
		managed := sets.New[gwv1.SectionName]()
		for _, src := range in.Sources {
			for _, l := range src.Listeners {
				if src.Kind == rules.KindListenerSet && next()%2 == 0 {
					gw.Spec.Listeners = append(gw.Spec.Listeners, Listener(&src, l))
					managed.Insert(rules.GatewayListenerName(src.Ref(), l.Name))
				}
			}
		}
		if next()%4 == 0 {
			e := listener("foreign")
			gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: e.Name, Port: e.Port, Protocol: e.Protocol, Hostname: e.Hostname})
		}
		in.ListenerSetGateway = &Sibling{Gateway: gw, Managed: managed}
	case next()%5 == 0:
		in.ListenerSetGatewayBlocked = "taken"
	}
	return in
}

func FuzzFold(f *testing.F) {
	f.Add([]byte{0, 3, 1, 0, 0, 0, 0, 8, 1, 1, 1, 0, 0, 1, 2, 1, 1, 0, 0, 0})
	f.Add([]byte{0, 66, 0, 1, 0, 0, 30, 3, 1, 1, 2, 1, 0, 1, 4, 0, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 0, 1, 20, 3, 0, 2, 1, 1, 0, 3, 3, 0, 2, 4, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		r := Fold(in)
		checkInvariants(t, in, r)

		if diff := cmp.Diff(r, Fold(in)); diff != "" {
			t.Fatalf("Fold is not deterministic:\n%s", diff)
		}
		rev := in
		rev.Sources = slices.Clone(in.Sources)
		slices.Reverse(rev.Sources)
		if diff := cmp.Diff(r, Fold(rev)); diff != "" {
			t.Fatalf("Fold depends on the order of its input:\n%s", diff)
		}
		if in.Gateway != nil {
			before := in.Gateway.DeepCopy()
			Fold(in)
			if diff := cmp.Diff(before, in.Gateway); diff != "" {
				t.Fatalf("Fold changed the Gateway:\n%s", diff)
			}
		}
	})
}

// BenchmarkFold is one fold of a Gateway with its listeners full (63
// fragments beside one own listener) and with 1,000 fragments competing for
// them, most of them overflowing.
func BenchmarkFold(b *testing.B) {
	for _, n := range []int{63, 1000} {
		in := Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName]()}
		for i := range n {
			in.Sources = append(in.Sources, fragment("shop", fmt.Sprintf("f%d", i), i, entry("web", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("f%d.example.com", i))))
		}
		b.Run(fmt.Sprintf("fragments=%d", n), func(b *testing.B) {
			for range b.N {
				Fold(in)
			}
		})
	}
	for _, n := range []int{1000, 50000} {
		for _, folded := range []bool{false, true} {
			in := claimedPool(n, folded)
			b.Run(fmt.Sprintf("pool=%d/claimed/folded=%v", n, folded), func(b *testing.B) {
				for range b.N {
					Fold(in)
				}
			})
		}
	}
}

// claimedPool is the fold's input for a pool's head with n fragments, each
// holding its claim: at first install (no sibling yet), or folded (its
// siblings carry every fragment's listener, 63 to a Gateway).
func claimedPool(n int, folded bool) Input {
	in := Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName](),
		Pool: &Pool{Names: sets.New("shared")}, Claims: map[rules.Tuple]types.NamespacedName{}}
	in.Gateway.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
	for i := range n {
		l := entry("web", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("f%d.example.com", i))
		src := fragment("shop", fmt.Sprintf("f%d", i), i, l)
		in.Sources = append(in.Sources, src)
		in.Claims[rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()] = src.Ref().NamespacedName
	}
	if !folded {
		return in
	}
	for k := 0; k < n; k += rules.MaxListeners - 1 {
		sib := gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, ""))
		sib.Name = rules.SiblingName("shared", len(in.Pool.Siblings)+2)
		managed := sets.New[gwv1.SectionName]("http")
		for _, src := range in.Sources[k:min(n, k+rules.MaxListeners-1)] {
			sib.Spec.Listeners = append(sib.Spec.Listeners, Listener(&src, src.Listeners[0]))
			managed.Insert(rules.GatewayListenerName(src.Ref(), src.Listeners[0].Name))
		}
		in.Pool.Siblings = append(in.Pool.Siblings, Sibling{Gateway: sib, Managed: managed})
		in.Pool.Names.Insert(sib.Name)
	}
	return in
}

func TestFoldChecksReferenceGrants(t *testing.T) {
	withCert := func(ns string) gwv1.ListenerEntry {
		l := entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com")
		l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert", Namespace: ptr.To(gwv1.Namespace(ns))}}}
		return l
	}
	grant := gwv1.ReferenceGrant{Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.Group(v1alpha1.GroupVersion.Group), Kind: "ListenerFragment", Namespace: "shop"}},
		To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}},
	}}
	tests := map[string]struct {
		grants map[string][]gwv1.ReferenceGrant
		want   []string
	}{
		"granted in the Secret's namespace":  {grants: map[string][]gwv1.ReferenceGrant{"certs": {grant}}, want: []string{"shop/f/web: Accepted", "shop/g/web: HostnameConflict"}},
		"no grant: not folded, and the next": {want: []string{"shop/f/web: RefNotPermitted", "shop/g/web: Accepted"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Fold(Input{Gateway: gateway(gwv1.NamespacesFromAll), Grants: tc.grants, Sources: []rules.Source{
				fragment("shop", "f", 0, withCert("certs")),
				fragment("shop", "g", 1, withCert("shop")),
			}})
			if diff := cmp.Diff(tc.want, outcomes(r)); diff != "" {
				t.Fatalf("Outcomes (-want +got):\n%s", diff)
			}
			if tc.grants != nil {
				return
			}
			ls := r.Statuses[fragmentKey("shop", "f")].Listeners[0]
			c := meta.FindStatusCondition(ls.Conditions, string(gwv1.ListenerEntryConditionResolvedRefs))
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RefNotPermitted" ||
				!strings.Contains(c.Message, "No ReferenceGrant in namespace certs lets ListenerFragments of namespace shop use Secret") {
				t.Errorf("ResolvedRefs = %+v, want False with RefNotPermitted naming the grant to create", c)
			}
		})
	}
}

func TestFoldConflictedListenerSaysTheConflictEverywhere(t *testing.T) {
	r := Fold(Input{Gateway: gateway(gwv1.NamespacesFromAll, own("main", 443, gwv1.HTTPSProtocolType, "app.example.com")), Sources: []rules.Source{
		fragment("shop", "f", 0, entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com")),
	}})
	ls := r.Statuses[fragmentKey("shop", "f")].Listeners[0]
	for _, want := range []struct {
		t string
		s metav1.ConditionStatus
	}{{"Accepted", metav1.ConditionFalse}, {"Conflicted", metav1.ConditionTrue}, {"Programmed", metav1.ConditionFalse}} {
		c := meta.FindStatusCondition(ls.Conditions, want.t)
		if c == nil || c.Status != want.s || c.Reason != "HostnameConflict" {
			t.Errorf("%s = %+v, want %s with reason HostnameConflict", want.t, c, want.s)
		}
	}
}

func TestFoldLeavesOutRejectedFragments(t *testing.T) {
	in := Input{Gateway: gateway(gwv1.NamespacesFromAll), Sources: []rules.Source{
		fragment("shop", "f", 0, entry("web", 443, gwv1.HTTPSProtocolType, "a.example.com")),
		fragment("shop", "g", 1, entry("web", 443, gwv1.HTTPSProtocolType, "b.example.com")),
	}, Rejected: map[rules.SourceRef]string{fragmentKey("shop", "f"): "denied by policy no-a"}}
	r := Fold(in)
	if diff := cmp.Diff([]string{"shop/g/web: Accepted"}, outcomes(r)); diff != "" {
		t.Fatalf("Outcomes (-want +got):\n%s", diff)
	}
	c := meta.FindStatusCondition(r.Statuses[fragmentKey("shop", "f")].Conditions, "Accepted")
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ListenersNotValid" || !strings.HasSuffix(c.Message, ": denied by policy no-a") {
		t.Errorf("Accepted = %+v, want False ListenersNotValid with the API server's message", c)
	}
}

func fragmentKey(ns, name string) rules.SourceRef {
	return rules.SourceRef{Kind: rules.KindListenerFragment, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// listenerSet is a ListenerSet ns/name created `created` seconds after the
// epoch, as the fold reads it.
func listenerSet(ns, name string, created int, ls ...gwv1.ListenerEntry) rules.Source {
	f := fragment(ns, name, created, ls...)
	return rules.FromListenerSet(&gwv1.ListenerSet{ObjectMeta: f.ObjectMeta, Spec: gwv1.ListenerSetSpec{ParentRef: f.ParentRef, Listeners: ls}})
}

func TestFoldOrdersListenerSetsAndFragmentsAsOne(t *testing.T) {
	host := func(h string) gwv1.ListenerEntry { return entry("web", 80, gwv1.HTTPProtocolType, h) }
	in := Input{
		Gateway: gateway(gwv1.NamespacesFromAll, own("own", 80, gwv1.HTTPProtocolType, "own.example.com")),
		Sources: []rules.Source{
			// A ListenerSet and a fragment of one name, neither conflicting.
			listenerSet("shop", "app", 0, host("set.example.com")),
			fragment("shop", "app", 0, host("fragment.example.com")),
			// The older source wins, whatever its kind.
			fragment("shop", "old", 1, host("a.example.com")),
			listenerSet("shop", "new", 2, host("a.example.com"), entry("own", 80, gwv1.HTTPProtocolType, "own.example.com")),
			listenerSet("shop", "older", 1, entry("tcp", 80, gwv1.TCPProtocolType, "")),
		},
		NamespaceLabels: map[string]map[string]string{"shop": {}},
	}
	r := Fold(in)
	want := []string{
		"shop/app/web: Accepted",
		"ListenerSet shop/app/web: Accepted",
		"shop/old/web: Accepted",
		"ListenerSet shop/older/tcp: ProtocolConflict",
		"ListenerSet shop/new/web: HostnameConflict",
		"ListenerSet shop/new/own: HostnameConflict",
	}
	if diff := cmp.Diff(want, outcomes(r)); diff != "" {
		t.Errorf("Outcomes (-want +got):\n%s", diff)
	}
	// One board for both, two Gateways: the fragment's listener is the
	// Gateway's, the ListenerSet's is on the Gateway of its ListenerSets.
	names := func(ls []gwv1.Listener) map[gwv1.SectionName]bool {
		out := map[gwv1.SectionName]bool{}
		for _, l := range ls {
			out[l.Name] = true
		}
		return out
	}
	set, frag := v1alpha1.ListenerSetListenerName("shop", "app", "web"), v1alpha1.ListenerName("shop", "app", "web")
	if got := names(r.Listeners); got[set] || !got[frag] {
		t.Errorf("Gateway listeners %v, want %s (the fragment's) and not %s (the ListenerSet's)", slices.Collect(maps.Keys(got)), frag, set)
	}
	if r.ListenerSetGateway == nil || r.ListenerSetGateway.Name != "shared-listenersets" || !names(r.ListenerSetGateway.Listeners)[set] {
		t.Errorf("Gateway of the ListenerSets = %+v, want shared-listenersets with %s", r.ListenerSetGateway, set)
	}

	// Upstream's ListenerSet status: a set none of whose listeners folds is
	// not accepted, and a conflicted listener says the conflict thrice.
	st := r.Statuses[rules.SourceRef{Kind: rules.KindListenerSet, NamespacedName: types.NamespacedName{Namespace: "shop", Name: "new"}}]
	for typ, want := range map[string]string{"Accepted": "False/ListenersNotValid", "Programmed": "False/ListenersNotValid"} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || string(c.Status)+"/"+c.Reason != want {
			t.Errorf("ListenerSet shop/new %s = %+v, want %s", typ, c, want)
		}
	}
	for typ, want := range map[string]string{"Accepted": "False/HostnameConflict", "Conflicted": "True/HostnameConflict", "Programmed": "False/HostnameConflict"} {
		if c := meta.FindStatusCondition(st.Listeners[0].Conditions, typ); c == nil || string(c.Status)+"/"+c.Reason != want {
			t.Errorf("ListenerSet shop/new listener %s = %+v, want %s", typ, c, want)
		}
	}
	if c := meta.FindStatusCondition(st.Listeners[0].Conditions, "Accepted"); c != nil && !strings.Contains(c.Message, "of a ListenerFragment in another namespace") && !strings.Contains(c.Message, "ListenerFragment old") {
		t.Errorf("The conflict message does not name the holder's kind: %q", c.Message)
	}
	checkInvariants(t, in, r)
}

func TestFoldChecksListenerSetGrantsByKind(t *testing.T) {
	e := entry("web", 443, gwv1.HTTPSProtocolType, "app.example.com")
	e.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert", Namespace: ptr.To(gwv1.Namespace("certs"))}}}
	grant := func(kind gwv1.Kind) gwv1.ReferenceGrant {
		return gwv1.ReferenceGrant{Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: kind, Namespace: "shop"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}},
		}}
	}
	tests := map[string]struct {
		grant gwv1.ReferenceGrant
		want  gwv1.ListenerEntryConditionReason
	}{
		"a grant from ListenerSets":         {grant: grant("ListenerSet"), want: gwv1.ListenerEntryReasonAccepted},
		"a grant to the Gateway is not one": {grant: grant("Gateway"), want: gwv1.ListenerEntryReasonRefNotPermitted},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Fold(Input{
				Gateway:         gateway(gwv1.NamespacesFromAll),
				Sources:         []rules.Source{listenerSet("shop", "app", 0, e)},
				NamespaceLabels: map[string]map[string]string{"shop": {}},
				Grants:          map[string][]gwv1.ReferenceGrant{"certs": {tc.grant}},
			})
			if got := r.Outcomes[0]; got.Reason != tc.want {
				t.Fatalf("Outcome %s (%s), want %s", got.Reason, got.Message, tc.want)
			}
			if tc.want == gwv1.ListenerEntryReasonRefNotPermitted && !strings.Contains(r.Outcomes[0].Message, "lets ListenerSets of namespace shop use Secret") {
				t.Errorf("Message %q does not say which grant the ListenerSet needs", r.Outcomes[0].Message)
			}
		})
	}
}

func TestHandoversNameTheSourceThatLostATuple(t *testing.T) {
	squat := fragment("b", "squat", 0, entry("http", 8000, gwv1.HTTPProtocolType, "victim.example.com"))
	victim := fragment("a", "victim", 5, entry("http", 8000, gwv1.HTTPProtocolType, "victim.example.com"))
	tuple := rules.EntryOf(8000, gwv1.HTTPProtocolType, ptr.To(gwv1.Hostname("victim.example.com"))).Tuple()
	carried := Listener(&victim, victim.Listeners[0])
	tests := map[string]struct {
		claims map[rules.Tuple]types.NamespacedName
		// moved: the victim changed its hostname since the Gateway got it.
		moved bool
		want  []Handover
	}{
		"the older fragment takes the tuple by precedence": {
			want: []Handover{{Tuple: tuple, From: victim.Ref(), To: squat.Ref()}},
		},
		"the claim holder keeps it": {
			claims: map[rules.Tuple]types.NamespacedName{tuple: {Namespace: "a", Name: "victim"}},
		},
		"a source that gave the tuple up lost nothing": {
			moved: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			victim := victim
			victim.Listeners = slices.Clone(victim.Listeners)
			if tc.moved {
				victim.Listeners[0].Hostname = ptr.To(gwv1.Hostname("elsewhere.example.com"))
			}
			in := Input{Gateway: gateway(gwv1.NamespacesFromAll, own("own", 80, gwv1.HTTPProtocolType, ""), carried), Managed: sets.New(carried.Name),
				Sources: []rules.Source{squat, victim}, Claims: tc.claims}
			if diff := cmp.Diff(tc.want, Handovers(&in, Fold(in))); diff != "" {
				t.Errorf("Handovers (-want +got):\n%s", diff)
			}
		})
	}
}

// withKinds sets a listener's allowedRoutes.kinds, of Gateway API's group.
func withKinds(e gwv1.ListenerEntry, kinds ...gwv1.Kind) gwv1.ListenerEntry {
	e.AllowedRoutes = &gwv1.AllowedRoutes{}
	for _, k := range kinds {
		e.AllowedRoutes.Kinds = append(e.AllowedRoutes.Kinds, gwv1.RouteGroupKind{Kind: k})
	}
	return e
}
