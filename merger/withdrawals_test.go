package merger

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

func TestWithdrawalMemoRecallsItsOwnThenTheStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gw := types.NamespacedName{Namespace: "infra", Name: "shared"}
	lf := fixture.Fragment("shop", "checkout", fixture.Gateway("infra", gwv1.NamespacesFromAll), fixture.Entry("web", 8443, gwv1.HTTPSProtocolType, "shop.example.com"))
	lf.Generation = 2
	lf.Status.Listeners = []v1alpha1.ListenerStatus{{Name: "web", Conditions: []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "UnsupportedProtocol", ObservedGeneration: 2},
		{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Withdrawn", ObservedGeneration: 2},
	}}}
	key := fold.WithdrawalKey{Source: rules.FragmentRef(lf), Generation: 2, Listener: "web"}
	tests := map[string]struct {
		remembered   map[fold.WithdrawalKey]fold.Withdrawal
		forget       bool
		wantAttempts int
	}{
		"a new leader keeps what the status records":   {wantAttempts: 1},
		"the memory wins over the status":              {remembered: map[fold.WithdrawalKey]fold.Withdrawal{key: {Since: now, Attempts: 3}}, wantAttempts: 3},
		"a forgotten Gateway falls back on the status": {remembered: map[fold.WithdrawalKey]fold.Withdrawal{key: {Since: now, Attempts: 3}}, forget: true, wantAttempts: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &withdrawalMemo{}
			m.remember(gw, tc.remembered)
			if tc.forget {
				m.forget(gw)
			}
			got := m.recall(gw, []rules.Source{rules.FromFragment(lf)}, now)
			if w, ok := got[key]; !ok || w.Attempts != tc.wantAttempts {
				t.Errorf("Recalled %+v, want listener web withdrawn with %d attempts", got, tc.wantAttempts)
			}
		})
	}
}
