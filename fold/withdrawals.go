package fold

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// WithdrawRetry is how long a listener the Gateway implementation refused
// stays withdrawn before it is folded again to be judged anew (a Secret it
// names may exist by then), unless its source's spec changes first; each
// refusal in a row doubles it, up to maxWithdrawRetry.
const WithdrawRetry = time.Minute

const maxWithdrawRetry = 16 * time.Minute

// retryAfter is how long a listener refused attempts times in a row stays
// withdrawn.
func retryAfter(attempts int) time.Duration {
	d := WithdrawRetry
	for range max(attempts, 1) - 1 {
		if d *= 2; d >= maxWithdrawRetry {
			return maxWithdrawRetry
		}
	}
	return d
}

// WithdrawalKey names one listener of one generation of a source.
type WithdrawalKey struct {
	Source     rules.SourceRef
	UID        types.UID
	Generation int64
	Listener   gwv1.SectionName
}

func withdrawalKey(src *rules.Source, listener gwv1.SectionName) WithdrawalKey {
	return WithdrawalKey{Source: src.Ref(), UID: src.UID, Generation: src.Generation, Listener: listener}
}

// Withdrawal is a listener the Gateway implementation refused.
type Withdrawal struct {
	// Since is when it was withdrawn.
	Since time.Time
	// Condition is the implementation's condition that refused it, with the
	// message gatefold reports.
	Condition metav1.Condition
	// Attempts is how many times in a row the implementation refused it.
	Attempts int
	// Retrying says the retry is under way: the listener is folded again,
	// and is withdrawn anew only on a fresh refusal.
	Retrying bool
	// Waiting says the listener is refused for a Secret that does not exist
	// yet and stays folded until SecretGrace after Since: cert-manager may
	// be issuing it for this very listener.
	Waiting bool
}

// SecretGrace is how long a listener refused for a missing Secret
// (InvalidCertificateRef) stays folded before it is withdrawn: cert-manager's
// gateway-shim issues a certificate only for a listener the Gateway carries.
const SecretGrace = 2 * time.Minute

// implementationRefusal returns the condition by which the Gateway implementation refuses
// a listener it reports on: Accepted=False, ResolvedRefs=False or
// Conflicted=True. Any of these makes some implementations (Traefik) set the
// whole Gateway Accepted=False.
func implementationRefusal(conds []metav1.Condition) *metav1.Condition {
	for _, c := range conds {
		switch {
		case c.Type == string(gwv1.ListenerConditionAccepted) && c.Status == metav1.ConditionFalse,
			c.Type == string(gwv1.ListenerConditionResolvedRefs) && c.Status == metav1.ConditionFalse,
			c.Type == string(gwv1.ListenerConditionConflicted) && c.Status == metav1.ConditionTrue:
			return &c
		}
	}
	return nil
}

// refusals are, by Gateway listener name, the Gateways of a fold whose
// implementation refuses that listener while it holds the Gateway not accepted
// for a tenant's sake (refusesTenants), in pool order.
type refusals map[gwv1.SectionName][]carrier

// carrier is a Gateway of the fold and the generations since which it
// carries each listener (Input.CarriedSince).
type carrier struct {
	gw    *gwv1.Gateway
	since map[gwv1.SectionName]int64
}

// refusalsOf indexes the refusals of in's Gateways; generated are the
// names of the sources' listeners.
func refusalsOf(in *Input, generated sets.Set[gwv1.SectionName]) refusals {
	out := refusals{}
	add := func(c carrier) {
		if !refusesTenants(c.gw, generated) {
			return
		}
		for _, l := range c.gw.Status.Listeners {
			if implementationRefusal(l.Conditions) != nil {
				out[l.Name] = append(out[l.Name], c)
			}
		}
	}
	add(carrier{in.Gateway, in.CarriedSince})
	if in.Pool != nil {
		for _, s := range in.Pool.Siblings {
			add(carrier{s.Gateway, s.CarriedSince})
		}
	}
	if s := in.ListenerSetGateway; s != nil {
		add(carrier{s.Gateway, s.CarriedSince})
	}
	return out
}

// of returns, when a Gateway of the fold carries listener e of src as folded
// and refuses it (for the generation that carries it), the refusing
// condition and that Gateway.
func (r refusals) of(src *rules.Source, e gwv1.ListenerEntry) (*metav1.Condition, *gwv1.Gateway) {
	carriers := r[rules.GatewayListenerName(src.Ref(), e.Name)]
	if len(carriers) == 0 {
		return nil, nil
	}
	l := Listener(src, e)
	for _, c := range carriers {
		gen, known := c.since[l.Name]
		if !known {
			gen = c.gw.Generation
		}
		if st, ok := reportedFor(c.gw, &l, gen); ok {
			if refusal := implementationRefusal(st.Conditions); refusal != nil {
				return refusal, c.gw
			}
		}
	}
	return nil, nil
}

// refusesTenants says whether gw's implementation holds the whole Gateway not
// accepted because of the sources' listeners: Accepted=False, none of the
// Gateway's own listeners (not in generated) refused, and some listener
// accepted. Only then does withdrawing a tenant's listener help.
func refusesTenants(gw *gwv1.Gateway, generated sets.Set[gwv1.SectionName]) bool {
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted))
	if c == nil || c.Status != metav1.ConditionFalse || (c.ObservedGeneration != 0 && c.ObservedGeneration < gw.Generation) {
		return false
	}
	accepted := false
	for _, l := range gw.Status.Listeners {
		refused := implementationRefusal(l.Conditions) != nil
		if refused && !generated.Has(l.Name) {
			return false
		}
		accepted = accepted || !refused
	}
	return accepted
}

