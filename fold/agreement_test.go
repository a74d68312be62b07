package fold

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

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

// FuzzRelatedSourcesAgree checks admission's shortcut on a pool's head: a
// board of the sources rules.RelatedSources finds answers every request
// listener as the board of all stored sources does, and counts the same
// own listeners.
func FuzzRelatedSourcesAgree(f *testing.F) {
	f.Add([]byte{0, 3, 1, 0, 0, 0, 0, 8, 1, 1, 1, 0, 0, 1, 2, 1, 1, 0, 0, 0}, []byte{1, 2, 3})
	f.Add([]byte{0, 5, 1, 1, 0, 3, 2, 2, 0, 12, 1, 3, 0, 4, 1, 1, 4, 4, 4, 0, 1}, []byte{3, 1, 0, 2, 7})
	f.Add([]byte{2, 9, 0, 0, 1, 1, 1, 3, 3, 0, 20, 3, 2, 2, 1, 0, 3, 1, 0, 2, 2, 2, 0}, []byte{0, 0, 0, 5})
	f.Fuzz(relatedAgree)
}

// TestRelatedSourcesAgree runs FuzzRelatedSourcesAgree's check on 3,000
// random worlds: the fuzzer's small inputs rarely chain conflicts.
func TestRelatedSourcesAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 50))
	for i := range 3000 {
		data, request := make([]byte, 200), make([]byte, 20)
		for _, b := range [][]byte{data, request} {
			for j := range b {
				b[j] = byte(r.IntN(256))
			}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { relatedAgree(t, data, request) })
	}
}

// relatedAgree is FuzzRelatedSourcesAgree's check of the world data
// makes, for a request request makes.
func relatedAgree(t *testing.T, data, request []byte) {
	in := fuzzInput(data)
	if in.Gateway == nil {
		return
	}
	next := byteReader(request)
	in.Gateway.Annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
	if next()%2 == 0 {
		// Two ports: chains of conflicts, where what a listener meets
		// depends on what blocked that one.
		for _, src := range in.Sources {
			for i := range src.Listeners {
				src.Listeners[i].Port = 80 + src.Listeners[i].Port%2*363
			}
		}
	}
	managed := in.Managed.Clone()
	for name := range in.Managed {
		if next()%3 == 0 {
			// Taken over by another field manager: own, unless a
			// source's listener has its name.
			managed.Delete(name)
		}
	}
	in.Gateway.ManagedFields = managedFieldsOf(managed)
	gateway := gatewayKey(in.Gateway)
	stored := rules.Stored{Gateway: in.Gateway, ListenerSets: listenerSetGatewayOf(&in), Claims: map[rules.Tuple]types.NamespacedName{}, Grants: map[string][]gwv1.ReferenceGrant{}}
	if stored.ListenerSets != nil && in.ListenerSetGateway != nil {
		stored.ListenerSets.ManagedFields = managedFieldsOf(in.ListenerSetGateway.Managed)
		if len(in.Sources) > 0 && next()%2 == 0 {
			// Added by someone under a source listener's name: not added,
			// since a source has that name.
			src := in.Sources[next()%len(in.Sources)]
			l := src.Listeners[next()%len(src.Listeners)]
			name := rules.GatewayListenerName(src.Ref(), l.Name)
			if !slices.ContainsFunc(stored.ListenerSets.Spec.Listeners, func(o gwv1.Listener) bool { return o.Name == name }) {
				stored.ListenerSets.Spec.Listeners = append(stored.ListenerSets.Spec.Listeners, gwv1.Listener{Name: name, Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: l.Hostname})
			}
		}
	}
	index := map[string][]rules.Source{}
	var seeds []rules.Source
	for _, src := range in.Sources {
		stored.Sources = append(stored.Sources, src)
		if src.Kind == rules.KindListenerSet {
			seeds = append(seeds, src)
			continue
		}
		for _, key := range rules.AdmissionKeys(gateway, &src) {
			index[key] = append(index[key], src)
		}
		for _, l := range src.Listeners {
			if next()%3 == 0 {
				stored.Claims[rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()] = src.Ref().NamespacedName
			}
		}
	}
	var entries []rules.Entry
	for range 1 + next()%3 {
		if len(in.Sources) > 0 && next()%2 == 0 {
			src := in.Sources[next()%len(in.Sources)]
			l := src.Listeners[next()%len(src.Listeners)]
			entries = append(entries, rules.EntryOf(l.Port, l.Protocol, l.Hostname))
			continue
		}
		entries = append(entries, rules.Entry{Port: gwv1.PortNumber(80 + next()%4*363), Protocol: []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType}[next()%4]})
	}
	if len(in.Sources) > 0 && next()%2 == 0 {
		stored.Skip = in.Sources[next()%len(in.Sources)].Ref()
	}
	related, err := rules.RelatedSources(in.Gateway, stored.ListenerSets, entries, seeds, func(key string) ([]rules.Source, error) { return index[key], nil })
	if err != nil {
		t.Fatal(err)
	}
	all, allOwn := rules.StoredBoard(stored)
	stored.Sources = related
	part, partOwn := rules.StoredBoard(stored)
	if diff := cmp.Diff(allOwn, partOwn); diff != "" {
		t.Fatalf("Own listeners differ with %d of %d sources (-all +related):\n%s", len(related), len(in.Sources), diff)
	}
	for _, e := range entries {
		if diff := cmp.Diff(all.Conflict(e), part.Conflict(e)); diff != "" {
			t.Fatalf("The conflict of %s differs with %d of %d sources (-all +related):\n%s", e, len(related), len(in.Sources), diff)
		}
	}
}

// managedFieldsOf is what the API server records of field manager gatefold
// applying listeners with the given names.
func managedFieldsOf(names sets.Set[gwv1.SectionName]) []metav1.ManagedFieldsEntry {
	listeners := map[string]any{}
	for name := range names {
		key, _ := json.Marshal(map[string]string{"name": string(name)})
		listeners["k:"+string(key)] = map[string]any{}
	}
	raw, _ := json.Marshal(map[string]any{"f:spec": map[string]any{"f:listeners": listeners}})
	return []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw))}}
}
