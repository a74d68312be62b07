package fold

import (
	"fmt"
	"strings"
	"testing"

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

// poolHead is the Gateway infra/shared marked as a pool's head, with one own
// HTTP listener (a redirect, say) that every sibling carries too.
func poolHead() *gwv1.Gateway {
	return fixture.PoolHead("infra", gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, ""))
}

// routes are n one-listener HTTPS fragments, the i-th created at second
// first+i.
func routes(first, n int) []rules.Source {
	var out []rules.Source
	for i := first; i < first+n; i++ {
		out = append(out, fragment("shop", fmt.Sprintf("r%04d", i), i, entry("web", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("r%04d.example.com", i))))
	}
	return out
}

// carrying returns a Gateway of the pool that carries the fragments'
// listeners as an earlier fold left them, and its managed set.
func carrying(gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], fragments ...rules.Source) (*gwv1.Gateway, sets.Set[gwv1.SectionName]) {
	if managed == nil {
		managed = sets.New[gwv1.SectionName]()
	}
	for _, lf := range fragments {
		for _, l := range lf.Listeners {
			gw.Spec.Listeners = append(gw.Spec.Listeners, Listener(&lf, l))
			managed.Insert(rules.GatewayListenerName(lf.Ref(), l.Name))
		}
	}
	return gw, managed
}

func sibling(n int) *gwv1.Gateway {
	gw := poolHead()
	gw.Name, gw.Annotations = rules.SiblingName("shared", n), nil
	return gw
}

// landing says on which Gateway each folded fragment landed, by name.
func landing(r Result) map[string]string {
	out := map[string]string{}
	for _, o := range r.Outcomes {
		if o.Folded() {
			out[o.Fragment.Name] = o.Gateway
		}
	}
	return out
}

// perGateway counts the fragment listeners folded into each Gateway.
func perGateway(r Result) map[string]int {
	out := map[string]int{"shared": len(r.Listeners)}
	for _, s := range r.Siblings {
		out[s.Name] = len(s.Listeners)
	}
	if s := r.ListenerSetGateway; s != nil {
		out[s.Name] = len(s.Listeners)
	}
	return out
}

// setGateway is the Gateway of the ListenerSets of infra/shared carrying
// the sources' listeners as an earlier fold left them.
func setGateway(sources ...rules.Source) *Sibling {
	gw := gateway(gwv1.NamespacesFromAll)
	gw.Name = rules.ListenerSetGatewayName("shared")
	gw, managed := carrying(gw, nil, sources...)
	return &Sibling{Gateway: gw, Managed: managed}
}

