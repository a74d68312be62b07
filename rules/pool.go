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
// of head or the one for its ListenerSets, to name the head instead.
func SiblingMessage(sibling, head types.NamespacedName) string {
	what := "the pool of"
	if sibling.Name == ListenerSetGatewayName(head.Name) {
		what = "the ListenerSets of"
	}
	return fmt.Sprintf("Gateway %s is one gatefold created for %s Gateway %s: set spec.parentRef.name to %s, and gatefold places the listeners",
		sibling, what, head, head.Name)
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

// listenerSetSuffix ends the name of the Gateway that carries the listeners
// of a Gateway's ListenerSets.
const listenerSetSuffix = "-listenersets"

// ListenerSetGatewayName is the name of the Gateway gatefold keeps beside
// Gateway parent for the listeners of parent's ListenerSets:
// <parent>-listenersets; past 253 characters, parent's first 223 and a hash
// of it. No pool sibling's name (SiblingName) ends so.
func ListenerSetGatewayName(parent string) string {
	if len(parent)+len(listenerSetSuffix) <= validation.DNS1123SubdomainMaxLength {
		return parent + listenerSetSuffix
	}
	sum := sha256.Sum256([]byte(parent))
	return parent[:223] + "-" + hex.EncodeToString(sum[:8]) + listenerSetSuffix
}

// ListenerSetGatewayParent returns the Gateway whose ListenerSets a Gateway
// named name would carry (ListenerSetGatewayName), if any; a name cut for
// length does not lead back to its parent.
func ListenerSetGatewayParent(name string) (string, bool) {
	parent, ok := strings.CutSuffix(name, listenerSetSuffix)
	return parent, ok && parent != "" && ListenerSetGatewayName(parent) == name
}

// ListenerSetGateway says whether gw is the Gateway gatefold keeps for the
// ListenerSets of its head (HeadOf): controlled by the head, labelled as a
// sibling of it, and named ListenerSetGatewayName(head).
func ListenerSetGateway(gw *gwv1.Gateway) bool {
	head, ok := HeadOf(gw)
	return ok && gw.Name == ListenerSetGatewayName(head.Name)
}

// ListenerSetGatewayBlocked says why no ListenerSet of Gateway parent can be
// folded while sets, the Gateway named ListenerSetGatewayName(parent) as read
// (nil when there is none), is as it is: not gatefold's for parent, being
// deleted, or left by an earlier Gateway of parent's name. "" when they can.
// The fold and admission both ask it.
func ListenerSetGatewayBlocked(parent, sets *gwv1.Gateway) string {
	if sets == nil {
		return ""
	}
	key := sets.Namespace + "/" + sets.Name
	switch {
	case ListenerSetGateway(sets) && !SiblingOf(sets, parent):
		return fmt.Sprintf("Gateway %s is left from an earlier Gateway %s: this ListenerSet folds once it is garbage collected", key, parent.Name)
	case !SiblingOf(sets, parent):
		return fmt.Sprintf("Gateway %s, where gatefold folds this ListenerSet, is not gatefold's: its owner must rename or delete it", key)
	case !sets.DeletionTimestamp.IsZero():
		return fmt.Sprintf("Gateway %s, where gatefold folds this ListenerSet, is being deleted: it folds once that is done", key)
	}
	return ""
}
