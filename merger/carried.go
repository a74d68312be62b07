package merger

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
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

type carried struct {
	listener gwv1.Listener
	since    int64
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
		c, ok := prev[l.Name]
		if !ok || !equality.Semantic.DeepEqual(c.listener, l) {
			c = carried{listener: *l.DeepCopy(), since: gw.Generation}
		}
		now[l.Name] = c
		since[l.Name] = c.since
	}
	m.byGateway[key] = now
	return since
}

// forget drops a deleted Gateway.
func (m *carriedMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byGateway, key)
}
