package testenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestManagerContainerIsTheManagerContainersLiteralsAndArgs(t *testing.T) {
	d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{
			map[string]any{"name": "sidecar", "env": []any{map[string]any{"name": "OTHER", "value": "x"}}, "args": []any{"--other"}},
			map[string]any{"name": "manager", "env": []any{
				map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
				map[string]any{"name": "GOMEMLIMIT", "value": "460MiB"},
			}, "args": []any{"manager", "--leader-elect=true", "--webhook-port=9443"}},
		},
	}}}}}
	env, args, err := managerContainer(d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GOMEMLIMIT=460MiB"}, env); diff != "" {
		t.Errorf("managerContainer's env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--leader-elect=true", "--webhook-port=9443"}, args); diff != "" {
		t.Errorf("managerContainer's args (-want +got):\n%s", diff)
	}
}

func TestLocalArgsDropsWhereToListen(t *testing.T) {
	got := LocalArgs([]string{"--leader-elect=true", "--metrics-bind-address=:8443", "--health-probe-bind-address", ":8081",
		"-webhook-port=9443", "--cert-mode=self-signed"})
	if diff := cmp.Diff([]string{"--leader-elect=true", "--cert-mode=self-signed"}, got); diff != "" {
		t.Errorf("LocalArgs (-want +got):\n%s", diff)
	}
}
