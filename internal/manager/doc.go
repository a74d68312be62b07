// Package manager holds the controller-runtime manager options every gatefold
// replica is built with (the scheme, what the informer cache holds and how the
// client reads it), so that a test running gatefold as installed sees the
// cache and rights a replica needs; the source parent indexes that webhook,
// claims and merger read; and the leader lease that fences the leader's
// writes. It imports api and rules, holds no flags and starts nothing.
package manager
