package conformance

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapplyv1 "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

const (
	// stubClassName is the GatewayClass the suite runs on.
	stubClassName = "gatefold-conformance"
	// stubControllerName is the class's controllerName, the one gatefold is
	// told to fold ListenerSets for.
	stubControllerName = "gatefold.dev/conformance-stub"
	// stubFieldManager writes the Gateways' status; gatefold writes
	// status.attachedListenerSets under its own, which the stub never touches.
	stubFieldManager = "gatefold-conformance-stub"
	// stubAddress is the only address the stub reports: it serves nothing,
	// and never names an address off this machine.
	stubAddress = "127.0.0.1"
)

// stubFeatures are the features the class reports. ListenerSet is not among
// them: gatefold leaves a class that supports ListenerSets natively alone.
var stubFeatures = []features.FeatureName{
	features.SupportGateway,
	features.SupportHTTPRoute,
	features.SupportReferenceGrant,
	features.SupportTLSRoute,
}

// createStubClass creates the GatewayClass and accepts it, as its
// implementation would once.
func createStubClass(ctx context.Context, c client.Client) error {
	gwc := &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: stubClassName},
		Spec:       gwv1.GatewayClassSpec{ControllerName: stubControllerName},
	}
	if err := c.Create(ctx, gwc); err != nil {
		return fmt.Errorf("creating GatewayClass %s: %w", stubClassName, err)
	}
	status := gwapplyv1.GatewayClassStatus().WithConditions(metav1apply.Condition().
		WithType(string(gwv1.GatewayClassConditionStatusAccepted)).
		WithStatus(metav1.ConditionTrue).
		WithReason(string(gwv1.GatewayClassReasonAccepted)).
		WithMessage("Accepted by the conformance stub").
		WithObservedGeneration(gwc.Generation).
		WithLastTransitionTime(metav1.Now()))
	for _, f := range stubFeatures {
		status.WithSupportedFeatures(gwapplyv1.SupportedFeature().WithName(gwv1.FeatureName(f)))
	}
	ac := gwapplyv1.GatewayClass(stubClassName).WithStatus(status)
	if err := c.Status().Apply(ctx, ac, client.FieldOwner(stubFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("accepting GatewayClass %s: %w", stubClassName, err)
	}
	return nil
}

// gatewayStub plays the Gateway implementation of the stub class, in status
// only: every Gateway of the class is accepted and programmed at its current
// generation, on loopback, with a status for each of its listeners.
type gatewayStub struct {
	client.Client
}

func (s *gatewayStub) setup(mgr ctrl.Manager) error {
	s.Client = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("conformance-gateway-stub").
		For(&gwv1.Gateway{}).
		// A grant given or revoked changes whether a listener's
		// certificate references resolve.
		Watches(&gwv1.ReferenceGrant{}, handler.EnqueueRequestsFromMapFunc(s.allGateways)).
		// The suite polls a Gateway's conditions while gatefold bumps its
		// generation: the stub must catch up at once, not behind a queue.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(s)
}

func (s *gatewayStub) allGateways(ctx context.Context, _ client.Object) []reconcile.Request {
	var gws gwv1.GatewayList
	if err := s.List(ctx, &gws); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(gws.Items))
	for _, gw := range gws.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gw)})
	}
	return reqs
}

func (s *gatewayStub) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	gw := &gwv1.Gateway{}
	if err := s.Get(ctx, req.NamespacedName, gw); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if gw.Spec.GatewayClassName != stubClassName {
		return reconcile.Result{}, nil
	}
	var grants gwv1.ReferenceGrantList
	if err := s.List(ctx, &grants); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ReferenceGrants: %w", err)
	}
	want := stubGatewayStatus(gw, grants.Items, metav1.Now())
	if statusCurrent(gw.Status, want) {
		return reconcile.Result{}, nil
	}
	ac := gwapplyv1.Gateway(gw.Name, gw.Namespace).WithStatus(applyStatus(want))
	if err := s.Status().Apply(ctx, ac, client.FieldOwner(stubFieldManager), client.ForceOwnership); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("applying the status of Gateway %s: %w", req.NamespacedName, err)
	}
	logf.FromContext(ctx).Info("Applied Gateway status", "generation", gw.Generation, "listeners", len(want.Listeners))
	return reconcile.Result{}, nil
}

