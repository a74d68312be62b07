package rules

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// ParentIndex indexes ListenerFragments by "namespace/name" of their Gateway.
const ParentIndex = "gatefold.dev/parent-gateway"

// ParentOf returns the Gateway a fragment's parentRef names; the namespace
// defaults to the fragment's.
func ParentOf(lf *v1alpha1.ListenerFragment) types.NamespacedName {
	ns := lf.Namespace
	if lf.Spec.ParentRef.Namespace != nil && *lf.Spec.ParentRef.Namespace != "" {
		ns = string(*lf.Spec.ParentRef.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(lf.Spec.ParentRef.Name)}
}

// IndexFragmentParents registers ParentIndex, once for both the webhooks
// and the merger.
func IndexFragmentParents(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.ListenerFragment{}, ParentIndex, func(o client.Object) []string {
		return []string{ParentOf(o.(*v1alpha1.ListenerFragment)).String()}
	})
}
