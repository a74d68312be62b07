package webhook

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

var fragmentGK = v1alpha1.GroupVersion.WithKind("ListenerFragment").GroupKind()

// fragmentValidator is the validating webhook's admission.Validator: it reads
// the Gateway, its namespace and ReferenceGrants from the cache, and takes
// claims for the fragment's listeners.
type fragmentValidator struct {
	cache  client.Reader
	claims *ClaimStore
}

func (v *fragmentValidator) ValidateCreate(ctx context.Context, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	return v.validate(ctx, lf)
}

// ValidateUpdate checks only a changed spec: a route controller relabelling a
// fragment that a later Gateway change made conflicted must not be blocked;
// the merger reports that conflict instead.
func (v *fragmentValidator) ValidateUpdate(ctx context.Context, old, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, lf.Spec) {
		return nil, nil
	}
	return v.validate(ctx, lf)
}

// ValidateDelete allows every delete: the claims a deleted fragment held are
// released by the collector once it is gone.
func (v *fragmentValidator) ValidateDelete(context.Context, *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	return nil, nil
}

func (v *fragmentValidator) validate(ctx context.Context, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	if !lf.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	gwKey := rules.ParentOf(lf)
	var warnings admission.Warnings
	var errs field.ErrorList

	gw := &gwv1.Gateway{}
	switch err := v.cache.Get(ctx, gwKey, gw); {
	case apierrors.IsNotFound(err):
		gw = nil
		warnings = append(warnings, fmt.Sprintf("Gateway %s does not exist yet: the listeners are folded once it is created", gwKey))
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("reading Gateway %s: %w", gwKey, err))
	}
	if gw != nil {
		ns := &corev1.Namespace{}
		if err := v.cache.Get(ctx, client.ObjectKey{Name: lf.Namespace}, ns); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", lf.Namespace, err))
		}
		errs = append(errs, CheckAllowedListeners(lf, gw, ns.Labels)...)
		fragments, err := fragmentsOf(ctx, v.cache, gw)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		own := rules.OwnListeners(gw, rules.ManagedListeners(gw), fragments)
		errs = append(errs, CheckAgainstBoard(lf, gwKey.String(), rules.OwnBoard(own))...)
	}
	grants, err := v.grantsFor(ctx, lf)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs = append(errs, CheckCertificateRefs(lf, grants)...)
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(fragmentGK, lf.Name, errs)
	}

	claimErrs, err := v.claim(ctx, lf)
	if err != nil {
		return warnings, apierrors.NewInternalError(err)
	}
	if len(claimErrs) > 0 {
		return warnings, apierrors.NewInvalid(fragmentGK, lf.Name, claimErrs)
	}
	return warnings, nil
}

// claim takes a claim per listener. On any denial it releases the claims this
// request created, so a denied request leaves nothing behind.
func (v *fragmentValidator) claim(ctx context.Context, lf *v1alpha1.ListenerFragment) (field.ErrorList, error) {
	dryRun := false
	if req, err := admission.RequestFromContext(ctx); err == nil {
		dryRun = ptr.Deref(req.DryRun, false)
	}
	var errs field.ErrorList
	var created []Claim
	for i, c := range claimsOf(lf) {
		l := lf.Spec.Listeners[i]
		h := Holder{Namespace: lf.Namespace, Name: lf.Name, UID: lf.UID, Listener: string(l.Name), Entry: entryOf(l)}
		var err error
		if dryRun {
			err = v.claims.Check(ctx, c, h)
		} else {
			var isNew bool
			isNew, err = v.claims.Acquire(ctx, c, h)
			if isNew {
				created = append(created, c)
			}
		}
		var held *HeldError
		switch {
		case errors.As(err, &held):
			errs = append(errs, conflictError(i, l, rules.ConflictOf(entryOf(l), held.RulesHolder()), c.Gateway.String(), lf.Namespace))
		case err != nil:
			v.release(ctx, created)
			return nil, err
		}
	}
	if len(errs) > 0 {
		v.release(ctx, created)
	}
	return errs, nil
}

func (v *fragmentValidator) release(ctx context.Context, claims []Claim) {
	for _, c := range claims {
		if err := v.claims.Release(ctx, c); err != nil {
			logf.FromContext(ctx).Error(err, "Releasing claim of a denied request; the collector will release it", "claim", c.Name())
		}
	}
}

// fragmentsOf lists the fragments that name gw as their parent.
func fragmentsOf(ctx context.Context, c client.Reader, gw *gwv1.Gateway) ([]v1alpha1.ListenerFragment, error) {
	list := &v1alpha1.ListenerFragmentList{}
	if err := c.List(ctx, list, client.MatchingFields{rules.ParentIndex: klog.KObj(gw).String()}); err != nil {
		return nil, fmt.Errorf("listing fragments of Gateway %s: %w", klog.KObj(gw), err)
	}
	return list.Items, nil
}

// grantsFor returns the ReferenceGrants of every namespace the fragment's
// certificateRefs point into, other than its own.
func (v *fragmentValidator) grantsFor(ctx context.Context, lf *v1alpha1.ListenerFragment) (map[string][]gwv1.ReferenceGrant, error) {
	grants := map[string][]gwv1.ReferenceGrant{}
	for i, l := range lf.Spec.Listeners {
		for _, ref := range rules.ForeignCertificateRefs(lf.Namespace, i, l) {
			if _, done := grants[ref.Namespace]; done {
				continue
			}
			list := &gwv1.ReferenceGrantList{}
			if err := v.cache.List(ctx, list, client.InNamespace(ref.Namespace)); err != nil {
				return nil, fmt.Errorf("listing ReferenceGrants in %s: %w", ref.Namespace, err)
			}
			grants[ref.Namespace] = list.Items
		}
	}
	return grants, nil
}