// stubGatewayStatus is the status the stub reports for gw: the fields it
// owns, with a condition's lastTransitionTime kept while its status holds.
func stubGatewayStatus(gw *gwv1.Gateway, grants []gwv1.ReferenceGrant, now metav1.Time) gwv1.GatewayStatus {
	gen := gw.Generation
	st := gwv1.GatewayStatus{
		Addresses: []gwv1.GatewayStatusAddress{{Type: ptr.To(gwv1.IPAddressType), Value: stubAddress}},
		Conditions: []metav1.Condition{
			condition(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "Accepted by the conformance stub", gen, now),
			condition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "Programmed by the conformance stub, which serves no traffic", gen, now),
		},
	}
	for _, l := range gw.Spec.Listeners {
		var old []metav1.Condition
		if i := slices.IndexFunc(gw.Status.Listeners, func(ls gwv1.ListenerStatus) bool { return ls.Name == l.Name }); i >= 0 {
			old = gw.Status.Listeners[i].Conditions
		}
		kinds, resolved, reason, msg := resolveListener(gw.Namespace, l, grants)
		programmed, programmedReason := true, string(gwv1.ListenerReasonProgrammed)
		if !resolved {
			programmed, programmedReason = false, string(gwv1.ListenerReasonInvalid)
		}
		st.Listeners = append(st.Listeners, gwv1.ListenerStatus{
			Name:           l.Name,
			SupportedKinds: kinds,
			AttachedRoutes: 0,
			Conditions: []metav1.Condition{
				condition(old, string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "Accepted", gen, now),
				condition(old, string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "No conflicts", gen, now),
				condition(old, string(gwv1.ListenerConditionResolvedRefs), resolved, reason, msg, gen, now),
				condition(old, string(gwv1.ListenerConditionProgrammed), programmed, programmedReason, "Programmed by the conformance stub", gen, now),
			},
		})
	}
	return st
}

// condition builds a condition, keeping the lastTransitionTime of the same
// type in old while its status is unchanged.
func condition(old []metav1.Condition, typ string, status bool, reason, msg string, gen int64, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now}
	if status {
		c.Status = metav1.ConditionTrue
	}
	if prev := meta.FindStatusCondition(old, typ); prev != nil && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// protocolKinds are the route kinds the stub supports per listener protocol.
var protocolKinds = map[gwv1.ProtocolType][]gwv1.Kind{
	gwv1.HTTPProtocolType:  {"HTTPRoute", "GRPCRoute"},
	gwv1.HTTPSProtocolType: {"HTTPRoute", "GRPCRoute"},
	gwv1.TLSProtocolType:   {"TLSRoute"},
	gwv1.TCPProtocolType:   {"TCPRoute"},
	gwv1.UDPProtocolType:   {"UDPRoute"},
}

