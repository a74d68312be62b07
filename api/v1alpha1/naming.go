package v1alpha1

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const (
	// listenerNameMaxLen keeps Gateway listener names short enough for
	// implementations that derive label values (63 characters) from them.
	listenerNameMaxLen = 63
	// listenerNameHashLen characters of base32 carry 80 bits of a SHA-256.
	listenerNameHashLen = 16
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ListenerName returns the name of the Gateway listener that gatefold folds
// listener `listener` of ListenerFragment namespace/fragment into, a valid
// SectionName of at most 63 characters, stable across gatefold versions. Route
// controllers set it as a Route's sectionName without waiting for the status.
// A hash of the exact triple keeps apart names that differ only past the cut
// of the readable prefix or in where the dots fall ("a.b"/"c", "a"/"b.c").
func ListenerName(namespace, fragment string, listener gwv1.SectionName) gwv1.SectionName {
	return listenerName(false, namespace, fragment, listener)
}

// ListenerSetListenerName returns the name of the Gateway listener that
// gatefold folds listener `listener` of upstream ListenerSet namespace/set
// into, for the GatewayClasses whose ListenerSets gatefold folds. It is built
// like ListenerName, with the kind in the readable prefix ("ls-") and in the
// hash, so a ListenerSet and a ListenerFragment of one name never collide.
func ListenerSetListenerName(namespace, set string, listener gwv1.SectionName) gwv1.SectionName {
	return listenerName(true, namespace, set, listener)
}

// listenerName names a listener of a ListenerSet (set) or of a
// ListenerFragment; a fragment's name carries no kind, so it stays stable.
func listenerName(set bool, namespace, source string, listener gwv1.SectionName) gwv1.SectionName {
	key, prefix := namespace+"/"+source+"/"+string(listener), namespace+"-"+source+"-"+string(listener)
	if set {
		key, prefix = "ListenerSet/"+key, "ls-"+prefix
	}
	sum := sha256.Sum256([]byte(key))
	hash := lowerBase32.EncodeToString(sum[:])[:listenerNameHashLen]

	if max := listenerNameMaxLen - listenerNameHashLen - 1; len(prefix) > max {
		prefix = prefix[:max]
	}
	// A cut may end on a separator, which a SectionName may not have before "-".
	prefix = strings.TrimRight(prefix, "-.")
	return gwv1.SectionName(prefix + "-" + hash)
}
