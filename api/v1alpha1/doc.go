// Package v1alpha1 is the gatefold.dev/v1alpha1 API, the first stage of the
// data path (api → rules → claims → webhook; fold → merger): the
// ListenerFragment a route controller writes, its condition types and reasons,
// and ListenerName, which a route controller imports to address its listener
// on the Gateway before any status exists.
//
// It imports apimachinery and the Gateway API types only, never a client, so
// that route controllers can import it cheaply.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=gatefold.dev
package v1alpha1
