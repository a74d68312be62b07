package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// These rules are pure: inputs in, field errors out. The admission plumbing
// (validator.go) reads what they need and the claim store (claims.go) makes
// the duplicate decision race-free.

var listenersPath = field.NewPath("spec", "listeners")

// Class groups protocols that may share a port: HTTP, HTTPS and TLS listeners
// (told apart by hostname) form one class, TCP and UDP (told apart by port
// alone) the other. Listeners of different classes on one port conflict.
type Class string

const (
	ClassL7 Class = "l7"
	ClassL4 Class = "l4"
)

// ClassOf returns the class of a protocol.
func ClassOf(p gwv1.ProtocolType) Class {
	if p == gwv1.TCPProtocolType || p == gwv1.UDPProtocolType {
		return ClassL4
	}
	return ClassL7
}

// Tuple is what a listener takes on a Gateway. Two listeners with equal
// tuples are duplicates: HTTP, HTTPS and TLS listeners on one port share the
// "family" protocol key, so they must differ in hostname.
type Tuple struct {
	Port     gwv1.PortNumber
	Protocol string
	Hostname string
}

// TupleOf returns the tuple a listener takes.
func TupleOf(port gwv1.PortNumber, protocol gwv1.ProtocolType, hostname *gwv1.Hostname) Tuple {
	t := Tuple{Port: port, Protocol: string(protocol)}
	if ClassOf(protocol) == ClassL7 {
		t.Protocol = "HTTP/HTTPS/TLS"
		if hostname != nil {
			t.Hostname = string(*hostname)
		}
	}
	return t
}

func (t Tuple) String() string {
	if t.Hostname == "" {
		if ClassOf(gwv1.ProtocolType(t.Protocol)) == ClassL4 {
			return fmt.Sprintf("port %d/%s", t.Port, t.Protocol)
		}
		return fmt.Sprintf("port %d (%s) with no hostname", t.Port, t.Protocol)
	}
	return fmt.Sprintf("port %d (%s) with hostname %s", t.Port, t.Protocol, t.Hostname)
}

// hostnameOrPortPath is the field that makes a tuple: the hostname where the
// listener has one, else the port.
func hostnameOrPortPath(i int, l gwv1.ListenerEntry) *field.Path {
	if l.Hostname != nil && ClassOf(l.Protocol) == ClassL7 {
		return listenersPath.Index(i).Child("hostname")
	}
	return listenersPath.Index(i).Child("port")
}

func hostnameOrPortValue(l gwv1.ListenerEntry) any {
	if l.Hostname != nil && ClassOf(l.Protocol) == ClassL7 {
		return string(*l.Hostname)
	}
	return l.Port
}

// duplicateError says listener i takes a tuple that `holder` already holds.
func duplicateError(i int, l gwv1.ListenerEntry, gateway string, holder string) *field.Error {
	fix := "choose another hostname or port"
	if ClassOf(l.Protocol) == ClassL4 {
		fix = "choose another port"
	}
	err := field.Duplicate(hostnameOrPortPath(i, l), hostnameOrPortValue(l))
	err.Detail = fmt.Sprintf("%s is already taken on Gateway %s by %s: %s", TupleOf(l.Port, l.Protocol, l.Hostname), gateway, holder, fix)
	return err
}

// protocolConflictError says listener i cannot share its port with listeners
// of the other class.
func protocolConflictError(i int, l gwv1.ListenerEntry, gateway string, holder string) *field.Error {
	other := "TCP or UDP"
	if ClassOf(l.Protocol) == ClassL4 {
		other = "HTTP, HTTPS or TLS"
	}
	return field.Invalid(listenersPath.Index(i).Child("protocol"), l.Protocol,
		fmt.Sprintf("port %d on Gateway %s already carries %s listeners (%s), which cannot share a port with %s: choose another port",
			l.Port, gateway, other, holder, l.Protocol))
}

// CheckAgainstListeners checks a fragment's listeners against listeners that
// already hold the Gateway (its own listeners), naming them as `owner`.
func CheckAgainstListeners(lf *v1alpha1.ListenerFragment, gateway string, taken []gwv1.Listener) field.ErrorList {
	var errs field.ErrorList
	for i, l := range lf.Spec.Listeners {
		for _, t := range taken {
			holder := fmt.Sprintf("the Gateway's own listener %q", t.Name)
			if t.Port != l.Port {
				continue
			}
			if ClassOf(t.Protocol) != ClassOf(l.Protocol) {
				errs = append(errs, protocolConflictError(i, l, gateway, holder))
				break
			}
			if TupleOf(t.Port, t.Protocol, t.Hostname) == TupleOf(l.Port, l.Protocol, l.Hostname) {
				errs = append(errs, duplicateError(i, l, gateway, holder))
				break
			}
		}
	}
	return errs
}

