package e2e

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/rules"
)

// secretGrant lets group/kind objects of the namespaces from read the
// Secrets of ns.
func secretGrant(ns, name, group, kind string, from ...string) *gwv1beta1.ReferenceGrant {
	g := &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gwv1beta1.ReferenceGrantSpec{To: []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret"}}},
	}
	for _, f := range from {
		g.Spec.From = append(g.Spec.From, gwv1beta1.ReferenceGrantFrom{Group: gwv1.Group(group), Kind: gwv1.Kind(kind), Namespace: gwv1.Namespace(f)})
	}
	return g
}

// landedParent is the parentRef a route controller writes for a fragment
// listener, from its status: the Gateway it landed on (on a pool, perhaps
// a sibling) and its name there.
func landedParent(l v1alpha1.GatewayListenerReference) gwv1.ParentReference {
	return gwv1.ParentReference{Namespace: ptr.To(l.Namespace), Name: l.Name, SectionName: ptr.To(l.ListenerName)}
}

// listenerSetParent is the parentRef of a route to listener, the generated
// name of a listener of one of gw's ListenerSets, on the Gateway that
// carries them (rules.ListenerSetGatewayName).
func listenerSetParent(gw *gwv1.Gateway, listener gwv1.SectionName) gwv1.ParentReference {
	return landedParent(v1alpha1.GatewayListenerReference{Namespace: gwv1.Namespace(gw.Namespace), Name: gwv1.ObjectName(rules.ListenerSetGatewayName(gw.Name)), ListenerName: listener})
}

// route is HTTPRoute ns/name to echo backend, attached to Gateway
// infra/shared's listeners sections, matching path prefix prefix ("" for
// every path).
func route(ns, name, prefix, backend string, sections ...gwv1.SectionName) *gwv1.HTTPRoute {
	var parents []gwv1.ParentReference
	for _, s := range sections {
		parents = append(parents, landedParent(v1alpha1.GatewayListenerReference{Namespace: "infra", Name: "shared", ListenerName: s}))
	}
	return routeTo(ns, name, prefix, backend, parents...)
}

// routeTo is route attached to parents.
func routeTo(ns, name, prefix, backend string, parents ...gwv1.ParentReference) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ParentRefs = parents
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{dataplane.BackendRef(backend)}}
	if prefix != "" {
		rule.Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(prefix)}}}
	}
	r.Spec.Rules = []gwv1.HTTPRouteRule{rule}
	return r
}
