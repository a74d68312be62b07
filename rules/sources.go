package rules

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// Listeners come from two kinds of source: gatefold's ListenerFragments, and
// upstream ListenerSets of the GatewayClasses a user opts in. Their specs have
// one shape (a parentRef and ListenerEntries), so a ListenerSet is read as a
// ListenerFragment whose TypeMeta says ListenerSet, and every rule applies to
// both alike: one precedence, one board, one grant check.

// Kinds of listener source.
const (
	KindListenerFragment = "ListenerFragment"
	KindListenerSet      = "ListenerSet"
)

// FeatureListenerSet is the name a GatewayClass lists in
// status.supportedFeatures when its implementation supports ListenerSets.
const FeatureListenerSet gwv1.FeatureName = "ListenerSet"

// KindOf returns the kind of source lf stands for. Objects read from the
// API carry no TypeMeta: those are ListenerFragments.
func KindOf(lf *v1alpha1.ListenerFragment) string {
	if lf.Kind == KindListenerSet && lf.APIVersion == APIVersionOf(KindListenerSet) {
		return KindListenerSet
	}
	return KindListenerFragment
}

// GroupOfKind returns the API group of a kind of source.
func GroupOfKind(kind string) string {
	if kind == KindListenerSet {
		return gwv1.GroupName
	}
	return v1alpha1.GroupVersion.Group
}

// APIVersionOf returns the apiVersion of a kind of source.
func APIVersionOf(kind string) string {
	if kind == KindListenerSet {
		return gwv1.GroupVersion.String()
	}
	return v1alpha1.GroupVersion.String()
}

// SourceRef names one source of listeners.
type SourceRef struct {
	Kind string
	types.NamespacedName
}

// RefOf returns the name of the source lf stands for.
func RefOf(lf *v1alpha1.ListenerFragment) SourceRef {
	return SourceRef{Kind: KindOf(lf), NamespacedName: types.NamespacedName{Namespace: lf.Namespace, Name: lf.Name}}
}

// String is the kind and namespace/name, as a user would look it up.
func (s SourceRef) String() string { return s.Kind + " " + s.NamespacedName.String() }

// SelectsGateway says whether a ListenerSet's parentRef selects a Gateway:
// its CRD, unlike a fragment's, lets the group and kind name anything.
func SelectsGateway(ref gwv1.ParentGatewayReference) bool {
	return (ref.Group == nil || *ref.Group == gwv1.GroupName) && (ref.Kind == nil || *ref.Kind == "Gateway")
}

// FromListenerSet returns the ListenerSet as the rules read it: a
// ListenerFragment of kind ListenerSet with the same metadata, parentRef,
// listeners and status.
func FromListenerSet(ls *gwv1.ListenerSet) v1alpha1.ListenerFragment {
	ls = ls.DeepCopy()
	return v1alpha1.ListenerFragment{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: KindListenerSet},
		ObjectMeta: ls.ObjectMeta,
		Spec:       v1alpha1.ListenerFragmentSpec{ParentRef: ls.Spec.ParentRef, Listeners: ls.Spec.Listeners},
		Status:     FromListenerSetStatus(ls.Status),
	}
}

// FromListenerSets returns each ListenerSet as the rules read it.
func FromListenerSets(items []gwv1.ListenerSet) []v1alpha1.ListenerFragment {
	out := make([]v1alpha1.ListenerFragment, 0, len(items))
	for i := range items {
		out = append(out, FromListenerSet(&items[i]))
	}
	return out
}

// FromListenerSetStatus returns a ListenerSet's status in a fragment's shape.
func FromListenerSetStatus(st gwv1.ListenerSetStatus) v1alpha1.ListenerFragmentStatus {
	out := v1alpha1.ListenerFragmentStatus{Conditions: st.Conditions}
	for _, l := range st.Listeners {
		out.Listeners = append(out.Listeners, v1alpha1.ListenerStatus{
			Name: l.Name, SupportedKinds: l.SupportedKinds, AttachedRoutes: l.AttachedRoutes, Conditions: l.Conditions,
		})
	}
	return out
}

// ToListenerSetStatus returns a status of a fragment's shape as a
// ListenerSet's, which has no field for the Gateway listener each listener
// landed on: its Accepted condition's message names it.
func ToListenerSetStatus(st v1alpha1.ListenerFragmentStatus) gwv1.ListenerSetStatus {
	out := gwv1.ListenerSetStatus{Conditions: st.Conditions}
	for _, l := range st.Listeners {
		out.Listeners = append(out.Listeners, gwv1.ListenerEntryStatus{
			Name: l.Name, SupportedKinds: l.SupportedKinds, AttachedRoutes: l.AttachedRoutes, Conditions: l.Conditions,
		})
	}
	return out
}

// GatewayListenerName returns the name listener `listener` of lf gets on the
// Gateway. The names of the two kinds never collide: a ListenerSet's carry
// the kind (see v1alpha1.ListenerSetListenerName).
func GatewayListenerName(lf *v1alpha1.ListenerFragment, listener gwv1.SectionName) gwv1.SectionName {
	if KindOf(lf) == KindListenerSet {
		return v1alpha1.ListenerSetListenerName(lf.Namespace, lf.Name, listener)
	}
	return v1alpha1.ListenerName(lf.Namespace, lf.Name, listener)
}

// HolderOf returns listener l of lf as a holder of its tuple.
func HolderOf(lf *v1alpha1.ListenerFragment, l gwv1.ListenerEntry) Holder {
	return Holder{Kind: KindOf(lf), Namespace: lf.Namespace, Fragment: lf.Name, Listener: l.Name, Entry: EntryOf(l.Port, l.Protocol, l.Hostname)}
}

// ListenerSetsFolded says whether gatefold folds the ListenerSets of
// Gateways of class gc: only when the user opted in the class's
// controllerName (controllers), and never when the implementation supports
// ListenerSets itself.
func ListenerSetsFolded(gc *gwv1.GatewayClass, controllers sets.Set[string]) bool {
	return gc != nil && controllers.Has(string(gc.Spec.ControllerName)) && !SupportsListenerSets(gc)
}

// SupportsListenerSets says whether gc's implementation supports ListenerSets
// itself: its status.supportedFeatures lists ListenerSet.
func SupportsListenerSets(gc *gwv1.GatewayClass) bool {
	return slices.ContainsFunc(gc.Status.SupportedFeatures, func(f gwv1.SupportedFeature) bool { return f.Name == FeatureListenerSet })
}

// ListenerFolded says whether lf's status, written for its current
// generation, reports its listener `listener` folded into a Gateway.
func ListenerFolded(lf *v1alpha1.ListenerFragment, listener gwv1.SectionName) bool {
	for _, l := range lf.Status.Listeners {
		if l.Name != listener {
			continue
		}
		c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionAccepted))
		return l.Gateway != nil && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == lf.Generation
	}
	return false
}