// OwnListenerIndexes returns the indexes of the Gateway's listeners that no
// fragment folded: the listeners other managers own.
func OwnListenerIndexes(gw *gwv1.Gateway, fragments []v1alpha1.ListenerFragment) []int {
	folded := map[gwv1.SectionName]bool{}
	for _, lf := range fragments {
		for _, l := range lf.Spec.Listeners {
			folded[v1alpha1.ListenerName(lf.Namespace, lf.Name, l.Name)] = true
		}
	}
	var own []int
	for i, l := range gw.Spec.Listeners {
		if !folded[l.Name] {
			own = append(own, i)
		}
	}
	return own
}

// CheckAllowedListeners checks that the Gateway's spec.allowedListeners
// admits the fragment's namespace, whose labels are nsLabels.
func CheckAllowedListeners(lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, nsLabels map[string]string) field.ErrorList {
	allowed, why := NamespaceAllowed(gw, lf.Namespace, nsLabels)
	if allowed {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "parentRef"),
		fmt.Sprintf("Gateway %s/%s does not allow listeners from namespace %s (%s): ask the Gateway's owner to allow this namespace in spec.allowedListeners, or choose another Gateway",
			gw.Namespace, gw.Name, lf.Namespace, why))}
}

// NamespaceAllowed applies the Gateway's spec.allowedListeners.namespaces to
// namespace ns, whose labels are nsLabels, and says why it is not admitted.
func NamespaceAllowed(gw *gwv1.Gateway, ns string, nsLabels map[string]string) (bool, string) {
	from := gwv1.NamespacesFromNone
	var selector *metav1.LabelSelector
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
		if al.Namespaces.From != nil {
			from = *al.Namespaces.From
		}
		selector = al.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true, ""
	case gwv1.NamespacesFromSame:
		return ns == gw.Namespace, "spec.allowedListeners.namespaces.from is Same"
	case gwv1.NamespacesFromSelector:
		if selector == nil {
			return false, "spec.allowedListeners.namespaces.from is Selector with no selector"
		}
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return false, fmt.Sprintf("its namespace selector is invalid: %v", err)
		}
		return s.Matches(labels.Set(nsLabels)), "the namespace's labels do not match spec.allowedListeners.namespaces.selector"
	default:
		return false, "spec.allowedListeners.namespaces.from is None, the default"
	}
}

// CheckCertificateRefs denies certificate references to Secrets in other
// namespaces that no ReferenceGrant there allows ListenerFragments of the
// fragment's namespace to read. grants are the ReferenceGrants by namespace.
func CheckCertificateRefs(lf *v1alpha1.ListenerFragment, grants map[string][]gwv1.ReferenceGrant) field.ErrorList {
	var errs field.ErrorList
	for _, r := range foreignCertificateRefs(lf) {
		if referenceGranted(grants[r.namespace], lf.Namespace, r.ref) {
			continue
		}
		errs = append(errs, field.Forbidden(r.path,
			fmt.Sprintf("Secret %s/%s is in another namespace and no ReferenceGrant in namespace %s allows ListenerFragments from namespace %s to reference it: create one there (from group %s, kind ListenerFragment, namespace %s; to kind Secret), or use a Secret in namespace %s",
				r.namespace, r.ref.Name, r.namespace, lf.Namespace, v1alpha1.GroupVersion.Group, lf.Namespace, lf.Namespace)))
	}
	return errs
}

// certificateRef is a certificateRef into another namespace, and its field.
type certificateRef struct {
	path      *field.Path
	namespace string
	ref       gwv1.SecretObjectReference
}

func foreignCertificateRefs(lf *v1alpha1.ListenerFragment) []certificateRef {
	var out []certificateRef
	for i, l := range lf.Spec.Listeners {
		if l.TLS == nil {
			continue
		}
		for j, ref := range l.TLS.CertificateRefs {
			if ref.Namespace == nil || string(*ref.Namespace) == lf.Namespace {
				continue
			}
			out = append(out, certificateRef{
				path:      listenersPath.Index(i).Child("tls", "certificateRefs").Index(j),
				namespace: string(*ref.Namespace),
				ref:       ref,
			})
		}
	}
	return out
}

func referenceGranted(grants []gwv1.ReferenceGrant, fromNS string, ref gwv1.SecretObjectReference) bool {
	kind := gwv1.Kind("Secret")
	if ref.Kind != nil {
		kind = *ref.Kind
	}
	group := gwv1.Group(corev1.GroupName)
	if ref.Group != nil {
		group = *ref.Group
	}
	for _, g := range grants {
		fromOK := false
		for _, f := range g.Spec.From {
			if string(f.Group) == v1alpha1.GroupVersion.Group && f.Kind == "ListenerFragment" && string(f.Namespace) == fromNS {
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
