package merger

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
)

// A fragment created again under its name finds the grant of the one before,
// which the garbage collector has not deleted yet: it is never in the new
// fragment's way. Someone else's grant of the name is left alone.
func TestGrantOfAnEarlierObjectOfTheNameIsReplaced(t *testing.T) {
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	lf := fixture.Fragment("shop", "web", gw, fixture.HTTPS("https", "web.example.com"))
	lf.UID, lf.CreationTimestamp = "new", metav1.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	src := rules.FromFragment(lf)
	folded := []fold.Outcome{{Fragment: src.Ref(), Listener: "https", Reason: gwv1.ListenerEntryReasonAccepted}}
	// grant is made at second 4 for the object of name owner, "old"; at
	// second 6 it is a later object's, which a stale cache may meet.
	grant := func(owner string, managed bool, second int) *gwv1.ReferenceGrant {
		g := desiredGrant(client.ObjectKey{Namespace: "shop", Name: GrantName(src.Ref())}, &src, "infra", []string{"old-cert"})
		g.OwnerReferences[0].UID = "old"
		g.OwnerReferences[0].Name = owner
		g.CreationTimestamp = metav1.Date(2026, 12, 1, 10, 0, second, 0, time.UTC)
		if !managed {
			g.Labels = nil
		}
		return g
	}
	tests := map[string]struct {
		stored   *gwv1.ReferenceGrant
		outcomes []fold.Outcome
		// want is the Secrets the grant lets infra read after the fold;
		// nil is no grant.
		want []string
	}{
		"the earlier fragment's, the new one needs a grant": {stored: grant("web", true, 4), outcomes: folded, want: []string{"cert"}},
		"the earlier fragment's, the new one needs none":    {stored: grant("web", true, 4)},
		"a later fragment's, met by a stale cache":          {stored: grant("web", true, 6), outcomes: folded, want: []string{"old-cert"}},
		"another fragment's of another name":                {stored: grant("other", true, 4), outcomes: folded, want: []string{"old-cert"}},
		"not gatefold's":                                    {stored: grant("web", false, 4), outcomes: folded, want: []string{"old-cert"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.stored).Build()
			r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10)}
			if err := r.applyGrant(context.Background(), &src, gw, tc.outcomes, false); err != nil {
				t.Fatal(err)
			}
			got := &gwv1.ReferenceGrant{}
			err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.stored), got)
			if tc.want == nil {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("The earlier fragment's grant is still there (%v), want it deleted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var secrets []string
			for _, to := range got.Spec.To {
				secrets = append(secrets, string(ptr.Deref(to.Name, "")))
			}
			if len(secrets) != len(tc.want) || secrets[0] != tc.want[0] {
				t.Errorf("The grant lets infra read %v, want %v", secrets, tc.want)
			}
			if tc.want[0] == "cert" && metav1.GetControllerOf(got).UID != "new" {
				t.Errorf("The grant is controlled by %+v, want the new fragment", metav1.GetControllerOf(got))
			}
		})
	}
}
