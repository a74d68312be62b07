package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/webhook"
)

// Latency is a distribution of request latencies, in milliseconds.
type Latency struct {
	Requests int     `json:"requests"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	P99      float64 `json:"p99"`
	Max      float64 `json:"max"`
}

// Throughput is how fast W writers created N fragments.
type Throughput struct {
	Creates       int     `json:"creates"`
	Writers       int     `json:"writers"`
	Seconds       float64 `json:"seconds"`
	PerSecond     float64 `json:"perSecond"`
	Errors        int     `json:"errors"`
	FirstErrorMsg string  `json:"firstError,omitempty"`
}

// AdmissionResult compares fragment creates with and without the webhooks:
// one at a time, and W writers at once.
type AdmissionResult struct {
	Without           Latency    `json:"withoutWebhooks"`
	With              Latency    `json:"withWebhooks"`
	ThroughputWithout Throughput `json:"throughputWithoutWebhooks"`
	ThroughputWith    Throughput `json:"throughputWithWebhooks"`
}

// latency is the distribution of samples; none is all zeros.
func latency(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(q float64) float64 { return ms(samples[int(q*float64(len(samples)-1))]) }
	return Latency{Requests: len(samples), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: ms(samples[len(samples)-1])}
}

// The runs with the webhooks create in the first namespace; the runs without
// in the second, which opts out of gatefold's admission as a cluster
// administrator may: the API server calls no webhook for it, and the
// leader's collector backfills no claim for it. Its fragments are deleted,
// with gatefold stopped, before the runs with the webhooks, which start
// once the replica has settled: they share the API server with no work the
// runs without, or the phases before, caused.
const (
	admissionNamespace        = "admission"
	admissionWithoutNamespace = "admission-without"
)

// admissionFragment is fragment i of a run: one HTTP listener with a
// hostname of its own on the run's Gateway.
func admissionFragment(ns, run string, i int, gateway string) *v1alpha1.ListenerFragment {
	return inFull(&v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", run, i)},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gateway)},
			Listeners: []gwv1.ListenerEntry{{Name: "web", Port: 8080, Protocol: gwv1.HTTPProtocolType,
				Hostname: ptr.To(gwv1.Hostname(fmt.Sprintf("%s-%d.example.com", run, i)))}},
		},
	})
}

// inFull returns lf as a route controller writes it: in full, so that
// the defaulting webhook is not called for it (its matchConditions).
func inFull(lf *v1alpha1.ListenerFragment) *v1alpha1.ListenerFragment {
	if errs := webhook.DefaultFragment(lf); len(errs) > 0 {
		panic(fmt.Sprintf("the bench's fragment %s/%s is invalid: %v", lf.Namespace, lf.Name, errs.ToAggregate()))
	}
	return lf
}

// admission times fragment creates, each with its own hostname, first
// without the webhooks, then with them (the manager serving them, as
// installed): p.AdmissionCreates sequential creates on a Gateway of their
// own, then p.Routes creates by p.Writers writers spread over p.Gateways
// Gateways of their own. The manager runs in both, so the merger's work
// behind the creates is alike.
func (h *harness) admission(ctx context.Context, p Params) (AdmissionResult, error) {
	var res AdmissionResult
	progress("Admission: %d sequential creates and %d by %d writers, without and with the webhooks", p.AdmissionCreates, p.Routes, p.Writers)
	setup, err := h.client("bench-setup")
	if err != nil {
		return res, err
	}
	c, err := h.client("bench-writer/admission")
	if err != nil {
		return res, err
	}
	// What the phases before left (contention's fragments, and its merger
	// work) is gone, and the runs with the webhooks start on a replica that
	// has settled: no fold of the runs without, no claims to backfill.
	if err := h.fresh(ctx); err != nil {
		return res, err
	}
	if err := h.namespace(ctx, admissionWithoutNamespace, map[string]string{webhook.AdmissionLabel: webhook.AdmissionDisabled}); err != nil {
		return res, err
	}
	gateway := func(ns, name string) error {
		return setup.Create(ctx, exampleGateway(ns, name))
	}
	sequential := func(ns string) (Latency, error) {
		if err := gateway(ns, "one-by-one"); err != nil {
			return Latency{}, err
		}
		var samples []time.Duration
		for i := range p.AdmissionCreates {
			lf := admissionFragment(ns, "one-by-one", i, "one-by-one")
			start := time.Now()
			if err := c.Create(ctx, lf); err != nil {
				return Latency{}, fmt.Errorf("creating %s: %w", lf.Name, err)
			}
			samples = append(samples, time.Since(start))
		}
		return latency(samples), nil
	}
	concurrent := func(ns string) (Throughput, error) {
		t := Throughput{Creates: p.Routes, Writers: p.Writers}
		for g := range p.Gateways {
			if err := gateway(ns, fmt.Sprintf("many-%d", g)); err != nil {
				return t, err
			}
		}
		items := make([]int, p.Routes)
		for i := range items {
			items[i] = i
		}
		var mu sync.Mutex
		start := time.Now()
		_ = parallel(p.Writers, items, func(i int) error {
			err := c.Create(ctx, admissionFragment(ns, "many", i, fmt.Sprintf("many-%d", i%p.Gateways)))
			if err != nil {
				mu.Lock()
				if t.Errors++; t.FirstErrorMsg == "" {
					t.FirstErrorMsg = err.Error()
				}
				mu.Unlock()
			}
			return nil
		})
		t.Seconds = time.Since(start).Seconds()
		t.PerSecond = float64(p.Routes-t.Errors) / t.Seconds
		return t, nil
	}
	// Both sides run alike: on a settled replica, and settled again between
	// the sequential and the concurrent run.
	m, err := h.serve(ctx, "replica-0")
	if err != nil {
		return res, err
	}
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return res, err
	}
	if res.Without, err = sequential(admissionWithoutNamespace); err != nil {
		return res, err
	}
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return res, err
	}
	if res.ThroughputWithout, err = concurrent(admissionWithoutNamespace); err != nil {
		return res, err
	}
	if err := h.fresh(ctx); err != nil {
		return res, err
	}
	if err := h.namespace(ctx, admissionNamespace, nil); err != nil {
		return res, err
	}
	if m, err = h.serve(ctx, "replica-1"); err != nil {
		return res, err
	}
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return res, err
	}
	prof := h.profile("admission-sequential")
	res.With, err = sequential(admissionNamespace)
	prof.end()
	if err != nil {
		return res, err
	}
	if err := h.settle(m, p.PhaseTimeout); err != nil {
		return res, err
	}
	prof = h.profile("admission-concurrent")
	res.ThroughputWith, err = concurrent(admissionNamespace)
	prof.end()
	if err != nil {
		return res, err
	}
	progress("  p50 %.1fms without, %.1fms with; %.0f/s without, %.0f/s with", res.Without.P50, res.With.P50,
		res.ThroughputWithout.PerSecond, res.ThroughputWith.PerSecond)
	return res, nil
}
