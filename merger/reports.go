package merger

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// A fold decides every fragment's status; storing them is separate work,
// keyed per fragment, with workers of its own: a fold never waits on status
// writes, and a new fragment's report never waits behind its Gateway's other
// fragments'.

// report is the status a fold decided for a fragment, not yet stored.
type report struct {
	// generation is the fragment's generation the fold read: the status
	// holds only for it.
	generation int64
	status     v1alpha1.ListenerFragmentStatus
}

// reports are the statuses the folds decided and the status writers have
// not yet seen stored.
type reports struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*report
	// queue is the status writers' queue, once their controller started.
	queue atomic.Pointer[queue]
}

// publish records the status a fold decided for lf, as the cache showed lf
// to the fold, and wakes a status writer when the stored one differs. A
// report of an older generation than one pending is dropped: it was decided
// from a fragment that has changed since.
func (rs *reports) publish(lf *v1alpha1.ListenerFragment, st v1alpha1.ListenerFragmentStatus) {
	key := keyOf(lf)
	_, stored := stamped(st, lf.Status)
	rs.mu.Lock()
	if old := rs.pending[key]; old != nil && old.generation > lf.Generation {
		rs.mu.Unlock()
		return
	}
	if stored {
		delete(rs.pending, key)
		rs.mu.Unlock()
		statusApplies.WithLabelValues(resultUnchanged).Inc()
		return
	}
	if rs.pending == nil {
		rs.pending = map[types.NamespacedName]*report{}
	}
	rs.pending[key] = &report{generation: lf.Generation, status: st}
	rs.mu.Unlock()
	if q := rs.queue.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: key})
	}
}

func (rs *reports) get(key types.NamespacedName) *report {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.pending[key]
}

// done drops rep once it is stored or moot, unless a newer one replaced it.
func (rs *reports) done(key types.NamespacedName, rep *report) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.pending[key] == rep {
		delete(rs.pending, key)
	}
}

// stamped returns the desired status with the stored lastTransitionTime of
// every condition whose status did not change and now on the others, and
// whether that is what is stored already.
func stamped(desired, stored v1alpha1.ListenerFragmentStatus) (v1alpha1.ListenerFragmentStatus, bool) {
	desired = withTransitionTimes(desired, stored, metav1.Now())
	return desired, equality.Semantic.DeepEqual(desired, stored)
}

// statusWriter stores the reports of the folds, one fragment per request.
type statusWriter struct {
	r *Reconciler
}

func (w statusWriter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rep := w.r.reports.get(req.NamespacedName)
	if rep == nil {
		return ctrl.Result{}, nil
	}
	lf := &v1alpha1.ListenerFragment{}
	switch err := w.r.Client.Get(ctx, req.NamespacedName, lf); {
	case apierrors.IsNotFound(err):
		w.r.reports.done(req.NamespacedName, rep)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	switch {
	case lf.Generation > rep.generation:
		// The fold of the newer spec publishes its own report.
		w.r.reports.done(req.NamespacedName, rep)
		return ctrl.Result{}, nil
	case lf.Generation < rep.generation:
		// The cache has not seen the fragment the fold read: its update
		// brings this request back.
		return ctrl.Result{}, nil
	}
	desired, stored := stamped(rep.status, lf.Status)
	if stored {
		w.r.reports.done(req.NamespacedName, rep)
		return ctrl.Result{}, nil
	}
	switch err := w.r.applyStatus(ctx, lf, desired); {
	case errors.Is(err, errFenced):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		// The cache is behind the fragment: its update brings this request
		// back, or this retry does.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
