package webhook

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/rules"
)

// The Gateway API rules themselves live in package rules; this file turns
// their answers into the field errors kubectl prints. The admission plumbing
// (validator.go) reads what they need and package claims makes the
// duplicate decision race-free.

var listenersPath = field.NewPath("spec", "listeners")

func entryOf(l gwv1.ListenerEntry) rules.Entry { return rules.EntryOf(l.Port, l.Protocol, l.Hostname) }

// conflictError says listener i of a fragment in namespace ns conflicts on
// Gateway gateway: a protocol conflict points at the protocol, a duplicate at
// the hostname (or the port, for listeners told apart by port alone).
func conflictError(i int, l gwv1.ListenerEntry, c *rules.Conflict, gateway, ns string) *field.Error {
	e := entryOf(l)
	msg := c.Message(e, gateway, ns)
	if c.Holder.Entry.Tuple() != e.Tuple() {
		return field.Invalid(listenersPath.Index(i).Child("protocol"), l.Protocol, msg)
	}
	var err *field.Error
	if e.Tuple().Hostname != "" {
		err = field.Duplicate(listenersPath.Index(i).Child("hostname"), e.Hostname)
	} else {
		err = field.Duplicate(listenersPath.Index(i).Child("port"), l.Port)
	}
	err.Detail = msg
	return err
}

// CheckAgainstBoard checks a fragment's listeners, in order, against a board
// holding the Gateway's own listeners, and against the fragment's earlier
// listeners: a fragment whose own listeners clash is denied too.
func CheckAgainstBoard(lf *v1alpha1.ListenerFragment, gateway string, own *rules.Board) field.ErrorList {
	return checkListeners(lf, gateway, own, nil)
}

// checkListeners is CheckAgainstBoard for an update: kept listeners (see
// keptListeners) are checked against the fragment's own earlier listeners
// only, so that a tuple taken since by a Gateway change or an opted-out
// namespace leaves the fragment's other listeners editable.
func checkListeners(lf *v1alpha1.ListenerFragment, gateway string, others *rules.Board, kept []bool) field.ErrorList {
	return conflictErrors(lf, gateway, claims.Conflicts(lf, others, kept))
}

// conflictErrors turns the conflicts of a fragment's listeners on Gateway
// gateway, by listener index (nil where there is none), into field errors.
func conflictErrors(lf *v1alpha1.ListenerFragment, gateway string, conflicts []*rules.Conflict) field.ErrorList {
	var errs field.ErrorList
	for i, c := range conflicts {
		if c != nil {
			errs = append(errs, conflictError(i, lf.Spec.Listeners[i], c, gateway, lf.Namespace))
		}
	}
	return errs
}

// keptListeners marks the listeners of lf, the new spec of an update, whose
// tuple old, the stored spec, already held on the same Gateway. On a create
// (old is nil) or a move to another Gateway none is kept.
func keptListeners(old, lf *v1alpha1.ListenerFragment) []bool {
	kept := make([]bool, len(lf.Spec.Listeners))
	if old == nil || rules.ParentOf(old) != rules.ParentOf(lf) {
		return kept
	}
	had := sets.New[rules.Tuple]()
	for _, l := range old.Spec.Listeners {
		had.Insert(entryOf(l).Tuple())
	}
	for i, l := range lf.Spec.Listeners {
		kept[i] = had.Has(entryOf(l).Tuple())
	}
	return kept
}

// CheckAllowedListeners checks that the Gateway's spec.allowedListeners
// admits the fragment's namespace, whose labels are nsLabels. The denial
// says what rules.NamespaceAllowed tells that namespace, never more.
func CheckAllowedListeners(lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, nsLabels map[string]string) field.ErrorList {
	allowed, why := rules.NamespaceAllowed(gw, lf.Namespace, nsLabels)
	if allowed {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "parentRef"),
		rules.NotAllowedMessage(klog.KObj(gw).String(), lf.Namespace, why))}
}

