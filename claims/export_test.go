package claims

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// What the tests of package claims_test read of the store's insides.

var Wants = wants

type (
	Sightings = sightings
	Held      = held
)

func NewSightings(grace time.Duration, now func() time.Time) *Sightings {
	return newSightings(grace, now)
}

func (s *sightings) Stale(name, version string, wanted bool) bool {
	return s.stale(name, version, wanted)
}

func (s *sightings) KeepOnly(names sets.Set[string]) { s.keepOnly(names) }

func (i *Informer) OnGateway(gw types.NamespacedName) ([]*Held, error) { return i.onGateway(gw) }

func (h *held) Lease() *coordinationv1.Lease { return h.lease }

func (h *held) Decoded() bool { return h.decoded }
