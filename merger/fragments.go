package merger

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	lfapply "github.com/gatefold/gatefold/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// applyStatus server-side applies src's status in its kind's shape,
// stamped with its transition times (a 409 when the object changed since the
// cache showed it), and records an event for each listener whose outcome
// changed.
func (r *Reconciler) applyStatus(ctx context.Context, src *rules.Source, desired v1alpha1.ListenerFragmentStatus) error {
	if err := r.fenced(); err != nil {
		return err
	}
	// Fenced like the Gateway apply: a deposed leader's stale status is refused.
	var applied runtime.ApplyConfiguration
	var err error
	if src.Kind == rules.KindListenerSet {
		status := &gwapply.ListenerSetStatusApplyConfiguration{}
		err = convert(rules.ToListenerSetStatus(desired), status)
		applied = gwapply.ListenerSet(src.Name, src.Namespace).WithResourceVersion(src.ResourceVersion).WithStatus(status)
	} else {
		status := &lfapply.ListenerFragmentStatusApplyConfiguration{}
		err = convert(desired, status)
		applied = lfapply.ListenerFragment(src.Name, src.Namespace).WithResourceVersion(src.ResourceVersion).WithStatus(status)
	}
	if err != nil {
		return fmt.Errorf("encoding status of %s: %w", src.Ref(), err)
	}
	if err := r.Client.Status().Apply(ctx, applied, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted since the cache saw it
		}
		if apierrors.IsConflict(err) {
			statusApplies.WithLabelValues(resultConflict).Inc()
			return err
		}
		statusApplies.WithLabelValues(resultError).Inc()
		return fmt.Errorf("applying status of %s: %w", src.Ref(), err)
	}
	statusApplies.WithLabelValues(resultWritten).Inc()
	r.recordEvents(src, src.Status, desired)
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

// recordEvents tells src's owner what changed: listeners folded after they
// were not, listeners not folded, or src not accepted, one event per reason
// naming every listener it concerns (the events API keeps a series' first
// note).
func (r *Reconciler) recordEvents(src *rules.Source, old, updated v1alpha1.ListenerFragmentStatus) {
	accepted := meta.FindStatusCondition(updated.Conditions, string(v1alpha1.FragmentConditionAccepted))
	if len(updated.Listeners) == 0 && accepted != nil && accepted.Status == metav1.ConditionFalse {
		if prev := meta.FindStatusCondition(old.Conditions, accepted.Type); prev == nil || prev.Reason != accepted.Reason {
			r.Recorder.Eventf(objectOf(src), nil, corev1.EventTypeWarning, accepted.Reason, "Fold", "%s", accepted.Message)
		}
		return
	}
	var reasons []string
	notes := map[string]*eventNote{}
	for _, l := range updated.Listeners {
		now := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionAccepted))
		prev := meta.FindStatusCondition(listenerStatus(old, l.Name).Conditions, now.Type)
		if prev != nil && prev.Status == now.Status && prev.Reason == now.Reason {
			continue
		}
		if prev == nil && now.Status == metav1.ConditionTrue {
			// A listener folded at its first report: the status says so,
			// and thousands of new fragments need no thousands of events.
			continue
		}
		reason := now.Reason
		if now.Status == metav1.ConditionTrue {
			reason = "Folded"
		} else {
			conflictsTotal.WithLabelValues(now.Reason).Inc()
		}
		if notes[reason] == nil {
			reasons = append(reasons, reason)
			notes[reason] = &eventNote{listeners: map[string][]gwv1.SectionName{}}
		}
		notes[reason].add(l.Name, now.Message)
	}
	for _, reason := range reasons {
		kind := corev1.EventTypeWarning
		if reason == "Folded" {
			kind = corev1.EventTypeNormal
		}
		r.Recorder.Eventf(objectOf(src), nil, kind, reason, "Fold", "%s", truncate(notes[reason].String(), maxNote))
	}
}

// eventNote is the note of one event: each message once, with the
// listeners it concerns, so that a fragment's 63 listeners refused for one
// reason make one sentence, not 63.
type eventNote struct {
	messages  []string
	listeners map[string][]gwv1.SectionName
}

func (n *eventNote) add(listener gwv1.SectionName, msg string) {
	if n.listeners[msg] == nil {
		n.messages = append(n.messages, msg)
	}
	n.listeners[msg] = append(n.listeners[msg], listener)
}

// maxNamed is how many listeners a note names before it counts the rest.
const maxNamed = 3

func (n *eventNote) String() string {
	parts := make([]string, 0, len(n.messages))
	for _, msg := range n.messages {
		names := n.listeners[msg]
		quoted := make([]string, 0, maxNamed)
		for _, name := range names[:min(len(names), maxNamed)] {
			quoted = append(quoted, strconv.Quote(string(name)))
		}
		switch {
		case len(names) == 1:
			parts = append(parts, fmt.Sprintf("Listener %s: %s", quoted[0], msg))
		case len(names) <= maxNamed:
			parts = append(parts, fmt.Sprintf("Listeners %s: %s", strings.Join(quoted, ", "), msg))
		default:
			parts = append(parts, fmt.Sprintf("%d listeners (%s and %d more): %s", len(names), strings.Join(quoted, ", "), len(names)-maxNamed, msg))
		}
	}
	return strings.Join(parts, "; ")
}

// maxNote is the longest note an events.k8s.io Event may carry.
const maxNote = 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-len("...")] + "..."
}

// objectOf returns an object that names src, for an event about it.
func objectOf(src *rules.Source) runtime.Object {
	if src.Kind == rules.KindListenerSet {
		return &gwv1.ListenerSet{TypeMeta: metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: rules.KindListenerSet}, ObjectMeta: src.ObjectMeta}
	}
	return &v1alpha1.ListenerFragment{ObjectMeta: src.ObjectMeta}
}
