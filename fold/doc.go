// Package fold is the pure fold, the first stage of the write path
// (rules → fold → merger): from what the merger read of one Gateway (its
// fragments and ListenerSets, namespaces, grants, claims, the pool it heads
// and the implementation's reports) it decides the listeners of each Gateway
// of the pool in precedence order, where each source is placed, which
// refused listeners are withdrawn, and every source's status.
//
// It imports only api/v1alpha1 and rules, never a client, and keeps no state
// from one fold to the next: the merger reads, remembers and writes. FuzzFold
// and FuzzAdmissionAndFoldAgree check its invariants.
package fold
