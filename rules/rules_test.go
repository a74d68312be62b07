package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

func e(port gwv1.PortNumber, protocol gwv1.ProtocolType, host string) Entry {
	return Entry{Port: port, Protocol: protocol, Hostname: host}
}

func TestConflictOf(t *testing.T) {
	const (
		http, https, tls, tcp, udp = gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType
		custom                     = gwv1.ProtocolType("example.com/x")
	)
	tests := map[string]struct {
		a, b Entry
		want gwv1.ListenerConditionReason // "" when distinct
	}{
		"HTTP with one hostname twice":                       {a: e(80, http, "a.example.com"), b: e(80, http, "a.example.com"), want: gwv1.ListenerReasonHostnameConflict},
		"HTTP with two hostnames":                            {a: e(80, http, "a.example.com"), b: e(80, http, "b.example.com")},
		"HTTP with no hostname twice":                        {a: e(80, http, ""), b: e(80, http, ""), want: gwv1.ListenerReasonHostnameConflict},
		"a missing hostname differs from a set one":          {a: e(80, http, ""), b: e(80, http, "a.example.com")},
		"a wildcard differs from an exact name":              {a: e(443, https, "*.example.com"), b: e(443, https, "a.example.com")},
		"HTTPS and TLS with one hostname":                    {a: e(443, https, "a.example.com"), b: e(443, tls, "a.example.com"), want: gwv1.ListenerReasonHostnameConflict},
		"HTTPS and TLS with two hostnames share a port":      {a: e(443, https, "a.example.com"), b: e(443, tls, "b.example.com")},
		"HTTP and HTTPS never share a port":                  {a: e(443, http, "a.example.com"), b: e(443, https, "b.example.com"), want: gwv1.ListenerReasonProtocolConflict},
		"HTTP and TLS never share a port":                    {a: e(8443, http, ""), b: e(8443, tls, "b.example.com"), want: gwv1.ListenerReasonProtocolConflict},
		"TCP takes the whole port from HTTP":                 {a: e(9000, tcp, ""), b: e(9000, http, "a.example.com"), want: gwv1.ListenerReasonProtocolConflict},
		"TCP takes the whole port from HTTPS":                {a: e(443, https, "a.example.com"), b: e(443, tcp, ""), want: gwv1.ListenerReasonProtocolConflict},
		"two TCP listeners on one port":                      {a: e(5432, tcp, ""), b: e(5432, tcp, ""), want: gwv1.ListenerReasonProtocolConflict},
		"TCP ignores hostnames":                              {a: e(5432, tcp, "a.example.com"), b: e(5432, tcp, "b.example.com"), want: gwv1.ListenerReasonProtocolConflict},
		"two UDP listeners on one port":                      {a: e(53, udp, ""), b: e(53, udp, ""), want: gwv1.ListenerReasonProtocolConflict},
		"UDP beside TCP":                                     {a: e(53, udp, ""), b: e(53, tcp, "")},
		"UDP beside HTTPS (HTTP/3)":                          {a: e(443, udp, ""), b: e(443, https, "a.example.com")},
		"UDP beside HTTP":                                    {a: e(80, udp, ""), b: e(80, http, "")},
		"a custom protocol twice on one tuple":               {a: e(7000, custom, "a.example.com"), b: e(7000, custom, "a.example.com"), want: gwv1.ListenerReasonHostnameConflict},
		"a custom protocol with another hostname":            {a: e(7000, custom, "a.example.com"), b: e(7000, custom, "b.example.com")},
		"a custom protocol beside TCP":                       {a: e(7000, custom, ""), b: e(7000, tcp, "")},
		"two custom protocols on one port and hostname":      {a: e(7000, custom, ""), b: e(7000, "example.com/y", "")},
		"other ports never conflict":                         {a: e(80, http, ""), b: e(81, tcp, "")},
		"one hostname on two ports":                          {a: e(443, https, "a.example.com"), b: e(8443, https, "a.example.com")},
		"HTTPS with no hostname beside TLS with no hostname": {a: e(443, https, ""), b: e(443, tls, ""), want: gwv1.ListenerReasonHostnameConflict},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, pair := range [][2]Entry{{tc.a, tc.b}, {tc.b, tc.a}} {
				var got gwv1.ListenerConditionReason
				if c := ConflictOf(pair[0], Holder{Listener: "held", Entry: pair[1]}); c != nil {
					got = c.Reason
				}
				if got != tc.want {
					t.Errorf("ConflictOf(%s, held %s) = %q, want %q", pair[0], pair[1], got, tc.want)
				}
				b := NewBoard()
				b.Take(Holder{Listener: "held", Entry: pair[1]})
				if c := b.Conflict(pair[0]); (c != nil) != (tc.want != "") {
					t.Errorf("Board.Conflict(%s) with %s taken = %v, want a conflict: %v", pair[0], pair[1], c, tc.want != "")
				}
			}
		})
	}
}

