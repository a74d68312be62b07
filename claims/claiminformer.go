package claims

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gatefold/gatefold/rules"
)

// Informer is this replica's watch of the claims (the Leases with the claim
// label in the claims namespace, never Leases elsewhere), which admission and
// the collector read. A request that wrote claims waits until it has seen its
// last write (CaughtUp). It runs on every replica, leader or not.
type Informer struct {
	informer toolscache.SharedIndexInformer

	mu sync.Mutex
	// changed is closed, and replaced, whenever the store changes.
	changed chan struct{}
	// read holds each claim the store holds, decoded once a version, by name.
	read map[string]*held
}

// entryIndex indexes decoded claims by rules.EntryKeys of their Gateway
// and listener: a request reads the claims its listeners could conflict
// with, not its Gateway's.
const entryIndex = "entry"

// claimPoll is how often a waiter looks at the store without being woken: a
// relist or a bookmark moves the store's version without an event.
const claimPoll = 50 * time.Millisecond

// NewInformer returns an informer of the claims lw lists and watches.
// It refuses to run without client-go's AtomicFIFO: only then does the
// store record the version it has caught up to, and apply a relist at once
// rather than object by object.
func NewInformer(lw toolscache.ListerWatcher) (*Informer, error) {
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.AtomicFIFO) {
		return nil, fmt.Errorf("the claims informer needs client-go's feature AtomicFIFO: unset KUBE_FEATURE_AtomicFIFO")
	}
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &coordinationv1.Lease{}, toolscache.SharedIndexInformerOptions{
		Indexers:          toolscache.Indexers{entryIndex: byEntryKeys},
		ObjectDescription: "claims",
	})
	if err := inf.SetTransform(cache.TransformStripManagedFields()); err != nil {
		return nil, fmt.Errorf("creating the claims informer: %w", err)
	}
	i := &Informer{informer: inf, changed: make(chan struct{}), read: map[string]*held{}}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    i.stored,
		UpdateFunc: func(_, obj any) { i.stored(obj) },
		DeleteFunc: i.deleted,
	}); err != nil {
		return nil, fmt.Errorf("creating the claims informer: %w", err)
	}
	return i, nil
}

// ListWatch lists and watches the claims in namespace ns, and nothing
// else: gatefold may read Leases there only.
func ListWatch(cfg *rest.Config, httpClient *http.Client, ns string) (toolscache.ListerWatcher, error) {
	c, err := coordinationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the claims watch client: %w", err)
	}
	leases := c.Leases(ns)
	selector := labels.Set{claimLabel: listenerClaim}.String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return leases.Watch(ctx, o)
		},
	}
	return toolscache.ToListWatcherWithWatchListSemantics(lw, c), nil
}

func byEntryKeys(obj any) ([]string, error) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, nil
	}
	h := readClaim(l)
	if !h.decoded {
		return nil, nil
	}
	return rules.EntryKeys(h.claim.Gateway.String(), h.holder.Entry), nil
}

// Start runs the informer until ctx ends.
func (i *Informer) Start(ctx context.Context) error {
	i.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica's webhook reads claims.
func (i *Informer) NeedLeaderElection() bool { return false }

// HasSynced says whether the informer holds every claim of its first list.
func (i *Informer) HasSynced() bool { return i.informer.HasSynced() }

// stored reads a claim the store now holds, and wakes the waiters. It runs
// after the store changed.
func (i *Informer) stored(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	h := readClaim(l)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.read[l.Name] = h
	i.notifyLocked()
}

// deleted forgets a claim the store no longer holds, and wakes the waiters.
func (i *Informer) deleted(obj any) {
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, name, splitErr := toolscache.SplitMetaNamespaceKey(key); err == nil && splitErr == nil {
		delete(i.read, name)
	}
	i.notifyLocked()
}

func (i *Informer) notifyLocked() {
	close(i.changed)
	i.changed = make(chan struct{})
}

// claim returns claim l as read: from read when it holds l itself, else
// read now (the store holds l, and stored has not run yet).
func (i *Informer) claim(l *coordinationv1.Lease) *held {
	i.mu.Lock()
	h := i.read[l.Name]
	i.mu.Unlock()
	if h != nil && h.lease == l {
		return h
	}
	return readClaim(l)
}

func (i *Informer) changes() <-chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.changed
}

