// Package fold is the pure fold: from what the merger read of one Gateway
// (its fragments and ListenerSets, namespaces, grants, claims, the pool it
// heads and the implementation's reports), it decides the listeners of each
// Gateway of the pool, in precedence order, and every source's status. It
// imports only api and rules, never a client, and keeps no state from one
// fold to the next: the merger reads, remembers and writes.
package fold
