package routing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// section is one Gateway listener a route attaches to.
type section struct {
	Gateway types.NamespacedName
	Name    gwv1.SectionName
}

// sectionOf is the Gateway listener of a landing.
func sectionOf(l rules.Landing) section { return section{Gateway: l.Gateway, Name: l.Listener.Name} }

// wantedSections returns the Gateway listeners the accepted verdicts attach
// the route to, each once.
func wantedSections(verdicts []verdict) sets.Set[section] {
	out := sets.New[section]()
	for _, v := range verdicts {
		if v.att.Accepted() {
			for _, l := range v.att.Landings {
				out.Insert(sectionOf(l))
			}
		}
	}
	return out
}

// derivedRoute returns the route derived from route for the Gateway
// listener s: the user's spec but its parentRefs, which name s alone. One
// parentRef each, because an implementation may count a listener once per
// parentRef that names its Gateway (Traefik does), and attachedRoutes
// would then count a route more than once.
func (r *Reconciler) derivedRoute(route *unstructured.Unstructured, s section) (*unstructured.Unstructured, error) {
	key := client.ObjectKeyFromObject(route)
	d := r.newRoute()
	d.SetNamespace(route.GetNamespace())
	d.SetName(derivedName(r.GVK.Kind, key, s))
	d.SetLabels(map[string]string{
		v1alpha1.ManagedByLabel:   v1alpha1.FieldManager,
		v1alpha1.DerivedLabel:     "true",
		v1alpha1.DerivedFromLabel: routeHash(r.GVK.Kind, key),
	})
	d.SetAnnotations(map[string]string{
		v1alpha1.DerivedSourceAnnotation:    r.GVK.Kind + "/" + route.GetName(),
		v1alpha1.SourceGenerationAnnotation: strconv.FormatInt(route.GetGeneration(), 10),
		v1alpha1.DerivedNoteAnnotation:      fmt.Sprintf("Made by gatefold from %s %s, which to edit instead: edits of this route are reverted", r.GVK.Kind, route.GetName()),
	})
	d.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: r.GVK.GroupVersion().String(), Kind: r.GVK.Kind, Name: route.GetName(), UID: route.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
	}})
	spec, _, err := unstructured.NestedMap(route.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("copying the spec of %s %s: %w", r.GVK.Kind, key, err)
	}
	ref := gwv1.ParentReference{
		Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")),
		Namespace: ptr.To(gwv1.Namespace(s.Gateway.Namespace)), Name: gwv1.ObjectName(s.Gateway.Name), SectionName: ptr.To(s.Name),
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ref)
	if err != nil {
		return nil, fmt.Errorf("building a parentRef: %w", err)
	}
	spec["parentRefs"] = []any{m}
	// The derived route attaches to its listener alone, never also to the
	// Gateways that take routes by default.
	delete(spec, "useDefaultGateways")
	d.Object["spec"] = spec
	return d, nil
}

// derived is what syncDerived found and made: the derived routes of a user
// route as stored, by the Gateway listener each names, and the names
// another object holds of those it could not make.
type derived struct {
	routes map[section]*unstructured.Unstructured
	taken  map[section]string
}

// syncDerived makes the derived routes of the user route key what the
// verdicts want: it creates the missing, puts back edited ones and deletes
// the unwanted; route nil deletes them all.
func (r *Reconciler) syncDerived(ctx context.Context, key types.NamespacedName, route *unstructured.Unstructured, verdicts []verdict) (derived, error) {
	out := derived{routes: map[section]*unstructured.Unstructured{}, taken: map[section]string{}}
	var uid types.UID
	if route != nil {
		uid = route.GetUID()
	}
	existing, err := r.listDerived(ctx, key, uid)
	if err != nil {
		return out, err
	}
	if route != nil {
		for s := range wantedSections(verdicts) {
			want, err := r.derivedRoute(route, s)
			if err != nil {
				return out, err
			}
			got, err := r.writeDerived(ctx, route, want, existing[want.GetName()])
			var taken *nameTakenError
			switch {
			case errors.As(err, &taken):
				out.taken[s] = want.GetName()
			case err != nil:
				return out, err
			default:
				out.routes[s] = got
			}
			delete(existing, want.GetName())
		}
	}
	for _, d := range existing {
		if err := r.deleteDerived(ctx, d); err != nil {
			return out, err
		}
	}
	return out, nil
}

// listDerived lists the derived routes of the user route key, by name:
// those it controls, of its UID unless uid is "".
func (r *Reconciler) listDerived(ctx context.Context, key types.NamespacedName, uid types.UID) (map[string]*unstructured.Unstructured, error) {
	list := r.newRouteList()
	if err := r.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{derivedOwnerIndex: key.Name}); err != nil {
		return nil, fmt.Errorf("listing the routes derived from %s %s: %w", r.GVK.Kind, key, err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		if d := &list.Items[i]; uid == "" || controlledBy(d, uid) {
			out[d.GetName()] = d
		}
	}
	return out, nil
}

