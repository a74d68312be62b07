package webhook

import (
	"context"
	"strings"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// DefaultFragment fills in what a fragment leaves out and normalises what the
// API server would otherwise reject, so `App.Example.COM.` is stored as
// `app.example.com` instead of failing the hostname pattern. It is idempotent.
func DefaultFragment(lf *v1alpha1.ListenerFragment) {
	ref := &lf.Spec.ParentRef
	if ref.Group == nil || *ref.Group == "" {
		ref.Group = ptr.To(gwv1.Group(gwv1.GroupName))
	}
	if ref.Kind == nil || *ref.Kind == "" {
		ref.Kind = ptr.To(gwv1.Kind("Gateway"))
	}
	if ref.Namespace == nil || *ref.Namespace == "" {
		ref.Namespace = ptr.To(gwv1.Namespace(lf.Namespace))
	}
	for i := range lf.Spec.Listeners {
		defaultListener(&lf.Spec.Listeners[i])
	}
}

func defaultListener(l *gwv1.ListenerEntry) {
	if l.Hostname != nil {
		h := strings.TrimRight(strings.ToLower(string(*l.Hostname)), ".")
		if h == "" {
			l.Hostname = nil
		} else {
			l.Hostname = ptr.To(gwv1.Hostname(h))
		}
	}
	if (l.Protocol == gwv1.HTTPSProtocolType || l.Protocol == gwv1.TLSProtocolType) && l.TLS != nil && (l.TLS.Mode == nil || *l.TLS.Mode == "") {
		l.TLS.Mode = ptr.To(gwv1.TLSModeTerminate)
	}
	if l.AllowedRoutes == nil {
		l.AllowedRoutes = &gwv1.AllowedRoutes{}
	}
	if l.AllowedRoutes.Namespaces == nil {
		l.AllowedRoutes.Namespaces = &gwv1.RouteNamespaces{}
	}
	if l.AllowedRoutes.Namespaces.From == nil {
		l.AllowedRoutes.Namespaces.From = ptr.To(gwv1.NamespacesFromSame)
	}
}

// fragmentDefaulter is the mutating webhook's admission.Defaulter.
type fragmentDefaulter struct{}

func (fragmentDefaulter) Default(_ context.Context, lf *v1alpha1.ListenerFragment) error {
	DefaultFragment(lf)
	return nil
}
