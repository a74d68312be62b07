package webhook

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// sightings is this replica's record of when it first saw each claim at its
// current resourceVersion. A claim is settled once this replica has seen one
// version of it, unchanged, for the grace period. client-go's leader
// election judges a Lease the same way: a timestamp written by another
// machine, compared with this one's clock, is only as good as the two clocks
// agree, while a version and a local monotonic clock need no agreement. A
// replica that has not watched a claim for the grace therefore never
// releases it, and a write to a claim restarts every replica's watch.
type sightings struct {
	mu    sync.Mutex
	grace time.Duration
	now   func() time.Time
	seen  map[string]sighting
	// pruned is when entries not seen for forgetAfter were last dropped.
	pruned time.Time
}

type sighting struct {
	version     string
	first, last time.Time
}

// forgetAfter is how long a claim that is not read again stays recorded.
// Forgetting only restarts a claim's watch, so it only delays a release; it
// keeps a replica that never lists every claim from growing without bound.
const forgetAfter = time.Hour

func newSightings(grace time.Duration, now func() time.Time) *sightings {
	return &sightings{grace: grace, now: now, seen: map[string]sighting{}, pruned: now()}
}

// settled records that claim name was read at version, and says whether
// this replica has seen it at that version for the grace period.
func (s *sightings) settled(name, version string) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	si, ok := s.seen[name]
	if !ok || si.version != version {
		si = sighting{version: version, first: now}
	}
	si.last = now
	s.seen[name] = si
	if now.Sub(s.pruned) > time.Minute {
		for n, o := range s.seen {
			if now.Sub(o.last) > forgetAfter {
				delete(s.seen, n)
			}
		}
		s.pruned = now
	}
	return now.Sub(si.first) >= s.grace
}

// keepOnly forgets every claim but those in names, after a list of every
// claim: the others are gone, and one that comes back starts afresh.
func (s *sightings) keepOnly(names sets.Set[string]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.seen {
		if !names.Has(n) {
			delete(s.seen, n)
		}
	}
}
