package merger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// applyStatus server-side applies a fragment's status when it differs from
// the stored one, and records an event for each listener whose outcome
// changed.
func (r *Reconciler) applyStatus(ctx context.Context, lf *v1alpha1.ListenerFragment, desired v1alpha1.ListenerFragmentStatus) error {
	desired = withTransitionTimes(desired, lf.Status, metav1.Now())
	if equality.Semantic.DeepEqual(desired, lf.Status) {
		statusApplies.WithLabelValues(resultUnchanged).Inc()
		return nil
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired)
	if err != nil {
		return fmt.Errorf("encoding status of ListenerFragment %s: %w", klog.KObj(lf), err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "ListenerFragment",
		"metadata":   map[string]any{"name": lf.Name, "namespace": lf.Namespace},
		"status":     status,
	}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted since the cache saw it
		}
		statusApplies.WithLabelValues(resultError).Inc()
		return fmt.Errorf("applying status of ListenerFragment %s: %w", klog.KObj(lf), err)
	}
	statusApplies.WithLabelValues(resultWritten).Inc()
	r.recordEvents(lf, lf.Status, desired)
	return nil
}

// withTransitionTimes keeps the stored lastTransitionTime of every condition
// whose status did not change and stamps the others with now.
func withTransitionTimes(desired, current v1alpha1.ListenerFragmentStatus, now metav1.Time) v1alpha1.ListenerFragmentStatus {
	desired = *desired.DeepCopy()
	stamp := func(conds, stored []metav1.Condition) {
		for i := range conds {
			if old := meta.FindStatusCondition(stored, conds[i].Type); old != nil && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			} else {
				conds[i].LastTransitionTime = now
			}
		}
	}
	stamp(desired.Conditions, current.Conditions)
	for i := range desired.Listeners {
		stamp(desired.Listeners[i].Conditions, listenerStatus(current, desired.Listeners[i].Name).Conditions)
	}
	return desired
}

func listenerStatus(st v1alpha1.ListenerFragmentStatus, name gwv1.SectionName) v1alpha1.ListenerStatus {
	for _, l := range st.Listeners {
		if l.Name == name {
			return l
		}
	}
	return v1alpha1.ListenerStatus{}
}

// recordEvents tells the fragment's owner what changed: a listener folded or
// not folded, or the fragment not accepted at all.
func (r *Reconciler) recordEvents(lf *v1alpha1.ListenerFragment, old, updated v1alpha1.ListenerFragmentStatus) {
	accepted := meta.FindStatusCondition(updated.Conditions, string(v1alpha1.FragmentConditionAccepted))
	if len(updated.Listeners) == 0 && accepted != nil && accepted.Status == metav1.ConditionFalse {
		if prev := meta.FindStatusCondition(old.Conditions, accepted.Type); prev == nil || prev.Reason != accepted.Reason {
			r.Recorder.Eventf(lf, nil, corev1.EventTypeWarning, accepted.Reason, "Fold", "%s", accepted.Message)
		}
		return
	}
	for _, l := range updated.Listeners {
		now := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionAccepted))
		prev := meta.FindStatusCondition(listenerStatus(old, l.Name).Conditions, now.Type)
		if prev != nil && prev.Status == now.Status && prev.Reason == now.Reason {
			continue
		}
		if now.Status == metav1.ConditionTrue {
			r.Recorder.Eventf(lf, nil, corev1.EventTypeNormal, "Folded", "Fold", "Listener %q: %s", l.Name, now.Message)
			continue
		}
		conflictsTotal.WithLabelValues(now.Reason).Inc()
		r.Recorder.Eventf(lf, nil, corev1.EventTypeWarning, now.Reason, "Fold", "Listener %q: %s", l.Name, now.Message)
	}
}
