package testenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestManagerEnvIsTheManagerContainersLiterals(t *testing.T) {
	d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{
			map[string]any{"name": "sidecar", "env": []any{map[string]any{"name": "OTHER", "value": "x"}}},
			map[string]any{"name": "manager", "env": []any{
				map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
				map[string]any{"name": "GOMEMLIMIT", "value": "460MiB"},
			}},
		},
	}}}}}
	got, err := managerEnv(d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GOMEMLIMIT=460MiB"}, got); diff != "" {
		t.Errorf("managerEnv (-want +got):\n%s", diff)
	}
}
