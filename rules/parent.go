package rules

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// ParentOf returns the Gateway a fragment's parentRef names; the namespace
// defaults to its own.
func ParentOf(lf *v1alpha1.ListenerFragment) types.NamespacedName {
	return parentOf(lf.Namespace, lf.Spec.ParentRef)
}

// ListenerSetParent returns the Gateway a ListenerSet's parentRef names, and
// false when it names another kind.
func ListenerSetParent(ls *gwv1.ListenerSet) (types.NamespacedName, bool) {
	return parentOf(ls.Namespace, ls.Spec.ParentRef), SelectsGateway(ls.Spec.ParentRef)
}

func parentOf(ns string, ref gwv1.ParentGatewayReference) types.NamespacedName {
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
}

// Precedence orders fragments and ListenerSets alike, as upstream orders
// ListenerSets: oldest first by creationTimestamp, then by namespace/name,
// then by kind. The fold places them in this order after the Gateway's own
// listeners and the tuples admission's claims reserve for their holders
// (docs/api.md, "Who gets a tuple").
func Precedence(a, b *Source) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
}

// SortByPrecedence sorts sources in Precedence order, moving each once.
func SortByPrecedence(sources []Source) {
	sorted := make([]Source, len(sources))
	for k, i := range PrecedenceOrder(sources) {
		sorted[k] = sources[i]
	}
	copy(sources, sorted)
}

// PrecedenceOrder returns the indexes of sources in Precedence order. It
// compares them where they are: a source is a large struct, and sorting a
// pool's thousand by value took most of an admission request's time.
func PrecedenceOrder(sources []Source) []int {
	order := make([]int, len(sources))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return Precedence(&sources[i], &sources[j]) })
	return order
}
