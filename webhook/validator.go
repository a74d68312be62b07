package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

var fragmentGK = v1alpha1.GroupVersion.WithKind("ListenerFragment").GroupKind()

// fragmentValidator is the validating webhook's admission.Validator: it reads
// the Gateway, its namespace and ReferenceGrants from the cache, and takes
// claims for the fragment's listeners.
type fragmentValidator struct {
	cache  client.Reader
	claims *claims.Store
	// listenerSetControllers are those of the GatewayClasses whose
	// ListenerSets gatefold folds.
	listenerSetControllers sets.Set[string]
}

func (v *fragmentValidator) ValidateCreate(ctx context.Context, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	stored, err := v.nameStored(ctx, lf)
	if err != nil {
		return nil, v.internal(ctx, lf, err)
	}
	if stored {
		// Answered as the API server would, and denied rather than admitted
		// untouched: were the stored object deleted before this create is
		// stored, it would otherwise land unchecked and unclaimed.
		return nil, apierrors.NewAlreadyExists(v1alpha1.GroupVersion.WithResource("listenerfragments").GroupResource(), lf.Name)
	}
	return v.validate(ctx, nil, lf)
}

// ValidateUpdate checks only a changed spec, and against other holders only
// the tuples the stored fragment did not have: a fragment that a later Gateway
// change made conflicted stays editable, and the merger reports the conflict.
func (v *fragmentValidator) ValidateUpdate(ctx context.Context, old, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, lf.Spec) {
		return nil, nil
	}
	return v.validate(ctx, old, lf)
}

// ValidateDelete allows every delete: the claims a deleted fragment held are
// released by the collector once it is gone.
func (v *fragmentValidator) ValidateDelete(context.Context, *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	return nil, nil
}

// nameStored says whether a fragment of lf's namespace and name is stored and
// not being deleted. The cache answers most creates, which are of new
// names; a name it holds is read live, since the cache may still hold a
// fragment deleted a moment ago whose name is being created again.
func (v *fragmentValidator) nameStored(ctx context.Context, lf *v1alpha1.ListenerFragment) (bool, error) {
	key := client.ObjectKeyFromObject(lf)
	for _, r := range []client.Reader{v.cache, v.claims.Reader} {
		stored := &v1alpha1.ListenerFragment{}
		if err := r.Get(ctx, key, stored); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("reading ListenerFragment %s: %w", key, err)
		}
		if !stored.DeletionTimestamp.IsZero() {
			return false, nil
		}
	}
	return true, nil
}

// validate checks everything a fragment needs that the cache can tell, then
// claims its listeners: reading only, so a denial writes nothing, then
// writing. old is the stored fragment of an update, nil for a create. A
// fragment whose Gateway is missing or does not admit its namespace claims
// nothing, and learns nothing of the Gateway's pool or tuples.
func (v *fragmentValidator) validate(ctx context.Context, old, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	if !lf.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	if errs := CheckValues(old, lf); len(errs) > 0 {
		return nil, invalid(lf, errs)
	}
	gwKey := rules.ParentOf(lf)
	var warnings admission.Warnings
	var errs field.ErrorList
	view := claims.NewView(v.cache)
	gw, err := view.Gateway(ctx, gwKey)
	if err != nil {
		return nil, v.internal(ctx, lf, err)
	}
	kept := keptListeners(old, lf)
	req := claims.NewRequest(lf, old == nil, kept)
	base := rules.NewBoard()
	if gw == nil {
		warnings = append(warnings, fmt.Sprintf("Gateway %s does not exist yet: the listeners are claimed and folded once it is created", gwKey))
	} else {
		labels, _, err := view.NamespaceLabels(ctx, lf.Namespace)
		if err != nil {
			return nil, v.internal(ctx, lf, err)
		}
		// A sibling carries its head's allowedListeners.
		errs = append(errs, CheckAllowedListeners(lf, gw, labels)...)
		if head, sibling := rules.HeadOf(gw); sibling && len(errs) == 0 {
			// Its listeners are the pool's to place: a fragment names the head.
			return nil, invalid(lf, field.ErrorList{field.Invalid(field.NewPath("spec", "parentRef", "name"), lf.Spec.ParentRef.Name,
				rules.SiblingMessage(gwKey, head))})
		}
		if len(errs) == 0 {
			var own int
			if base, own, err = v.storedBoard(ctx, view, gw, lf); err != nil {
				return nil, v.internal(ctx, lf, err)
			}
			errs = append(errs, checkFits(old, lf, own, gw)...)
		}
	}
	grants := map[string][]gwv1.ReferenceGrant{}
	if err := v.grantsFor(ctx, lf.Namespace, lf.Spec.Listeners, grants); err != nil {
		return nil, v.internal(ctx, lf, err)
	}
	errs = append(errs, CheckCertificateRefs(lf, grants)...)
	if gw == nil || len(errs) > 0 {
		return warnings, invalid(lf, append(errs, checkListeners(lf, gwKey.String(), base, kept)...))
	}

	// One deadline for the claim work, not one per wait.
	ctx, cancel := context.WithTimeout(ctx, claims.Wait)
	defer cancel()
	plan, conflicts, err := v.claims.Check(ctx, req, base)
	if err != nil {
		return warnings, v.internal(ctx, lf, err)
	}
	if conflicts != nil {
		return warnings, invalid(lf, conflictErrors(lf, gwKey.String(), conflicts))
	}
	if ar, err := admission.RequestFromContext(ctx); err == nil && ptr.Deref(ar.DryRun, false) {
		return warnings, nil
	}
	if conflicts, err = v.claims.Acquire(ctx, plan); err != nil {
		if apierrors.IsConflict(err) {
			return warnings, err
		}
		return warnings, v.internal(ctx, lf, err)
	}
	return warnings, invalid(lf, conflictErrors(lf, gwKey.String(), conflicts))
}

