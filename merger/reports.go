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
	"github.com/gatefold/gatefold/rules"
)

// A fold decides every fragment's status; storing them is separate work,
// keyed per fragment, with workers of its own: a fold never waits on status
// writes, and a new fragment's report never waits behind its Gateway's other
// fragments'. Status writes wait for the folds under way (gate).

// report is the status a fold decided for a fragment, not yet stored.
type report struct {
	// uid and generation are the fragment's the fold read: the status holds
	// only for them. A fragment created again under the name starts again
	// at generation 1.
	uid        types.UID
	generation int64
	status     v1alpha1.ListenerFragmentStatus
}

// supersededBy says whether the fold's view of src is of a newer object than
// the one rep was decided for.
func (rep *report) supersededBy(src *rules.Source) bool {
	return src.UID != rep.uid || src.Generation > rep.generation
}

// reports are the statuses the folds decided for sources of one kind and
// the status writers have not yet seen stored.
type reports struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*report
	// queue is the status writers' queue, once their controller started.
	queue atomic.Pointer[queue]
}

// publish records the status a fold decided for src, as the cache showed src
// to the fold, and wakes a status writer. A report of an older generation
// than the one pending is dropped; with nothing pending and the status stored
// there is nothing to write, else the writer, which reads its writes, decides.
func (rs *reports) publish(src *rules.Source, st v1alpha1.ListenerFragmentStatus) {
	key := src.Ref().NamespacedName
	if src.Kind == rules.KindListenerSet {
		// As stored: a ListenerSet's status cannot say which Gateway
		// listener each listener became.
		st = rules.FromListenerSetStatus(rules.ToListenerSetStatus(st))
	}
	_, stored := stamped(st, src.Status)
	rs.mu.Lock()
	old := rs.pending[key]
	if old != nil && old.uid == src.UID && old.generation > src.Generation {
		rs.mu.Unlock()
		return
	}
	if stored && old == nil {
		rs.mu.Unlock()
		statusApplies.WithLabelValues(resultUnchanged).Inc()
		return
	}
	if rs.pending == nil {
		rs.pending = map[types.NamespacedName]*report{}
	}
	rs.pending[key] = &report{uid: src.UID, generation: src.Generation, status: st}
	rs.mu.Unlock()
	if q := rs.queue.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: key})
	}
}

// forget drops the report pending for key, if any, and says whether there
// was one: the fold no longer decides that object's status.
func (rs *reports) forget(key types.NamespacedName) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, pending := rs.pending[key]
	delete(rs.pending, key)
	return pending
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

// reportsOf returns the reports of sources of a kind.
func (r *Reconciler) reportsOf(kind string) *reports {
	if kind == rules.KindListenerSet {
		return &r.setReports
	}
	return &r.fragmentReports
}

// statusWriter stores the reports of the folds for sources of one kind, one
// source per request.
type statusWriter struct {
	r    *Reconciler
	kind string
}

func (w statusWriter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	reports := w.r.reportsOf(w.kind)
	if reports.get(req.NamespacedName) == nil {
		return ctrl.Result{}, nil
	}
	// Gateway folds go first (gate); one may publish a newer report meanwhile.
	if err := w.r.folding.wait(ctx); err != nil {
		return ctrl.Result{}, err
	}
	rep := reports.get(req.NamespacedName)
	if rep == nil {
		return ctrl.Result{}, nil
	}
	src, err := w.r.getSource(ctx, w.kind, req.NamespacedName)
	switch {
	case apierrors.IsNotFound(err):
		reports.done(req.NamespacedName, rep)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if w.kind == rules.KindListenerSet {
		switch ok, err := w.r.reportable(ctx, src); {
		case err != nil:
			return ctrl.Result{}, err
		case !ok:
			reports.done(req.NamespacedName, rep)
			return ctrl.Result{}, nil
		}
	}
	switch {
	case rep.supersededBy(src):
		// The fold of the newer object publishes its own report.
		reports.done(req.NamespacedName, rep)
		return ctrl.Result{}, nil
	case src.Generation < rep.generation:
		// The cache has not seen the fragment the fold read: its update
		// brings this request back.
		return ctrl.Result{}, nil
	}
	desired, stored := stamped(rep.status, src.Status)
	if stored {
		statusApplies.WithLabelValues(resultUnchanged).Inc()
		reports.done(req.NamespacedName, rep)
		return ctrl.Result{}, nil
	}
	switch err := w.r.applyStatus(ctx, src, desired); {
	case errors.Is(err, errFenced):
		// This replica may have lost its lease, or may renew it yet: it
		// looks again then.
		return ctrl.Result{RequeueAfter: fenceRetry}, nil
	case apierrors.IsConflict(err):
		// The cache is behind the fragment: its update brings this request
		// back, or this retry does.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
