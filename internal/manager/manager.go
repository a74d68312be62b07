// Package manager holds the controller-runtime manager options every gatefold
// replica is built with: the scheme, what the informer cache holds and how the
// client reads it. `gatefold manager` and the tests that run gatefold as
// installed both build their managers from Options, so a test sees the cache
// and the rights a replica needs in a cluster. It holds no flags and starts
// nothing.
package manager

import (
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
)

// Options returns the scheme, cache and client options of a gatefold
// manager; the caller adds its addresses, webhook server and leader election.
//
// The cache holds only what gatefold reads, without managedFields, except on
// Gateways: the merger and the Gateway webhook read which listeners gatefold
// applied from the Gateway's managedFields. Claims are not cached: the claim
// store reads and writes them with a client of its own, so no replica needs
// to list Leases outside gatefold's namespace.
func Options() ctrl.Options {
	return ctrl.Options{
		Scheme: scheme.New(),
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&gwv1.Gateway{}: {Transform: keep},
			},
		},
		// After a write, the next fold reads what it wrote, not a stale cache
		// that would make it write the same thing again.
		Client: client.Options{Cache: &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}},
	}
}

// keep caches an object as the API server sent it.
func keep(obj any) (any, error) { return obj, nil }