// CaughtUp waits until the store holds every claim write up to resourceVersion
// rv ("" for: until it has synced), or ctx ends, and fails closed naming what
// it waited for. The store applies events, relists and bookmarks in order, so
// at rv or later it lacks no write up to rv.
func (i *Informer) CaughtUp(ctx context.Context, rv string) error {
	start := time.Now()
	tick := time.NewTicker(claimPoll)
	defer tick.Stop()
	for {
		changed := i.changes()
		done, err := i.reached(rv)
		if done || err != nil {
			return err
		}
		if i.informer.IsStopped() {
			return errors.New("this replica's claims informer has stopped")
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting %v for this replica's claims informer to see the claims written up to resourceVersion %q (it has seen %q, synced %v): %w",
				time.Since(start).Round(time.Millisecond), rv, i.informer.GetIndexer().LastStoreSyncResourceVersion(), i.HasSynced(), ctx.Err())
		}
	}
}

// reached says whether the store has synced and caught up to rv.
func (i *Informer) reached(rv string) (bool, error) {
	if !i.informer.HasSynced() {
		return false, nil
	}
	seen := i.informer.GetIndexer().LastStoreSyncResourceVersion()
	if rv == "" || seen == "" {
		// Synced is all rv "" asks; a store that has seen no version yet
		// waits for the next event.
		return rv == "", nil
	}
	cmp, err := resourceversion.CompareResourceVersion(seen, rv)
	if err != nil {
		return false, fmt.Errorf("comparing the claims informer's resourceVersion %q with a claim write's %q: %w", seen, rv, err)
	}
	return cmp >= 0, nil
}

// against returns the claims on Gateway gw that may conflict with one of
// entries (rules.ConflictKeys), and those of the given keys
// ("namespace/name"), decoded or not. They are shared: callers must not
// change them.
func (i *Informer) against(gw types.NamespacedName, entries []rules.Entry, keys []string) ([]*held, error) {
	indexer := i.informer.GetIndexer()
	seen := map[string]bool{}
	var objs []any
	found := func(o any) {
		if l, ok := o.(*coordinationv1.Lease); ok && !seen[l.Name] {
			seen[l.Name] = true
			objs = append(objs, o)
		}
	}
	for _, e := range entries {
		for _, key := range rules.ConflictKeys(gw.String(), e) {
			list, err := indexer.ByIndex(entryIndex, key)
			if err != nil {
				return nil, fmt.Errorf("reading the claims on Gateway %s: %w", gw, err)
			}
			for _, o := range list {
				found(o)
			}
		}
	}
	for _, key := range keys {
		if o, ok, err := indexer.GetByKey(key); err != nil {
			return nil, fmt.Errorf("reading claim %s: %w", key, err)
		} else if ok {
			found(o)
		}
	}
	return i.claims(objs), nil
}

// Versions returns the resourceVersion of each claim the informer holds, by
// name.
func (i *Informer) Versions() map[string]string {
	out := map[string]string{}
	for _, o := range i.informer.GetStore().List() {
		if l, ok := o.(*coordinationv1.Lease); ok {
			out[l.Name] = l.ResourceVersion
		}
	}
	return out
}

// all returns every claim, shared as against's.
func (i *Informer) all() []*held {
	return i.claims(i.informer.GetStore().List())
}

func (i *Informer) claims(objs []any) []*held {
	out := make([]*held, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			out = append(out, i.claim(l))
		}
	}
	return out
}
