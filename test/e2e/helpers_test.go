package e2e

import (
	"context"
	"fmt"
	"testing"

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