func TestConflictMessage(t *testing.T) {
	own := Holder{Listener: "main", Entry: e(443, gwv1.HTTPSProtocolType, "a.example.com")}
	other := Holder{Namespace: "blog", Fragment: "posts", Listener: "web", Entry: e(443, gwv1.HTTPProtocolType, "")}
	mine := Holder{Namespace: "shop", Fragment: "cart", Listener: "db", Entry: e(5432, gwv1.TCPProtocolType, "")}
	tests := map[string]struct {
		entry  Entry
		holder Holder
		want   string
	}{
		"a hostname the Gateway's own listener holds names no listener": {
			entry: e(443, gwv1.TLSProtocolType, "a.example.com"), holder: own,
			want: `Hostname a.example.com on port 443 (TLS) is already taken on Gateway infra/shared by a listener of the Gateway itself (HTTPS): choose another hostname or port`,
		},
		"a port another tenant holds with HTTP names no fragment": {
			entry: e(443, gwv1.HTTPSProtocolType, "b.example.com"), holder: Holder{Namespace: "blog", Fragment: "posts", Listener: "web", Entry: e(443, gwv1.HTTPProtocolType, "")},
			want: `Port 443 on Gateway infra/shared carries a listener (HTTP) of a ListenerFragment in another namespace, which cannot share a port with HTTPS: choose another port`,
		},
		"a TCP port of the requester's own namespace": {
			entry: e(5432, gwv1.TCPProtocolType, ""), holder: mine,
			want: `Port 5432 (TCP) is already taken on Gateway infra/shared by listener "db" (TCP) of ListenerFragment cart: choose another port`,
		},
		"no hostname": {
			entry: e(80, gwv1.HTTPProtocolType, ""), holder: other,
			want: `Port 80 (HTTP) with no hostname is already taken on Gateway infra/shared by a listener (HTTP) of a ListenerFragment in another namespace: choose another hostname or port`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := tc.holder
			h.Entry.Port = tc.entry.Port
			c := ConflictOf(tc.entry, h)
			if c == nil {
				t.Fatalf("No conflict of %s with %s", tc.entry, h.Entry)
			}
			if got := c.Message(tc.entry, "infra/shared", "shop"); got != tc.want {
				t.Errorf("Message =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestManagedListeners(t *testing.T) {
	fields := metav1.NewFieldsV1
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields(
			`{"f:spec":{"f:listeners":{"k:{\"name\":\"ours-a\"}":{".":{},"f:port":{}},"k:{\"name\":\"ours-b\"}":{".":{}}}}}`)},
		// The status subresource and other managers do not count.
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: fields(
			`{"f:spec":{"f:listeners":{"k:{\"name\":\"not-spec\"}":{}}}}`)},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(
			`{"f:spec":{"f:listeners":{"k:{\"name\":\"human\"}":{".":{}}}}}`)},
	}}}
	want := sets.New[gwv1.SectionName]("ours-a", "ours-b")
	if diff := cmp.Diff(sets.List(want), sets.List(ManagedListeners(gw))); diff != "" {
		t.Errorf("Managed listeners (-want +got):\n%s", diff)
	}
}

