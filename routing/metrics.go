package routing

import (
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a write, as the metrics count them.
const (
	resultWritten   = "written"
	resultUnchanged = "unchanged" // not sent: nothing to change
	resultDeferred  = "deferred"  // not sent yet: replaced by another writer, written again after a backoff
	resultConflict  = "conflict"  // refused: the object changed since it was read
	resultError     = "error"
)

func resultOf(err error) string {
	switch {
	case err == nil:
		return resultWritten
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return resultConflict
	}
	return resultError
}

var (
	derivedWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_routing_derived_route_writes_total",
		Help: "Creates, updates (a hand edit put back, or the user's route changed) and deletes of derived routes, by operation and result",
	}, []string{"operation", "result"})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_routing_route_status_writes_total",
		Help: "Writes of user routes' status.parents entries, by result: written, unchanged (not sent), deferred (not sent yet: another writer replaced them; written again after a backoff), conflict or error",
	}, []string{"result"})
	parentsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatefold_routing_route_parents_dropped_total",
		Help: "Status entries gatefold left off user routes because status.parents holds at most 32",
	})
	statusOverwritten = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatefold_route_status_overwritten_total",
		Help: "Times gatefold found the status.parents entries it wrote on a user route replaced by another writer",
	})
)

func init() {
	metrics.Registry.MustRegister(derivedWrites, statusWrites, statusOverwritten, parentsDropped)
}
