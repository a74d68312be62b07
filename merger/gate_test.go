package merger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// A status that waits while a Gateway's fold applies its listeners is
// written after the Gateway, not beside it.
func TestGatewayApplyGoesBeforeWaitingStatus(t *testing.T) {
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	lf := fixture.Fragment("shop", "web", gw, fixture.HTTPS("https", "web.example.com"))
	waiting := fixture.Fragment("shop", "api", gw, fixture.HTTPS("https", "api.example.com"))
	waiting.Generation = 1
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}

	var mu sync.Mutex
	var order []string
	wrote := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	applying, release := make(chan struct{}), make(chan struct{})
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(gw, lf, waiting, ns).
		WithStatusSubresource(lf, waiting).
		WithIndex(&gwv1.Gateway{}, manager.PoolIndex, manager.PoolHeadOf)
	if err := manager.IndexFragments(context.Background(), fixture.Indexer{B: b}); err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(b.Build(), interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			close(applying)
			<-release
			wrote("Gateway")
			return nil
		},
		SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
			wrote("status")
			return nil
		},
	})
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), folding: gate{limit: time.Minute}}
	src := rules.FromFragment(waiting)
	r.fragmentReports.publish(&src, v1alpha1.ListenerFragmentStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}})

	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(gw)}); err != nil {
			t.Errorf("Folding: %v", err)
		}
	})
	select {
	case <-applying:
	case <-time.After(10 * time.Second):
		t.Fatal("The fold applied no listeners to the Gateway")
	}
	wg.Go(func() {
		if _, err := (statusWriter{r: r, kind: rules.KindListenerFragment}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(waiting)}); err != nil {
			t.Errorf("Writing the status: %v", err)
		}
	})
	// Time for a status write that does not wait to happen.
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	if diff := cmp.Diff([]string{"Gateway", "status"}, order); diff != "" {
		t.Errorf("Writes (-want +got):\n%s", diff)
	}
}

func TestGateHoldsStatusesWhileFoldsLastAtMostItsLimit(t *testing.T) {
	const limit = time.Second
	tests := map[string]struct {
		folds   int           // folds under way when the status write comes
		release time.Duration // when they end; 0 for never
		want    time.Duration // how long the status write waits
	}{
		"no fold":                    {want: 0},
		"folds under way, then done": {folds: 2, release: 50 * time.Millisecond, want: 50 * time.Millisecond},
		"folds that never end":       {folds: 1, want: limit},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := &gate{limit: limit}
			for range tc.folds {
				release := g.hold()
				if tc.release > 0 {
					time.AfterFunc(tc.release, release)
				}
			}
			// A wait that ignores its limit fails here rather than hangs.
			ctx, cancel := context.WithTimeout(context.Background(), 3*limit)
			defer cancel()
			start := time.Now()
			if err := g.wait(ctx); err != nil {
				t.Fatalf("The status write waited past 3 times the limit: %v", err)
			}
			// A wait short of the limit ended with the folds.
			if got := time.Since(start); got < tc.want || (tc.want < limit && got >= limit) {
				t.Errorf("The status write waited %v, want %v", got.Round(time.Millisecond), tc.want)
			}
		})
	}
}
