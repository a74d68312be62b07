// Package rules holds the Gateway API rules, each a pure function written
// once, that admission, the fold and the Gateway warnings share: which
// listeners can share a port and the tuple a listener takes, the Board
// listeners are placed on, a Gateway's own and managed listeners and
// allowedListeners, the ReferenceGrant check, values the schema admits and
// Gateway API does not, precedence, a source's parent and pool membership.
// A Source is a ListenerFragment or a ListenerSet, which the rules read alike.
//
// It is the second stage of the data path (api → rules → claims → webhook;
// rules → fold → merger). It imports only api/v1alpha1 and the Gateway API
// types, and never reads or writes the API server: webhook, claims, fold and
// merger call it instead of keeping copies that drift.
package rules
