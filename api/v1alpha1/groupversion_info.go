// Package v1alpha1 holds the gatefold.dev/v1alpha1 API: the ListenerFragment
// a route controller writes, and the listener-naming function it imports to
// address its listeners on the Gateway. It owns types only, never clients, so
// route controllers can import it with nothing but apimachinery behind it.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=gatefold.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "gatefold.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name generated code uses.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers this API's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ListenerFragment{}, &ListenerFragmentList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
