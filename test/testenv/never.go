package testenv

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
)

// Never watches the objects of list's kind that opts select, those present
// when it starts included, for window, and fails t at the first event that
// bad describes (bad returns a non-empty description). A check that
// something does not happen then holds for the whole window, not only at
// the moment a test looks.
func Never(t testing.TB, env *devenv.Env, list client.ObjectList, window time.Duration, bad func(watch.Event) string, opts ...client.ListOption) {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatalf("Creating a watching client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), window+10*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, list, opts...)
	if err != nil {
		t.Fatalf("Watching: %v", err)
	}
	defer w.Stop()
	start := time.Now()
	end := time.NewTimer(window)
	defer end.Stop()
	for {
		select {
		case <-end.C:
			return
		case ev, open := <-w.ResultChan():
			switch {
			case !open:
				t.Fatalf("The watch ended %v into a window of %v", time.Since(start).Round(time.Millisecond), window)
			case ev.Type == watch.Error:
				t.Fatalf("Watching: %v", apierrors.FromObject(ev.Object))
			}
			if what := bad(ev); what != "" {
				t.Fatalf("%v into a window of %v: %s", time.Since(start).Round(time.Millisecond), window, what)
			}
		}
	}
}
