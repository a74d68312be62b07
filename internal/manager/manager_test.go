package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// lock answers every write with err, after delay; its lease is held by
// holder, and it is replica "me".
type lock struct {
	resourcelock.Interface
	err     error
	delay   time.Duration
	holder  string
	updates int
}

func (l *lock) Identity() string { return "me" }

func (l *lock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}

func (l *lock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	time.Sleep(l.delay)
	return l.err
}

func (l *lock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	time.Sleep(l.delay)
	l.updates++
	return l.err
}

func TestLeaseFencesALeaderThatHasNotRenewed(t *testing.T) {
	const deadline = 50 * time.Millisecond
	inner := &lock{}
	l := &Lease{Interface: inner, renewDeadline: deadline}
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence before any renewal = %v, want ErrNotLeading", err)
	}
	if err := l.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(); err != nil {
		t.Fatalf("Fence right after taking the lease = %v, want nil", err)
	}
	time.Sleep(deadline)
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence a renew deadline after the last renewal = %v, want ErrNotLeading", err)
	}
	inner.err = errors.New("the lease is held by another replica")
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err == nil {
		t.Fatal("A failed renewal reported success")
	}
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence after a failed renewal = %v, want ErrNotLeading", err)
	}
	inner.err = nil
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(); err != nil {
		t.Fatalf("Fence right after a renewal = %v, want nil", err)
	}
}

// A renewal answered a renew deadline after it was sent (its answer waited
// in the socket of a replica frozen meanwhile) is no renewal now: another
// replica may hold the lease by then.
func TestLeaseFencesARenewalAnsweredLate(t *testing.T) {
	const deadline = 50 * time.Millisecond
	l := &Lease{Interface: &lock{delay: deadline}, renewDeadline: deadline}
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence right after a renewal sent a renew deadline ago = %v, want ErrNotLeading", err)
	}
}

// A release (a record with no holder) closes the fence at once, and is
// refused when the lease was last read held by another replica: client-go
// releases a lease its last renewal says it holds, and would empty the
// lease of the replica that took it over meanwhile.
func TestLeaseReleaseClosesTheFenceAndSparesASuccessor(t *testing.T) {
	tests := map[string]struct {
		holder      string
		wantErr     error
		wantUpdates int
	}{
		"held by this replica":  {holder: "me", wantUpdates: 2},
		"taken over by another": {holder: "other", wantErr: ErrNotHolder, wantUpdates: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inner := &lock{holder: tc.holder}
			l := &Lease{Interface: inner, renewDeadline: time.Minute}
			if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.Get(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{}); !errors.Is(err, tc.wantErr) {
				t.Errorf("Release = %v, want %v", err, tc.wantErr)
			}
			if inner.updates != tc.wantUpdates {
				t.Errorf("%d updates sent, want %d", inner.updates, tc.wantUpdates)
			}
			if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
				t.Errorf("Fence after a release = %v, want ErrNotLeading", err)
			}
		})
	}
}

func TestFencedClientWritesNothingWhileFenced(t *testing.T) {
	fenced := true
	c := FencedClient(fake.NewClientBuilder().Build(), func() error {
		if fenced {
			return ErrNotLeading
		}
		return nil
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gatefold-system", Name: "claim"}}
	ctx := context.Background()
	if err := c.Create(ctx, cm.DeepCopy()); !errors.Is(err, ErrFenced) {
		t.Errorf("Create while fenced = %v, want ErrFenced", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("A create while fenced landed: %v", err)
	}
	fenced = false
	if err := c.Create(ctx, cm.DeepCopy()); err != nil {
		t.Fatalf("Create = %v", err)
	}
	fenced = true
	for name, write := range map[string]func() error{
		"Update": func() error { return c.Update(ctx, cm.DeepCopy()) },
		"Patch":  func() error { return c.Patch(ctx, cm.DeepCopy(), client.MergeFrom(cm)) },
		"Delete": func() error { return c.Delete(ctx, cm.DeepCopy()) },
	} {
		if err := write(); !errors.Is(err, ErrFenced) {
			t.Errorf("%s while fenced = %v, want ErrFenced", name, err)
		}
	}
}

func TestCacheKeepsOfAFragmentWhatGatefoldReads(t *testing.T) {
	lf := &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lf", Labels: map[string]string{"app": "a"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: v1alpha1.ListenerFragmentSpec{ParentRef: gwv1.ParentGatewayReference{Name: "gw"},
			Listeners: []gwv1.ListenerEntry{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}},
	}
	want := lf.DeepCopy()
	want.Annotations, want.ManagedFields = nil, nil
	got, err := fragmentTransform(t)(lf.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("cached fragment = %+v, want %+v", got, want)
	}
}

// fragmentTransform is how Options' cache transforms ListenerFragments.
func fragmentTransform(t *testing.T) toolscache.TransformFunc {
	for obj, o := range Options().Cache.ByObject {
		if _, ok := obj.(*v1alpha1.ListenerFragment); ok {
			return o.Transform
		}
	}
	t.Fatal("no cache options for ListenerFragments")
	return nil
}