// storedBoard returns the board a request is checked against besides claims
// (rules.StoredBoard), and the Gateway's count of own listeners. A stored
// source may hold no claim until the collector's next round; what the fold
// does not place blocks no one (docs/architecture.md, "Claims").
func (v *fragmentValidator) storedBoard(ctx context.Context, view *claims.View, gw *gwv1.Gateway, lf *v1alpha1.ListenerFragment) (*rules.Board, int, error) {
	listenerSets, err := listenerSetsOf(ctx, v.cache, v.listenerSetControllers, gw)
	if err != nil {
		return nil, 0, err
	}
	stored := rules.Stored{Gateway: gw, Grants: map[string][]gwv1.ReferenceGrant{}, Skip: rules.FragmentRef(lf)}
	// Read whether or not ListenerSets are left: what someone added to it
	// holds its tuples for the fold either way.
	if stored.ListenerSets, err = view.Gateway(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: rules.ListenerSetGatewayName(gw.Name)}); err != nil {
		return nil, 0, err
	}
	if stored.Sources, err = v.sourcesFor(ctx, view, gw, stored.ListenerSets, lf, listenerSets); err != nil {
		// Another tenant's namespace: the requester is not told which.
		logf.FromContext(ctx).Error(err, "Reading the stored ListenerFragments of a Gateway and their namespaces", "gateway", klog.KObj(gw))
		return nil, 0, fmt.Errorf("reading the ListenerFragments of Gateway %s and their namespaces from the informer cache (gatefold's log has the details)", klog.KObj(gw))
	}
	var tuples []rules.Tuple
	for _, src := range stored.Sources {
		for _, l := range src.Listeners {
			tuples = append(tuples, rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple())
		}
	}
	if stored.Claims, err = v.claims.Holders(client.ObjectKeyFromObject(gw), tuples); err != nil {
		return nil, 0, err
	}
	for _, f := range stored.Sources {
		if f.Ref() == stored.Skip {
			continue
		}
		if err := v.grantsFor(ctx, f.Namespace, f.Listeners, stored.Grants); err != nil {
			// Another tenant's certificate namespace: not named.
			logf.FromContext(ctx).Error(err, "Reading the ReferenceGrants of a stored source", "source", f.Ref().String())
			return nil, 0, fmt.Errorf("reading the ReferenceGrants of the sources of Gateway %s from the informer cache (gatefold's log has the details)", klog.KObj(gw))
		}
	}
	b, own := rules.StoredBoard(stored)
	return b, len(own), nil
}

// internal is the error for a request admission could not decide, nil for
// a nil err. It is logged, so that an operator sees a request refused inside
// admission (a missing right shows there as Forbidden); its message names
// nothing of another tenant's.
func (v *fragmentValidator) internal(ctx context.Context, lf *v1alpha1.ListenerFragment, err error) error {
	if err == nil {
		return nil
	}
	logf.FromContext(ctx).Error(err, "Refusing a ListenerFragment admission request: it could not be decided", "fragment", klog.KObj(lf))
	return apierrors.NewInternalError(err)
}

