package routing

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/internal/manager"
)

// writtenMemo remembers, by route, the entries gatefold last wrote, when,
// and how many times in a row it wrote them again after another writer
// replaced them. Replaced entries are written again after a backoff that
// starts at a second and doubles with each replacement in a row, at most a
// resync period (manager.RewriteBackoff, as the merger's attachedMemo): an
// implementation that rewrites the route's status after each of gatefold's
// writes (Traefik does on a route that also names one of its Gateways)
// costs a few writes, not a loop.
type writtenMemo struct {
	mu   sync.Mutex
	last map[types.NamespacedName]written
}

type written struct {
	uid     types.UID
	gen     int64
	entries []gwv1.RouteParentStatus
	at      time.Time
	// drops is how many times in a row the entries were written again
	// after another writer replaced them; noticed says the last write was
	// found replaced already.
	drops   int
	noticed bool
}

// overwriteStood is how long written entries must stand, at the least,
// for the backoff to start over.
const overwriteStood = time.Minute

// due says whether entries, gatefold's entries of the route at generation
// gen, which the stored status lacks, must be written now, else how long
// until they are; overwritten is true the first time entries gatefold
// wrote are found replaced.
func (m *writtenMemo) due(key types.NamespacedName, uid types.UID, gen int64, entries []gwv1.RouteParentStatus, now time.Time, resync time.Duration) (due bool, wait time.Duration, overwritten bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[key]
	if !ok || last.uid != uid || last.gen != gen || !equalParents(last.entries, entries) {
		return true, 0, false
	}
	overwritten = !last.noticed
	last.noticed = true
	since := now.Sub(last.at)
	if since >= max(2*manager.RewriteBackoff(last.drops, resync), overwriteStood) {
		last.drops = 0
	}
	m.last[key] = last
	if wait := manager.RewriteBackoff(last.drops, resync) - since; wait > 0 {
		return false, wait, overwritten
	}
	return true, 0, overwritten
}

// wrote records that entries were written to the route at now.
func (m *writtenMemo) wrote(key types.NamespacedName, uid types.UID, gen int64, entries []gwv1.RouteParentStatus, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.NamespacedName]written{}
	}
	next := written{uid: uid, gen: gen, entries: entries, at: now}
	if last, ok := m.last[key]; ok && last.uid == uid && last.gen == gen && equalParents(last.entries, entries) {
		next.drops = last.drops + 1
	}
	m.last[key] = next
}

func (m *writtenMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}
