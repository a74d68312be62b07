package fold

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// Input is everything the fold reads for one Gateway.
type Input struct {
	// Gateway is the parent; nil when it does not exist.
	Gateway *gwv1.Gateway
	// Managed are the names of the Gateway's listeners that gatefold applied
	// last time; they are not the Gateway's own even when no fragment wants
	// them any more.
	Managed sets.Set[gwv1.SectionName]
	// Sources are the fragments and ListenerSets whose parentRef names the
	// Gateway.
	Sources []rules.Source
	// Deleting are the sources of the Gateway being deleted, which a
	// finalizer holds: nothing of theirs is folded, and their statuses say so.
	Deleting []rules.Source
	// NamespaceLabels are the labels of the fragments' namespaces, by name.
	NamespaceLabels map[string]map[string]string
	// Grants are the ReferenceGrants of every namespace a fragment's
	// certificateRefs point into, by namespace.
	Grants map[string][]gwv1.ReferenceGrant
	// CarriedSince is, by listener name, the Gateway generation that first
	// carried each of gatefold's listeners as it is now; a listener missing
	// here is taken to be carried since the Gateway's current generation.
	CarriedSince map[gwv1.SectionName]int64
	// Rejected are fragments whose listeners the API server refused on the
	// Gateway, with its message: they are left out so that the rest fold.
	Rejected map[rules.SourceRef]string
	// Claims are the fragments that hold admission's claims on the
	// Gateway's tuples, by tuple: a claimed tuple goes to its holder
	// whatever the precedence (see rules.Board.Reserve).
	Claims map[rules.Tuple]types.NamespacedName
	// Withdrawn are the listeners withdrawn after the Gateway
	// implementation refused them, as the last fold left them.
	Withdrawn map[WithdrawalKey]Withdrawal
	// Now is when the fold runs, for the withdrawals' retries.
	Now time.Time
	// Pool is the rest of the pool the Gateway heads; nil when it heads
	// none, and folds alone.
	Pool *Pool
	// Head is set when the Gateway is a sibling in the pool of Head: its
	// fragments must name the head, and nothing is folded into it.
	Head *types.NamespacedName
	// ListenerSetGateway is the Gateway gatefold keeps beside this one for
	// the listeners of its ListenerSets (rules.ListenerSetGatewayName), as
	// read; nil when there is none. No ListenerSet listener is folded into
	// the Gateway itself or its pool's siblings, so that a route naming the
	// Gateway never reaches one (GEP-1713).
	ListenerSetGateway *Sibling
	// ListenerSetGatewayBlocked says why no ListenerSet can be folded now:
	// a Gateway of that name is not gatefold's, or is being deleted. Empty
	// when they can.
	ListenerSetGatewayBlocked string
}

// Result is what the fold decided for one Gateway.
type Result struct {
	// Listeners are gatefold's listeners for the Gateway, in precedence
	// order. The Gateway's own listeners are not among them.
	Listeners []gwv1.Listener
	// Own are the Gateway's own listeners; every sibling of its pool
	// carries them too.
	Own []gwv1.Listener
	// Siblings are, for a pool, the listeners of each sibling.
	Siblings []SiblingListeners
	// ListenerSetGateway is what the fold decided for the Gateway of the
	// ListenerSets (Input.ListenerSetGateway): nil when it neither exists
	// nor is needed; without listeners when it exists and is not needed.
	ListenerSetGateway *SiblingListeners
	// Statuses are the fragments' statuses by namespace/name. Conditions
	// carry no lastTransitionTime: the writer keeps the stored one.
	Statuses map[rules.SourceRef]v1alpha1.ListenerFragmentStatus
	// Outcomes are every fragment listener's outcome, in precedence order.
	Outcomes []Outcome
	// Withdrawn are the listeners withdrawn after the Gateway
	// implementation refused them, and those being retried.
	Withdrawn map[WithdrawalKey]Withdrawal
}

// Outcome is what became of one fragment listener.
type Outcome struct {
	Fragment rules.SourceRef
	Listener gwv1.SectionName
	// Reason is Accepted when folded, else why not.
	Reason gwv1.ListenerEntryConditionReason
	// Message explains Reason without naming other tenants' objects.
	Message string
	// Refusal is, for a listener withdrawn after the Gateway implementation
	// refused it, the type of the implementation's refusing condition.
	Refusal string
	// Gateway is the name of the Gateway of the pool it was folded into, and
	// GatewayListener the listener it became there.
	Gateway         string
	GatewayListener *gwv1.Listener
}