func TestOwnListeners(t *testing.T) {
	l := func(name string) gwv1.Listener {
		return gwv1.Listener{Name: gwv1.SectionName(name), Port: 443, Protocol: gwv1.HTTPSProtocolType}
	}
	lf := v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
		Spec: v1alpha1.ListenerFragmentSpec{Listeners: []gwv1.ListenerEntry{{Name: "https"}}}}
	generated := string(v1alpha1.ListenerName("shop", "checkout", "https"))
	gw := &gwv1.Gateway{Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{l("main"), l(generated), l("left-behind"), l("https")}}}
	var got []gwv1.SectionName
	for _, o := range OwnListeners(gw, sets.New[gwv1.SectionName]("left-behind"), []Source{FromFragment(&lf)}) {
		got = append(got, o.Name)
	}
	// A listener gatefold folded for a since-deleted fragment is not own; a
	// human's listener named like a fragment's local name still is.
	if diff := cmp.Diff([]gwv1.SectionName{"main", "https"}, got); diff != "" {
		t.Errorf("Own listeners (-want +got):\n%s", diff)
	}
}

func TestNamespaceAllowed(t *testing.T) {
	gw := func(al *gwv1.AllowedListeners) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}, Spec: gwv1.GatewaySpec{AllowedListeners: al}}
	}
	from := func(f gwv1.FromNamespaces, sel *metav1.LabelSelector) *gwv1.AllowedListeners {
		return &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(f), Selector: sel}}
	}
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
	// Another namespace learns nothing of the rule that refuses it.
	const askOwner = "ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway"
	tests := map[string]struct {
		gw      *gwv1.Gateway
		ns      string
		labels  map[string]string
		wantWhy string // "" when allowed
	}{
		"no allowedListeners admits nobody":        {gw: gw(nil), ns: "shop", wantWhy: askOwner},
		"All admits any namespace":                 {gw: gw(from(gwv1.NamespacesFromAll, nil)), ns: "shop"},
		"Same admits the Gateway's namespace":      {gw: gw(from(gwv1.NamespacesFromSame, nil)), ns: "infra"},
		"Same refuses another namespace":           {gw: gw(from(gwv1.NamespacesFromSame, nil)), ns: "shop", wantWhy: askOwner},
		"Selector admits a matching namespace":     {gw: gw(from(gwv1.NamespacesFromSelector, team)), ns: "shop", labels: map[string]string{"team": "shop"}},
		"Selector refuses a namespace not matched": {gw: gw(from(gwv1.NamespacesFromSelector, team)), ns: "blog", labels: map[string]string{"team": "blog"}, wantWhy: askOwner},
		"Selector with no selector admits nobody":  {gw: gw(from(gwv1.NamespacesFromSelector, nil)), ns: "shop", wantWhy: askOwner},
		"the Gateway's namespace is told None": {gw: gw(nil), ns: "infra",
			wantWhy: "allow it in spec.allowedListeners (namespaces.from is None, the default), or choose another Gateway"},
		"the Gateway's namespace is told its labels do not match": {gw: gw(from(gwv1.NamespacesFromSelector, team)), ns: "infra",
			wantWhy: "allow it in spec.allowedListeners (the namespace's labels do not match namespaces.selector), or choose another Gateway"},
		"the Gateway's namespace is told there is no selector": {gw: gw(from(gwv1.NamespacesFromSelector, nil)), ns: "infra",
			wantWhy: "allow it in spec.allowedListeners (namespaces.from is Selector with no selector), or choose another Gateway"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ok, why := NamespaceAllowed(tc.gw, tc.ns, tc.labels)
			if ok != (tc.wantWhy == "") || why != tc.wantWhy {
				t.Errorf("NamespaceAllowed = %v, %q; want allowed %v, why %q", ok, why, tc.wantWhy == "", tc.wantWhy)
			}
		})
	}
}

