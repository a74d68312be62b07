package rules

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A fragment's certificateRefs resolve in its own namespace. A reference into
// another namespace needs a ReferenceGrant there that lets ListenerFragments
// (for a ListenerSet, ListenerSets) of the fragment's namespace read the
// Secret; admission and every fold check it, so revoking the grant withdraws
// the listener.

// ForeignRef is a certificateRef of a fragment listener into another
// namespace.
type ForeignRef struct {
	// Path is the reference's field in the fragment.
	Path      *field.Path
	Namespace string
	Ref       gwv1.SecretObjectReference
}

// ForeignCertificateRefs returns listener i's certificateRefs into namespaces
// other than fromNS, the fragment's.
func ForeignCertificateRefs(fromNS string, i int, l gwv1.ListenerEntry) []ForeignRef {
	if l.TLS == nil {
		return nil
	}
	var out []ForeignRef
	for j, ref := range l.TLS.CertificateRefs {
		if ref.Namespace == nil || string(*ref.Namespace) == fromNS {
			continue
		}
		out = append(out, ForeignRef{
			Path:      field.NewPath("spec", "listeners").Index(i).Child("tls", "certificateRefs").Index(j),
			Namespace: string(*ref.Namespace),
			Ref:       ref,
		})
	}
	return out
}

// GroupKindOf returns the group and kind a certificateRef names, defaulted
// as the API defaults them: a core Secret.
func GroupKindOf(ref gwv1.SecretObjectReference) (gwv1.Group, gwv1.Kind) {
	group, kind := gwv1.Group(corev1.GroupName), gwv1.Kind("Secret")
	if ref.Group != nil {
		group = *ref.Group
	}
	if ref.Kind != nil {
		kind = *ref.Kind
	}
	return group, kind
}

// RefGranted says whether one of grants, the ReferenceGrants of the Secret's
// namespace, lets sources of kind fromKind (ListenerFragment or ListenerSet)
// in namespace fromNS reference it. A grant to another kind, the Gateway
// included, does not count.
func RefGranted(grants []gwv1.ReferenceGrant, fromKind, fromNS string, ref gwv1.SecretObjectReference) bool {
	group, kind := GroupKindOf(ref)
	for _, g := range grants {
		fromOK := false
		for _, f := range g.Spec.From {
			if string(f.Group) == GroupOfKind(fromKind) && string(f.Kind) == fromKind && string(f.Namespace) == fromNS {
				fromOK = true
			}
		}
		if !fromOK {
			continue
		}
		for _, t := range g.Spec.To {
			if t.Group == group && t.Kind == kind && (t.Name == nil || *t.Name == ref.Name) {
				return true
			}
		}
	}
	return false
}

// UngrantedRefs returns listener i's references into other namespaces that
// no grant allows the source (of kind fromKind, in fromNS); grants are the
// ReferenceGrants by namespace.
func UngrantedRefs(fromKind, fromNS string, i int, l gwv1.ListenerEntry, grants map[string][]gwv1.ReferenceGrant) []ForeignRef {
	var out []ForeignRef
	for _, r := range ForeignCertificateRefs(fromNS, i, l) {
		if !RefGranted(grants[r.Namespace], fromKind, fromNS, r.Ref) {
			out = append(out, r)
		}
	}
	return out
}

// RefNotPermittedMessage says which grant a source of kind fromKind in
// namespace fromNS needs for r, and where.
func RefNotPermittedMessage(fromKind, fromNS string, r ForeignRef) string {
	return fmt.Sprintf("No ReferenceGrant in namespace %s lets %ss of namespace %s use Secret %s: add one (from: %s/%s in %s), or use a Secret in %s",
		r.Namespace, fromKind, fromNS, r.Ref.Name, GroupOfKind(fromKind), fromKind, fromNS, fromNS)
}