func TestPoolPlacement(t *testing.T) {
	tests := map[string]struct {
		input func() Input
		// per is the listeners per Gateway; landed, where some fragments
		// landed; reasons, outcomes that are not Accepted.
		per     map[string]int
		landed  map[string]string
		reasons map[string]string
	}{
		"1,000 one-listener fragments fill ⌈1000/63⌉ Gateways in order, none stuck": {
			input: func() Input {
				return Input{Gateway: poolHead(), Managed: sets.New[gwv1.SectionName](), Pool: &Pool{Names: sets.New("shared")}, Sources: routes(0, 1000)}
			},
			per: func() map[string]int {
				m := map[string]int{"shared": 63}
				for n := 2; n <= 15; n++ {
					m[rules.SiblingName("shared", n)] = 63
				}
				m["shared-16"] = 1000 - 15*63
				return m
			}(),
			landed: map[string]string{"r0000": "shared", "r0062": "shared", "r0063": "shared-2", "r0999": "shared-16"},
		},
		"a folded fragment stays where it is when an older one arrives": {
			input: func() Input {
				head, managed := carrying(poolHead(), nil, routes(1, 63)...)
				sib, sibManaged := carrying(sibling(2), sets.New[gwv1.SectionName]("http"), routes(64, 2)...)
				// r0000 is older than all, and new: it must not push r0063 out.
				return Input{Gateway: head, Managed: managed, Sources: routes(0, 66),
					Pool: &Pool{Names: sets.New("shared", "shared-2"), Siblings: []Sibling{{Gateway: sib, Managed: sibManaged}}}}
			},
			per:    map[string]int{"shared": 63, "shared-2": 3},
			landed: map[string]string{"r0000": "shared-2", "r0001": "shared", "r0063": "shared", "r0064": "shared-2", "r0065": "shared-2"},
		},
		"room a deleted fragment freed is taken by the next new one": {
			input: func() Input {
				all := routes(0, 70)
				kept := append(append([]rules.Source{}, all[:10]...), all[11:63]...) // r0010 deleted
				head, managed := carrying(poolHead(), nil, kept...)
				sib, sibManaged := carrying(sibling(2), sets.New[gwv1.SectionName]("http"), all[63:69]...)
				fragments := append(append([]rules.Source{}, kept...), all[63:]...)
				return Input{Gateway: head, Managed: managed, Sources: fragments,
					Pool: &Pool{Names: sets.New("shared", "shared-2"), Siblings: []Sibling{{Gateway: sib, Managed: sibManaged}}}}
			},
			per:    map[string]int{"shared": 63, "shared-2": 6},
			landed: map[string]string{"r0069": "shared", "r0063": "shared-2"},
		},
		"a tuple is taken once per pool": {
			input: func() Input {
				head, managed := carrying(poolHead(), nil, routes(0, 63)...)
				dup := fragment("blog", "dup", 100, entry("web", 443, gwv1.HTTPSProtocolType, "r0005.example.com"))
				return Input{Gateway: head, Managed: managed, Sources: append(routes(0, 63), dup), Pool: &Pool{Names: sets.New("shared")}}
			},
			per:     map[string]int{"shared": 63},
			reasons: map[string]string{"blog/dup/web": "HostnameConflict"},
		},
		"a sibling's name someone else took is skipped": {
			input: func() Input {
				return Input{Gateway: poolHead(), Managed: sets.New[gwv1.SectionName](), Sources: routes(0, 64), Pool: &Pool{Names: sets.New("shared", "shared-2")}}
			},
			per:    map[string]int{"shared": 63, "shared-3": 1},
			landed: map[string]string{"r0063": "shared-3"},
		},
		"a pool that may not grow says why": {
			input: func() Input {
				return Input{Gateway: poolHead(), Managed: sets.New[gwv1.SectionName](), Sources: routes(0, 64),
					Pool: &Pool{Names: sets.New("shared"), NoGrowth: "the API server refused to create Gateway infra/shared-2 (quota)"}}
			},
			per:     map[string]int{"shared": 63},
			reasons: map[string]string{"shop/r0063/web": "TooManyListeners: The 1 Gateways of the pool of infra/shared have no room for this ListenerFragment's 1 listeners, and the pool does not grow: the API server refused to create Gateway infra/shared-2 (quota)"},
		},
		"an unmarked Gateway still says TooManyListeners": {
			input: func() Input {
				gw := poolHead()
				gw.Annotations = nil
				return Input{Gateway: gw, Managed: sets.New[gwv1.SectionName](), Sources: routes(0, 64)}
			},
			per:     map[string]int{"shared": 63},
			reasons: map[string]string{"shop/r0063/web": `TooManyListeners: Gateway infra/shared has 64 of its 64 listeners taken and this ListenerFragment needs 1: use another Gateway, remove listeners, or ask its owner for a pool (annotation gatefold.dev/pool: "true")`},
		},
		"a folded fragment that grows past its Gateway's room keeps what it has": {
			input: func() Input {
				fs := routes(0, 63)
				head, managed := carrying(poolHead(), nil, fs...)
				fs[5].Listeners = append(fs[5].Listeners, entry("api", 443, gwv1.HTTPSProtocolType, "api.r0005.example.com"))
				fs[5].Generation = 2
				return Input{Gateway: head, Managed: managed, Sources: fs, Pool: &Pool{Names: sets.New("shared")}}
			},
			per:     map[string]int{"shared": 63},
			landed:  map[string]string{"r0005": "shared"},
			reasons: map[string]string{"shop/r0005/api": "TooManyListeners: Gateway infra/shared, which carries this ListenerFragment's other listeners, has no room for 1 more and a folded ListenerFragment never moves: put them in a new ListenerFragment, or free room there"},
		},
		"when the head's own listeners grow, the youngest fragments of a full Gateway move, not the oldest": {
			input: func() Input {
				fs := routes(0, 126)
				head, managed := carrying(poolHead(), nil, fs[:63]...)
				head.Spec.Listeners = append(head.Spec.Listeners, own("metrics", 9090, gwv1.HTTPProtocolType, ""))
				sib, sibManaged := carrying(sibling(2), sets.New[gwv1.SectionName]("http"), fs[63:]...)
				return Input{Gateway: head, Managed: managed, Sources: fs,
					Pool: &Pool{Names: sets.New("shared", "shared-2"), Siblings: []Sibling{{Gateway: sib, Managed: sibManaged}}}}
			},
			per:    map[string]int{"shared": 62, "shared-2": 62, "shared-3": 2},
			landed: map[string]string{"r0000": "shared", "r0061": "shared", "r0062": "shared-3", "r0063": "shared-2", "r0124": "shared-2", "r0125": "shared-3"},
		},
		"a fragment left out (refused) frees its room for a new one": {
			input: func() Input {
				fs := routes(0, 63)
				head, managed := carrying(poolHead(), nil, fs...)
				return Input{Gateway: head, Managed: managed, Sources: append(fs, routes(100, 1)...), Pool: &Pool{Names: sets.New("shared")},
					Rejected: map[rules.SourceRef]string{fragmentKey("shop", "r0005"): "refused"}}
			},
			per:    map[string]int{"shared": 63},
			landed: map[string]string{"r0100": "shared"},
		},
		"a fragment too big for any Gateway of the pool is told to split": {
			input: func() Input {
				var ls []gwv1.ListenerEntry
				for i := range 64 {
					ls = append(ls, entry(fmt.Sprintf("l%d", i), 443, gwv1.HTTPSProtocolType, fmt.Sprintf("h%d.example.com", i)))
				}
				return Input{Gateway: poolHead(), Managed: sets.New[gwv1.SectionName](), Sources: []rules.Source{fragment("shop", "big", 0, ls...)}, Pool: &Pool{Names: sets.New("shared")}}
			},
			per:     map[string]int{"shared": 0},
			reasons: map[string]string{"shop/big": "TooManyListeners: This ListenerFragment needs 64 listeners, and a Gateway of the pool of infra/shared holds at most 63 besides the head's 1 own: split it into ListenerFragments of at most 63"},
		},
		"a full pool head's ListenerSet lands on the Gateway of its ListenerSets": {
			input: func() Input {
				head, managed := carrying(poolHead(), nil, routes(0, 63)...)
				ls := listenerSet("shop", "set", 100, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com"))
				return Input{Gateway: head, Managed: managed, Sources: append(routes(0, 63), ls), Pool: &Pool{Names: sets.New("shared")}}
			},
			per:    map[string]int{"shared": 63, "shared-listenersets": 1},
			landed: map[string]string{"set": "shared-listenersets"},
		},
		"a ListenerSet never lands on the Gateway it names, nor a fragment on the Gateway of the ListenerSets": {
			input: func() Input {
				return Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName](), Sources: []rules.Source{
					listenerSet("shop", "set", 0, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com")),
					fragment("shop", "frag", 1, entry("web", 443, gwv1.HTTPSProtocolType, "frag.example.com")),
				}}
			},
			per:    map[string]int{"shared": 1, "shared-listenersets": 1},
			landed: map[string]string{"set": "shared-listenersets", "frag": "shared"},
		},
		"tuples are unique across the Gateway, its siblings and the Gateway of its ListenerSets": {
			input: func() Input {
				old := fragment("shop", "old", 0, entry("web", 443, gwv1.HTTPSProtocolType, "a.example.com"))
				first := listenerSet("shop", "first", 1, entry("web", 443, gwv1.HTTPSProtocolType, "b.example.com"))
				sib, managed := carrying(sibling(2), nil, old)
				return Input{Gateway: poolHead(), Managed: sets.New[gwv1.SectionName](), Sources: []rules.Source{
					old, first,
					listenerSet("shop", "set", 2, entry("web", 443, gwv1.HTTPSProtocolType, "a.example.com")),
					listenerSet("shop", "own", 3, entry("http", 80, gwv1.HTTPProtocolType, "")),
					fragment("shop", "young", 4, entry("web", 443, gwv1.HTTPSProtocolType, "b.example.com")),
				}, Pool: &Pool{Names: sets.New("shared", sib.Name), Siblings: []Sibling{{Gateway: sib, Managed: managed}}}}
			},
			per:    map[string]int{"shared": 0, "shared-2": 1, "shared-listenersets": 1},
			landed: map[string]string{"old": "shared-2", "first": "shared-listenersets"},
			reasons: map[string]string{
				"ListenerSet shop/set/web": "HostnameConflict", "ListenerSet shop/own/http": "HostnameConflict", "shop/young/web": "HostnameConflict",
			},
		},
		"the Gateway of the ListenerSets holds 64 of theirs, whatever the Gateway's own": {
			input: func() Input {
				var ls []gwv1.ListenerEntry
				for i := range 64 {
					ls = append(ls, entry(fmt.Sprintf("l%d", i), 443, gwv1.HTTPSProtocolType, fmt.Sprintf("h%d.example.com", i)))
				}
				return Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName](), Sources: []rules.Source{
					listenerSet("shop", "big", 0, ls...),
					listenerSet("shop", "more", 1, entry("web", 443, gwv1.HTTPSProtocolType, "more.example.com")),
					fragment("shop", "frag", 2, entry("web", 443, gwv1.HTTPSProtocolType, "frag.example.com")),
				}}
			},
			per:    map[string]int{"shared": 1, "shared-listenersets": 64},
			landed: map[string]string{"big": "shared-listenersets", "frag": "shared"},
			reasons: map[string]string{"ListenerSet shop/more/web": "TooManyListeners: Gateway infra/shared-listenersets has 64 of its 64 listeners taken and this ListenerSet needs 1: " +
				"use another Gateway, or remove listeners"},
		},
		"a ListenerSet's listener an older gatefold folded into the Gateway moves to the Gateway of the ListenerSets": {
			input: func() Input {
				set := listenerSet("shop", "set", 0, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com"))
				gw, managed := carrying(gateway(gwv1.NamespacesFromAll), nil, set)
				return Input{Gateway: gw, Managed: managed, Sources: []rules.Source{set}}
			},
			per:    map[string]int{"shared": 0, "shared-listenersets": 1},
			landed: map[string]string{"set": "shared-listenersets"},
		},
		"the Gateway of the ListenerSets is emptied once none is left": {
			input: func() Input {
				gone := listenerSet("shop", "gone", 0, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com"))
				return Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName](),
					ListenerSetGateway: setGateway(gone), Sources: []rules.Source{fragment("shop", "frag", 1, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com"))}}
			},
			per:    map[string]int{"shared": 1, "shared-listenersets": 0},
			landed: map[string]string{"frag": "shared"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := tc.input()
			r := Fold(in)
			checkInvariants(t, in, r)
			if diff := cmp.Diff(tc.per, perGateway(r)); diff != "" {
				t.Errorf("Listeners per Gateway (-want +got):\n%s", diff)
			}
			got := landing(r)
			for f, gw := range tc.landed {
				if got[f] != gw {
					t.Errorf("%s landed on %q, want %q", f, got[f], gw)
				}
			}
			for i, line := range outcomes(r) {
				key, reason, _ := strings.Cut(line, ": ")
				want, listed := tc.reasons[key]
				if src := key[:strings.LastIndex(key, "/")]; !listed {
					want, listed = tc.reasons[src] // one for all its listeners
				}
				got := reason + ": " + r.Outcomes[i].Message
				switch {
				case !listed && reason != "Accepted":
					t.Errorf("Unexpected outcome %s", got)
				case listed && want != reason && want != got:
					t.Errorf("%s:\n got %s\nwant %s", key, got, want)
				}
			}
		})
	}
}

// TestPoolStatusNamesTheLandedGateway: a route controller reads where each
// listener landed from the fragment's status.
func TestPoolStatusNamesTheLandedGateway(t *testing.T) {
	in := Input{Gateway: poolHead(), Managed: sets.New[gwv1.SectionName](), Pool: &Pool{Names: sets.New("shared")}, Sources: routes(0, 64)}
	r := Fold(in)
	st := r.Statuses[fragmentKey("shop", "r0063")]
	if len(st.Listeners) != 1 || st.Listeners[0].Gateway == nil {
		t.Fatalf("No Gateway in the status: %+v", st)
	}
	want := v1alpha1.GatewayListenerReference{Namespace: "infra", Name: "shared-2", ListenerName: rules.GatewayListenerName(in.Sources[63].Ref(), "web")}
	if diff := cmp.Diff(want, *st.Listeners[0].Gateway); diff != "" {
		t.Errorf("Landed Gateway (-want +got):\n%s", diff)
	}
	if c := meta.FindStatusCondition(st.Conditions, string(v1alpha1.FragmentConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "infra/shared-2") {
		t.Errorf("Accepted = %+v, want True naming infra/shared-2", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, string(v1alpha1.FragmentConditionProgrammed)); c == nil || c.Reason != string(v1alpha1.FragmentReasonPending) {
		t.Errorf("Programmed = %+v, want Pending until the new Gateway's implementation reports", c)
	}
}

// TestPoolSiblingIsNoParent: a fragment that names a sibling is told to
// name the head, and nothing folds into the sibling.
func TestPoolSiblingIsNoParent(t *testing.T) {
	in := Input{Gateway: sibling(2), Managed: sets.New[gwv1.SectionName](), Sources: routes(0, 1),
		Head: &types.NamespacedName{Namespace: "infra", Name: "shared"}}
	r := Fold(in)
	checkInvariants(t, in, r)
	c := meta.FindStatusCondition(r.Statuses[fragmentKey("shop", "r0000")].Conditions, string(v1alpha1.FragmentConditionAccepted))
	if c == nil || c.Reason != string(v1alpha1.FragmentReasonNotAllowed) || !strings.Contains(c.Message, "set spec.parentRef.name to shared") {
		t.Errorf("Accepted = %+v, want NotAllowed telling to name shared", c)
	}

	// A namespace the pool does not admit learns nothing of the pool.
	in.Gateway = sibling(2)
	same := gwv1.NamespacesFromSame
	in.Gateway.Spec.AllowedListeners.Namespaces.From = &same
	r = Fold(in)
	c = meta.FindStatusCondition(r.Statuses[fragmentKey("shop", "r0000")].Conditions, string(v1alpha1.FragmentConditionAccepted))
	if c == nil || c.Reason != string(v1alpha1.FragmentReasonNotAllowed) || strings.Contains(c.Message, "pool") || !strings.Contains(c.Message, "does not allow listeners from namespace shop") {
		t.Errorf("Accepted = %+v, want NotAllowed that names no pool", c)
	}
}

// TestListenerSetsWaitWhileTheirGatewayIsNotGatefolds: a Gateway that
// gatefold did not create holds the name of the Gateway of the ListenerSets:
// it is never taken over, and the ListenerSets say why they are not folded.
func TestListenerSetsWaitWhileTheirGatewayIsNotGatefolds(t *testing.T) {
	taken := gateway(gwv1.NamespacesFromAll)
	taken.Name = rules.ListenerSetGatewayName(taken.Name)
	in := Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName](),
		ListenerSetGatewayBlocked: rules.ListenerSetGatewayBlocked(gateway(gwv1.NamespacesFromAll), taken),
		Sources: []rules.Source{
			listenerSet("shop", "set", 0, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com")),
			fragment("shop", "frag", 1, entry("web", 443, gwv1.HTTPSProtocolType, "frag.example.com")),
		}}
	r := Fold(in)
	checkInvariants(t, in, r)
	if r.ListenerSetGateway != nil {
		t.Errorf("The fold wants Gateway %s, whose name another Gateway holds", r.ListenerSetGateway.Name)
	}
	set := rules.SourceRef{Kind: rules.KindListenerSet, NamespacedName: types.NamespacedName{Namespace: "shop", Name: "set"}}
	c := meta.FindStatusCondition(r.Statuses[set].Conditions, string(v1alpha1.FragmentConditionAccepted))
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "Gateway infra/shared-listenersets, where gatefold folds this ListenerSet, is not gatefold's: its owner must rename or delete it") {
		t.Errorf("ListenerSet Accepted = %+v, want False naming infra/shared-listenersets and what to do", c)
	}
	if got := accepted(r, "shop", "frag"); got != "True/Accepted" {
		t.Errorf("Fragment Accepted = %s, want True/Accepted", got)
	}
}

// A ListenerSet on the Gateway of the ListenerSets is served only where that
// Gateway is: not programmed, or at another address than its parent, the
// ListenerSet is not Programmed, and says why.
func TestListenerSetsAreNotProgrammedWhereTheirGatewayIsNot(t *testing.T) {
	addresses := func(values ...string) []gwv1.GatewayStatusAddress {
		var out []gwv1.GatewayStatusAddress
		for _, v := range values {
			out = append(out, gwv1.GatewayStatusAddress{Type: ptr.To(gwv1.IPAddressType), Value: v})
		}
		return out
	}
	tests := map[string]struct {
		parent, sets []gwv1.GatewayStatusAddress
		programmed   *metav1.Condition
		want         string // Programmed status/reason: message
	}{
		"one address":                      {parent: addresses("10.0.0.1"), sets: addresses("10.0.0.1"), want: "Unknown/Pending"},
		"no address yet":                   {parent: addresses("10.0.0.1"), want: "Unknown/Pending"},
		"addresses both, in another order": {parent: addresses("10.0.0.1", "fd00::1"), sets: addresses("fd00::1", "10.0.0.1"), want: "Unknown/Pending"},
		"another address": {parent: addresses("10.0.0.1"), sets: addresses("10.0.0.2"),
			want: "False/AddressNotUsable: Gateway infra/shared-listenersets, which carries this ListenerSet, is at 10.0.0.2, Gateway infra/shared at 10.0.0.1: its class must give both one address"},
		"not programmed": {programmed: &metav1.Condition{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "AddressNotAssigned", Message: "no address free", ObservedGeneration: 1},
			want: "False/AddressNotAssigned: Gateway infra/shared-listenersets, which carries this ListenerSet, is not programmed: no address free"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := listenerSet("shop", "set", 0, entry("web", 443, gwv1.HTTPSProtocolType, "set.example.com"))
			in := Input{Gateway: gateway(gwv1.NamespacesFromAll, own("http", 80, gwv1.HTTPProtocolType, "")), Managed: sets.New[gwv1.SectionName](),
				ListenerSetGateway: setGateway(set), Sources: []rules.Source{set}}
			in.Gateway.Status.Addresses = tc.parent
			gw := in.ListenerSetGateway.Gateway
			gw.Generation, gw.Status.Addresses = 1, tc.sets
			if tc.programmed != nil {
				gw.Status.Conditions = []metav1.Condition{*tc.programmed}
			}
			r := Fold(in)
			c := meta.FindStatusCondition(r.Statuses[set.Ref()].Conditions, "Programmed")
			got := string(c.Status) + "/" + c.Reason
			if c.Status == metav1.ConditionFalse {
				got += ": " + c.Message
			}
			if got != tc.want {
				t.Errorf("Programmed = %s, want %s", got, tc.want)
			}
		})
	}
}
