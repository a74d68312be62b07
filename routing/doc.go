// Package routing serves the routes that name a ListenerFragment or a
// ListenerSet as parentRef, a stage after the fold (rules → fold → merger →
// routing): a leader-only controller that, for each such user route, keeps
// one derived route per listener it attaches to, wherever the parent's
// listeners landed, in the route's namespace and of its kind, naming that
// Gateway and the listener's generated sectionName, and writes the user route's status.parents entries for those
// parentRefs from rules.Attach and the implementation's verdict on the
// derived routes.
//
// It imports api/v1alpha1, rules and internal/manager (the parent index),
// never webhook, claims, fold or merger. It never writes a user route but its
// status, never touches status entries of other parentRefs or controllers,
// and never writes while this replica may no longer lead.
package routing
