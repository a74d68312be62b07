package merger

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// carriedMemo remembers, per Gateway and listener, the first generation seen
// to carry gatefold's listener as it is, so that the implementation's report
// is mirrored only when it is about that listener. A new leader starts from
// the current generation: Pending a little longer, never a stale Programmed.
type carriedMemo struct {
	mu        sync.Mutex
	byGateway map[types.NamespacedName]map[gwv1.SectionName]carried
}

// carried is a listener's digest, not the listener: the memo would
// otherwise hold a second copy of every listener gatefold folded.
type carried struct {
	digest [sha256.Size]byte
	since  int64
}

// observe records the Gateway's managed listeners and returns, by name, the
// generation since which each has been carried as it is.
func (m *carriedMemo) observe(key types.NamespacedName, gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName]) map[gwv1.SectionName]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byGateway == nil {
		m.byGateway = map[types.NamespacedName]map[gwv1.SectionName]carried{}
	}
	prev := m.byGateway[key]
	now := map[gwv1.SectionName]carried{}
	since := map[gwv1.SectionName]int64{}
	for _, l := range gw.Spec.Listeners {
		if !managed.Has(l.Name) {
			continue
		}
		d := digest(&l)
		c, ok := prev[l.Name]
		if !ok || c.digest != d {
			c = carried{digest: d, since: gw.Generation}
		}
		now[l.Name] = c
		since[l.Name] = c.since
	}
	m.byGateway[key] = now
	return since
}

// digest is the SHA-256 of listener l's JSON: equal for equal listeners,
// since JSON writes struct fields in order and map keys sorted.
func digest(l *gwv1.Listener) [sha256.Size]byte {
	raw, _ := json.Marshal(l) // a Listener holds nothing JSON cannot encode
	return sha256.Sum256(raw)
}

// forget drops a deleted Gateway.
func (m *carriedMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byGateway, key)
}
