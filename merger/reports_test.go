package merger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

func TestReportsKeepTheNewestGenerationAndDropWhatIsStored(t *testing.T) {
	status := func(reason string) v1alpha1.ListenerFragmentStatus {
		return v1alpha1.ListenerFragmentStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: reason}}}
	}
	fragment := func(gen int64, stored v1alpha1.ListenerFragmentStatus) *v1alpha1.ListenerFragment {
		return &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: gen}, Status: stored}
	}
	type publish struct {
		gen    int64
		stored string // the stored Accepted reason, "" for no status
		report string // the reason the fold decided
	}
	tests := map[string]struct {
		publishes []publish
		want      string // the pending report's reason, "" for none
		wantGen   int64
	}{
		"a new report waits":                      {publishes: []publish{{gen: 1, report: "NotAllowed"}}, want: "NotAllowed", wantGen: 1},
		"a stored report is not pending":          {publishes: []publish{{gen: 1, stored: "NotAllowed", report: "NotAllowed"}}},
		"a newer fold replaces the report":        {publishes: []publish{{gen: 1, report: "NotAllowed"}, {gen: 1, report: "TooManyListeners"}}, want: "TooManyListeners", wantGen: 1},
		"a fold of an older spec is dropped":      {publishes: []publish{{gen: 2, report: "NotAllowed"}, {gen: 1, report: "TooManyListeners"}}, want: "NotAllowed", wantGen: 2},
		"a fold finding it stored clears it":      {publishes: []publish{{gen: 1, report: "NotAllowed"}, {gen: 1, stored: "NotAllowed", report: "NotAllowed"}}},
		"a fold of an older spec clears nothing":  {publishes: []publish{{gen: 2, report: "NotAllowed"}, {gen: 1, stored: "NotAllowed", report: "NotAllowed"}}, want: "NotAllowed", wantGen: 2},
		"a fold of a newer spec replaces the old": {publishes: []publish{{gen: 1, report: "NotAllowed"}, {gen: 2, report: "TooManyListeners"}}, want: "TooManyListeners", wantGen: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var rs reports
			var lf *v1alpha1.ListenerFragment
			for _, p := range tc.publishes {
				stored := v1alpha1.ListenerFragmentStatus{}
				if p.stored != "" {
					stored = status(p.stored)
				}
				lf = fragment(p.gen, stored)
				rs.publish(lf, status(p.report))
			}
			got := rs.get(keyOf(lf))
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("Pending: %s of generation %d, want none", got.status.Conditions[0].Reason, got.generation)
			case tc.want != "" && got == nil:
				t.Errorf("Nothing pending, want %s of generation %d", tc.want, tc.wantGen)
			case tc.want != "" && (got.status.Conditions[0].Reason != tc.want || got.generation != tc.wantGen):
				t.Errorf("Pending: %s of generation %d, want %s of generation %d", got.status.Conditions[0].Reason, got.generation, tc.want, tc.wantGen)
			}
		})
	}
}
