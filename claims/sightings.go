package claims

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// sightings is this replica's record of how it judged each claim. A claim is
// stale once this replica has judged it, at one resourceVersion, unwanted for
// the grace period without a break; judged wanted, written again or not looked
// at for a grace, it starts afresh. Like client-go's leader election, it never
// compares another machine's timestamp with this one's clock.
type sightings struct {
	mu    sync.Mutex
	grace time.Duration
	now   func() time.Time
	seen  map[string]sighting
	// pruned is when entries not seen for forgetAfter were last dropped.
	pruned time.Time
}

type sighting struct {
	version string
	// last is when the claim was last judged.
	last time.Time
	// unwanted is when this replica first judged the claim unwanted at
	// this version since it last found it wanted; zero while it is wanted.
	unwanted time.Time
}

// forgetAfter is how long a claim that is not read again stays recorded.
// Forgetting only restarts a claim's watch, so it only delays a release; it
// keeps a replica that never lists every claim from growing without bound.
const forgetAfter = time.Hour

func newSightings(grace time.Duration, now func() time.Time) *sightings {
	return &sightings{grace: grace, now: now, seen: map[string]sighting{}, pruned: now()}
}

// stale records that claim name, read at version, was judged wanted or not
// by its holder, and says whether this replica has judged it unwanted at
// that version for the grace period.
func (s *sightings) stale(name, version string, wanted bool) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	si, ok := s.seen[name]
	if !ok || si.version != version || now.Sub(si.last) > s.grace {
		si = sighting{version: version}
	}
	si.last = now
	switch {
	case wanted:
		si.unwanted = time.Time{}
	case si.unwanted.IsZero():
		si.unwanted = now
	}
	s.seen[name] = si
	if now.Sub(s.pruned) > time.Minute {
		for n, o := range s.seen {
			if now.Sub(o.last) > forgetAfter {
				delete(s.seen, n)
			}
		}
		s.pruned = now
	}
	return !wanted && now.Sub(si.unwanted) >= s.grace
}

// releaseIn is how long until claim name, at version, goes stale, when this
// replica last judged it unwanted; 0 when it judged it wanted or not at all.
func (s *sightings) releaseIn(name, version string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	si, ok := s.seen[name]
	if !ok || si.version != version || si.unwanted.IsZero() {
		return 0
	}
	return max(s.grace-s.now().Sub(si.unwanted), time.Second)
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