// Folded reports whether the listener is on the Gateway.
func (o Outcome) Folded() bool { return o.Reason == gwv1.ListenerEntryReasonAccepted }

// Fold folds the sources into the Gateway's listeners in ListenerSet
// precedence: the Gateway's own listeners, then sources oldest first, then
// by namespace/name. It is deterministic and does not depend on the order of
// in.Sources. The result never repeats a name or a tuple of another
// listener, and never holds more than MaxListeners with the own listeners.
func Fold(in Input) Result {
	res := Result{Statuses: map[rules.SourceRef]v1alpha1.ListenerFragmentStatus{}, Withdrawn: map[WithdrawalKey]Withdrawal{}}
	for i := range in.Deleting {
		res.Statuses[in.Deleting[i].Ref()] = deleting(&in.Deleting[i])
	}
	sources := slices.Clone(in.Sources)
	rules.SortByPrecedence(sources)

	if in.Gateway == nil {
		for i := range sources {
			src := &sources[i]
			res.Statuses[src.Ref()] = NoGateway(src)
		}
		return res
	}

	res.Own = rules.OwnListeners(in.Gateway, in.Managed, sources)
	var placeable []rules.Source
	for i := range sources {
		src := &sources[i]
		// A sibling carries its head's allowedListeners; a namespace it does
		// not admit learns nothing of the pool.
		if allowed, why := rules.NamespaceAllowed(in.Gateway, src.Namespace, in.NamespaceLabels[src.Namespace]); !allowed {
			res.Statuses[src.Ref()] = NotAccepted(src, v1alpha1.FragmentReasonNotAllowed,
				rules.NotAllowedMessage(gatewayKey(in.Gateway), src.Namespace, why))
			continue
		}
		if in.Head != nil {
			res.Statuses[src.Ref()] = NotAccepted(src, v1alpha1.FragmentReasonNotAllowed,
				rules.SiblingMessage(types.NamespacedName{Namespace: in.Gateway.Namespace, Name: in.Gateway.Name}, *in.Head))
			continue
		}
		if msg, rejected := in.Rejected[src.Ref()]; rejected {
			res.Statuses[src.Ref()] = NotAccepted(src, v1alpha1.FragmentReasonListenersNotValid,
				fmt.Sprintf("The API server refused this %s's listeners on Gateway %s: %s", src.Kind, gatewayKey(in.Gateway), msg))
			continue
		}
		if src.Kind == rules.KindListenerSet && in.ListenerSetGatewayBlocked != "" {
			res.Statuses[src.Ref()] = NotAccepted(src, v1alpha1.FragmentReasonListenersNotValid, in.ListenerSetGatewayBlocked)
			continue
		}
		placeable = append(placeable, *src)
	}
	if in.Head != nil {
		res.Own = nil
		return res
	}
	p := newPool(&in, res.Own, sources, placeable)
	rules.ReserveClaimed(p.board, placeable, in.Claims)
	refused := refusalsOf(&in, rules.GeneratedNames(sources))
	for i := range placeable {
		src := &placeable[i]
		withheld := withhold(&in, &res, src, refused)
		for j := range withheld {
			if w, ok := res.Withdrawn[withdrawalKey(src, src.Listeners[j].Name)]; ok && !w.Retrying {
				// A withdrawn listener keeps its tuple while it waits.
				p.board.Reserve(rules.HolderOf(src.Ref(), src.Listeners[j]))
			}
		}
		placements, r := p.place(src, in.Grants, withheld)
		outcomes := make([]Outcome, len(placements))
		for j, pl := range placements {
			outcomes[j] = Outcome{Fragment: src.Ref(), Listener: src.Listeners[j].Name, Reason: pl.Reason, Message: pl.Message}
			if w, ok := res.Withdrawn[withdrawalKey(src, src.Listeners[j].Name)]; ok && !w.Retrying {
				outcomes[j].Refusal = w.Condition.Type
			}
			if pl.Placed() {
				l := Listener(src, src.Listeners[j])
				outcomes[j].Message = fmt.Sprintf("Folded into Gateway %s as listener %q", gatewayKey(r.gw), l.Name)
				outcomes[j].Gateway, outcomes[j].GatewayListener = r.gw.Name, &l
				r.listeners = append(r.listeners, l)
			}
		}
		res.Outcomes = append(res.Outcomes, outcomes...)
		st := fragmentStatus(src, r.gw, r.since, outcomes)
		if r == p.sets && r.exists {
			servedBeside(&st, src, in.Gateway, r.gw)
		}
		res.Statuses[src.Ref()] = st
	}
	res.Listeners = p.rooms[0].listeners
	res.Siblings = p.siblings()
	res.ListenerSetGateway = p.listenerSetGateway()
	return res
}

