package conformance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// endpointStubManager is the managed-by label of the EndpointSlices the
// stub writes.
const endpointStubManager = "gatefold-conformance-stub"

// endpointStub stands in for the EndpointSlice controller, for the Services
// of the suite's namespaces: each Service gets one EndpointSlice for each of
// its Pods that runs an echo server, Ready, with the ports that server
// listens on for the Service's targetPorts. A slice per Pod, because each
// Pod's server has ports of its own. The slices are owned by the Service,
// so the garbage collector deletes them with it.
type endpointStub struct {
	client.Client
	namespaces map[string]bool
	echo       *echoBackends
}

func (s *endpointStub) setup(mgr ctrl.Manager) error {
	s.Client = mgr.GetClient()
	inSuite := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return s.namespaces[o.GetNamespace()]
	}))
	return ctrl.NewControllerManagedBy(mgr).
		Named("conformance-endpoint-stub").
		For(&corev1.Service{}, inSuite).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(s.servicesOf), inSuite).
		Complete(s)
}

// servicesOf are the Services of the Pod's namespace.
func (s *endpointStub) servicesOf(ctx context.Context, pod client.Object) []reconcile.Request {
	var svcs corev1.ServiceList
	if err := s.List(ctx, &svcs, client.InNamespace(pod.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, svc := range svcs.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&svc)})
	}
	return reqs
}

func (s *endpointStub) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	if err := s.Get(ctx, req.NamespacedName, svc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if svc.DeletionTimestamp != nil || len(svc.Spec.Selector) == 0 {
		return reconcile.Result{}, nil
	}
	var pods corev1.PodList
	if err := s.List(ctx, &pods, client.InNamespace(svc.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(svc.Spec.Selector)}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		p, ok := s.echo.lookup(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		if !ok || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		if err := s.writeSlice(ctx, svc, pod, p); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// writeSlice creates or updates the EndpointSlice of svc for pod, served by
// p, unless p serves none of svc's ports.
func (s *endpointStub) writeSlice(ctx context.Context, svc *corev1.Service, pod *corev1.Pod, p *echoPod) error {
	var ports []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		if port, ok := p.port(sp.TargetPort); ok {
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(port), Protocol: ptr.To(sp.Protocol), AppProtocol: sp.AppProtocol})
		}
	}
	if len(ports) == 0 {
		return nil
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-" + pod.Name, Namespace: svc.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, s.Client, slice, func() error {
		slice.Labels = map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: endpointStubManager}
		slice.AddressType = discoveryv1.AddressTypeIPv4
		slice.Endpoints = []discoveryv1.Endpoint{{
			Addresses:  []string{pod.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		}}
		slice.Ports = ports
		return controllerutil.SetControllerReference(svc, slice, s.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	return nil
}
