package fold

import (
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/webhook"
)

// FuzzAdmissionAndFoldAgree admits fragments one by one, in the fuzzer's
// order, as the validating webhook does (against the Gateway's own listeners,
// then against the tuples and ports that earlier admitted fragments claimed),
// and folds what was admitted with no Gateway change in between: no listener
// may come out Conflicted. A difference means a fragment the webhook let in
// that the fold then refuses, or the other way round.
func FuzzAdmissionAndFoldAgree(f *testing.F) {
	f.Add([]byte{0, 3, 1, 0, 0, 0, 0, 8, 1, 1, 1, 0, 0, 1, 2, 1, 1, 0, 0, 0})
	f.Add([]byte{0, 5, 1, 1, 0, 3, 2, 2, 0, 12, 1, 3, 0, 4, 1, 1, 4, 4, 4, 0, 1})
	f.Add([]byte{2, 9, 0, 0, 1, 1, 1, 3, 3, 0, 20, 3, 2, 2, 1, 0, 3, 1, 0, 2, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		if in.Gateway == nil {
			return
		}
		all := gwv1.NamespacesFromAll
		in.Gateway.Spec.AllowedListeners.Namespaces.From = &all
		gateway := gatewayKey(in.Gateway)
		claimed := rules.OwnBoard(rules.OwnListeners(in.Gateway, in.Managed, in.Sources))
		var admitted []rules.Source
		for i := range in.Sources {
			src := &in.Sources[i]
			lf := &v1alpha1.ListenerFragment{ObjectMeta: src.ObjectMeta, Spec: v1alpha1.ListenerFragmentSpec{ParentRef: src.ParentRef, Listeners: src.Listeners}}
			if errs := webhook.CheckAgainstBoard(lf, gateway, claimed); len(errs) > 0 {
				continue
			}
			admitted = append(admitted, *src)
			for _, l := range src.Listeners {
				claimed.Take(rules.Holder{Namespace: src.Namespace, Fragment: src.Name, Listener: l.Name, Entry: rules.EntryOf(l.Port, l.Protocol, l.Hostname)})
			}
		}
		in.Sources = admitted
		for _, o := range Fold(in).Outcomes {
			switch o.Reason {
			case gwv1.ListenerEntryReasonHostnameConflict, gwv1.ListenerEntryReasonProtocolConflict:
				t.Fatalf("Admitted listener %s/%s folded as %s: %s", o.Fragment, o.Listener, o.Reason, o.Message)
			}
		}
	})
}