// Handover is a tuple a fold gave to another source than the one whose
// listener a Gateway of the pool carried for it.
type Handover struct {
	Tuple    rules.Tuple
	From, To rules.SourceRef
}

// Handovers returns the tuples res gives to another source than the one
// whose listener the Gateways of in carry for them, where that source still
// wants the tuple: what an operator wants to hear of, since a listener was
// taken from a live source.
func Handovers(in *Input, res Result) []Handover {
	if in.Gateway == nil {
		return nil
	}
	bySource := map[gwv1.SectionName]rules.SourceRef{}
	wanted := sets.New[Handover]()
	for i := range in.Sources {
		src := &in.Sources[i]
		for _, l := range src.Listeners {
			bySource[rules.GatewayListenerName(src.Ref(), l.Name)] = src.Ref()
			wanted.Insert(Handover{Tuple: rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple(), From: src.Ref()})
		}
	}
	carried := map[rules.Tuple]rules.SourceRef{}
	gateways := []*gwv1.Gateway{in.Gateway}
	if in.Pool != nil {
		for _, s := range in.Pool.Siblings {
			gateways = append(gateways, s.Gateway)
		}
	}
	if in.ListenerSetGateway != nil {
		gateways = append(gateways, in.ListenerSetGateway.Gateway)
	}
	for _, gw := range gateways {
		for _, l := range gw.Spec.Listeners {
			if from, ok := bySource[l.Name]; ok {
				carried[rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()] = from
			}
		}
	}
	var out []Handover
	for _, o := range res.Outcomes {
		if !o.Folded() {
			continue
		}
		l := o.GatewayListener
		t := rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()
		// A source that gave the tuple up itself lost nothing.
		if from, ok := carried[t]; ok && from != o.Fragment && wanted.Has(Handover{Tuple: t, From: from}) {
			out = append(out, Handover{Tuple: t, From: from, To: o.Fragment})
		}
	}
	return out
}

func gatewayKey(gw *gwv1.Gateway) string { return gw.Namespace + "/" + gw.Name }

// Listener returns the Gateway listener a source's listener folds into:
// named by rules.GatewayListenerName, with namespace-relative references made
// absolute, because on the Gateway they would resolve in its namespace.
func Listener(src *rules.Source, e gwv1.ListenerEntry) gwv1.Listener {
	e = *e.DeepCopy()
	l := gwv1.Listener{
		Name:          rules.GatewayListenerName(src.Ref(), e.Name),
		Hostname:      e.Hostname,
		Port:          e.Port,
		Protocol:      e.Protocol,
		TLS:           e.TLS,
		AllowedRoutes: e.AllowedRoutes,
	}
	if l.TLS != nil {
		for i := range l.TLS.CertificateRefs {
			if ref := &l.TLS.CertificateRefs[i]; ref.Namespace == nil {
				ns := gwv1.Namespace(src.Namespace)
				ref.Namespace = &ns
			}
		}
	}
	if l.AllowedRoutes == nil {
		l.AllowedRoutes = &gwv1.AllowedRoutes{}
	}
	if l.AllowedRoutes.Namespaces == nil {
		l.AllowedRoutes.Namespaces = &gwv1.RouteNamespaces{}
	}
	rn := l.AllowedRoutes.Namespaces
	if rn.From == nil || *rn.From == gwv1.NamespacesFromSame {
		// Same means the fragment's namespace, not the Gateway's.
		from := gwv1.NamespacesFromSelector
		rn.From = &from
		rn.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: src.Namespace}}
	}
	return l
}