// resolveListener returns the route kinds l supports (those of its protocol,
// narrowed to allowedRoutes.kinds when set) and its ResolvedRefs condition:
// False with InvalidRouteKinds when it asks for a kind its protocol does not
// carry, with RefNotPermitted when a certificate Secret in another namespace
// has no ReferenceGrant from the Gateway's namespace, else True.
func resolveListener(gwNamespace string, l gwv1.Listener, grants []gwv1.ReferenceGrant) (kinds []gwv1.RouteGroupKind, resolved bool, reason, msg string) {
	supported := protocolKinds[l.Protocol]
	group := gwv1.Group(gwv1.GroupName)
	var invalid []string
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		for _, k := range supported {
			kinds = append(kinds, gwv1.RouteGroupKind{Group: ptr.To(group), Kind: k})
		}
	} else {
		for _, k := range l.AllowedRoutes.Kinds {
			if ptr.Deref(k.Group, group) == group && slices.Contains(supported, k.Kind) {
				kinds = append(kinds, gwv1.RouteGroupKind{Group: ptr.To(group), Kind: k.Kind})
			} else {
				invalid = append(invalid, string(ptr.Deref(k.Group, group))+"/"+string(k.Kind))
			}
		}
	}
	if len(invalid) > 0 {
		return kinds, false, string(gwv1.ListenerReasonInvalidRouteKinds), fmt.Sprintf("Route kinds %v are not supported on a %s listener", invalid, l.Protocol)
	}
	if l.TLS != nil {
		for _, ref := range l.TLS.CertificateRefs {
			if ptr.Deref(ref.Group, "") != "" || ptr.Deref(ref.Kind, "Secret") != "Secret" {
				return kinds, false, string(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("Certificate reference %s is not a Secret", ref.Name)
			}
			ns := string(ptr.Deref(ref.Namespace, gwv1.Namespace(gwNamespace)))
			if ns != gwNamespace && !secretGranted(grants, gwNamespace, ns, string(ref.Name)) {
				return kinds, false, string(gwv1.ListenerReasonRefNotPermitted), fmt.Sprintf("No ReferenceGrant in namespace %s lets Gateways of namespace %s use Secret %s", ns, gwNamespace, ref.Name)
			}
		}
	}
	return kinds, true, string(gwv1.ListenerReasonResolvedRefs), "Resolved"
}

// secretGranted reports whether a ReferenceGrant in namespace to lets a
// Gateway in namespace from reference the Secret name.
func secretGranted(grants []gwv1.ReferenceGrant, from, to, name string) bool {
	for _, g := range grants {
		if g.Namespace != to {
			continue
		}
		fromOK := slices.ContainsFunc(g.Spec.From, func(f gwv1.ReferenceGrantFrom) bool {
			return f.Group == gwv1.GroupName && f.Kind == "Gateway" && string(f.Namespace) == from
		})
		toOK := slices.ContainsFunc(g.Spec.To, func(t gwv1.ReferenceGrantTo) bool {
			return t.Group == "" && t.Kind == "Secret" && (t.Name == nil || string(*t.Name) == name)
		})
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// statusCurrent reports whether have already carries everything in want.
func statusCurrent(have, want gwv1.GatewayStatus) bool {
	if !equality.Semantic.DeepEqual(have.Addresses, want.Addresses) || !equality.Semantic.DeepEqual(have.Listeners, want.Listeners) {
		return false
	}
	for _, c := range want.Conditions {
		if h := meta.FindStatusCondition(have.Conditions, c.Type); h == nil || !equality.Semantic.DeepEqual(*h, c) {
			return false
		}
	}
	return true
}

// applyStatus is st as an apply configuration, every field of it owned by
// the stub: attachedListenerSets stays out.
func applyStatus(st gwv1.GatewayStatus) *gwapplyv1.GatewayStatusApplyConfiguration {
	ac := gwapplyv1.GatewayStatus().WithConditions(applyConditions(st.Conditions)...)
	for _, a := range st.Addresses {
		ac.WithAddresses(gwapplyv1.GatewayStatusAddress().WithType(*a.Type).WithValue(a.Value))
	}
	for _, l := range st.Listeners {
		ls := gwapplyv1.ListenerStatus().WithName(l.Name).WithAttachedRoutes(l.AttachedRoutes).WithConditions(applyConditions(l.Conditions)...)
		for _, k := range l.SupportedKinds {
			ls.WithSupportedKinds(gwapplyv1.RouteGroupKind().WithGroup(*k.Group).WithKind(k.Kind))
		}
		ac.WithListeners(ls)
	}
	return ac
}

func applyConditions(conds []metav1.Condition) []*metav1apply.ConditionApplyConfiguration {
	out := make([]*metav1apply.ConditionApplyConfiguration, 0, len(conds))
	for _, c := range conds {
		out = append(out, metav1apply.Condition().WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).
			WithMessage(c.Message).WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	return out
}
