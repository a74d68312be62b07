package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
)

// Invariant is what must hold, in every state they pass through, of the
// objects of List's kind in Namespace ("" for all) that Opts also select,
// by name.
type Invariant struct {
	List      client.ObjectList
	Namespace string
	Opts      []client.ListOption
	Check     func(objs map[string]client.Object) error
}

// watchers holds one watching client per control plane, for Holds: a new
// one would spend the start of the window on discovery.
var watchers sync.Map // *devenv.Env → client.WithWatch

// watcher returns env's watching client, made on first use.
func watcher(env *devenv.Env) (client.WithWatch, error) {
	if c, ok := watchers.Load(env); ok {
		return c.(client.WithWatch), nil
	}
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a watching client: %w", err)
	}
	actual, _ := watchers.LoadOrStore(env, c)
	return actual.(client.WithWatch), nil
}

// Holds follows the objects of every invariant for window, from their state
// now, and stops the test at the first state one rejects: call it from the
// test's goroutine. A check that something does not happen then holds for
// the whole window: one look at its end misses a write undone since, a
// deletion, an object made anew.
func Holds(t testing.TB, env *devenv.Env, window time.Duration, invariants ...Invariant) {
	t.Helper()
	c, err := watcher(env)
	if err != nil {
		t.Fatal(err)
	}
	g, ctx := errgroup.WithContext(context.Background())
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	start := time.Now()
	for _, inv := range invariants {
		g.Go(func() error { return Follow(ctx, c, inv) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("%v into a window of %v: %v", time.Since(start).Round(time.Millisecond), window, err)
	}
}

// Follow calls inv.Check with the objects it names: once as listed, then
// after every change a watch from that list delivers, in the API server's
// order, so that Check judges every state they pass through, however
// briefly. It returns Check's first error, an error when the watch fails or
// ends early, or nil once ctx ends. Check must not keep the map.
func Follow(ctx context.Context, c client.WithWatch, inv Invariant) error {
	list := inv.List.DeepCopyObject().(client.ObjectList)
	opts := append([]client.ListOption{client.InNamespace(inv.Namespace)}, inv.Opts...)
	if err := c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing %T in %q: %w", list, inv.Namespace, err)
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
	if err := inv.Check(state); err != nil {
		return err
	}
	from := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}}
	w, err := c.Watch(ctx, list, append(opts, from)...)
	if err != nil {
		return fmt.Errorf("watching %T in %q: %w", list, inv.Namespace, err)
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
			return fmt.Errorf("the watch of %T in %q ended early", list, inv.Namespace)
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			obj := ev.Object.(client.Object)
			state[obj.GetName()] = obj
		case watch.Deleted:
			delete(state, ev.Object.(client.Object).GetName())
		case watch.Error:
			return fmt.Errorf("watching %T in %q: %w", list, inv.Namespace, apierrors.FromObject(ev.Object))
		default:
			continue
		}
		if err := inv.Check(state); err != nil {
			return err
		}
	}
}

// ObjectHolds is the Invariant that the object key of list's kind exists
// and check accepts it.
func ObjectHolds(list client.ObjectList, key client.ObjectKey, check func(client.Object) error) Invariant {
	return Invariant{List: list, Namespace: key.Namespace, Opts: []client.ListOption{client.MatchingFields{"metadata.name": key.Name}},
		Check: func(objs map[string]client.Object) error {
			obj, ok := objs[key.Name]
			if !ok {
				return fmt.Errorf("%s is gone", key)
			}
			return check(obj)
		}}
}
