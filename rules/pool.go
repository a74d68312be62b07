package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// PoolLabelValue is the v1alpha1.PoolLabel value of the siblings of head:
// its name, or, past the 63 characters a label value may have, its first 46
// and a hash of it.
func PoolLabelValue(head string) string {
	if len(head) <= validation.LabelValueMaxLength {
		return head
	}
	sum := sha256.Sum256([]byte(head))
	return head[:46] + "-" + hex.EncodeToString(sum[:8])
}

// PoolHead says whether the Gateway's owner made it the head of a pool.
func PoolHead(gw *gwv1.Gateway) bool { return gw.Annotations[v1alpha1.PoolAnnotation] == "true" }

// HeadOf returns the head of the pool a sibling belongs to, and false for a
// Gateway that is no sibling.
func HeadOf(gw *gwv1.Gateway) (types.NamespacedName, bool) {
	label, labelled := gw.Labels[v1alpha1.PoolLabel]
	ref := metav1.GetControllerOf(gw)
	if !labelled || ref == nil || ref.Kind != "Gateway" || label != PoolLabelValue(ref.Name) || !strings.HasPrefix(ref.APIVersion, gwv1.GroupName+"/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: gw.Namespace, Name: ref.Name}, true
}

// SiblingOf says whether gw is a sibling in the pool of head.
func SiblingOf(gw, head *gwv1.Gateway) bool {
	h, ok := HeadOf(gw)
	return ok && h.Name == head.Name && metav1.IsControlledBy(gw, head)
}

// SiblingMessage tells a source that names sibling, a Gateway of the pool
// of head, to name the head instead.
func SiblingMessage(sibling, head types.NamespacedName) string {
	return fmt.Sprintf("Gateway %s is one gatefold created for the pool of Gateway %s: set spec.parentRef.name to %s, and gatefold places the listeners",
		sibling, head, head.Name)
}

// SiblingName is the name of the pool's n-th Gateway (n ≥ 2; the head is
// the first): <head>-<n>, the head's name cut to fit 253 characters.
func SiblingName(head string, n int) string {
	suffix := "-" + strconv.Itoa(n)
	return head[:min(len(head), 253-len(suffix))] + suffix
}

// SiblingIndex is n for a sibling named SiblingName(head, n), else 0.
func SiblingIndex(head, name string) int {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil || n < 2 || SiblingName(head, n) != name {
		return 0
	}
	return n
}