// controlledBy says whether o's controller has uid.
func controlledBy(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.UID == uid
}

// nameTakenError is a derived route's name held by an object gatefold did
// not make for the route.
type nameTakenError struct{ name string }

func (e *nameTakenError) Error() string { return "the name " + e.name + " is taken" }

// writeDerived creates want, or updates got to want when they differ,
// fenced by got's resourceVersion; labels and annotations others added
// stay. A route of want's name that route controls is adopted; one it does
// not control is left alone, reported on route as a *nameTakenError.
func (r *Reconciler) writeDerived(ctx context.Context, route, want, got *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if got == nil {
		err := r.createDerived(ctx, route, want)
		if !apierrors.IsAlreadyExists(err) {
			return want, err
		}
		if got, err = r.holder(ctx, route, want); err != nil {
			return nil, err
		}
	}
	next := got.DeepCopy()
	labels, annotations := next.GetLabels(), next.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	maps.Copy(annotations, want.GetAnnotations())
	next.SetLabels(labels)
	next.SetAnnotations(annotations)
	next.SetOwnerReferences(want.GetOwnerReferences())
	next.Object["spec"] = want.Object["spec"]
	if reflect.DeepEqual(next.Object, got.Object) {
		return got, nil
	}
	if err := r.fenced(); err != nil {
		return nil, err
	}
	if err := r.Client.Update(ctx, next); err != nil {
		derivedWrites.WithLabelValues("update", resultOf(err)).Inc()
		return nil, fmt.Errorf("updating %s %s: %w", r.GVK.Kind, klog.KObj(next), err)
	}
	derivedWrites.WithLabelValues("update", resultWritten).Inc()
	log.FromContext(ctx).Info("Put back a derived route", "route", klog.KObj(route), "derived", klog.KObj(next))
	return next, nil
}

// createDerived creates want, derived from route, fenced.
func (r *Reconciler) createDerived(ctx context.Context, route, want *unstructured.Unstructured) error {
	if err := r.fenced(); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, want); err != nil {
		derivedWrites.WithLabelValues("create", resultOf(err)).Inc()
		return fmt.Errorf("creating %s %s: %w", r.GVK.Kind, klog.KObj(want), err)
	}
	derivedWrites.WithLabelValues("create", resultWritten).Inc()
	log.FromContext(ctx).Info("Created a derived route", "route", klog.KObj(route), "derived", klog.KObj(want))
	r.Recorder.Eventf(route, nil, corev1.EventTypeNormal, "Derived", "CreateDerivedRoute",
		"Served through %s %s, which gatefold keeps; edits of it are reverted", r.GVK.Kind, want.GetName())
	return nil
}

// holder reads the object that holds want's name: it is returned when
// route controls it, or nothing does and its labels say it was derived
// from route (its ownerReference removed by hand), to be adopted; else a
// *nameTakenError, which a Warning event on route reports.
func (r *Reconciler) holder(ctx context.Context, route, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got := r.newRoute()
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return nil, fmt.Errorf("reading %s %s, whose name is taken: %w", r.GVK.Kind, klog.KObj(want), err)
	}
	labels := got.GetLabels()
	if controlledBy(got, route.GetUID()) || metav1.GetControllerOfNoCopy(got) == nil && labels[v1alpha1.DerivedLabel] == "true" &&
		labels[v1alpha1.DerivedFromLabel] == want.GetLabels()[v1alpha1.DerivedFromLabel] {
		log.FromContext(ctx).Info("Adopting a derived route", "route", klog.KObj(route), "derived", klog.KObj(got))
		return got, nil
	}
	log.FromContext(ctx).Info("The name of a derived route is taken", "route", klog.KObj(route), "holder", klog.KObj(got))
	if r.fenced() == nil {
		r.Recorder.Eventf(route, nil, corev1.EventTypeWarning, reasonNameTaken, "CreateDerivedRoute",
			"%s %s here is not one gatefold made for this route: delete or rename it, and gatefold serves the route", r.GVK.Kind, want.GetName())
	}
	return nil, &nameTakenError{name: want.GetName()}
}

// deleteDerived deletes a derived route no longer wanted, fenced by its
// resourceVersion.
func (r *Reconciler) deleteDerived(ctx context.Context, d *unstructured.Unstructured) error {
	if err := r.fenced(); err != nil {
		return err
	}
	err := client.IgnoreNotFound(r.Client.Delete(ctx, d, client.Preconditions{ResourceVersion: ptr.To(d.GetResourceVersion())}))
	derivedWrites.WithLabelValues("delete", resultOf(err)).Inc()
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", r.GVK.Kind, klog.KObj(d), err)
	}
	log.FromContext(ctx).Info("Deleted a derived route", "derived", klog.KObj(d))
	return nil
}
