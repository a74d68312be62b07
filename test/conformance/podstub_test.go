package conformance

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// podStub stands in for the Deployment and ReplicaSet controllers and the
// kubelet, for the Deployments of the suite's base manifests only: it
// creates each one's Pods and marks them Ready, so that the suite's readiness
// checks pass. Without echo nothing runs in them; with echo, a Pod whose
// container is upstream's echo server runs it, and gets its address.
type podStub struct {
	client.Client
	// namespaces are the suite's; gatefold's own Deployment stays as it is.
	namespaces map[string]bool
	// echo, when set, runs the Pods' echo servers.
	echo *echoBackends
}

func (s *podStub) setup(mgr ctrl.Manager) error {
	s.Client = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("conformance-pod-stub").
		For(&appsv1.Deployment{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return s.namespaces[o.GetNamespace()]
		}))).
		Complete(s)
}

func (s *podStub) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := s.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if d.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	for i := range ptr.Deref(d.Spec.Replicas, 1) {
		if err := s.readyPod(ctx, d, fmt.Sprintf("%s-stub-%d", d.Name, i)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// readyPod creates the Pod name of Deployment d from its template, unless it
// exists, starts its echo server if it has one, and reports it Running and
// Ready, with the server's address.
func (s *podStub) readyPod(ctx context.Context, d *appsv1.Deployment, name string) error {
	pod := &corev1.Pod{}
	err := s.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, pod)
	if apierrors.IsNotFound(err) {
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       d.Namespace,
				Labels:          d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			},
			Spec: *d.Spec.Template.Spec.DeepCopy(),
		}
		err = s.Create(ctx, pod)
	}
	if err != nil {
		return fmt.Errorf("creating Pod %s/%s: %w", d.Namespace, name, err)
	}
	if pod.Status.Phase == corev1.PodRunning {
		return nil
	}
	if s.echo != nil && serves(pod) {
		p, err := s.echo.start(pod)
		if err != nil {
			return err
		}
		pod.Status.PodIP = p.ip.String()
		pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	if err := s.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("marking Pod %s/%s ready: %w", d.Namespace, name, err)
	}
	return nil
}
