package routing

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/internal/manager"
)

// writtenMemo remembers, by route, the entries gatefold last wrote
// (manager.Rewrites, as the merger's attachedMemo): replaced entries are
// written again after a backoff, so an implementation that rewrites the
// route's status after each of gatefold's writes (Traefik does on a route
// that also names one of its Gateways) costs a few writes, not a loop.
type writtenMemo struct {
	manager.Rewrites[types.NamespacedName, written]
}

// written are a route's entries as gatefold wrote them, at a UID and
// generation of the route.
type written struct {
	uid     types.UID
	gen     int64
	entries []gwv1.RouteParentStatus
}

func (w written) Same(o written) bool {
	return w.uid == o.uid && w.gen == o.gen && equalParents(w.entries, o.entries)
}

// due says whether entries, gatefold's entries of the route at generation
// gen, which the stored status lacks, must be written now, else how long
// until they are; overwritten is true the first time entries gatefold
// wrote are found replaced.
func (m *writtenMemo) due(key types.NamespacedName, uid types.UID, gen int64, entries []gwv1.RouteParentStatus, now time.Time, resync time.Duration) (due bool, wait time.Duration, overwritten bool) {
	return m.Due(key, written{uid: uid, gen: gen, entries: entries}, now, resync)
}

// wrote records that entries were written to the route at now.
func (m *writtenMemo) wrote(key types.NamespacedName, uid types.UID, gen int64, entries []gwv1.RouteParentStatus, now time.Time) {
	m.Wrote(key, written{uid: uid, gen: gen, entries: entries}, now)
}
