package merger

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// The merger reads and writes a pool's siblings here; where sources land is
// the fold's (fold/pool.go).

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=create;update;delete

// readPool adds to in the pool the Gateway heads: its siblings and the
// names taken in its namespace. A Gateway that is not marked and has no
// siblings heads none. One no longer marked keeps its siblings, and what
// they carry, but does not grow, and lets them empty.
func (r *Reconciler) readPool(ctx context.Context, in *fold.Input) error {
	gw := in.Gateway
	list := &gwv1.GatewayList{}
	if rules.PoolHead(gw) {
		// Read your writes: a sibling this replica just created must be
		// seen, or the fold would name it anew. Every name in the namespace
		// is read: a new sibling takes one no Gateway has.
		if err := r.Client.List(ctx, list, client.InNamespace(gw.Namespace)); err != nil {
			return fmt.Errorf("listing the Gateways of namespace %s: %w", gw.Namespace, err)
		}
	} else if err := r.Client.List(ctx, list, client.MatchingFields{manager.PoolIndex: client.ObjectKeyFromObject(gw).String()}, client.DisableReadYourWritesConsistency); err != nil {
		// Only an unmarked head still has siblings, which it never adds to:
		// every other Gateway's fold waits on no one's writes.
		return fmt.Errorf("listing the siblings of Gateway %s: %w", klog.KObj(gw), err)
	}
	p := &fold.Pool{Names: sets.New[string]()}
	for i := range list.Items {
		sib := &list.Items[i]
		p.Names.Insert(sib.Name)
		// The Gateway of the ListenerSets is no pool's (readListenerSetGateway).
		if !rules.SiblingOf(sib, gw) || !sib.DeletionTimestamp.IsZero() || rules.ListenerSetGateway(sib) {
			continue
		}
		managed := rules.ManagedListeners(sib)
		p.Siblings = append(p.Siblings, fold.Sibling{Gateway: sib, Managed: managed,
			CarriedSince: r.carried.observe(client.ObjectKeyFromObject(sib), sib, managed)})
	}
	if !rules.PoolHead(gw) && len(p.Siblings) == 0 {
		return nil
	}
	slices.SortFunc(p.Siblings, func(a, b fold.Sibling) int {
		return rules.SiblingIndex(gw.Name, a.Gateway.Name) - rules.SiblingIndex(gw.Name, b.Gateway.Name)
	})
	p.NoGrowth = r.pools.recall(client.ObjectKeyFromObject(gw), time.Now())
	p.Draining = !rules.PoolHead(gw)
	in.Pool = p
	return nil
}

// readListenerSetGateway adds to in the Gateway gatefold keeps for the
// ListenerSets of in.Gateway, or why no ListenerSet can be folded now: a
// Gateway of that name that gatefold did not create is never taken over.
func (r *Reconciler) readListenerSetGateway(ctx context.Context, in *fold.Input) error {
	gw := in.Gateway
	key := listenerSetGatewayKey(client.ObjectKeyFromObject(gw))
	got := &gwv1.Gateway{}
	// Read your writes: one this replica just created must be seen, or the
	// fold would create it anew.
	switch err := r.Client.Get(ctx, key, got); {
	case apierrors.IsNotFound(err):
		in.ListenerSetGatewayBlocked = r.pools.recall(key, time.Now())
		return nil
	case err != nil:
		return fmt.Errorf("reading Gateway %s: %w", key, err)
	}
	if in.ListenerSetGatewayBlocked = rules.ListenerSetGatewayBlocked(gw, got); in.ListenerSetGatewayBlocked == "" {
		managed := rules.ManagedListeners(got)
		in.ListenerSetGateway = &fold.Sibling{Gateway: got, Managed: managed, CarriedSince: r.carried.observe(key, got, managed)}
	}
	return nil
}

// listenerSetGatewayKey is the key of the Gateway of parent's ListenerSets.
func listenerSetGatewayKey(parent types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Namespace: parent.Namespace, Name: rules.ListenerSetGatewayName(parent.Name)}
}

