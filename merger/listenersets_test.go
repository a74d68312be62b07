package merger

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// An implementation that writes the Gateway's whole status drops
// attachedListenerSets; gatefold applies it again only when the count
// changes or a resync period has passed, never once per such write.
func TestAttachedListenerSetsAreNotReappliedAfterEveryStatusWrite(t *testing.T) {
	const resync = 10 * time.Minute
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gateway := func(stored *int32) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}, Status: gwv1.GatewayStatus{AttachedListenerSets: stored}}
	}
	type last struct {
		n   int32
		ago time.Duration
	}
	tests := map[string]struct {
		stored *int32
		last   *last
		n      int32
		resync time.Duration // resync when 0; none when negative
		due    bool
	}{
		"stored as counted":                         {stored: ptr.To[int32](2), n: 2},
		"none and no count to set":                  {n: 0},
		"never applied":                             {n: 2, due: true},
		"stored count changed":                      {stored: ptr.To[int32](1), last: &last{n: 1, ago: time.Second}, n: 2, due: true},
		"dropped by another writer, count the same": {last: &last{n: 2, ago: time.Minute}, n: 2},
		"dropped, and a resync period passed":       {last: &last{n: 2, ago: resync}, n: 2, due: true},
		"dropped, and the count changed":            {last: &last{n: 2, ago: time.Second}, n: 3, due: true},
		"dropped, with resync off":                  {last: &last{n: 2, ago: 100 * resync}, n: 2, resync: -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var m attachedMemo
			gw := gateway(tc.stored)
			if tc.last != nil {
				m.applied(gw, tc.last.n, now.Add(-tc.last.ago))
			}
			r := resync
			if tc.resync < 0 {
				r = 0
			}
			if got := m.due(gw, tc.n, now, r); got != tc.due {
				t.Errorf("due = %v, want %v", got, tc.due)
			}
		})
	}
}
