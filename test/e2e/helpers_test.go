package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func conditionString(cond *metav1.Condition) string {
	if cond == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s (generation %d: %q)", cond.Status, cond.Reason, cond.ObservedGeneration, cond.Message)
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// waitFor polls check until it is true, or fails the test after timeout
// with what it waited for and check's last word.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		var ok bool
		if ok, last = check(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waited %s for %s; last: %s", timeout, what, last)
		}
	}
}
