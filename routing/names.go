package routing

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// derivedPrefix starts the name of every derived route, so that kubectl
// lists them apart.
const derivedPrefix = "gf-"

// hashLen hex characters carry 80 bits of a SHA-256.
const hashLen = 20

// routeHash identifies the user route kind namespace/name: the value of
// v1alpha1.DerivedFromLabel on its derived routes.
func routeHash(kind string, route types.NamespacedName) string {
	return hashOf(kind + "/" + route.String())
}

// derivedName is the name of the route derived from the user route kind
// namespace/name for the Gateway listener s: deterministic, so that a new
// leader finds what the last one made, and a valid DNS-1123 subdomain.
func derivedName(kind string, route types.NamespacedName, s section) string {
	return derivedPrefix + hashOf(kind+"/"+route.String()+"|"+s.Gateway.String()+"/"+string(s.Name))
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}
