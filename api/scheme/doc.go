// Package scheme builds the one runtime.Scheme every gatefold component and
// test shares: Kubernetes built-in types, the Gateway API and gatefold.dev.
// It imports api/v1alpha1 and client-go's scheme; it holds no other state.
package scheme
