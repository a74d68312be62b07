package integration

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// TestListenerFragmentCRDRules checks the rules the API server enforces on a
// fragment by itself, without gatefold running.
func TestListenerFragmentCRDRules(t *testing.T) {
	ns := newNamespace(t)
	https := func(name, host string) gwv1.ListenerEntry {
		return gwv1.ListenerEntry{Name: gwv1.SectionName(name), Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname(host)),
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}
	}
	tests := map[string]struct {
		parent    gwv1.ParentGatewayReference
		listeners []gwv1.ListenerEntry
		wantErr   string
	}{
		"a valid fragment is stored": {
			listeners: []gwv1.ListenerEntry{https("a", "a.example.com"), https("b", "b.example.com")},
		},
		"duplicate listener names are rejected": {
			listeners: []gwv1.ListenerEntry{https("a", "a.example.com"), https("a", "b.example.com")},
			wantErr:   "Listener name must be unique within the ListenerFragment",
		},
		"duplicate port, protocol and hostname are rejected": {
			listeners: []gwv1.ListenerEntry{https("a", "a.example.com"), https("b", "a.example.com")},
			wantErr:   "Combination of port, protocol and hostname must be unique for each listener",
		},
		"tls on an HTTP listener is rejected": {
			listeners: []gwv1.ListenerEntry{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, TLS: &gwv1.ListenerTLSConfig{}}},
			wantErr:   "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
		},
		"a hostname on a TCP listener is rejected": {
			listeners: []gwv1.ListenerEntry{{Name: "db", Port: 5432, Protocol: gwv1.TCPProtocolType, Hostname: ptr.To(gwv1.Hostname("db.example.com"))}},
			wantErr:   "hostname must not be specified for protocols ['TCP', 'UDP']",
		},
		"a parent that is not a Gateway is rejected": {
			parent:    gwv1.ParentGatewayReference{Name: "shared", Kind: ptr.To(gwv1.Kind("Service")), Group: ptr.To(gwv1.Group(""))},
			listeners: []gwv1.ListenerEntry{https("a", "a.example.com")},
			wantErr:   "parentRef must refer to a Gateway: group gateway.networking.k8s.io, kind Gateway",
		},
		"no listeners is rejected": {
			wantErr: "spec.listeners",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			parent := tc.parent
			if parent.Name == "" {
				parent.Name = "shared"
			}
			lf := &v1alpha1.ListenerFragment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "lf-"},
				Spec:       v1alpha1.ListenerFragmentSpec{ParentRef: parent, Listeners: tc.listeners},
			}
			err := env.Client.Create(context.Background(), lf)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Create error = %v, want Invalid containing %q", err, tc.wantErr)
			}
		})
	}
}
