package merger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// A folded listener reads its certificate Secrets from the fragment's
// namespace, which a Gateway in another namespace may only do through a
// ReferenceGrant there. The merger keeps one per fragment, owned by it (so
// garbage collection removes it with the fragment), allowing exactly the
// Gateway's namespace to read exactly those Secrets.

// GrantName is the name of the ReferenceGrant the merger keeps for a
// fragment, in the fragment's namespace.
func GrantName(lf *v1alpha1.ListenerFragment) string {
	const prefix, max = "gatefold-", 253
	name := prefix + lf.Name
	if len(name) > max {
		// Cut names stay distinct by the hash that ends a listener name.
		h := string(v1alpha1.ListenerName(lf.Namespace, lf.Name, ""))
		name = name[:max-17] + "-" + h[len(h)-16:]
	}
	return name
}

// secretsToGrant returns the Secrets in the fragment's namespace that its
// folded listeners reference, when the Gateway is in another namespace.
func secretsToGrant(lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, outcomes []Outcome) []string {
	if gw == nil || gw.Namespace == lf.Namespace {
		return nil
	}
	folded := sets.New[gwv1.SectionName]()
	for _, o := range outcomes {
		if o.Fragment == keyOf(lf) && o.Folded() {
			folded.Insert(o.Listener)
		}
	}
	secrets := sets.New[string]()
	for _, e := range lf.Spec.Listeners {
		if !folded.Has(e.Name) || e.TLS == nil {
			continue
		}
		for _, ref := range Listener(lf, e).TLS.CertificateRefs {
			if string(*ref.Namespace) == lf.Namespace && (ref.Group == nil || *ref.Group == "") && (ref.Kind == nil || *ref.Kind == "Secret") {
				secrets.Insert(string(ref.Name))
			}
		}
	}
	return sets.List(secrets)
}

// applyGrant makes the fragment's ReferenceGrant match the Secrets its
// folded listeners need, deleting it when they need none.
func (r *Reconciler) applyGrant(ctx context.Context, lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, outcomes []Outcome) error {
	secrets := secretsToGrant(lf, gw, outcomes)
	key := types.NamespacedName{Namespace: lf.Namespace, Name: GrantName(lf)}
	current := &gwv1.ReferenceGrant{}
	switch err := r.Client.Get(ctx, key, current); {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return fmt.Errorf("reading ReferenceGrant %s: %w", key, err)
	}
	if len(secrets) == 0 {
		if current == nil || !ownedBy(current, lf) {
			return nil
		}
		if err := r.Client.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
			grantWrites.WithLabelValues("delete", resultError).Inc()
			return fmt.Errorf("deleting unused ReferenceGrant %s: %w", key, err)
		}
		grantWrites.WithLabelValues("delete", resultWritten).Inc()
		log.FromContext(ctx).Info("Deleted unused ReferenceGrant", "referenceGrant", klog.KObj(current))
		return nil
	}
	if current != nil && !ownedBy(current, lf) {
		// Someone else's grant of that name: never overwrite it.
		r.Recorder.Eventf(lf, nil, corev1.EventTypeWarning, "ReferenceGrantNotOwned", "Grant",
			"ReferenceGrant %s exists and gatefold does not manage it, so it was left unchanged: Gateway namespace %s may be unable to read Secrets %v; rename or delete that ReferenceGrant, or grant them yourself",
			key, gw.Namespace, secrets)
		return nil
	}
	if current != nil && grantUpToDate(current, gw.Namespace, secrets) {
		return nil
	}
	spec := gwapply.ReferenceGrantSpec().WithFrom(gwapply.ReferenceGrantFrom().
		WithGroup(gwv1.GroupName).WithKind("Gateway").WithNamespace(gwv1.Namespace(gw.Namespace)))
	for _, s := range secrets {
		spec.WithTo(gwapply.ReferenceGrantTo().WithGroup(corev1.GroupName).WithKind("Secret").WithName(gwv1.ObjectName(s)))
	}
	grant := gwapply.ReferenceGrant(key.Name, key.Namespace).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": rules.FieldManager}).
		WithOwnerReferences(metaapply.OwnerReference().
			WithAPIVersion(v1alpha1.GroupVersion.String()).WithKind("ListenerFragment").
			WithName(lf.Name).WithUID(lf.UID).WithController(true)).
		WithSpec(spec)
	if err := r.Client.Apply(ctx, grant, client.FieldOwner(rules.FieldManager), client.ForceOwnership); err != nil {
		grantWrites.WithLabelValues("apply", resultError).Inc()
		return fmt.Errorf("applying ReferenceGrant %s: %w", key, err)
	}
	grantWrites.WithLabelValues("apply", resultWritten).Inc()
	log.FromContext(ctx).Info("Applied ReferenceGrant", "referenceGrant", key.String(), "gatewayNamespace", gw.Namespace, "secrets", secrets)
	return nil
}

func ownedBy(grant *gwv1.ReferenceGrant, lf *v1alpha1.ListenerFragment) bool {
	ref := metav1.GetControllerOf(grant)
	return ref != nil && ref.UID == lf.UID
}

func grantUpToDate(g *gwv1.ReferenceGrant, gatewayNS string, secrets []string) bool {
	if len(g.Spec.From) != 1 || len(g.Spec.To) != len(secrets) {
		return false
	}
	if f := g.Spec.From[0]; f.Group != gwv1.GroupName || f.Kind != "Gateway" || string(f.Namespace) != gatewayNS {
		return false
	}
	for i, t := range g.Spec.To {
		if t.Group != corev1.GroupName || t.Kind != "Secret" || t.Name == nil || string(*t.Name) != secrets[i] {
			return false
		}
	}
	return true
}
