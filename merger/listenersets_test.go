package merger

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// An implementation that writes the Gateway's whole status drops
// attachedListenerSets; gatefold applies it again soon, after a backoff that
// doubles with each drop in a row up to the resync period, so that one that
// drops it after every apply costs a few applies, not a loop.
func TestAttachedListenerSetsDroppedAreAppliedAgainWithABackoff(t *testing.T) {
	const resync = 10 * time.Minute
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gateway := func(stored *int32) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}, Status: gwv1.GatewayStatus{AttachedListenerSets: stored}}
	}
	type apply struct {
		n   int32
		ago time.Duration
	}
	// inARow applies count 2 at each of agos, oldest first, each after it
	// was found dropped; with the same ago, a drop in a row.
	inARow := func(agos ...time.Duration) []apply {
		var out []apply
		for _, ago := range agos {
			out = append(out, apply{n: 2, ago: ago})
		}
		return out
	}
	// times repeats ago n times.
	times := func(n int, ago time.Duration) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = ago
		}
		return out
	}
	tests := map[string]struct {
		stored  *int32
		applied []apply
		n       int32
		resync  time.Duration // resync when 0; none when negative
		due     bool
		wait    time.Duration
		// drops is what the memo counts once the due count is applied.
		drops int
	}{
		"stored as counted":                     {stored: ptr.To[int32](2), applied: inARow(time.Second), n: 2},
		"none and no count to set":              {n: 0},
		"never applied":                         {n: 2, due: true},
		"stored count changed":                  {stored: ptr.To[int32](1), applied: []apply{{n: 1, ago: time.Second}}, n: 2, due: true},
		"dropped, and the count changed":        {applied: inARow(3*time.Second, 2*time.Second, time.Second), n: 3, due: true},
		"dropped just after the apply":          {applied: inARow(100 * time.Millisecond), n: 2, wait: 900 * time.Millisecond},
		"dropped, and the first backoff passed": {applied: inARow(time.Second), n: 2, due: true, drops: 1},
		"dropped again: the backoff doubles":    {applied: inARow(time.Second, 500*time.Millisecond), n: 2, wait: 1500 * time.Millisecond},
		"dropped a third time":                  {applied: inARow(4*time.Second, 3*time.Second, time.Second), n: 2, wait: 3 * time.Second},
		"dropped a third time, backoff passed":  {applied: inARow(7*time.Second, 6*time.Second, 4*time.Second), n: 2, due: true, drops: 3},
		"dropped in a row: at most a resync":    {applied: inARow(append(times(11, 15*time.Minute), time.Minute)...), n: 2, wait: resync - time.Minute},
		"a resync after the last apply":         {applied: inARow(append(times(11, 25*time.Minute), resync)...), n: 2, due: true, drops: 12},
		"dropped after it stood: starts over":   {applied: inARow(time.Hour, time.Minute), n: 2, due: true, drops: 1},
		"stood, started over, dropped again":    {applied: inARow(time.Hour, 2*time.Minute, 100*time.Millisecond), n: 2, wait: 1900 * time.Millisecond},
		"dropped 5s after each: keeps doubling": {applied: inARow(20*time.Second, 15*time.Second, 10*time.Second, 5*time.Second), n: 2, wait: 3 * time.Second},
		"dropped once, long after the apply":    {applied: inARow(time.Minute), n: 2, due: true, drops: 1},
		"resync off: no limit":                  {applied: inARow(append(times(11, 90*time.Minute), time.Hour)...), n: 2, resync: -1, due: true, drops: 12},
		"resync off: no limit, early":           {applied: inARow(append(times(11, time.Hour), 30*time.Minute)...), n: 2, resync: -1, wait: 2048*time.Second - 30*time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var m attachedMemo
			gw := gateway(tc.stored)
			r := resync
			if tc.resync < 0 {
				r = 0
			}
			// As a reconcile does: found dropped, then applied.
			for _, a := range tc.applied {
				m.due(gateway(nil), a.n, now.Add(-a.ago), r)
				m.applied(gw, a.n, now.Add(-a.ago))
			}
			due, wait := m.due(gw, tc.n, now, r)
			if due != tc.due || wait != tc.wait {
				t.Fatalf("due, wait = %v, %v, want %v, %v", due, wait, tc.due, tc.wait)
			}
			if !due {
				return
			}
			if drops := m.applied(gw, tc.n, now); drops != tc.drops {
				t.Errorf("applied again, drops in a row = %d, want %d", drops, tc.drops)
			}
		})
	}
}

// A writer that drops the count a while after each of gatefold's applies, by
// any delay, costs a few applies an hour: the backoff does not start over
// while the two take turns.
func TestAttachedListenerSetsDroppedAfterEachApplyCostAFewAppliesAnHour(t *testing.T) {
	const resync = 10 * time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dropped := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}}
	for _, delay := range []time.Duration{100 * time.Millisecond, 4 * time.Second, 5 * time.Second, 30 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			var m attachedMemo
			applies := 0
			// As reconciles do: the drop's event finds it dropped, and a
			// deferred count is applied when its wait is over.
			for now := start; now.Before(start.Add(time.Hour)); now = now.Add(delay) {
				due, wait := m.due(dropped, 2, now, resync)
				if !due {
					now = now.Add(wait)
					if due, _ = m.due(dropped, 2, now, resync); !due {
						t.Fatalf("not due after its wait of %v at %v", wait, now.Sub(start))
					}
				}
				m.applied(dropped, 2, now)
				applies++
			}
			if applies > 20 {
				t.Errorf("%d applies in an hour against a writer that drops the count %v after each, want at most 20", applies, delay)
			}
		})
	}
}
