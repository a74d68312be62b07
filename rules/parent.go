package rules

import (
	"cmp"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// ParentIndex indexes ListenerFragments by "namespace/name" of their Gateway.
const ParentIndex = "gatefold.dev/parent-gateway"

// ParentOf returns the Gateway a fragment's (or ListenerSet's) parentRef
// names; the namespace defaults to its own.
func ParentOf(lf *v1alpha1.ListenerFragment) types.NamespacedName {
	ns := lf.Namespace
	if lf.Spec.ParentRef.Namespace != nil && *lf.Spec.ParentRef.Namespace != "" {
		ns = string(*lf.Spec.ParentRef.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(lf.Spec.ParentRef.Name)}
}

// Precedence orders fragments and ListenerSets alike, as upstream orders
// ListenerSets: oldest first by creationTimestamp, then by namespace/name
// (and, between a fragment and a ListenerSet of one name, by kind). The fold places them in this
// order, and the claim collector gives an unclaimed tuple to the first
// fragment in it that wants the tuple, so both agree on who comes first.
func Precedence(a, b v1alpha1.ListenerFragment) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(KindOf(&a), KindOf(&b)))
}
