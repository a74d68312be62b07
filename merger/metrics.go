package merger

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/fold"
)

// Results of a write, as the *_applies_total metrics count them.
const (
	resultWritten   = "written"   // the object changed
	resultNoop      = "noop"      // sent, and the API server found nothing to change
	resultUnchanged = "unchanged" // not sent: nothing to change
	resultDeferred  = "deferred"  // not sent yet: dropped by another writer, applied again after a backoff
	resultConflict  = "conflict"  // refused: the Gateway changed since the fold read it
	resultError     = "error"
)

var (
	foldsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatefold_merger_folds_total",
		Help: "Folds computed, one per reconcile of a Gateway",
	})
	gatewayApplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_merger_gateway_applies_total",
		Help: "Server-side applies of a Gateway's folded listeners, by result: written, noop, unchanged (not sent), conflict (the Gateway changed since the fold read it) or error",
	}, []string{"result"})
	statusApplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_merger_status_applies_total",
		Help: "Server-side applies of fragment and ListenerSet statuses, by result: written, unchanged (not sent: a fold or a status writer found it stored), conflict (the fragment changed since the status writer's cache showed it; retried) or error",
	}, []string{"result"})
	gatewayStatusApplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_merger_gateway_status_applies_total",
		Help: "Server-side applies of a Gateway's status.attachedListenerSets, by result: written (set, set again after another writer dropped it, or released when gatefold stops folding the Gateway's ListenerSets), unchanged (not sent: stored), deferred (not sent yet: dropped by another writer, applied again after a backoff that doubles with each drop in a row) or error",
	}, []string{"result"})
	grantWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_merger_reference_grant_writes_total",
		Help: "ReferenceGrants applied or deleted for fragments' certificate Secrets, by operation and result",
	}, []string{"operation", "result"})
	conflictsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatefold_merger_conflicts_total",
		Help: "Fragment listeners whose Accepted condition became False, by reason (HostnameConflict, ProtocolConflict, RefNotPermitted, TooManyListeners, or a reason the Gateway implementation reported)",
	}, []string{"reason"})
	poolGateways = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatefold_merger_pool_gateways",
		Help: "Gateways in the pool a Gateway (namespace/name) heads: the head, its siblings, and those the last fold needs created",
	}, []string{"gateway"})
	listenersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatefold_merger_listeners",
		Help: "Fragment listeners per Gateway (namespace/name) by state: folded, conflicted, too_many or ref_not_permitted",
	}, []string{"gateway", "state"})
)

func init() {
	metrics.Registry.MustRegister(foldsTotal, gatewayApplies, gatewayStatusApplies, statusApplies, grantWrites, conflictsTotal, listenersGauge, poolGateways)
}

// recordListeners sets the per-state listener gauges of one Gateway, and
// drops them when the Gateway is gone.
func recordListeners(key types.NamespacedName, in *fold.Input, res fold.Result) {
	if in.Pool == nil {
		poolGateways.DeleteLabelValues(key.String())
	} else {
		poolGateways.WithLabelValues(key.String()).Set(float64(1 + len(res.Siblings)))
	}
	if in.Gateway == nil || in.Head != nil {
		// Gone, or a sibling, whose listeners its head counts.
		listenersGauge.DeletePartialMatch(prometheus.Labels{"gateway": key.String()})
		return
	}
	counts := map[string]float64{"folded": 0, "conflicted": 0, "too_many": 0, "ref_not_permitted": 0}
	for _, o := range res.Outcomes {
		switch {
		case o.Folded():
			counts["folded"]++
		case o.Reason == gwv1.ListenerEntryReasonTooManyListeners:
			counts["too_many"]++
		case o.Reason == gwv1.ListenerEntryReasonRefNotPermitted:
			counts["ref_not_permitted"]++
		default:
			counts["conflicted"]++
		}
	}
	for state, n := range counts {
		listenersGauge.WithLabelValues(key.String(), state).Set(n)
	}
}
