package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=gatefold;gateway-api,shortName=lf
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.spec.parentRef.name`
// +kubebuilder:printcolumn:name="Landed",type=string,JSONPath=`.status.listeners[*].gateway.name`,description="The Gateway the listeners were folded into: the parent, or a sibling of its pool"
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Gateway Namespace",type=string,JSONPath=`.spec.parentRef.namespace`,priority=1,description="The namespace of the parent Gateway, and of any sibling the listeners landed on; admission defaults it to the fragment's own"
// +kubebuilder:printcolumn:name="Accepted Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Programmed Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].reason`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].message`,priority=1,description="The Accepted condition's message: where the listeners were folded, or why not"

// ListenerFragment declares listeners that one route needs on a Gateway. Each
// fragment has one writer; gatefold folds all fragments of a Gateway into the
// Gateway's spec.listeners, in ListenerSet precedence, and reports back here.
type ListenerFragment struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the Gateway this fragment attaches to and the listeners it needs.
	// +required
	Spec ListenerFragmentSpec `json:"spec"`

	// Status is where each listener landed and how the Gateway took it.
	//
	// +kubebuilder:default={conditions: {{type: "Accepted", status: "Unknown", reason:"Pending", message:"Waiting for controller", lastTransitionTime: "1970-01-01T00:00:00Z"},{type: "Programmed", status: "Unknown", reason:"Pending", message:"Waiting for controller", lastTransitionTime: "1970-01-01T00:00:00Z"}}}
	// +optional
	Status ListenerFragmentStatus `json:"status,omitempty"`
}

// ListenerFragmentSpec is the desired state of a ListenerFragment.
type ListenerFragmentSpec struct {
	// ParentRef is the Gateway the listeners are folded into. Group and kind
	// default to the Gateway kind, namespace to the fragment's own.
	//
	// +kubebuilder:validation:XValidation:message="parentRef must refer to a Gateway: group gateway.networking.k8s.io, kind Gateway",rule="(!has(self.group) || self.group == 'gateway.networking.k8s.io') && (!has(self.kind) || self.kind == 'Gateway')"
	// +required
	ParentRef gwv1.ParentGatewayReference `json:"parentRef"`

	// Listeners are the listeners this fragment needs on the Gateway, with the
	// same rules as a ListenerSet's. Their names are local to the fragment;
	// on the Gateway each gets the name ListenerName gives.
	//
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:message="tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",rule="self.all(l, l.protocol in ['HTTP', 'TCP', 'UDP'] ? !has(l.tls) : true)"
	// +kubebuilder:validation:XValidation:message="tls mode must be Terminate for protocol HTTPS",rule="self.all(l, (l.protocol == 'HTTPS' && has(l.tls)) ? (l.tls.mode == '' || l.tls.mode == 'Terminate') : true)"
	// +kubebuilder:validation:XValidation:message="tls mode must be set for protocol TLS",rule="self.all(l, (l.protocol == 'TLS' ? has(l.tls) && has(l.tls.mode) && l.tls.mode != '' : true))"
	// +kubebuilder:validation:XValidation:message="hostname must not be specified for protocols ['TCP', 'UDP']",rule="self.all(l, l.protocol in ['TCP', 'UDP']  ? (!has(l.hostname) || l.hostname == '') : true)"
	// +kubebuilder:validation:XValidation:message="Listener name must be unique within the ListenerFragment",rule="self.all(l1, self.exists_one(l2, l1.name == l2.name))"
	// +kubebuilder:validation:XValidation:message="Combination of port, protocol and hostname must be unique for each listener",rule="self.all(l1, !has(l1.port) || self.exists_one(l2, has(l2.port) && l1.port == l2.port && l1.protocol == l2.protocol && (has(l1.hostname) && has(l2.hostname) ? l1.hostname == l2.hostname : !has(l1.hostname) && !has(l2.hostname))))"
	// +required
	Listeners []gwv1.ListenerEntry `json:"listeners"`
}

// ListenerFragmentStatus is the observed state of a ListenerFragment.
type ListenerFragmentStatus struct {
	// Conditions are the fragment's Accepted and Programmed conditions.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Listeners is the status of each listener of the spec, by name.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Listeners []ListenerStatus `json:"listeners,omitempty"`
}

// ListenerStatus is where one fragment listener landed and how the Gateway
// implementation took it.
type ListenerStatus struct {
	// Name is the listener's name in the fragment's spec.
	// +required
	Name gwv1.SectionName `json:"name"`

	// Gateway is the Gateway listener this listener was folded into; unset
	// while it is not folded.
	// +optional
	Gateway *GatewayListenerReference `json:"gateway,omitempty"`

	// SupportedKinds are the Route kinds the Gateway implementation supports
	// on the Gateway listener, as it reports them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	SupportedKinds []gwv1.RouteGroupKind `json:"supportedKinds,omitempty"`

	// AttachedRoutes is the number of Routes attached to the Gateway listener,
	// as the Gateway implementation reports it.
	// +required
	AttachedRoutes int32 `json:"attachedRoutes"`

	// Conditions are the listener's Accepted, Conflicted, ResolvedRefs and
	// Programmed conditions.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GatewayListenerReference names one listener of one Gateway.
type GatewayListenerReference struct {
	// Namespace is the Gateway's namespace.
	// +required
	Namespace gwv1.Namespace `json:"namespace"`

	// Name is the Gateway's name.
	// +required
	Name gwv1.ObjectName `json:"name"`

	// ListenerName is the listener's name on the Gateway, the value a Route
	// sets as sectionName.
	// +required
	ListenerName gwv1.SectionName `json:"listenerName"`
}

// +kubebuilder:object:root=true

// ListenerFragmentList is a list of ListenerFragments.
type ListenerFragmentList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// +required
	Items []ListenerFragment `json:"items"`
}
