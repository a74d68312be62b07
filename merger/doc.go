// Package merger is the last stage of the write path (rules → fold → merger):
// the leader-only controller that reads one Gateway's fold input from the
// cache, calls the pure fold.Fold, and writes the difference with fencing: the
// Gateway's listeners by server-side apply as field manager gatefold (with
// refusals bisected), a pool's siblings, the ReferenceGrants folded listeners
// need, every source's status, and status.attachedListenerSets.
//
// It imports api/v1alpha1, rules, fold and internal/manager (the parent
// index), never webhook or claims (claims reach it as Options.Claims). It never changes listeners other managers own
// and never writes while this replica may no longer lead.
package merger