func TestUngrantedRefs(t *testing.T) {
	withRef := func(ns string) gwv1.ListenerEntry {
		l := gwv1.ListenerEntry{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}
		if ns != "" {
			l.TLS.CertificateRefs[0].Namespace = ptr.To(gwv1.Namespace(ns))
		}
		return l
	}
	grant := func(fromKind gwv1.Kind, fromNS string, to *gwv1.ObjectName) gwv1.ReferenceGrant {
		return gwv1.ReferenceGrant{Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: "gatefold.dev", Kind: fromKind, Namespace: gwv1.Namespace(fromNS)}},
			To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: to}},
		}}
	}
	upstream := func(fromKind gwv1.Kind) gwv1.ReferenceGrant {
		g := grant(fromKind, "shop", nil)
		g.Spec.From[0].Group = gwv1.GroupName
		return g
	}
	listenerSetGrant, gatewayGrant := upstream("ListenerSet"), upstream("Gateway")
	certs := func(g ...gwv1.ReferenceGrant) map[string][]gwv1.ReferenceGrant {
		return map[string][]gwv1.ReferenceGrant{"certs": g}
	}
	tests := map[string]struct {
		l       gwv1.ListenerEntry
		grants  map[string][]gwv1.ReferenceGrant
		kind    string // of the source; a ListenerFragment when empty
		granted bool
	}{
		"a Secret in the fragment's namespace needs no grant": {l: withRef(""), granted: true},
		"an explicit own namespace needs no grant":            {l: withRef("shop"), granted: true},
		"a Secret elsewhere without a grant":                  {l: withRef("certs")},
		"a grant for all Secrets":                             {l: withRef("certs"), grants: certs(grant("ListenerFragment", "shop", nil)), granted: true},
		"a grant naming the Secret":                           {l: withRef("certs"), grants: certs(grant("ListenerFragment", "shop", ptr.To(gwv1.ObjectName("cert")))), granted: true},
		"a grant naming another Secret":                       {l: withRef("certs"), grants: certs(grant("ListenerFragment", "shop", ptr.To(gwv1.ObjectName("other"))))},
		"a grant for another namespace's fragments":           {l: withRef("certs"), grants: certs(grant("ListenerFragment", "blog", nil))},
		"a grant from another kind":                           {l: withRef("certs"), grants: certs(grant("Gateway", "shop", nil))},
		"a grant in another namespace":                        {l: withRef("certs"), grants: map[string][]gwv1.ReferenceGrant{"shop": {grant("ListenerFragment", "shop", nil)}}},
		"a ListenerSet's grant":                               {l: withRef("certs"), kind: KindListenerSet, grants: certs(listenerSetGrant), granted: true},
		"a fragment's grant does not serve a ListenerSet":     {l: withRef("certs"), kind: KindListenerSet, grants: certs(grant("ListenerFragment", "shop", nil))},
		"a ListenerSet's grant does not serve a fragment":     {l: withRef("certs"), grants: certs(listenerSetGrant)},
		"a Gateway's grant does not serve a ListenerSet":      {l: withRef("certs"), kind: KindListenerSet, grants: certs(gatewayGrant)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kind := tc.kind
			if kind == "" {
				kind = KindListenerFragment
			}
			got := UngrantedRefs(kind, "shop", 0, tc.l, tc.grants)
			if (len(got) == 0) != tc.granted {
				t.Fatalf("UngrantedRefs = %v, want granted %v", got, tc.granted)
			}
			if len(got) == 1 && got[0].Path.String() != "spec.listeners[0].tls.certificateRefs[0]" {
				t.Errorf("Path = %s", got[0].Path)
			}
		})
	}
}

var fuzzProtocols = []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType, "example.com/x"}

func fuzzEntry(port, proto, host uint8) Entry {
	return e(gwv1.PortNumber(80+port%3), fuzzProtocols[int(proto)%len(fuzzProtocols)], []string{"", "a.example.com", "*.example.com"}[host%3])
}

