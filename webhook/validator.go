package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	return v.validate(ctx, lf, true)
}

// ValidateUpdate checks only a changed spec: a route controller relabelling a
// fragment that a later Gateway change made conflicted must not be blocked;
// the merger reports that conflict instead.
func (v *fragmentValidator) ValidateUpdate(ctx context.Context, old, lf *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, lf.Spec) {
		return nil, nil
	}
	return v.validate(ctx, lf, false)
}

// ValidateDelete allows every delete: the claims a deleted fragment held are
// released by the collector once it is gone.
func (v *fragmentValidator) ValidateDelete(context.Context, *v1alpha1.ListenerFragment) (admission.Warnings, error) {
	return nil, nil
}

// validate checks everything a fragment needs that the cache can tell, then
// claims its listeners: first reading only, so a denial writes nothing, then
// writing. A fragment of a Gateway that does not exist, or does not admit
// its namespace, claims nothing; the collector backfills its claims once the
// Gateway admits it.
func (v *fragmentValidator) validate(ctx context.Context, lf *v1alpha1.ListenerFragment, create bool) (admission.Warnings, error) {
	if !lf.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	gwKey := rules.ParentOf(lf)
	var warnings admission.Warnings
	var errs field.ErrorList
	view := newView(v.cache)
	gw, err := view.gateway(ctx, gwKey)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	own := rules.NewBoard()
	if gw == nil {
		warnings = append(warnings, fmt.Sprintf("Gateway %s does not exist yet: the listeners are claimed and folded once it is created", gwKey))
	} else {
		labels, _, err := view.namespaceLabels(ctx, lf.Namespace)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, CheckAllowedListeners(lf, gw, labels)...)
		fragments, err := fragmentsOf(ctx, v.cache, gw)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		own = rules.OwnBoard(rules.OwnListeners(gw, rules.ManagedListeners(gw), fragments))
	}
	grants, err := v.grantsFor(ctx, lf)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs = append(errs, CheckCertificateRefs(lf, grants)...)
	if gw == nil || len(errs) > 0 {
		return warnings, invalid(lf, append(errs, CheckAgainstBoard(lf, gwKey.String(), own)...))
	}

	plan, errs, err := v.claims.check(ctx, newClaimRequest(lf, create), own)
	if err != nil {
		return warnings, apierrors.NewInternalError(err)
	}
	if len(errs) > 0 {
		return warnings, invalid(lf, errs)
	}
	if req, err := admission.RequestFromContext(ctx); err == nil && ptr.Deref(req.DryRun, false) {
		return warnings, nil
	}
	if errs, err = v.claims.acquire(ctx, plan); err != nil {
		if apierrors.IsConflict(err) {
			return warnings, err
		}
		return warnings, apierrors.NewInternalError(err)
	}
	return warnings, invalid(lf, errs)
}

// invalid is the error kubectl prints for errs, nil when there are none.
func invalid(lf *v1alpha1.ListenerFragment, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(fragmentGK, lf.Name, errs)
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