// withhold decides which listeners of src the fold leaves out: those whose
// values Gateway API disallows (rules.ListenerProblem), and those the
// Gateway implementation refused, which it records in res.Withdrawn. It
// returns them by index as placements.
func withhold(in *Input, res *Result, src *rules.Source, refused refusals) map[int]rules.Placement {
	var out map[int]rules.Placement
	for i, e := range src.Listeners {
		if reason, msg := rules.ListenerProblem(e); msg != "" {
			if out == nil {
				out = map[int]rules.Placement{}
			}
			out[i] = rules.Placement{Reason: reason, Message: msg + "; gatefold does not fold it: fix it"}
			continue
		}
		key := withdrawalKey(src, e.Name)
		w, known := in.Withdrawn[key]
		c, gw := refused.of(src, e)
		switch {
		case c != nil && awaitsSecret(c) && (!known || w.Waiting) && (!known || in.Now.Before(w.Since.Add(SecretGrace))):
			if !known {
				w, known = Withdrawal{Since: in.Now, Condition: *c, Waiting: true}, true
			}
		case c != nil:
			attempts := 1
			if known {
				attempts = w.Attempts + 1
			}
			c.Message = fmt.Sprintf("The implementation of Gateway %s refused it (%s: %s), so gatefold withdrew it: fix it; a spec change, or %v, folds it again",
				gatewayKey(gw), c.Reason, c.Message, retryAfter(attempts))
			w, known = Withdrawal{Since: in.Now, Condition: *c, Attempts: attempts}, true
		case known && w.Waiting:
			known = false // its Secret came
		case known && !w.Retrying && !in.Now.Before(w.Since.Add(retryAfter(w.Attempts))):
			w.Retrying = true
		}
		if !known {
			continue
		}
		res.Withdrawn[key] = w
		if w.Retrying || w.Waiting {
			continue
		}
		if out == nil {
			out = map[int]rules.Placement{}
		}
		out[i] = rules.Placement{Reason: gwv1.ListenerEntryConditionReason(w.Condition.Reason), Message: w.Condition.Message}
	}
	return out
}

// awaitsSecret says whether the refusal is for a Secret that does not exist
// yet, which SecretGrace waits for.
func awaitsSecret(c *metav1.Condition) bool {
	return c.Type == string(gwv1.ListenerConditionResolvedRefs) && c.Reason == string(gwv1.ListenerReasonInvalidCertificateRef)
}

// withdrawnConditions are the conditions of a listener withheld after the
// implementation refused it: Programmed=False with reason Withdrawn marks
// it, so that a new leader keeps it withdrawn (see WithdrawalsInStatus).
func withdrawnConditions(src *rules.Source, o Outcome) []metav1.Condition {
	conds := []metav1.Condition{condition(gwv1.ListenerEntryConditionAccepted, metav1.ConditionFalse, o.Reason, src.Generation, o.Message)}
	if o.Refusal == string(gwv1.ListenerConditionResolvedRefs) {
		conds = append(conds, condition(gwv1.ListenerEntryConditionResolvedRefs, metav1.ConditionFalse, o.Reason, src.Generation, o.Message))
	}
	conflicted := condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionFalse, gwv1.ListenerReasonNoConflicts, src.Generation, "No conflicts")
	if o.Refusal == string(gwv1.ListenerConditionConflicted) {
		conflicted = condition(gwv1.ListenerEntryConditionConflicted, metav1.ConditionTrue, o.Reason, src.Generation, o.Message)
	}
	return append(conds, conflicted,
		condition(gwv1.ListenerEntryConditionProgrammed, metav1.ConditionFalse, v1alpha1.FragmentReasonWithdrawn, src.Generation, o.Message))
}

// WithdrawalsInStatus returns the withdrawals src's status records for its
// current generation, as if made at now: a new leader, which remembers none,
// keeps them withdrawn for WithdrawRetry.
func WithdrawalsInStatus(src *rules.Source, now time.Time) map[WithdrawalKey]Withdrawal {
	var out map[WithdrawalKey]Withdrawal
	for _, l := range src.Status.Listeners {
		p := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionProgrammed))
		a := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionAccepted))
		if p == nil || a == nil || p.Reason != string(v1alpha1.FragmentReasonWithdrawn) || p.ObservedGeneration != src.Generation {
			continue
		}
		c := *a
		if r := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionResolvedRefs)); r != nil && r.Status == metav1.ConditionFalse {
			c.Type = r.Type
		} else if r := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionConflicted)); r != nil && r.Status == metav1.ConditionTrue {
			c.Type, c.Status = r.Type, r.Status
		}
		if out == nil {
			out = map[WithdrawalKey]Withdrawal{}
		}
		out[withdrawalKey(src, l.Name)] = Withdrawal{Since: now, Condition: c, Attempts: 1}
	}
	return out
}

// NextRetry is how long until the first withdrawal is due to be retried,
// 0 when none waits.
func NextRetry(withdrawn map[WithdrawalKey]Withdrawal, now time.Time) time.Duration {
	var next time.Duration
	for _, w := range withdrawn {
		if w.Retrying {
			continue
		}
		due := w.Since.Add(retryAfter(w.Attempts))
		if w.Waiting {
			due = w.Since.Add(SecretGrace)
		}
		if d := max(due.Sub(now), time.Second); next == 0 || d < next {
			next = d
		}
	}
	return next
}
