package merger

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestDebouncer(t *testing.T) {
	const quiet, maxDelay = 200 * time.Millisecond, 2 * time.Second
	gw := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "infra", Name: "shared"}}
	type step struct {
		at    time.Duration // since the start
		event bool          // an event, else the fold asks whether it is due
		wait  time.Duration // what event or due answers
	}
	tests := map[string][]step{
		"a requeue with no event folds at once": {{at: 0, wait: 0}},
		"one event waits the quiet period": {
			{at: 0, event: true, wait: quiet},
			{at: 100 * time.Millisecond, wait: 100 * time.Millisecond},
			{at: quiet, wait: 0},
		},
		"each event restarts the quiet period": {
			{at: 0, event: true, wait: quiet},
			{at: 40 * time.Millisecond, event: true, wait: quiet},
			{at: 100 * time.Millisecond, wait: 140 * time.Millisecond},
			{at: 240 * time.Millisecond, wait: 0},
		},
		"events a few hundred milliseconds apart wait four mean gaps": {
			{at: 0, event: true, wait: quiet},
			{at: 150 * time.Millisecond, event: true, wait: 600 * time.Millisecond},
			{at: 300 * time.Millisecond, event: true, wait: 600 * time.Millisecond},
			{at: 600 * time.Millisecond, wait: 300 * time.Millisecond},
			{at: 900 * time.Millisecond, wait: 0},
		},
		"the longer quiet is at most five quiet periods": {
			{at: 0, event: true, wait: quiet},
			{at: 800 * time.Millisecond, event: true, wait: 5 * quiet},
			{at: 1800 * time.Millisecond, wait: 0},
		},
		"a burst that never goes quiet is folded at the maximum delay": {
			{at: 0, event: true, wait: quiet},
			{at: 1900 * time.Millisecond, event: true, wait: 100 * time.Millisecond},
			{at: 1950 * time.Millisecond, event: true, wait: 50 * time.Millisecond},
			{at: 2 * time.Second, wait: 0},
		},
		"the fold ends the burst: a later event starts the next one": {
			{at: 0, event: true, wait: quiet},
			{at: 5 * time.Second, wait: 0},
			{at: 5 * time.Second, wait: 0},
			{at: 6 * time.Second, event: true, wait: quiet},
			{at: 6*time.Second + 100*time.Millisecond, wait: 100 * time.Millisecond},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			var now time.Time
			d := newDebouncer(quiet, maxDelay)
			d.now = func() time.Time { return now }
			for i, s := range steps {
				now = start.Add(s.at)
				var got time.Duration
				if s.event {
					got = d.event(gw)
				} else {
					got = d.due(gw)
				}
				if got != s.wait {
					t.Errorf("step %d at %v (event %v): wait %v, want %v", i, s.at, s.event, got, s.wait)
				}
			}
		})
	}
}

// On controller-runtime's priority queue a debounced event still waits the
// quiet period, and an event of the informer's initial list keeps its low
// priority, so that a leader that just started folds changes first.
func TestDebouncedEventsKeepTheirPriority(t *testing.T) {
	const quiet = 50 * time.Millisecond
	q := priorityqueue.New[reconcile.Request]("debounce-test")
	defer q.ShutDown()
	h := debounced(newDebouncer(quiet, time.Second), handler.EventHandler(&handler.EnqueueRequestForObject{}))
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}}
	start := time.Now()
	h.Create(context.Background(), event.CreateEvent{Object: gw, IsInInitialList: true}, q)
	req, priority, _ := q.GetWithPriority()
	if waited := time.Since(start); waited < quiet {
		t.Errorf("The Gateway was ready after %v, before the quiet period of %v", waited, quiet)
	}
	if want := (reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "infra", Name: "shared"}}); req != want {
		t.Errorf("Got %v, want %v", req, want)
	}
	if priority != handler.LowPriority {
		t.Errorf("An initial-list event has priority %d, want %d (low)", priority, handler.LowPriority)
	}
}
