package merger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/rules"
)

// The merger keeps one ReferenceGrant per fragment whose folded listeners read
// Secrets in its namespace, owned by the fragment, allowing exactly the
// Gateway's namespace to read exactly those Secrets.

// GrantName is the name of the ReferenceGrant the merger keeps for source
// src, in its namespace. A ListenerSet's starts "gatefold.listenerset.",
// which no fragment's "gatefold-" name can.
func GrantName(src rules.SourceRef) string {
	const max = 253
	prefix := "gatefold-"
	if src.Kind == rules.KindListenerSet {
		prefix = "gatefold.listenerset."
	}
	name := prefix + src.Name
	if len(name) > max {
		// Cut names stay distinct by the hash that ends a listener name.
		h := string(rules.GatewayListenerName(src, ""))
		name = name[:max-17] + "-" + h[len(h)-16:]
	}
	return name
}

// secretsToGrant returns the Secrets in src's namespace that its folded
// listeners reference, when the Gateway is in another namespace.
func secretsToGrant(src *rules.Source, gw *gwv1.Gateway, outcomes []fold.Outcome) []string {
	if gw == nil || gw.Namespace == src.Namespace {
		return nil
	}
	folded := sets.New[gwv1.SectionName]()
	for _, o := range outcomes {
		if o.Fragment == src.Ref() && o.Folded() {
			folded.Insert(o.Listener)
		}
	}
	secrets := sets.New[string]()
	for _, e := range src.Listeners {
		if !folded.Has(e.Name) || e.TLS == nil {
			continue
		}
		for _, ref := range fold.Listener(src, e).TLS.CertificateRefs {
			if group, kind := rules.GroupKindOf(ref); string(*ref.Namespace) == src.Namespace && group == corev1.GroupName && kind == "Secret" {
				secrets.Insert(string(ref.Name))
			}
		}
	}
	return sets.List(secrets)
}

// applyGrant makes src's ReferenceGrant match the Secrets its folded
// listeners need, deleting it when they need none. With widenOnly (before a
// Gateway apply) it only adds: the implementation must never see a folded
// listener whose Secret it may not read yet.
func (r *Reconciler) applyGrant(ctx context.Context, src *rules.Source, gw *gwv1.Gateway, outcomes []fold.Outcome, widenOnly bool) error {
	if err := r.fenced(); err != nil {
		return err
	}
	secrets := secretsToGrant(src, gw, outcomes)
	if widenOnly && len(secrets) == 0 {
		return nil
	}
	key := types.NamespacedName{Namespace: src.Namespace, Name: GrantName(src.Ref())}
	current := &gwv1.ReferenceGrant{}
	switch err := r.Client.Get(ctx, key, current); {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return fmt.Errorf("reading ReferenceGrant %s: %w", key, err)
	}
	if current != nil && ofEarlierObject(current, src) {
		if err := r.deleteGrant(ctx, current, "Deleted the ReferenceGrant of an earlier object of the name"); err != nil {
			return err
		}
		current = nil
	}
	if widenOnly && current != nil && ownedBy(current, src) && len(current.Spec.From) == 1 && string(current.Spec.From[0].Namespace) == gw.Namespace {
		for _, t := range current.Spec.To {
			if t.Name != nil && t.Group == corev1.GroupName && t.Kind == "Secret" {
				secrets = append(secrets, string(*t.Name))
			}
		}
		secrets = sets.List(sets.New(secrets...))
	}
	if len(secrets) == 0 {
		if current == nil || !ownedBy(current, src) {
			return nil
		}
		return r.deleteGrant(ctx, current, "Deleted unused ReferenceGrant")
	}
	if current != nil && !ownedBy(current, src) {
		// Someone else's grant of that name: never overwrite it.
		r.Recorder.Eventf(objectOf(src), nil, corev1.EventTypeWarning, "ReferenceGrantNotOwned", "Grant",
			"ReferenceGrant %s is not gatefold's, so it was left unchanged and namespace %s may not read Secrets %v: delete or rename it, or grant them yourself",
			key, gw.Namespace, secrets)
		return nil
	}
	if current != nil && grantUpToDate(current, gw.Namespace, secrets) {
		return nil
	}
	desired := desiredGrant(key, src, gw.Namespace, secrets)
	var err error
	if current == nil {
		// Created, not applied: a grant of that name someone made since the
		// cache saw none is never taken over.
		err = r.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager))
	} else {
		// Fenced by the version read, for the same reason.
		applied := &gwapply.ReferenceGrantApplyConfiguration{}
		if err = convert(desired, applied); err == nil {
			err = r.Client.Apply(ctx, applied.WithResourceVersion(current.ResourceVersion), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
		}
	}
	switch {
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		grantWrites.WithLabelValues("apply", resultConflict).Inc()
		return err // folded again shortly, with the newer grant
	case err != nil:
		grantWrites.WithLabelValues("apply", resultError).Inc()
		return fmt.Errorf("applying ReferenceGrant %s: %w", key, err)
	}
	grantWrites.WithLabelValues("apply", resultWritten).Inc()
	log.FromContext(ctx).Info("Applied ReferenceGrant", "referenceGrant", key.String(), "gatewayNamespace", gw.Namespace, "secrets", secrets)
	return nil
}

