package merger

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatefold/gatefold/rules"
)

// refusalTTL is how long a fragment the API server refused stays left out
// without being tried again, unless it changes first: a policy or a Gateway
// that changes under it is noticed within this time.
const refusalTTL = time.Minute

// refusalMemo remembers, per Gateway, the sources the API server refused,
// so that a reconcile does not pay the refused apply and its dry runs again
// for every event while nothing changed.
type refusalMemo struct {
	mu        sync.Mutex
	byGateway map[types.NamespacedName]map[rules.SourceRef]refusal
	// owner holds, per Gateway, a refusal no fragment causes.
	owner map[types.NamespacedName]ownerRefusal
}

// ownerRefusal holds while the Gateway's spec and its sources are as they
// were when it was refused.
type ownerRefusal struct {
	generation  int64
	fingerprint string
	err         error
	at          time.Time
}

// fingerprint names the sources of a fold and their generations.
func fingerprint(sources []rules.Source) string {
	parts := make([]string, len(sources))
	for i := range sources {
		parts[i] = fmt.Sprintf("%s/%s/%s/%d", sources[i].Namespace, sources[i].Name, sources[i].UID, sources[i].Generation)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// recallOwner returns the Gateway's refusal no source causes, if it still
// holds.
func (m *refusalMemo) recallOwner(gateway types.NamespacedName, generation int64, sources []rules.Source, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.owner[gateway]
	if !ok || r.generation != generation || r.fingerprint != fingerprint(sources) || now.Sub(r.at) >= refusalTTL {
		delete(m.owner, gateway)
		return nil
	}
	return r.err
}

// rememberOwner records a refusal no source causes.
func (m *refusalMemo) rememberOwner(gateway types.NamespacedName, generation int64, sources []rules.Source, err error, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owner == nil {
		m.owner = map[types.NamespacedName]ownerRefusal{}
	}
	m.owner[gateway] = ownerRefusal{generation: generation, fingerprint: fingerprint(sources), err: err, at: now}
}

type refusal struct {
	uid        types.UID
	generation int64
	message    string
	at         time.Time
}

// recall returns the refusals of the Gateway's sources that still hold:
// same object, same generation, not expired. It drops the others.
func (m *refusalMemo) recall(gateway types.NamespacedName, sources []rules.Source, now time.Time) map[rules.SourceRef]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.byGateway[gateway]
	if len(held) == 0 {
		return nil
	}
	out := map[rules.SourceRef]string{}
	kept := map[rules.SourceRef]refusal{}
	for i := range sources {
		k := sources[i].Ref()
		if r, ok := held[k]; ok && r.uid == sources[i].UID && r.generation == sources[i].Generation && now.Sub(r.at) < refusalTTL {
			out[k] = r.message
			kept[k] = r
		}
	}
	m.byGateway[gateway] = kept
	return out
}

// remember records newly refused sources of a Gateway.
func (m *refusalMemo) remember(gateway types.NamespacedName, sources []rules.Source, refused map[rules.SourceRef]string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byGateway == nil {
		m.byGateway = map[types.NamespacedName]map[rules.SourceRef]refusal{}
	}
	if m.byGateway[gateway] == nil {
		m.byGateway[gateway] = map[rules.SourceRef]refusal{}
	}
	for i := range sources {
		k := sources[i].Ref()
		if msg, ok := refused[k]; ok {
			m.byGateway[gateway][k] = refusal{uid: sources[i].UID, generation: sources[i].Generation, message: msg, at: now}
		}
	}
}

// any says whether the Gateway has refusals to try again when they expire.
func (m *refusalMemo) any(gateway types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, owner := m.owner[gateway]
	return len(m.byGateway[gateway]) > 0 || owner
}

// forget drops a deleted Gateway.
func (m *refusalMemo) forget(gateway types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byGateway, gateway)
	delete(m.owner, gateway)
}