// FuzzConflictOf checks that a conflict does not depend on which side came
// first, that other ports never conflict, and that equal tuples always do.
func FuzzConflictOf(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(1), uint8(0), uint8(0), uint8(1))
	f.Add(uint8(0), uint8(1), uint8(1), uint8(0), uint8(3), uint8(0))
	f.Add(uint8(1), uint8(4), uint8(0), uint8(1), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, p1, pr1, h1, p2, pr2, h2 uint8) {
		a, b := fuzzEntry(p1, pr1, h1), fuzzEntry(p2, pr2, h2)
		ab, ba := ConflictOf(a, Holder{Entry: b}), ConflictOf(b, Holder{Entry: a})
		if (ab == nil) != (ba == nil) || (ab != nil && ab.Reason != ba.Reason) {
			t.Fatalf("Conflict is not symmetric: %s against %s gives %v, the reverse %v", a, b, ab, ba)
		}
		if a.Port != b.Port && ab != nil {
			t.Fatalf("%s and %s conflict on different ports", a, b)
		}
		if a.Tuple() == b.Tuple() && ab == nil {
			t.Fatalf("%s and %s take one tuple and do not conflict", a, b)
		}
	})
}

func TestPrecedence(t *testing.T) {
	at := func(ns, name string, sec int64) Source {
		return FromFragment(&v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(sec, 0)}})
	}
	tests := map[string]struct {
		a, b Source
		want int
	}{
		"the older fragment comes first, whatever its name": {a: at("z", "z", 1), b: at("a", "a", 2), want: -1},
		"the newer fragment comes last":                     {a: at("a", "a", 2), b: at("z", "z", 1), want: 1},
		"within one second the namespace decides":           {a: at("blog", "z", 1), b: at("shop", "a", 1), want: -1},
		"within one namespace and second the name decides":  {a: at("shop", "b", 1), b: at("shop", "a", 1), want: 1},
		"a fragment is not before itself":                   {a: at("shop", "a", 1), b: at("shop", "a", 1), want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Precedence(&tc.a, &tc.b); got != tc.want {
				t.Errorf("Precedence = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestListenerSetsFolded(t *testing.T) {
	class := func(controller string, features ...gwv1.FeatureName) *gwv1.GatewayClass {
		gc := &gwv1.GatewayClass{Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(controller)}}
		for _, f := range features {
			gc.Status.SupportedFeatures = append(gc.Status.SupportedFeatures, gwv1.SupportedFeature{Name: f})
		}
		return gc
	}
	opted := sets.New("traefik.io/gateway-controller")
	tests := map[string]struct {
		gc   *gwv1.GatewayClass
		want bool
	}{
		"no class":                              {},
		"a class not opted in":                  {gc: class("example.com/other")},
		"an opted-in class":                     {gc: class("traefik.io/gateway-controller", "Gateway", "HTTPRoute"), want: true},
		"an opted-in class supporting them":     {gc: class("traefik.io/gateway-controller", "Gateway", FeatureListenerSet)},
		"a class supporting them, not opted in": {gc: class("example.com/other", FeatureListenerSet)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ListenerSetsFolded(tc.gc, opted); got != tc.want {
				t.Errorf("ListenerSetsFolded = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPoolNamesAndLabels(t *testing.T) {
	for _, head := range []string{"shared", strings.Repeat("a", 63), strings.Repeat("very-long.gateway-name", 11)} {
		label := PoolLabelValue(head)
		if errs := validation.IsValidLabelValue(label); len(errs) > 0 {
			t.Errorf("PoolLabelValue(%q) = %q, not a label value: %v", head, label, errs)
		}
		sib := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: SiblingName(head, 2), Labels: map[string]string{v1alpha1.PoolLabel: label},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: head, Controller: ptr.To(true)}}}}
		if got, ok := HeadOf(sib); !ok || got.Name != head {
			t.Errorf("HeadOf(sibling of %q) = %v, %v", head, got, ok)
		}
		if n := SiblingIndex(head, sib.Name); n != 2 || len(sib.Name) > 253 {
			t.Errorf("SiblingIndex(%q, %q) = %d (name of %d characters)", head, sib.Name, n, len(sib.Name))
		}
	}
	if PoolLabelValue(strings.Repeat("a", 64)) == PoolLabelValue(strings.Repeat("a", 65)) {
		t.Error("Two long heads share a label value")
	}
}

func TestListenerSetGatewayNames(t *testing.T) {
	for _, parent := range []string{"shared", strings.Repeat("a", 240), strings.Repeat("a", 253), strings.Repeat("very-long.gateway-name", 11)} {
		name := ListenerSetGatewayName(parent)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("ListenerSetGatewayName(%q) = %q, not a Gateway name: %v", parent, name, errs)
		}
		// Only a name that was not cut leads back to its parent.
		if got, ok := ListenerSetGatewayParent(name); len(name) == len(parent)+len("-listenersets") && (!ok || got != parent) {
			t.Errorf("ListenerSetGatewayParent(%q) = %q, %v, want %q", name, got, ok, parent)
		}
		gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name, Labels: map[string]string{v1alpha1.PoolLabel: PoolLabelValue(parent)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: parent, Controller: ptr.To(true)}}}}
		if head, ok := HeadOf(gw); !ok || head.Name != parent || !ListenerSetGateway(gw) {
			t.Errorf("HeadOf(%q) = %v, %v; ListenerSetGateway = %v, want %q and true", name, head, ok, ListenerSetGateway(gw), parent)
		}
		// No pool sibling of any head is named so.
		if SiblingIndex(parent, name) != 0 {
			t.Errorf("ListenerSetGatewayName(%q) = %q is a sibling's name", parent, name)
		}
		sib := gw.DeepCopy()
		sib.Name = SiblingName(parent, 2)
		if ListenerSetGateway(sib) {
			t.Errorf("Sibling %q is taken for the Gateway of the ListenerSets", sib.Name)
		}
	}
	if ListenerSetGatewayName(strings.Repeat("a", 241)) == ListenerSetGatewayName(strings.Repeat("a", 242)) {
		t.Error("Two long parents share the Gateway of their ListenerSets")
	}
}

