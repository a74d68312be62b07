// Package v1alpha1 holds the gatefold.dev/v1alpha1 API: the ListenerFragment
// a route controller writes, and the listener-naming function it imports to
// address its listeners on the Gateway. It owns types only, never clients.
//
// +kubebuilder:object:generate=true
// +groupName=gatefold.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "gatefold.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this API's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this API's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
