package webhook

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fakeClaims lists and watches the claims of a fake client for a real claim
// informer, as the API server would, except that a test may hold back each
// event (delay) to show what a lagging informer does.
type fakeClaims struct {
	c client.WithWatch
	// delay is how long each watch event is held back.
	delay atomic.Int64
	// watching is closed once a watch is open: writes before it would be
	// lost, the fake's watch starting where it is opened.
	watching chan struct{}
	once     sync.Once
	informer *ClaimInformer
	// stop stops the informer.
	stop func()
}

func newFakeClaims(c client.WithWatch) *fakeClaims {
	return &fakeClaims{c: c, watching: make(chan struct{})}
}

// IsWatchListSemanticsUnSupported tells the reflector to list, then watch.
func (f *fakeClaims) IsWatchListSemanticsUnSupported() bool { return true }

func (f *fakeClaims) listWatch() toolscache.ListerWatcher {
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			list := &coordinationv1.LeaseList{}
			return list, f.c.List(ctx, list, client.InNamespace(claimsNS))
		},
		WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			w, err := f.c.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(claimsNS))
			if err != nil {
				return nil, err
			}
			f.once.Do(func() { close(f.watching) })
			return newRelay(w, &f.delay), nil
		},
	}, f)
}

// start runs a claim informer on the fake until the test ends, and waits
// until it has synced and watches.
func (f *fakeClaims) start(t *testing.T) *ClaimInformer {
	t.Helper()
	i, err := NewClaimInformer(f.listWatch())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = i.Start(ctx)
	}()
	f.stop = func() { cancel(); <-stopped }
	t.Cleanup(f.stop)
	wait, done := context.WithTimeout(ctx, 5*time.Second)
	defer done()
	if err := i.caughtUp(wait, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.watching:
	case <-wait.Done():
		t.Fatal("The claim informer opened no watch")
	}
	f.informer = i
	return i
}

// settle waits until the informer holds every claim of the fake at its
// version, and no other.
func (f *fakeClaims) settle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		list := &coordinationv1.LeaseList{}
		if err := f.c.List(context.Background(), list, client.InNamespace(claimsNS)); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for _, l := range list.Items {
			want[l.Name] = l.ResourceVersion
		}
		got := map[string]string{}
		for _, h := range f.informer.all() {
			got[h.lease.Name] = h.lease.ResourceVersion
		}
		if equalVersions(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("The claim informer holds %v, want %v", got, want)
		}
	}
}

func equalVersions(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// relay passes a fake's watch events on, each held back by delay, in order.
// The fake sends a deleted object at the version it had; the API server
// sends it at the version of its deletion, which relay stands in for with
// the latest version it passed on, so that the informer's version never goes
// back.
type relay struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newRelay(in watch.Interface, delay *atomic.Int64) *relay {
	r := &relay{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go r.run(delay)
	return r
}

func (r *relay) run(delay *atomic.Int64) {
	defer close(r.out)
	var latest uint64
	for ev := range r.in.ResultChan() {
		select {
		case <-time.After(time.Duration(delay.Load())):
		case <-r.stop:
			return
		}
		if m, err := meta.Accessor(ev.Object); err == nil {
			rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
			if ev.Type == watch.Deleted && rv < latest {
				ev.Object = ev.Object.DeepCopyObject()
				m, _ = meta.Accessor(ev.Object)
				m.SetResourceVersion(strconv.FormatUint(latest, 10))
			}
			latest = max(latest, rv)
		}
		select {
		case r.out <- ev:
		case <-r.stop:
			return
		}
	}
}

func (r *relay) Stop() {
	r.once.Do(func() {
		close(r.stop)
		r.in.Stop()
	})
}

func (r *relay) ResultChan() <-chan watch.Event { return r.out }

func TestRequestWhoseClaimTheInformerDoesNotSeeInTimeFails(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	v := s.validator()
	s.watch.delay.Store(int64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := v.ValidateCreate(ctx, onShared("shop", "app", 1, appHTTPS))
	wantErr(t, err, "for this replica's claims informer to see the claims written up to resourceVersion")
	wantErr(t, err, "context deadline exceeded")
}

func TestRequestFailsOnceTheInformerStopped(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	v := s.validator()
	s.watch.stop()
	s.took()
	_, err := v.ValidateCreate(context.Background(), onShared("shop", "app", 1, appHTTPS))
	wantErr(t, err, "this replica's claims informer has stopped")
	if got := writes(s.took()); !cmp.Equal(got, []string{"create " + claimName(appHTTPS), "delete " + claimName(appHTTPS)}) {
		t.Errorf("The failed request wrote %q, want its claim created and released", got)
	}
}

func TestClaimInformerReadsAClaimOncePerVersion(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	s.watch.settle(t)
	claimOn := func() *held {
		claims, err := s.claims.Claims.onGateway(shared)
		if err != nil || len(claims) != 1 {
			t.Fatalf("Claims on the Gateway: %v, %v", claims, err)
		}
		return claims[0]
	}
	// The informer reads a claim as its event is handled, just after the
	// store changed.
	first := claimOn()
	for deadline := time.Now().Add(5 * time.Second); claimOn() != first; first = claimOn() {
		if time.Now().After(deadline) {
			t.Fatal("The informer reads a claim again at every read at the version it has")
		}
		time.Sleep(time.Millisecond)
	}
	l := s.claim(claimName(appHTTPS))
	l.Annotations["touched"] = "yes"
	if err := s.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	s.watch.settle(t)
	if h := claimOn(); h == first || h.lease.ResourceVersion != l.ResourceVersion || !h.decoded {
		t.Errorf("After a write the informer gives the claim at version %s, want it read again at %s", h.lease.ResourceVersion, l.ResourceVersion)
	}
}
