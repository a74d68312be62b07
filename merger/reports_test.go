package merger

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

func TestReportsKeepTheNewestGenerationAndDropWhatIsStored(t *testing.T) {
	status := func(reason string) v1alpha1.ListenerFragmentStatus {
		return v1alpha1.ListenerFragmentStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: reason}}}
	}
	fragment := func(uid types.UID, gen int64, stored v1alpha1.ListenerFragmentStatus) *v1alpha1.ListenerFragment {
		return &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: uid, Generation: gen}, Status: stored}
	}
	type publish struct {
		uid    types.UID // "a" when empty
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
		"a fold of a newer spec replaces the old": {publishes: []publish{{gen: 1, report: "NotAllowed"}, {gen: 2, report: "TooManyListeners"}}, want: "TooManyListeners", wantGen: 2},
		// The first report may be in flight, unseen by the second fold's
		// view: the writer decides, on a view that reads its own writes.
		"a fold finding its report stored still goes to the writer": {publishes: []publish{{gen: 1, stored: "NotAllowed", report: "TooManyListeners"}, {gen: 1, stored: "NotAllowed", report: "NotAllowed"}}, want: "NotAllowed", wantGen: 1},
		"a fragment created again replaces the old one's report":    {publishes: []publish{{uid: "a", gen: 3, report: "NotAllowed"}, {uid: "b", gen: 1, report: "TooManyListeners"}}, want: "TooManyListeners", wantGen: 1},
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
				uid := p.uid
				if uid == "" {
					uid = "a"
				}
				lf = fragment(uid, p.gen, stored)
				src := rules.FromFragment(lf)
				rs.publish(&src, status(p.report))
			}
			got := rs.get(client.ObjectKeyFromObject(lf))
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

// A fragment deleted and created again under its name while a report of
// the old object waits: the writer drops the old report instead of waiting
// for an update of the old object that never comes.
func TestWriterDropsTheReportOfAnObjectCreatedAgain(t *testing.T) {
	lf := &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "new", Generation: 1}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(lf).WithStatusSubresource(lf).Build()
	r := &Reconciler{Client: c}
	old := &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "old", Generation: 3}}
	oldSrc := rules.FromFragment(old)
	r.fragmentReports.publish(&oldSrc, v1alpha1.ListenerFragmentStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowed"}}})
	if _, err := (statusWriter{r: r, kind: rules.KindListenerFragment}).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(lf)}); err != nil {
		t.Fatal(err)
	}
	if rep := r.fragmentReports.get(client.ObjectKeyFromObject(lf)); rep != nil {
		t.Errorf("The old object's report (uid %s, generation %d) is still pending", rep.uid, rep.generation)
	}
	got := &v1alpha1.ListenerFragment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(lf), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 {
		t.Errorf("The old object's status was written to the new one: %+v", got.Status.Conditions)
	}
}

func TestEventNoteSaysEachMessageOnce(t *testing.T) {
	tests := map[string]struct {
		listeners map[string]string // listener → message, added in name order
		want      string
	}{
		"one listener": {
			listeners: map[string]string{"a": "no room"},
			want:      `Listener "a": no room`,
		},
		"listeners with one message share it": {
			listeners: map[string]string{"a": "no room", "b": "no room", "c": "taken"},
			want:      `Listeners "a", "b": no room; Listener "c": taken`,
		},
		"many listeners with one message are counted": {
			listeners: map[string]string{"l1": "no room", "l2": "no room", "l3": "no room", "l4": "no room", "l5": "no room"},
			want:      `5 listeners ("l1", "l2", "l3" and 2 more): no room`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := &eventNote{listeners: map[string][]gwv1.SectionName{}}
			for _, l := range slices.Sorted(maps.Keys(tc.listeners)) {
				n.add(gwv1.SectionName(l), tc.listeners[l])
			}
			if got := n.String(); got != tc.want {
				t.Errorf("note = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFencedLeaderWritesNoStatus: the status applies that no resourceVersion
// fences (a Gateway's status.attachedListenerSets) are fenced by the lease:
// a leader that may have lost it sends nothing.
func TestFencedLeaderWritesNoStatus(t *testing.T) {
	sent := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).Build(), interceptor.Funcs{
		SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
			sent++
			return nil
		},
	})
	r := &Reconciler{Client: c, Fence: func() error { return errors.New("the lease was not renewed") }}
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared"}}
	if err := r.applyGatewayStatus(context.Background(), gw, gwapply.GatewayStatus().WithAttachedListenerSets(1)); !errors.Is(err, errFenced) {
		t.Errorf("applyGatewayStatus = %v, want errFenced", err)
	}
	lf := &v1alpha1.ListenerFragment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "f", ResourceVersion: "1"}}
	src := rules.FromFragment(lf)
	if err := r.applyStatus(context.Background(), &src, v1alpha1.ListenerFragmentStatus{}); !errors.Is(err, errFenced) {
		t.Errorf("applyStatus = %v, want errFenced", err)
	}
	if sent != 0 {
		t.Errorf("A fenced leader sent %d status applies", sent)
	}
	r.Fence = nil
	if err := r.applyGatewayStatus(context.Background(), gw, gwapply.GatewayStatus().WithAttachedListenerSets(1)); err != nil || sent != 1 {
		t.Errorf("Unfenced: applyGatewayStatus = %v with %d applies sent, want one", err, sent)
	}
}