// CheckValues denies what the schema admits and Gateway API does not (see
// rules.ProtocolProblem, HostnameProblem, CertificateKindProblem). On an
// update, a value the stored listener of that name (in old) already had is not
// checked again, so a fragment stored before a rule was added stays editable.
func CheckValues(old, lf *v1alpha1.ListenerFragment) field.ErrorList {
	var errs field.ErrorList
	for i, l := range lf.Spec.Listeners {
		path := listenersPath.Index(i)
		was := storedListener(old, l.Name)
		if msg := rules.ProtocolProblem(l.Protocol); msg != "" && (was == nil || was.Protocol != l.Protocol) {
			errs = append(errs, field.Invalid(path.Child("protocol"), l.Protocol, msg))
		}
		if msg := rules.HostnameProblem(entryOf(l).Hostname); msg != "" && (was == nil || entryOf(*was).Hostname != entryOf(l).Hostname) {
			errs = append(errs, field.Invalid(path.Child("hostname"), *l.Hostname, msg))
		}
		if l.TLS == nil {
			continue
		}
		for j, ref := range l.TLS.CertificateRefs {
			if msg := rules.CertificateKindProblem(ref); msg != "" && !hadKind(was, *ref.Kind) {
				errs = append(errs, field.Invalid(path.Child("tls", "certificateRefs").Index(j).Child("kind"), *ref.Kind, msg))
			}
		}
	}
	return errs
}

// hadKind says whether l, a stored listener (nil for none), references a
// certificate of that kind.
func hadKind(l *gwv1.ListenerEntry, kind gwv1.Kind) bool {
	return l != nil && l.TLS != nil && slices.ContainsFunc(l.TLS.CertificateRefs, func(r gwv1.SecretObjectReference) bool {
		return r.Kind != nil && *r.Kind == kind
	})
}

// storedListener returns old's listener named name, nil when old is nil or
// has none.
func storedListener(old *v1alpha1.ListenerFragment, name gwv1.SectionName) *gwv1.ListenerEntry {
	if old == nil {
		return nil
	}
	i := slices.IndexFunc(old.Spec.Listeners, func(l gwv1.ListenerEntry) bool { return l.Name == name })
	if i < 0 {
		return nil
	}
	return &old.Spec.Listeners[i]
}

// CheckCertificateRefs denies certificate references to Secrets in other
// namespaces that no ReferenceGrant there allows ListenerFragments of the
// fragment's namespace to read. grants are the ReferenceGrants by namespace.
func CheckCertificateRefs(lf *v1alpha1.ListenerFragment, grants map[string][]gwv1.ReferenceGrant) field.ErrorList {
	var errs field.ErrorList
	for i, l := range lf.Spec.Listeners {
		for _, r := range rules.UngrantedRefs(rules.KindListenerFragment, lf.Namespace, i, l, grants) {
			errs = append(errs, field.Forbidden(r.Path, rules.RefNotPermittedMessage(rules.KindListenerFragment, lf.Namespace, r)))
		}
	}
	return errs
}

// checkFits denies a fragment that can never be placed beside the Gateway's
// own listeners (own of them). An update (old is stored) is checked only when
// it adds listeners or moves, so a fragment crowded out stays editable.
func checkFits(old, lf *v1alpha1.ListenerFragment, own int, gw *gwv1.Gateway) field.ErrorList {
	if old != nil && rules.ParentOf(old) == rules.ParentOf(lf) && len(lf.Spec.Listeners) <= len(old.Spec.Listeners) {
		return nil
	}
	msg := rules.NeverFits(rules.KindListenerFragment, len(lf.Spec.Listeners), own, gw.Namespace+"/"+gw.Name, rules.PoolHead(gw))
	if msg == "" {
		return nil
	}
	err := field.TooMany(listenersPath, len(lf.Spec.Listeners), rules.MaxListeners-own)
	err.Detail = msg
	return field.ErrorList{err}
}
