package claims

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// What the tests of package claims_test read of the store's insides.

// Wants is wants with the Gateway's managed listeners read as a View does.
func Wants(c Claim, lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, nsLabels map[string]string) bool {
	var managed sets.Set[gwv1.SectionName]
	if gw != nil {
		managed = NewView(nil).managedOn(gw)
	}
	return wants(c, lf, gw, managed, nsLabels)
}

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

func (h *held) Lease() *coordinationv1.Lease { return h.lease }

func (h *held) Decoded() bool { return h.decoded }

func (i *Informer) Against(gw types.NamespacedName, entries []rules.Entry) ([]*Held, error) {
	return i.against(gw, entries, nil)
}