// desiredGrant is the grant, owned by src, that lets Gateways of namespace
// gatewayNS read src's Secrets.
func desiredGrant(key types.NamespacedName, src *rules.Source, gatewayNS string, secrets []string) *gwv1.ReferenceGrant {
	g := &gwv1.ReferenceGrant{
		TypeMeta: metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "ReferenceGrant"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      key.Name,
			Labels:    map[string]string{v1alpha1.ManagedByLabel: v1alpha1.FieldManager},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: rules.APIVersionOf(src.Kind), Kind: src.Kind, Name: src.Name, UID: src.UID, Controller: ptr.To(true),
			}},
		},
		Spec: gwv1.ReferenceGrantSpec{From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: gwv1.Namespace(gatewayNS)}}},
	}
	for _, s := range secrets {
		g.Spec.To = append(g.Spec.To, gwv1.ReferenceGrantTo{Group: corev1.GroupName, Kind: "Secret", Name: ptr.To(gwv1.ObjectName(s))})
	}
	return g
}

// deleteGrant deletes grant, on condition that it is the object read, and
// logs msg.
func (r *Reconciler) deleteGrant(ctx context.Context, grant *gwv1.ReferenceGrant, msg string) error {
	err := r.Client.Delete(ctx, grant, client.Preconditions{UID: &grant.UID, ResourceVersion: &grant.ResourceVersion})
	if client.IgnoreNotFound(err) != nil {
		grantWrites.WithLabelValues("delete", resultError).Inc()
		return fmt.Errorf("deleting ReferenceGrant %s: %w", klog.KObj(grant), err)
	}
	grantWrites.WithLabelValues("delete", resultWritten).Inc()
	log.FromContext(ctx).Info(msg, "referenceGrant", klog.KObj(grant))
	return nil
}

// ofEarlierObject says whether grant is the one gatefold made for an earlier
// object of src's kind and name, deleted since: the garbage collector may not
// have deleted it yet, and it must not stand in src's way. Made before src
// was: a cache that still shows the earlier object must not take the grant
// of a later one for it.
func ofEarlierObject(grant *gwv1.ReferenceGrant, src *rules.Source) bool {
	ref := metav1.GetControllerOf(grant)
	return ref != nil && ref.UID != src.UID && ref.Kind == src.Kind && ref.Name == src.Name &&
		grant.Labels[v1alpha1.ManagedByLabel] == v1alpha1.FieldManager && grant.CreationTimestamp.Before(&src.CreationTimestamp)
}

func ownedBy(grant *gwv1.ReferenceGrant, src *rules.Source) bool {
	ref := metav1.GetControllerOf(grant)
	return ref != nil && ref.UID == src.UID
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