// prune deletes the siblings that have carried no folded listener for the
// grace period, and returns when to look again at those that will. A
// sibling this fold wrote is left for the next: the delete is fenced by the
// resourceVersion the fold read.
func (r *Reconciler) prune(ctx context.Context, in *fold.Input, res fold.Result) (time.Duration, error) {
	var next time.Duration
	now := time.Now()
	ts, err := r.targets(ctx, in, res)
	if err != nil {
		return 0, err
	}
	for _, t := range ts[1:] {
		if t.gw == nil || len(t.listeners) > 0 || t.changed() {
			r.pools.filled(t.key)
			continue
		}
		left := r.PoolGrace - now.Sub(r.pools.empty(t.key, now))
		if left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		if err := r.deleteSibling(ctx, t, false, fmt.Sprintf("it carried no folded listener for %s", r.PoolGrace)); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// deleteSibling deletes the target, a sibling, fenced by the uid and
// resourceVersion the fold read; why says why, in the log and the event.
func (r *Reconciler) deleteSibling(ctx context.Context, t target, dryRun bool, why string) error {
	opts := []client.DeleteOption{client.Preconditions{UID: ptr.To(t.gw.UID), ResourceVersion: ptr.To(t.gw.ResourceVersion)}}
	if dryRun {
		opts = append(opts, client.DryRunAll, client.DisableReadYourWritesConsistency)
	} else if err := r.fenced(); err != nil {
		return err
	}
	switch err := r.Client.Delete(ctx, t.gw, opts...); {
	case dryRun || apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("deleting Gateway %s, gatefold's for Gateway %s: %w", t.key, klog.KObj(t.head), err)
	}
	if t.listenerSets {
		log.FromContext(ctx).Info("Deleted the Gateway of a Gateway's ListenerSets", "gateway", klog.KObj(t.head), "listenerSetGateway", t.key.Name, "why", why)
		r.Recorder.Eventf(t.head, nil, corev1.EventTypeNormal, "ListenerSetGatewayDeleted", "Fold", "Deleted Gateway %s, which carried the listeners of this Gateway's ListenerSets: %s", t.key.Name, why)
	} else {
		log.FromContext(ctx).Info("Deleted a Gateway of a pool", "gateway", klog.KObj(t.head), "sibling", t.key.Name, "why", why)
		r.Recorder.Eventf(t.head, nil, corev1.EventTypeNormal, "PoolShrank", "Fold", "Deleted Gateway %s of the pool: %s", t.key.Name, why)
	}
	gatewayApplies.WithLabelValues(resultWritten).Inc()
	r.pools.filled(t.key)
	r.carried.forget(t.key)
	return nil
}

// siblingsToHead maps a Gateway event to the Gateway to fold: a sibling's
// changes (its implementation's status, above all) matter to its head's
// pool; a sibling itself is folded too, to answer fragments that name it. A
// Gateway named like the one of another's ListenerSets, gatefold's or not,
// matters to that other.
func siblingsToHead(_ context.Context, o client.Object) []reconcile.Request {
	out := []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	if head, ok := rules.HeadOf(o.(*gwv1.Gateway)); ok {
		out = append(out, reconcile.Request{NamespacedName: head})
	} else if parent, ok := rules.ListenerSetGatewayParent(o.GetName()); ok {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: parent}})
	}
	return out
}

// poolMemo remembers, per pool head, a refused sibling (the pool does not
// grow for refusalTTL), per Gateway of a Gateway's ListenerSets a refused
// create (no ListenerSet folds for refusalTTL), and since when each sibling
// has been empty.
type poolMemo struct {
	mu         sync.Mutex
	refused    map[types.NamespacedName]growthRefusal
	emptySince map[types.NamespacedName]time.Time
}

type growthRefusal struct {
	msg string
	at  time.Time
}

// refuse remembers that the API server refused a Gateway gatefold would
// create, keyed by key (the pool's head, or the Gateway of the ListenerSets),
// with what the sources that needed it are told.
func (m *poolMemo) refuse(key types.NamespacedName, msg string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refused == nil {
		m.refused = map[types.NamespacedName]growthRefusal{}
	}
	m.refused[key] = growthRefusal{msg: msg, at: now}
}

// recall returns what refuse remembered of key, while the refusal holds.
func (m *poolMemo) recall(key types.NamespacedName, now time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.refused[key]
	if !ok || now.Sub(g.at) >= refusalTTL {
		delete(m.refused, key)
		return ""
	}
	return g.msg
}

// forget drops what is remembered of a deleted head's growth and of the
// Gateway of its ListenerSets.
func (m *poolMemo) forget(head types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.refused, head)
	delete(m.refused, listenerSetGatewayKey(head))
}

// empty returns since when the sibling has been seen empty.
func (m *poolMemo) empty(sibling types.NamespacedName, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.emptySince == nil {
		m.emptySince = map[types.NamespacedName]time.Time{}
	}
	if _, ok := m.emptySince[sibling]; !ok {
		m.emptySince[sibling] = now
	}
	return m.emptySince[sibling]
}

// filled forgets that the sibling was empty.
func (m *poolMemo) filled(sibling types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.emptySince, sibling)
}
