// Package merger folds every accepted ListenerFragment of a Gateway into that
// Gateway's spec.listeners with server-side apply, as the single field owner
// of the entries it adds, and reports back on each fragment. Its fold is a
// pure function with no client; the controller that feeds it and writes its
// result lives apart from it. It never changes listeners other managers own.
package merger
