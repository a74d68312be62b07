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

// Kinds of listener source.
const (
	KindListenerFragment = "ListenerFragment"
	KindListenerSet      = "ListenerSet"
)

// FeatureListenerSet is the name a GatewayClass lists in
// status.supportedFeatures when its implementation supports ListenerSets.
const FeatureListenerSet gwv1.FeatureName = "ListenerSet"

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

// FragmentRef returns the name of fragment lf.
func FragmentRef(lf *v1alpha1.ListenerFragment) SourceRef {
	return SourceRef{Kind: KindListenerFragment, NamespacedName: types.NamespacedName{Namespace: lf.Namespace, Name: lf.Name}}
}

// String is the kind and namespace/name, as a user would look it up.
func (s SourceRef) String() string { return s.Kind + " " + s.NamespacedName.String() }

// SelectsGateway says whether a ListenerSet's parentRef selects a Gateway:
// its CRD, unlike a fragment's, lets the group and kind name anything.
func SelectsGateway(ref gwv1.ParentGatewayReference) bool {
	return (ref.Group == nil || *ref.Group == gwv1.GroupName) && (ref.Kind == nil || *ref.Kind == "Gateway")
}

// Source is a source of listeners: a ListenerFragment or a ListenerSet.
// Their specs have one shape, so every rule applies to both alike: one
// precedence, one board, one grant check.
type Source struct {
	// Kind is KindListenerFragment or KindListenerSet.
	Kind string
	metav1.ObjectMeta
	ParentRef gwv1.ParentGatewayReference
	Listeners []gwv1.ListenerEntry
	// Status is in a fragment's shape (FromListenerSetStatus).
	Status v1alpha1.ListenerFragmentStatus
}

// FromFragment returns fragment lf as a source; it shares lf's slices and
// maps.
func FromFragment(lf *v1alpha1.ListenerFragment) Source {
	return Source{Kind: KindListenerFragment, ObjectMeta: lf.ObjectMeta, ParentRef: lf.Spec.ParentRef, Listeners: lf.Spec.Listeners, Status: lf.Status}
}

// FromFragments returns each fragment as a source.
func FromFragments(items []v1alpha1.ListenerFragment) []Source {
	out := make([]Source, 0, len(items))
	for i := range items {
		out = append(out, FromFragment(&items[i]))
	}
	return out
}

// FromListenerSet returns a deep copy of ListenerSet ls as a source.
func FromListenerSet(ls *gwv1.ListenerSet) Source {
	ls = ls.DeepCopy()
	return Source{Kind: KindListenerSet, ObjectMeta: ls.ObjectMeta, ParentRef: ls.Spec.ParentRef, Listeners: ls.Spec.Listeners, Status: FromListenerSetStatus(ls.Status)}
}

// FromListenerSets returns each ListenerSet as a source.
func FromListenerSets(items []gwv1.ListenerSet) []Source {
	out := make([]Source, 0, len(items))
	for i := range items {
		out = append(out, FromListenerSet(&items[i]))
	}
	return out
}

// Ref returns the name of s.
func (s *Source) Ref() SourceRef {
	return SourceRef{Kind: s.Kind, NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}}
}

// Parent returns the Gateway s's parentRef names; the namespace defaults to
// its own.
func (s *Source) Parent() types.NamespacedName { return parentOf(s.Namespace, s.ParentRef) }

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

// GatewayListenerName returns the name listener `listener` of source src
// gets on the Gateway. The two kinds' names never collide.
func GatewayListenerName(src SourceRef, listener gwv1.SectionName) gwv1.SectionName {
	if src.Kind == KindListenerSet {
		return v1alpha1.ListenerSetListenerName(src.Namespace, src.Name, listener)
	}
	return v1alpha1.ListenerName(src.Namespace, src.Name, listener)
}

// HolderOf returns listener l of source src as a holder of its tuple.
func HolderOf(src SourceRef, l gwv1.ListenerEntry) Holder {
	return Holder{Kind: src.Kind, Namespace: src.Namespace, Fragment: src.Name, Listener: l.Name, Entry: EntryOf(l.Port, l.Protocol, l.Hostname)}
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
