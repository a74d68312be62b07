// Package claimstest runs a claim store on a fake API server, for the tests
// of package claims and of the webhooks that take claims: a test moves the
// replica's clock, holds back the claim informer's events and counts every
// request on claims. It must never be linked into gatefold.
package claimstest

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

const (
	// Namespace holds the claims.
	Namespace = "gatefold-system"
	// Grace is the store's grace period.
	Grace = 30 * time.Second
)

// Store is a claim store on a fake API server whose informer cache is the
// fake itself, with a real claim informer watching the fake, a clock the
// test moves and a log of the claim requests.
type Store struct {
	T      *testing.T
	C      client.WithWatch
	Claims *claims.Store
	Watch  *FakeClaims
	Clock  time.Time

	mu sync.Mutex
	// calls are the requests on claims: "list", "get", "create NAME",
	// "update NAME", "delete NAME". The claim informer's are not counted.
	calls []string
	// BeforeDelete, when set, runs before a claim is deleted.
	BeforeDelete func(c client.WithWatch, name string)
	// BeforeCreate, when set, runs before a claim is created, and
	// AfterCreate after it was.
	BeforeCreate, AfterCreate func(c client.WithWatch, name string)
	// FailGet, when set, may fail a read of any object.
	FailGet func(key client.ObjectKey, obj client.Object) error
}

// New returns a Store on a fake API server holding objs.
func New(t *testing.T, objs ...client.Object) *Store {
	t.Helper()
	s := &Store{T: t, Clock: time.Unix(1_000_000, 0)}
	isClaim := func(o any) bool {
		_, lease := o.(*coordinationv1.Lease)
		_, leases := o.(*coordinationv1.LeaseList)
		return lease || leases
	}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithGlobalResourceVersionCounter()
	if err := manager.IndexFragments(context.Background(), fixture.Indexer{B: b}); err != nil {
		t.Fatal(err)
	}
	base := b.Build()
	s.C = interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if isClaim(list) {
				s.record("list")
			}
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if isClaim(obj) {
				s.record("get")
			}
			if s.FailGet != nil {
				if err := s.FailGet(key, obj); err != nil {
					return err
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !isClaim(obj) {
				return c.Create(ctx, obj, opts...)
			}
			s.record("create " + obj.GetName())
			if s.BeforeCreate != nil {
				s.BeforeCreate(c, obj.GetName())
			}
			err := c.Create(ctx, obj, opts...)
			if err == nil && s.AfterCreate != nil {
				s.AfterCreate(c, obj.GetName())
			}
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if isClaim(obj) {
				s.record("update " + obj.GetName())
			}
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if isClaim(obj) {
				s.record("delete " + obj.GetName())
				del := &client.DeleteOptions{}
				del.ApplyOptions(opts)
				if del.Preconditions == nil || ptr.Deref(del.Preconditions.ResourceVersion, "") == "" {
					t.Errorf("Claim %s deleted without a resourceVersion precondition", obj.GetName())
				}
				if s.BeforeDelete != nil {
					s.BeforeDelete(c, obj.GetName())
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	live := interceptor.NewClient(s.C, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, fragment := obj.(*v1alpha1.ListenerFragment); fragment {
				s.record("live get " + key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	s.Watch = NewFakeClaims(base)
	s.Claims = &claims.Store{Client: s.C, Claims: s.Watch.Start(t), Reader: live, Cache: s.C, Namespace: Namespace, Grace: Grace, Now: func() time.Time { return s.Clock }}
	return s
}

func (s *Store) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

// Took returns the requests since the last call, and forgets them.
func (s *Store) Took() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

// Writes are the writes among calls.
func Writes(calls []string) []string {
	var out []string
	for _, c := range calls {
		if c != "list" && c != "get" && !strings.HasPrefix(c, "live get ") {
			out = append(out, c)
		}
	}
	return out
}

// Claim returns the claim with that name, nil when there is none.
func (s *Store) Claim(name string) *coordinationv1.Lease {
	s.T.Helper()
	l := &coordinationv1.Lease{}
	if err := s.C.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, l); err != nil {
		return nil
	}
	return l
}

// HolderOf returns the holder identity of the claim with that name, "" when
// there is none.
func (s *Store) HolderOf(name string) string {
	s.T.Helper()
	if l := s.Claim(name); l != nil {
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	return ""
}

// Collect runs one round of the collector once the informer shows every
// claim.
func (s *Store) Collect() claims.Collected {
	s.T.Helper()
	s.Watch.Settle(s.T)
	done, err := s.Claims.Collect(context.Background())
	if err != nil {
		s.T.Fatalf("Collect: %v", err)
	}
	return done
}

// LeaseFor is the claim of listener i of lf, as the store writes it.
func (s *Store) LeaseFor(lf *v1alpha1.ListenerFragment, i int) *coordinationv1.Lease {
	l := lf.Spec.Listeners[i]
	e := rules.EntryOf(l.Port, l.Protocol, l.Hostname)
	return s.Claims.Lease(claims.Claim{Gateway: rules.ParentOf(lf), Tuple: e.Tuple()},
		claims.Holder{Namespace: lf.Namespace, Name: lf.Name, UID: lf.UID, Listener: string(l.Name), Entry: e})
}

// Namespaced is namespace name with labels.
func Namespaced(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Gateway is Gateway ns/name of class example that admits listeners from
// namespaces from, with listeners (an HTTP listener on 8080 when none).
func Gateway(ns, name string, from gwv1.FromNamespaces, listeners ...gwv1.Listener) *gwv1.Gateway {
	if len(listeners) == 0 {
		listeners = []gwv1.Listener{fixture.Own("default", 8080, gwv1.HTTPProtocolType, "")}
	}
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{GatewayClassName: "example", Listeners: listeners,
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(from)}}},
	}
}

// Shared is the Gateway the fragments of OnShared name.
var Shared = types.NamespacedName{Namespace: "infra", Name: "shared"}

// OnShared is fragment ns/name of Gateway infra/shared, created at second sec.
func OnShared(ns, name string, sec int64, listeners ...gwv1.ListenerEntry) *v1alpha1.ListenerFragment {
	return &v1alpha1.ListenerFragment{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ListenerFragment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"),
			CreationTimestamp: metav1.Unix(sec, 0)},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: "shared", Namespace: ptr.To(gwv1.Namespace("infra"))},
			Listeners: listeners,
		},
	}
}

// FoldedOnShared is OnShared with a status that says the fold placed every
// listener: what the collector backfills claims for.
func FoldedOnShared(ns, name string, sec int64, listeners ...gwv1.ListenerEntry) *v1alpha1.ListenerFragment {
	lf := OnShared(ns, name, sec, listeners...)
	lf.Status = fixture.FoldedStatus(lf, gwv1.ObjectName(Shared.Name))
	return lf
}

// ClaimName is the name of the claim of listener e on Gateway infra/shared.
func ClaimName(e gwv1.ListenerEntry) string {
	return claims.Claim{Gateway: Shared, Tuple: rules.EntryOf(e.Port, e.Protocol, e.Hostname).Tuple()}.Name()
}

// Tenants are objs with the namespaces infra, shop, blog and the claims'.
func Tenants(objs ...client.Object) []client.Object {
	return append([]client.Object{Namespaced("infra", nil), Namespaced("shop", nil), Namespaced("blog", nil), Namespaced(Namespace, nil)}, objs...)
}

// Listeners the tests share.
var (
	AppHTTPS  = fixture.Entry("https", 443, gwv1.HTTPSProtocolType, "app.example.com")
	BlogHTTPS = fixture.Entry("https", 443, gwv1.HTTPSProtocolType, "blog.example.com")
	PG        = fixture.Entry("pg", 7000, gwv1.TCPProtocolType, "")
	Web7000   = fixture.Entry("web", 7000, gwv1.HTTPProtocolType, "a.example.com")
)

// FakeClaims lists and watches the claims of a fake client for a real claim
// informer, as the API server would, except that a test may hold back each
// event (Delay) to show what a lagging informer does.
type FakeClaims struct {
	c client.WithWatch
	// Delay is how long each watch event is held back.
	Delay atomic.Int64
	// watching is closed once a watch is open: writes before it would be
	// lost, the fake's watch starting where it is opened.
	watching chan struct{}
	once     sync.Once
	informer *claims.Informer
	// stop stops the informer.
	stop func()
}

// NewFakeClaims returns the claims of c.
func NewFakeClaims(c client.WithWatch) *FakeClaims {
	return &FakeClaims{c: c, watching: make(chan struct{})}
}

// IsWatchListSemanticsUnSupported tells the reflector to list, then watch.
func (f *FakeClaims) IsWatchListSemanticsUnSupported() bool { return true }

func (f *FakeClaims) listWatch() toolscache.ListerWatcher {
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			list := &coordinationv1.LeaseList{}
			return list, f.c.List(ctx, list, client.InNamespace(Namespace))
		},
		WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			w, err := f.c.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(Namespace))
			if err != nil {
				return nil, err
			}
			f.once.Do(func() { close(f.watching) })
			return f.newRelay(w), nil
		},
	}, f)
}

