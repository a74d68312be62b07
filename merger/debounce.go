package merger

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A Gateway's events start a burst, and the Gateway is folded once they have
// been quiet for the quiet period, or at the latest the maximum delay after the
// burst's first event, so that a burst costs one or two Gateway writes.
// Requeues the merger asks for itself are not delayed.

// debouncer tracks the bursts of events of each Gateway.
type debouncer struct {
	quiet, maxDelay time.Duration
	// now is the clock; tests replace it.
	now func() time.Time

	mu     sync.Mutex
	bursts map[reconcile.Request]burst
}

// burst is when a Gateway's first and last pending events came, and how
// many came.
type burst struct {
	first, last time.Time
	events      int
}

func newDebouncer(quiet, maxDelay time.Duration) *debouncer {
	return &debouncer{quiet: quiet, maxDelay: maxDelay, now: time.Now, bursts: map[reconcile.Request]burst{}}
}

// event records an event of req and returns how long to wait before the
// Gateway may be folded.
func (d *debouncer) event(req reconcile.Request) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	b, ok := d.bursts[req]
	if !ok {
		b.first = now
	}
	b.last = now
	b.events++
	d.bursts[req] = b
	return d.wait(b, now)
}

// due says how long the fold of req must still wait, and ends its burst when
// it need not: events after this moment start the next burst. A nil
// debouncer never waits.
func (d *debouncer) due(req reconcile.Request) time.Duration {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.bursts[req]
	if !ok {
		return 0
	}
	if w := d.wait(b, d.now()); w > 0 {
		return w
	}
	delete(d.bursts, req)
	return 0
}

func (d *debouncer) wait(b burst, now time.Time) time.Duration {
	return max(0, min(b.last.Add(d.quietFor(b)).Sub(now), b.first.Add(d.maxDelay).Sub(now)))
}

// quietFor is the quiet period that ends burst b: the configured one, or, for
// a Gateway whose events keep coming a few hundred milliseconds apart, four of
// their mean gaps, at most five quiet periods (docs/architecture.md, "Debounce").
func (d *debouncer) quietFor(b burst) time.Duration {
	if b.events < 2 {
		return d.quiet
	}
	gap := b.last.Sub(b.first) / time.Duration(b.events-1)
	return min(max(d.quiet, 4*gap), 5*d.quiet)
}

// debounced wraps an event handler so that the Gateways it enqueues are
// folded when their burst ends.
func debounced[T any](d *debouncer, h handler.TypedEventHandler[T, reconcile.Request]) handler.TypedEventHandler[T, reconcile.Request] {
	return debouncedHandler[T]{d: d, h: h}
}

type debouncedHandler[T any] struct {
	d *debouncer
	h handler.TypedEventHandler[T, reconcile.Request]
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h debouncedHandler[T]) Create(ctx context.Context, e event.TypedCreateEvent[T], q queue) {
	h.h.Create(ctx, e, h.wrap(q))
}

func (h debouncedHandler[T]) Update(ctx context.Context, e event.TypedUpdateEvent[T], q queue) {
	h.h.Update(ctx, e, h.wrap(q))
}

func (h debouncedHandler[T]) Delete(ctx context.Context, e event.TypedDeleteEvent[T], q queue) {
	h.h.Delete(ctx, e, h.wrap(q))
}

func (h debouncedHandler[T]) Generic(ctx context.Context, e event.TypedGenericEvent[T], q queue) {
	h.h.Generic(ctx, e, h.wrap(q))
}

// wrap debounces what the handler adds to q. On controller-runtime's
// priority queue it stays one, so that the handler still gives the events
// of the initial list, and updates that change nothing, a low priority.
func (h debouncedHandler[T]) wrap(q queue) queue {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return debouncedPriorityQueue{PriorityQueue: pq, d: h.d}
	}
	return debouncedQueue{q, h.d}
}

// debouncedQueue turns a handler's Add into an Add after the quiet period;
// the reconciler then waits for the rest of the burst (debouncer.due).
type debouncedQueue struct {
	queue
	d *debouncer
}

func (q debouncedQueue) Add(req reconcile.Request) { q.AddAfter(req, q.d.event(req)) }

// debouncedPriorityQueue is debouncedQueue on a priority queue.
type debouncedPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	d *debouncer
}

func (q debouncedPriorityQueue) Add(req reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, req)
}

func (q debouncedPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	for _, req := range reqs {
		o := o
		o.After = max(o.After, q.d.event(req))
		q.PriorityQueue.AddWithOpts(o, req)
	}
}