func TestListenerSetGatewayBlocked(t *testing.T) {
	parent := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared", UID: "p"}}
	gatefolds := func(uid types.UID, edit func(*gwv1.Gateway)) *gwv1.Gateway {
		gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared-listenersets", Labels: map[string]string{v1alpha1.PoolLabel: PoolLabelValue("shared")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: "shared", UID: uid, Controller: ptr.To(true)}}}}
		if edit != nil {
			edit(gw)
		}
		return gw
	}
	tests := map[string]struct {
		sets *gwv1.Gateway
		want string
	}{
		"none":       {},
		"gatefold's": {sets: gatefolds("p", nil)},
		"not gatefold's": {sets: &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared-listenersets"}},
			want: "Gateway infra/shared-listenersets, where gatefold folds this ListenerSet, is not gatefold's: its owner must rename or delete it"},
		"being deleted": {sets: gatefolds("p", func(gw *gwv1.Gateway) { gw.DeletionTimestamp = ptr.To(metav1.Now()) }),
			want: "Gateway infra/shared-listenersets, where gatefold folds this ListenerSet, is being deleted: it folds once that is done"},
		"an earlier parent's": {sets: gatefolds("earlier", nil),
			want: "Gateway infra/shared-listenersets is left from an earlier Gateway shared: this ListenerSet folds once it is garbage collected"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ListenerSetGatewayBlocked(parent, tc.sets)
			if got != tc.want {
				t.Errorf("ListenerSetGatewayBlocked = %q, want %q", got, tc.want)
			}
			if len(got) > 130 {
				t.Errorf("Message of %d characters, want about 120", len(got))
			}
		})
	}
}
