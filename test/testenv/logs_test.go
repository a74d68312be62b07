package testenv

import (
	"io"
	"testing"
)

func TestLogsKeepOnlyRefusedRights(t *testing.T) {
	tests := map[string]struct {
		line    string
		refused bool
	}{
		"informer refused a cluster-wide list, zap JSON": {
			line:    `{"level":"error","logger":"controller-runtime.cache.UnhandledError","msg":"Failed to watch","type":"*v1.Lease","error":"failed to list *v1.Lease: leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:gatefold-system:gatefold-controller-manager\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope"}`,
			refused: true,
		},
		"informer refused a cluster-wide list, klog text": {
			line:    `E1130 08:40:50.123456    4242 reflector.go:205] "Failed to watch" err="failed to list *v1.Lease: leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:gatefold-system:gatefold-controller-manager\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope" type="*v1.Lease"`,
			refused: true,
		},
		"named Secret refused, plain error": {
			line:    `reading the CA Secret: secrets "gatefold-webhook-ca" is forbidden: User "system:serviceaccount:gatefold-system:gatefold-controller-manager" cannot get resource "secrets" in API group "" in the namespace "gatefold-system"`,
			refused: true,
		},
		"admission policy denied an apply": {
			line: `{"level":"info","msg":"The API server refused a fragment's listeners; folding the others","message":"gateways.gateway.networking.k8s.io \"shared\" is forbidden: ValidatingAdmissionPolicy 'forbid' with binding 'forbid' denied request: listeners for forbidden.example.com are not allowed here"}`,
		},
		"event into a namespace being deleted": {
			line: `{"level":"error","logger":"events","msg":"Server rejected event (will not retry!)","error":"events.events.k8s.io \"f.18ecc67b5cdd700e\" is forbidden: unable to create new content in namespace merge-2ksnt because it is being terminated"}`,
		},
		"webhook denial with a field.Forbidden": {
			line: `{"level":"info","msg":"Denied","error":"spec.parentRef: Forbidden: a fragment may not name another ListenerFragment"}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := NewLogs(io.Discard)
			if _, err := l.Write([]byte(tc.line + "\n")); err != nil {
				t.Fatal(err)
			}
			if got := len(l.Forbidden()) == 1; got != tc.refused {
				t.Errorf("Refused = %v, want %v: %q", got, tc.refused, l.Forbidden())
			}
		})
	}
}
