package fold

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/webhook"
)

// FuzzAdmissionAndFoldAgree stores the ListenerSets unchecked, as the API
// server does (no webhook, no claim), then admits the fragments one by one,
// in the fuzzer's order, as the validating webhook does: against what is
// stored (rules.StoredBoard, which reads the Gateway of the ListenerSets as
// the merger does: listeners someone added there, or why none folds), then
// against the tuples and ports that earlier admitted fragments claimed. It
// folds what was stored, with those claims and no Gateway change in between:
// no admitted fragment's listener may come out Conflicted. A difference
// means a fragment the webhook let in that the fold then refuses.
func FuzzAdmissionAndFoldAgree(f *testing.F) {
	f.Add([]byte{0, 3, 1, 0, 0, 0, 0, 8, 1, 1, 1, 0, 0, 1, 2, 1, 1, 0, 0, 0})
	f.Add([]byte{0, 5, 1, 1, 0, 3, 2, 2, 0, 12, 1, 3, 0, 4, 1, 1, 4, 4, 4, 0, 1})
	f.Add([]byte{2, 9, 0, 0, 1, 1, 1, 3, 3, 0, 20, 3, 2, 2, 1, 0, 3, 1, 0, 2, 2, 2, 0})
	// A ListenerSet was admitted as a fragment against a board without the
	// listener someone added to the Gateway of the ListenerSets.
	f.Add([]byte("0\x02000020000000"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		if in.Gateway == nil {
			return
		}
		all := gwv1.NamespacesFromAll
		in.Gateway.Spec.AllowedListeners.Namespaces.From = &all
		gateway := gatewayKey(in.Gateway)
		stored := rules.Stored{Gateway: in.Gateway, ListenerSets: listenerSetGatewayOf(&in)}
		var fragments []rules.Source
		for _, src := range in.Sources {
			if src.Kind == rules.KindListenerSet {
				stored.Sources = append(stored.Sources, src)
			} else {
				fragments = append(fragments, src)
			}
		}
		claimed := rules.NewBoard()
		in.Claims = map[rules.Tuple]types.NamespacedName{}
		for i := range fragments {
			src := &fragments[i]
			lf := &v1alpha1.ListenerFragment{ObjectMeta: src.ObjectMeta, Spec: v1alpha1.ListenerFragmentSpec{ParentRef: src.ParentRef, Listeners: src.Listeners}}
			stored.Claims, stored.Skip = in.Claims, src.Ref()
			base, _ := rules.StoredBoard(stored)
			if errs := webhook.CheckAgainstBoard(lf, gateway, base); len(errs) > 0 {
				continue
			}
			if errs := webhook.CheckAgainstBoard(lf, gateway, claimed); len(errs) > 0 {
				continue
			}
			stored.Sources = append(stored.Sources, *src)
			for _, l := range src.Listeners {
				claimed.Take(rules.HolderOf(src.Ref(), l))
				in.Claims[rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()] = src.Ref().NamespacedName
			}
		}
		in.Sources = stored.Sources
		for _, o := range Fold(in).Outcomes {
			if o.Fragment.Kind != rules.KindListenerFragment {
				continue
			}
			switch o.Reason {
			case gwv1.ListenerEntryReasonHostnameConflict, gwv1.ListenerEntryReasonProtocolConflict:
				t.Fatalf("Admitted listener %s/%s folded as %s: %s", o.Fragment, o.Listener, o.Reason, o.Message)
			}
		}
	})
}

// listenerSetGatewayOf is the Gateway of in's ListenerSets as admission
// reads it: gatefold's for in.Gateway when the fold has one, one gatefold
// did not create when the fold is told it cannot have one.
func listenerSetGatewayOf(in *Input) *gwv1.Gateway {
	name := rules.ListenerSetGatewayName(in.Gateway.Name)
	switch {
	case in.ListenerSetGateway != nil:
		gw := in.ListenerSetGateway.Gateway.DeepCopy()
		gw.Labels = map[string]string{v1alpha1.PoolLabel: rules.PoolLabelValue(in.Gateway.Name)}
		gw.OwnerReferences = []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: in.Gateway.Name, UID: in.Gateway.UID, Controller: ptr.To(true)}}
		return gw
	case in.ListenerSetGatewayBlocked != "":
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: in.Gateway.Namespace, Name: name}}
	}
	return nil
}
