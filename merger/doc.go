// Package merger folds every accepted ListenerFragment of a Gateway into that
// Gateway's spec.listeners with server-side apply, as the single field owner
// of the entries it adds, and reports back on each fragment. It reads the
// fold's input from the cache, calls the pure fold.Fold, and writes its
// result. It never changes listeners other managers own.
package merger
