package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// ManagedListeners returns the names of the Gateway's listeners that
// v1alpha1.FieldManager applied, read from the Gateway's managedFields.
func ManagedListeners(gw *gwv1.Gateway) sets.Set[gwv1.SectionName] {
	names := sets.New[gwv1.SectionName]()
	for _, mf := range gw.ManagedFields {
		if mf.Manager != v1alpha1.FieldManager || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec struct {
				Listeners map[string]json.RawMessage `json:"f:listeners"`
			} `json:"f:spec"`
		}
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		for k := range fields.Spec.Listeners {
			var item struct {
				Name gwv1.SectionName `json:"name"`
			}
			if key, ok := strings.CutPrefix(k, "k:"); ok && json.Unmarshal([]byte(key), &item) == nil && item.Name != "" {
				names.Insert(item.Name)
			}
		}
	}
	return names
}

// StatusWritten says whether v1alpha1.FieldManager owns fields of the
// object's status, read from its managedFields: gatefold wrote it and has
// not released it.
func StatusWritten(managed []metav1.ManagedFieldsEntry) bool {
	return slices.ContainsFunc(managed, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == v1alpha1.FieldManager && mf.Subresource == "status"
	})
}

// SoleStatusWriter says whether no one but v1alpha1.FieldManager owns fields of
// the object's status, so that releasing gatefold's leaves no one's values half
// gone (a writer that updates owns only the fields it changed).
func SoleStatusWriter(managed []metav1.ManagedFieldsEntry) bool {
	return !slices.ContainsFunc(managed, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager != v1alpha1.FieldManager && mf.Subresource == "status"
	})
}

// OwnListeners returns the Gateway's own listeners: those that gatefold
// neither applied (managed) nor would name for one of the sources. A
// listener folded for a since-deleted source is therefore not "own", and
// neither is one a source is about to get. The sources' names are hashed
// only when a listener is not managed: a pool's sibling is asked on every
// fold, for thousands of sources.
func OwnListeners(gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], sources []Source) []gwv1.Listener {
	var generated sets.Set[gwv1.SectionName]
	var own []gwv1.Listener
	for _, l := range gw.Spec.Listeners {
		if managed.Has(l.Name) {
			continue
		}
		if generated == nil {
			generated = GeneratedNames(sources)
		}
		if !generated.Has(l.Name) {
			own = append(own, l)
		}
	}
	return own
}

// GeneratedNames are the Gateway listener names of the sources' listeners.
func GeneratedNames(sources []Source) sets.Set[gwv1.SectionName] {
	names := sets.New[gwv1.SectionName]()
	for i := range sources {
		ref := sources[i].Ref()
		for _, l := range sources[i].Listeners {
			names.Insert(GatewayListenerName(ref, l.Name))
		}
	}
	return names
}

// OwnBoard returns a board holding the Gateway's own listeners.
func OwnBoard(own []gwv1.Listener) *Board {
	b := NewBoard()
	for _, l := range own {
		b.Take(Holder{Listener: l.Name, Entry: EntryOf(l.Port, l.Protocol, l.Hostname)})
	}
	return b
}

// NamespaceAllowed applies the Gateway's spec.allowedListeners.namespaces to
// namespace ns, whose labels are nsLabels, and when it does not admit ns
// says what ns's owner can do about it. Only the Gateway's own namespace,
// whose owner the Gateway is, is told which rule refuses it; any other is
// told to ask the Gateway's owner, and learns nothing of the rule.
func NamespaceAllowed(gw *gwv1.Gateway, ns string, nsLabels map[string]string) (bool, string) {
	allowed, rule := namespaceAllowed(gw, ns, nsLabels)
	if allowed {
		return true, ""
	}
	if ns != gw.Namespace {
		return false, "ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway"
	}
	return false, fmt.Sprintf("allow it in spec.allowedListeners (%s), or choose another Gateway", rule)
}

// NotAllowedMessage tells a source in namespace ns that Gateway gateway does
// not admit it, and why (NamespaceAllowed's answer).
func NotAllowedMessage(gateway, ns, why string) string {
	return fmt.Sprintf("Gateway %s does not allow listeners from namespace %s: %s", gateway, ns, why)
}

// namespaceAllowed is NamespaceAllowed, saying which rule refuses ns.
func namespaceAllowed(gw *gwv1.Gateway, ns string, nsLabels map[string]string) (bool, string) {
	from := gwv1.NamespacesFromNone
	var selector *metav1.LabelSelector
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
		if al.Namespaces.From != nil {
			from = *al.Namespaces.From
		}
		selector = al.Namespaces.Selector
	}
	return fromAllowed(from, selector, gw.Namespace, ns, nsLabels)
}

// fromAllowed applies a namespaces rule (from, selector) of an object in
// namespace home to namespace ns, whose labels are nsLabels, and says which
// rule refuses ns: Same means home.
func fromAllowed(from gwv1.FromNamespaces, selector *metav1.LabelSelector, home, ns string, nsLabels map[string]string) (bool, string) {
	switch from {
	case gwv1.NamespacesFromAll:
		return true, ""
	case gwv1.NamespacesFromSame:
		return ns == home, "namespaces.from is Same"
	case gwv1.NamespacesFromSelector:
		if selector == nil {
			return false, "namespaces.from is Selector with no selector"
		}
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return false, fmt.Sprintf("namespaces.selector is invalid: %v", err)
		}
		return s.Matches(labels.Set(nsLabels)), "the namespace's labels do not match namespaces.selector"
	default:
		return false, "namespaces.from is None, the default"
	}
}
