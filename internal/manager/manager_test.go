package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// lock answers every write with err, after delay.
type lock struct {
	resourcelock.Interface
	err   error
	delay time.Duration
}

func (l *lock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	time.Sleep(l.delay)
	return l.err
}

func (l *lock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	time.Sleep(l.delay)
	return l.err
}

func TestLeaseFencesALeaderThatHasNotRenewed(t *testing.T) {
	const deadline = 50 * time.Millisecond
	inner := &lock{}
	l := &Lease{Interface: inner, renewDeadline: deadline}
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence before any renewal = %v, want ErrNotLeading", err)
	}
	if err := l.Create(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
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
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err == nil {
		t.Fatal("A failed renewal reported success")
	}
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence after a failed renewal = %v, want ErrNotLeading", err)
	}
	inner.err = nil
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
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
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("Fence right after a renewal sent a renew deadline ago = %v, want ErrNotLeading", err)
	}
}
