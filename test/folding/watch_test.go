package folding

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// follow calls seen with the objects of list's kind in namespace ns, by
// name: once as listed, then after every change a watch from that list
// delivers, in the API server's order, so that seen judges every state they
// pass through, however briefly. It returns seen's first error, an error
// when the watch fails or ends early, or nil once ctx ends. seen must not
// keep the map.
func follow(ctx context.Context, list client.ObjectList, ns string, seen func(map[string]client.Object) error) error {
	if err := watcher.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing %T in %s: %w", list, ns, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	state := map[string]client.Object{}
	for _, o := range items {
		obj := o.(client.Object)
		state[obj.GetName()] = obj
	}
	if err := seen(state); err != nil {
		return err
	}
	w, err := watcher.Watch(ctx, list, &client.ListOptions{Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
	if err != nil {
		return fmt.Errorf("watching %T in %s: %w", list, ns, err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return nil
		case ev, open = <-w.ResultChan():
		}
		if !open {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the watch of %T in %s ended early", list, ns)
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			obj := ev.Object.(client.Object)
			state[obj.GetName()] = obj
		case watch.Deleted:
			delete(state, ev.Object.(client.Object).GetName())
		case watch.Error:
			return fmt.Errorf("watching %T in %s: %w", list, ns, apierrors.FromObject(ev.Object))
		default:
			continue
		}
		if err := seen(state); err != nil {
			return err
		}
	}
}

// invariant is what must hold of the objects of a kind in a namespace, by
// name, in every state they pass through.
type invariant struct {
	list  client.ObjectList
	ns    string
	check func(map[string]client.Object) error
}

// holds follows the objects of every invariant for d, from their state now,
// and fails t at the first state one rejects. A negative check holds for a
// whole window: one look at its end misses a write undone since, a
// deletion, an object made anew.
func holds(t *testing.T, d time.Duration, invariants ...invariant) {
	t.Helper()
	g, window := errgroup.WithContext(ctx)
	window, cancel := context.WithTimeout(window, d)
	defer cancel()
	for _, inv := range invariants {
		g.Go(func() error { return follow(window, inv.list, inv.ns, inv.check) })
	}
	if err := g.Wait(); err != nil {
		t.Errorf("Within %s: %v", d, err)
	}
}

// unchanged is the invariant that the objects of list's kind in ns are
// those of versions, by name, at those resourceVersions: none is written,
// made or deleted.
func unchanged(list client.ObjectList, ns string, versions map[string]string) invariant {
	return invariant{list: list, ns: ns, check: func(objs map[string]client.Object) error {
		for name, obj := range objs {
			if rv, ok := versions[name]; !ok || rv != obj.GetResourceVersion() {
				return fmt.Errorf("%T %s was written in a steady state: resourceVersion %q became %s", obj, name, rv, obj.GetResourceVersion())
			}
		}
		for name := range versions {
			if _, ok := objs[name]; !ok {
				return fmt.Errorf("%s was deleted in a steady state", name)
			}
		}
		return nil
	}}
}

// unwritten is the invariant that the objects of list's kind in ns stay as
// they are now.
func unwritten(t *testing.T, list client.ObjectList, ns string) invariant {
	t.Helper()
	if err := watcher.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatalf("Listing %T in %s: %v", list, ns, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, o := range items {
		obj := o.(client.Object)
		versions[obj.GetName()] = obj.GetResourceVersion()
	}
	return unchanged(list.DeepCopyObject().(client.ObjectList), ns, versions)
}