// Start runs a claim informer on the fake until the test ends, and waits
// until it has synced and watches.
func (f *FakeClaims) Start(t *testing.T) *claims.Informer {
	t.Helper()
	i, err := claims.NewInformer(f.listWatch())
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
	if err := i.CaughtUp(wait, ""); err != nil {
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

// Stop stops the informer.
func (f *FakeClaims) Stop() { f.stop() }

// Settle waits until the informer holds every claim of the fake at its
// version, and no other.
func (f *FakeClaims) Settle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		list := &coordinationv1.LeaseList{}
		if err := f.c.List(context.Background(), list, client.InNamespace(Namespace)); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for _, l := range list.Items {
			want[l.Name] = l.ResourceVersion
		}
		got := f.informer.Versions()
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("The claim informer holds %v, want %v", got, want)
		}
	}
}

// relay passes a fake's watch events on, each held back by Delay, in order.
// The fake sends a deleted object at the version it had; the API server
// sends it at the version of its deletion, which relay stands in for with
// the latest version it passed on, so that the informer's version never goes
// back.
type relay struct {
	delay *atomic.Int64
	in    watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (f *FakeClaims) newRelay(in watch.Interface) *relay {
	r := &relay{delay: &f.Delay, in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go r.run()
	return r
}

func (r *relay) run() {
	defer close(r.out)
	var latest uint64
	for ev := range r.in.ResultChan() {
		select {
		case <-time.After(time.Duration(r.delay.Load())):
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
