package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// WaitAccepted waits until the fragment's Accepted condition has status and
// reason at its current generation, and returns the fragment as read.
func WaitAccepted(t testing.TB, c client.Reader, timeout time.Duration, lf *v1alpha1.ListenerFragment, status metav1.ConditionStatus, reason string) *v1alpha1.ListenerFragment {
	t.Helper()
	got := &v1alpha1.ListenerFragment{}
	Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(lf), got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != got.Generation {
			return fmt.Errorf("fragment %s/%s Accepted = %s, want %s/%s at generation %d", lf.Namespace, lf.Name, ConditionString(cond), status, reason, got.Generation)
		}
		return nil
	})
	return got
}

// ConditionString renders a condition for a test's message: "absent", or
// status/reason (generation n: "message").
func ConditionString(cond *metav1.Condition) string {
	if cond == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s (generation %d: %q)", cond.Status, cond.Reason, cond.ObservedGeneration, cond.Message)
}
