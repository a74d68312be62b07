package merger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
)

func TestHeadSpecCarriesWhatTheTypesLack(t *testing.T) {
	own := fixture.Own("http", 80, gwv1.HTTPProtocolType, "")
	folded := fixture.Own("folded", 443, gwv1.HTTPSProtocolType, "a.example.com")
	head := fixture.PoolHead("ns", gwv1.NamespacesFromSame, own, folded)
	head.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr.To(gwv1.IPAddressType), Value: "10.0.0.1"}, {Type: ptr.To(gwv1.HostnameAddressType)}}
	head.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:listeners":{"k:{\"name\":\"folded\"}":{}}}}`)}}

	for name, tc := range map[string]struct {
		edit      func(spec map[string]any)
		typedOnly bool
		ownField  bool
	}{
		"only fields the types know": {edit: func(map[string]any) {}, typedOnly: true},
		"a field on the spec":        {edit: func(spec map[string]any) { spec["future"] = "x" }},
		"a field on an own listener": {edit: func(spec map[string]any) {
			spec["listeners"].([]any)[0].(map[string]any)["future"] = "x"
		}, ownField: true},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(head)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(raw["spec"].(map[string]any))
			s, err := newHeadSpec(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatal(err)
			}
			if s.typed != tc.typedOnly {
				t.Errorf("headSpec.typed = %v, want %v", s.typed, tc.typedOnly)
			}
			if got := len(s.rest["addresses"].([]any)); got != 1 {
				t.Errorf("The head's spec keeps %d addresses, want only the one without a value", got)
			}
			if _, ok := s.own["folded"]; ok || len(s.own) != 1 {
				t.Errorf("Own listeners are %v, want http alone: folded is gatefold's", sets.KeySet(s.own).UnsortedList())
			}
			stored, err := storedSpec(s, []gwv1.Listener{own}, []gwv1.Listener{folded}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			typed, err := typedOnly(siblingSpec(head, []gwv1.Listener{own, folded}), stored)
			if err != nil {
				t.Fatal(err)
			}
			if typed != tc.typedOnly {
				t.Errorf("typedOnly = %v, want %v", typed, tc.typedOnly)
			}
			if _, ok := stored["listeners"].([]any)[0].(map[string]any)["future"]; ok != tc.ownField {
				t.Errorf("The sibling's copy of the own listener has the unknown field: %v, want %v", ok, tc.ownField)
			}

			// A Gateway with no listener left (a bisect's dry run) is typed.
			if typed, err := typedOnly(gwv1.GatewaySpec{GatewayClassName: "c"}, map[string]any{"gatewayClassName": "c", "listeners": []any(nil)}); err != nil || !typed {
				t.Errorf("typedOnly of an empty listener list = %v, %v; want true", typed, err)
			}

			// The copy of an own listener the fold sees otherwise is the fold's.
			changed := own
			changed.Port = 8080
			stored, err = storedSpec(s, []gwv1.Listener{changed}, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if l := stored["listeners"].([]any)[0].(map[string]any); l["port"] != int64(8080) || l["future"] != nil {
				t.Errorf("The own listener the fold changed is %v, want the fold's, port 8080", l)
			}
		})
	}
}

func TestHeadSpecDigestFollowsTheStoredSpec(t *testing.T) {
	head := fixture.PoolHead("ns", gwv1.NamespacesFromSame, fixture.Own("http", 80, gwv1.HTTPProtocolType, ""))
	digest := func(edit func(map[string]any)) string {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(head)
		if err != nil {
			t.Fatal(err)
		}
		edit(raw["spec"].(map[string]any))
		s, err := newHeadSpec(&unstructured.Unstructured{Object: raw})
		if err != nil {
			t.Fatal(err)
		}
		return s.digest
	}
	plain := digest(func(map[string]any) {})
	if again := digest(func(map[string]any) {}); again != plain {
		t.Errorf("The same spec gave digests %s and %s", plain, again)
	}
	for name, edit := range map[string]func(map[string]any){
		"an unknown field":           func(s map[string]any) { s["future"] = "x" },
		"an own listener's field":    func(s map[string]any) { s["listeners"].([]any)[0].(map[string]any)["future"] = "x" },
		"the class":                  func(s map[string]any) { s["gatewayClassName"] = "other" },
		"an address without a value": func(s map[string]any) { s["addresses"] = []any{map[string]any{"type": "IPAddress"}} },
	} {
		if got := digest(edit); got == plain {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	if got := digest(func(s map[string]any) {
		s["addresses"] = []any{map[string]any{"type": "IPAddress", "value": "10.0.0.1"}}
	}); got != plain {
		t.Errorf("An address with a value, which siblings do not copy, changed the digest")
	}
}