// invalid is the error kubectl prints for errs, nil when there are none.
func invalid(lf *v1alpha1.ListenerFragment, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(fragmentGK, lf.Name, errs)
}

// sourcesFor returns the stored sources of gw that the fold places (View.Placed)
// and lf is checked against, its ListenerSets among them: on a pool's head
// only those lf's listeners may meet (rules.RelatedSources), else every
// fragment naming gw. lsGateway is the Gateway of gw's ListenerSets, nil
// when there is none.
func (v *fragmentValidator) sourcesFor(ctx context.Context, view *claims.View, gw, lsGateway *gwv1.Gateway, lf *v1alpha1.ListenerFragment, listenerSets []rules.Source) ([]rules.Source, error) {
	if !rules.PoolHead(gw) {
		fragments, err := fragmentsOf(ctx, v.cache, gw)
		if err != nil {
			return nil, err
		}
		return view.Placed(ctx, gw, append(fragments, listenerSets...))
	}
	entries := make([]rules.Entry, 0, len(lf.Spec.Listeners))
	for _, l := range lf.Spec.Listeners {
		entries = append(entries, rules.EntryOf(l.Port, l.Protocol, l.Hostname))
	}
	seeds, err := view.Placed(ctx, gw, listenerSets)
	if err != nil {
		return nil, err
	}
	// What the fold does not place decides nothing: it is not followed.
	return rules.RelatedSources(gw, lsGateway, entries, seeds, func(key string) ([]rules.Source, error) {
		list := &v1alpha1.ListenerFragmentList{}
		if err := v.cache.List(ctx, list, client.MatchingFields{manager.AdmissionIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the ListenerFragments of Gateway %s that may conflict with the request: %w", klog.KObj(gw), err)
		}
		return view.Placed(ctx, gw, rules.FromFragments(list.Items))
	})
}

// fragmentsOf lists the fragments that name gw as their parent, as sources
// that share the cache's objects, not copies (a pool's head has a
// thousand): they must only be read.
func fragmentsOf(ctx context.Context, c client.Reader, gw *gwv1.Gateway) ([]rules.Source, error) {
	list := &v1alpha1.ListenerFragmentList{}
	if err := c.List(ctx, list, client.MatchingFields{manager.ParentIndex: klog.KObj(gw).String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing fragments of Gateway %s: %w", klog.KObj(gw), err)
	}
	return rules.FromFragments(list.Items), nil
}

// listenerSetsOf lists gw's ListenerSets when gatefold folds those of its
// class (controllers are those opted in); else none.
func listenerSetsOf(ctx context.Context, cache client.Reader, controllers sets.Set[string], gw *gwv1.Gateway) ([]rules.Source, error) {
	if controllers.Len() == 0 {
		return nil, nil
	}
	gc := &gwv1.GatewayClass{}
	if err := cache.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, gc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	if !rules.ListenerSetsFolded(gc, controllers) {
		return nil, nil
	}
	list := &gwv1.ListenerSetList{}
	if err := cache.List(ctx, list, client.MatchingFields{manager.ParentIndex: klog.KObj(gw).String()}); err != nil {
		return nil, fmt.Errorf("listing ListenerSets of Gateway %s: %w", klog.KObj(gw), err)
	}
	return rules.FromListenerSets(list.Items), nil
}

// grantsFor adds to grants, by namespace, the ReferenceGrants of every
// namespace that listeners of a source in namespace ns point into with
// certificateRefs, other than ns, and not in grants yet.
func (v *fragmentValidator) grantsFor(ctx context.Context, ns string, listeners []gwv1.ListenerEntry, grants map[string][]gwv1.ReferenceGrant) error {
	for i, l := range listeners {
		for _, ref := range rules.ForeignCertificateRefs(ns, i, l) {
			if _, done := grants[ref.Namespace]; done {
				continue
			}
			list := &gwv1.ReferenceGrantList{}
			if err := v.cache.List(ctx, list, client.InNamespace(ref.Namespace)); err != nil {
				return fmt.Errorf("listing ReferenceGrants in %s: %w", ref.Namespace, err)
			}
			grants[ref.Namespace] = list.Items
		}
	}
	return nil
}
