package webhook

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// DefaultFragment fills in what a fragment leaves out and normalises what the
// API server would reject (`App.Example.COM.` is stored as `app.example.com`).
// It is idempotent and never widens what a fragment asks for: an empty
// normalised hostname, an explicit empty parentRef group or kind, a non-ASCII
// hostname or a missing parentRef name are errors, in words (the API server's
// schema check, which runs later, would quote a pattern).
func DefaultFragment(lf *v1alpha1.ListenerFragment) field.ErrorList {
	var errs field.ErrorList
	ref := &lf.Spec.ParentRef
	parent := field.NewPath("spec", "parentRef")
	switch {
	case ref.Group == nil:
		ref.Group = ptr.To(gwv1.Group(gwv1.GroupName))
	case *ref.Group == "":
		errs = append(errs, field.Invalid(parent.Child("group"), "",
			"an empty group is the core API group, which has no Gateway: set group to "+gwv1.GroupName+", or leave it out"))
	}
	switch {
	case ref.Kind == nil:
		ref.Kind = ptr.To(gwv1.Kind("Gateway"))
	case *ref.Kind == "":
		errs = append(errs, field.Invalid(parent.Child("kind"), "", "an empty kind names no Gateway: set kind to Gateway, or leave it out"))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(parent.Child("name"), "set spec.parentRef.name to the name of the Gateway that should carry these listeners"))
	}
	if ref.Namespace == nil || *ref.Namespace == "" {
		ref.Namespace = ptr.To(gwv1.Namespace(lf.Namespace))
	}
	for i := range lf.Spec.Listeners {
		errs = append(errs, defaultListener(listenersPath.Index(i), &lf.Spec.Listeners[i])...)
	}
	return errs
}

func defaultListener(path *field.Path, l *gwv1.ListenerEntry) field.ErrorList {
	var errs field.ErrorList
	if l.Hostname != nil {
		written := string(*l.Hostname)
		h := strings.TrimRight(lowerASCII(written), ".")
		if h == "" {
			errs = append(errs, field.Invalid(path.Child("hostname"), written,
				"without its trailing dots the hostname is empty, which is not every hostname: set the hostname served, or leave hostname out for every hostname"))
		} else {
			l.Hostname = ptr.To(gwv1.Hostname(h))
		}
		if msg := rules.NonASCIIHostnameProblem(h); msg != "" {
			errs = append(errs, field.Invalid(path.Child("hostname"), written, msg))
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
	return errs
}

// lowerASCII lowercases A to Z and leaves every other byte as it is: a
// Unicode case mapping could turn a name the schema rejects into one it
// accepts (the Kelvin sign lowercases to k).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// fragmentDefaulter is the mutating webhook's admission.Defaulter. A
// mutating webhook may deny too: an Invalid error names the field and the
// fix, as the validating webhook's denials do.
type fragmentDefaulter struct{}

func (fragmentDefaulter) Default(_ context.Context, lf *v1alpha1.ListenerFragment) error {
	if errs := DefaultFragment(lf); len(errs) > 0 {
		return apierrors.NewInvalid(fragmentGK, lf.Name, errs)
	}
	return nil
}
