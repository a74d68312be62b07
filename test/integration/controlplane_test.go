package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// newNamespace creates a namespace of the test's own and removes it after.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("Creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

func TestControlPlaneIsRealKubernetes(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatalf("Reading server version: %v", err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("Server version = %q, want v1.37.2 (the version test/controlplane builds)", v.GitVersion)
	}
	for _, gv := range []string{"gateway.networking.k8s.io/v1", "gatefold.dev/v1alpha1"} {
		if _, err := dc.ServerResourcesForGroupVersion(gv); err != nil {
			t.Errorf("Group version %s is not served: %v", gv, err)
		}
	}
}

func httpListener(name, hostname string) gwv1.Listener {
	return gwv1.Listener{
		Name:     gwv1.SectionName(name),
		Hostname: ptr.To(gwv1.Hostname(hostname)),
		Port:     80,
		Protocol: gwv1.HTTPProtocolType,
	}
}

func TestGatewayCELRejectsDuplicateListenerTuple(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tests := map[string]struct {
		listeners []gwv1.Listener
		wantErr   string
	}{
		"distinct hostnames on one port are stored": {
			listeners: []gwv1.Listener{httpListener("a", "a.example.com"), httpListener("b", "b.example.com")},
		},
		"same port, protocol and hostname is rejected by upstream CEL": {
			listeners: []gwv1.Listener{httpListener("a", "a.example.com"), httpListener("b", "a.example.com")},
			wantErr:   "Combination of port, protocol and hostname must be unique for each listener",
		},
		"duplicate listener names are rejected": {
			listeners: []gwv1.Listener{httpListener("a", "a.example.com"), httpListener("a", "b.example.com")},
			wantErr:   "Duplicate value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gw := &gwv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gw-"},
				Spec:       gwv1.GatewaySpec{GatewayClassName: "example", Listeners: tc.listeners},
			}
			err := env.Client.Create(ctx, gw)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				got := &gwv1.Gateway{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gw), got); err != nil {
					t.Fatal(err)
				}
				if len(got.Spec.Listeners) != len(tc.listeners) {
					t.Errorf("Stored %d listeners, want %d", len(got.Spec.Listeners), len(tc.listeners))
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create error = %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Create error = %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
