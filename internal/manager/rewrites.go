package manager

import (
	"sync"
	"time"
)

// Rewrites remembers, by key, what gatefold last wrote of something another
// writer may replace (a Gateway's attachedListenerSets, a route's status
// entries), when, and how many times in a row it wrote it again after a
// replacement. A replaced value is written again after a backoff that starts
// at a second and doubles with each replacement in a row, at most a resync
// period, so that a writer that replaces it after each of gatefold's writes
// costs a few writes, not a loop. The zero value is ready to use.
type Rewrites[K comparable, V Same[V]] struct {
	mu   sync.Mutex
	last map[K]rewrite[V]
}

// Same is a value whose writes are told apart by Same.
type Same[V any] interface {
	Same(V) bool
}

type rewrite[V any] struct {
	v  V
	at time.Time
	// drops is how many times in a row v was written again after a
	// replacement; noticed says the last write was found replaced already.
	drops   int
	noticed bool
}

// rewriteStood is how long a write must stand, at the least, for its
// backoff to start over: a writer that replaces it a few seconds after each
// write otherwise resets the backoff every time, and the two write in a loop.
const rewriteStood = time.Minute

// Due says whether v, which the stored state lacks, must be written for key
// now, else how long until it must. replaced is true the first time a value
// gatefold wrote is found replaced. A value found replaced twice its
// backoff, and rewriteStood, or more after it was written had stood: its
// backoff starts over.
func (m *Rewrites[K, V]) Due(key K, v V, now time.Time, resync time.Duration) (due bool, wait time.Duration, replaced bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[key]
	if !ok || !last.v.Same(v) {
		return true, 0, false
	}
	replaced = !last.noticed
	last.noticed = true
	since := now.Sub(last.at)
	if since >= max(2*rewriteBackoff(last.drops, resync), rewriteStood) {
		last.drops = 0
	}
	m.last[key] = last
	if wait := rewriteBackoff(last.drops, resync) - since; wait > 0 {
		return false, wait, replaced
	}
	return true, 0, replaced
}

// Wrote records that v was written for key at now, and returns how many
// times in a row it was written again after a replacement.
func (m *Rewrites[K, V]) Wrote(key K, v V, now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[K]rewrite[V]{}
	}
	next := rewrite[V]{v: v, at: now}
	if last, ok := m.last[key]; ok && last.v.Same(v) {
		next.drops = last.drops + 1
	}
	m.last[key] = next
	return next.drops
}

// Forget forgets key.
func (m *Rewrites[K, V]) Forget(key K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}

// rewriteBackoff is how long to wait, from the last write, before writing a
// value again after drops replacements in a row: a second doubled drops
// times, at most resync when set.
func rewriteBackoff(drops int, resync time.Duration) time.Duration {
	d := time.Second << min(drops, 20)
	if resync > 0 {
		return min(d, resync)
	}
	return d
}
