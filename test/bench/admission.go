package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// Latency is a distribution of request latencies, in milliseconds.
type Latency struct {
	Requests int     `json:"requests"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	P99      float64 `json:"p99"`
}

// AdmissionResult compares fragment creates with and without the webhooks.
type AdmissionResult struct {
	Without Latency `json:"withoutWebhooks"`
	With    Latency `json:"withWebhooks"`
}

func latency(samples []time.Duration) Latency {
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))].Microseconds()) / 1000
	}
	return Latency{Requests: len(samples), P50: at(0.5), P90: at(0.9), P99: at(0.99)}
}

// admission times sequential fragment creates, each with its own hostname,
// first with the webhooks removed, then installed (the manager serving
// them). Each run has a Gateway of its own, so the merger's work behind the
// creates grows alike in both.
func (h *harness) admission(ctx context.Context, p Params) (AdmissionResult, error) {
	var res AdmissionResult
	progress("Admission: %d creates without and %d with the webhooks", p.AdmissionCreates, p.AdmissionCreates)
	const ns = "admission"
	setup, err := h.client("bench-setup")
	if err != nil {
		return res, err
	}
	c, err := h.client("bench-writer/admission")
	if err != nil {
		return res, err
	}
	if err := setup.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return res, err
	}
	run := func(label string) (Latency, error) {
		gw := &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: label},
			Spec: gwv1.GatewaySpec{
				GatewayClassName: "example",
				Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
				AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
			},
		}
		if err := setup.Create(ctx, gw); err != nil {
			return Latency{}, err
		}
		var samples []time.Duration
		for i := range p.AdmissionCreates {
			lf := &v1alpha1.ListenerFragment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", label, i)},
				Spec: v1alpha1.ListenerFragmentSpec{
					ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(label)},
					Listeners: []gwv1.ListenerEntry{{Name: "web", Port: 8080, Protocol: gwv1.HTTPProtocolType,
						Hostname: ptr.To(gwv1.Hostname(fmt.Sprintf("%s-%d.example.com", label, i)))}},
				},
			}
			start := time.Now()
			if err := c.Create(ctx, lf); err != nil {
				return Latency{}, fmt.Errorf("creating %s: %w", lf.Name, err)
			}
			samples = append(samples, time.Since(start))
		}
		return latency(samples), nil
	}
	if err := h.setWebhooks(ctx, false); err != nil {
		return res, err
	}
	if res.Without, err = run("without"); err != nil {
		return res, err
	}
	if err := h.setWebhooks(ctx, true); err != nil {
		return res, err
	}
	if res.With, err = run("with"); err != nil {
		return res, err
	}
	progress("  p50 %.1fms without, %.1fms with", res.Without.P50, res.With.P50)
	return res, nil
}
