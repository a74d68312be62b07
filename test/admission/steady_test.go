package admission

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// These tests look at claims once the grace and several collection periods
// have passed, and at requests of one fragment racing each other or another
// fragment's, through both replicas.

func TestDuplicateIsStillDeniedInTheSteadyState(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	l := https("https", "steady.example.com")
	lf := newFragment(ns, "steady", gw, l)
	mustCreate(t, lf)
	claim := claimOf(t, ns, gw.Name, l)

	time.Sleep(claimGrace + 4*time.Second)
	err := env.Client.Create(context.Background(), newFragment(ns, "late", gw, l))
	wantDenied(t, err, `Duplicate value: "steady.example.com"`, `by listener "https" (HTTPS) of ListenerFragment steady`)
	if now := claimOf(t, ns, gw.Name, l); now == nil || now.ResourceVersion != claim.ResourceVersion {
		t.Errorf("In a steady state the claim changed from %v to %v: the collector must write nothing", claim.ObjectMeta, now)
	}

	// A relabel is no spec change: it takes nothing and frees nothing.
	lf.Labels = map[string]string{"route": "steady"}
	if err := env.Client.Update(context.Background(), lf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(claimGrace + 2*time.Second)
	err = env.Client.Create(context.Background(), newFragment(ns, "later", gw, l))
	wantDenied(t, err, `Duplicate value: "steady.example.com"`)
}

// race runs the functions at once, released together, and returns their
// errors.
func race(fns ...func() error) []error {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(fns))
	for i, fn := range fns {
		wg.Go(func() {
			<-start
			errs[i] = fn()
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func TestUpdateMovingATupleRacesACreateOfIt(t *testing.T) {
	ns := newNamespace(t, nil)
	other := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromAll)
	wins := map[string]int{}
	for i := range 8 {
		from, to := https("https", fmt.Sprintf("from-%d.example.com", i)), https("https", fmt.Sprintf("to-%d.example.com", i))
		mover := newFragment(ns, fmt.Sprintf("mover-%d", i), gw, from)
		mustCreate(t, mover)
		moved := mover.DeepCopy()
		moved.Spec.Listeners[0] = to
		errs := race(
			func() error { return env.Client.Update(context.Background(), moved) },
			func() error {
				return env.Client.Create(context.Background(), newFragment(other, fmt.Sprintf("taker-%d", i), gw, to))
			},
		)
		for _, err := range errs {
			if err != nil && !apierrors.IsInvalid(err) {
				t.Fatalf("Round %d failed with something other than a denial: %v", i, err)
			}
		}
		switch {
		case errs[0] == nil && errs[1] == nil:
			t.Errorf("Round %d: both the update and the create took %s", i, *to.Hostname)
		case errs[0] != nil && errs[1] != nil:
			t.Errorf("Round %d: neither took %s: %v", i, *to.Hostname, errs)
		case errs[0] == nil:
			wins["update"]++
		default:
			wins["create"]++
		}
		holders := 0
		for _, n := range []string{ns, other} {
			list := &v1alpha1.ListenerFragmentList{}
			if err := env.Client.List(context.Background(), list, client.InNamespace(n)); err != nil {
				t.Fatal(err)
			}
			for _, lf := range list.Items {
				if h := lf.Spec.Listeners[0].Hostname; h != nil && *h == *to.Hostname {
					holders++
				}
			}
		}
		if holders != 1 {
			t.Errorf("Round %d: %d stored fragments take %s, want 1", i, holders, *to.Hostname)
		}
	}
	t.Logf("Winners: %v", wins)
}

func TestConcurrentUpdatesOfOneFragment(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	first, b, c := https("https", "first.example.com"), https("https", "b.example.com"), https("https", "c.example.com")
	lf := newFragment(ns, "twice", gw, first)
	mustCreate(t, lf)
	toB, toC := lf.DeepCopy(), lf.DeepCopy()
	toB.Spec.Listeners[0], toC.Spec.Listeners[0] = b, c
	raced := time.Now()
	errs := race(
		func() error { return env.Client.Update(context.Background(), toB) },
		func() error { return env.Client.Update(context.Background(), toC) },
	)
	won, lost := b, c
	switch {
	case errs[0] == nil && apierrors.IsConflict(errs[1]):
	case errs[1] == nil && apierrors.IsConflict(errs[0]):
		won, lost = c, b
	default:
		t.Fatalf("Two updates from one resourceVersion: got %v, want one stored and one Conflict", errs)
	}
	stored := &v1alpha1.ListenerFragment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(lf), stored); err != nil {
		t.Fatal(err)
	}
	if *stored.Spec.Listeners[0].Hostname != *won.Hostname {
		t.Fatalf("Stored %s, want the winner %s", *stored.Spec.Listeners[0].Hostname, *won.Hostname)
	}
	if got := holderOf(claimOf(t, ns, gw.Name, won)); got != ns+"/twice/"+string(stored.UID) {
		t.Errorf("The stored fragment's claim is held by %q", got)
	}

	// The loser's tuple and the one the fragment left are released after
	// the grace; the winner's stays held.
	waitClaim(t, ns, gw.Name, lost, "")
	waitClaim(t, ns, gw.Name, first, "")
	if d := time.Since(raced); d > claimGrace+5*time.Second {
		t.Errorf("The loser's tuple stayed claimed for %v, beyond the grace (%v) and a few collection periods", d, claimGrace)
	}
	mustCreate(t, newFragment(ns, "loser", gw, lost))
	mustCreate(t, newFragment(ns, "left", gw, first))
	time.Sleep(claimGrace)
	err := env.Client.Create(context.Background(), newFragment(ns, "copy", gw, won))
	wantDenied(t, err, fmt.Sprintf(`Duplicate value: %q`, *won.Hostname), "of ListenerFragment twice")
}
