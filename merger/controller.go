package merger

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// Reconciler folds the fragments of one Gateway, the request's key, and
// writes the difference: the Gateway's listeners and the ReferenceGrants the
// folded listeners need. It publishes the fragments' statuses to the status
// writers (statusWriter).
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: a head's spec whole, which the
	// cache holds only as far as the Go types know it.
	APIReader client.Reader
	// Recorder records events on fragments and Gateways.
	Recorder events.EventRecorder
	// ManageReferenceGrants keeps a ReferenceGrant per fragment that lets
	// the Gateway read the fragment's certificate Secrets.
	ManageReferenceGrants bool
	// Resync is how often a Gateway is folded again with no event, which
	// repairs statuses someone else changed; a current one writes nothing.
	Resync time.Duration
	// Fence, when set, is asked before every write and fails while this
	// replica may no longer lead: a leader frozen past its lease that wakes
	// up writes nothing before it notices the loss and exits.
	Fence func() error
	// ListenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets the merger folds (see rules.ListenerSetsFolded).
	ListenerSetControllers sets.Set[string]
	// PoolGrace is how long a sibling of a pool stays with no folded
	// listener before it is deleted.
	PoolGrace time.Duration
	// Claims returns the holders of admission's claims on a Gateway's
	// tuples (Options.Claims); nil when no webhook runs beside the merger.
	Claims func(ctx context.Context, gateway types.NamespacedName) (map[rules.Tuple]types.NamespacedName, error)

	leftAlone announced
	pools     poolMemo
	attached  attachedMemo
	carried   carriedMemo
	headSpecs headSpecMemo
	refusals  refusalMemo
	// withdrawals are the listeners withdrawn after the Gateway
	// implementation refused them.
	withdrawals withdrawalMemo
	debounce    *debouncer
	// folding holds the status writers while Gateways are folded.
	folding gate
	// fragmentReports and setReports are the statuses decided for
	// ListenerFragments and ListenerSets, each kind with its writers.
	fragmentReports, setReports reports
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=patch
// +kubebuilder:rbac:groups=gatefold.dev,resources=listenerfragments/status,verbs=patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if wait := r.debounce.due(req); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	in, mode, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, foldErr := r.fold(ctx, req.NamespacedName, &in)
	var gatewayRefused *gatewayRefusedError
	switch {
	case errors.Is(foldErr, errFenced):
		return ctrl.Result{RequeueAfter: fenceRetry}, nil
	case apierrors.IsConflict(foldErr), apierrors.IsAlreadyExists(foldErr), apierrors.IsNotFound(foldErr):
		// The Gateway changed since the read, a sibling to create exists
		// already, or one to write is gone: fold what is there now. A deposed leader ends here
		// instead of overwriting its successor's fold.
		log.FromContext(ctx).V(1).Info("Gateway changed while folding, folding again", "gateway", req.NamespacedName)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case errors.As(foldErr, &gatewayRefused):
		// Statuses still say what happened; the Gateway's owner has the
		// event, and the fold is tried again when the refusal expires.
	case foldErr != nil:
		return ctrl.Result{}, foldErr
	default:
		for _, h := range fold.Handovers(&in, res) {
			log.FromContext(ctx).Info("Gave a listener's tuple to another source", "gateway", req.NamespacedName,
				"port", h.Tuple.Port, "group", h.Tuple.Group, "hostname", h.Tuple.Hostname, "from", h.From.String(), "to", h.To.String())
		}
	}
	var w writes
	for i := range in.Sources {
		src := &in.Sources[i]
		r.reportsOf(src.Kind).publish(src, res.Statuses[src.Ref()])
		// After a refused apply the Gateway still carries the listeners it
		// had: their grants must stay as they are.
		if r.ManageReferenceGrants && gatewayRefused == nil && w.note(r.applyGrant(ctx, src, in.Gateway, res.Outcomes, false)) {
			return ctrl.Result{RequeueAfter: fenceRetry}, nil
		}
	}
	if gatewayRefused == nil {
		// Only once the Gateway no longer carries their listeners.
		for i := range in.Deleting {
			src := &in.Deleting[i]
			r.reportsOf(src.Kind).publish(src, res.Statuses[src.Ref()])
		}
	}
	// Last, so that a refused count holds back no status or grant.
	var recount time.Duration
	if r.ListenerSetControllers.Len() > 0 && gatewayRefused == nil {
		next, err := r.finishListenerSets(ctx, req.NamespacedName, in.Gateway, mode, res)
		if w.note(err) {
			return ctrl.Result{RequeueAfter: fenceRetry}, nil
		}
		recount = next
	}
	var prune time.Duration
	if in.Pool != nil && gatewayRefused == nil {
		next, err := r.prune(ctx, &in, res)
		if w.note(err) {
			return ctrl.Result{RequeueAfter: fenceRetry}, nil
		}
		prune = next
	}
	if err := errors.Join(w.errs...); err != nil {
		return ctrl.Result{}, err
	}
	changed := w.changed
	switch {
	case changed:
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case in.Gateway == nil && len(in.Sources) == 0, in.Head != nil && len(in.Sources) == 0:
		return ctrl.Result{}, nil // gone, or a sibling, with nothing left to report
	}
	var refusal time.Duration
	if r.refusals.any(req.NamespacedName) {
		refusal = refusalTTL
	}
	return ctrl.Result{RequeueAfter: manager.Soonest(r.Resync, prune, refusal, recount, fold.NextRetry(res.Withdrawn, in.Now))}, nil
}

// writes gathers what became of a reconcile's writes after the fold.
type writes struct {
	changed bool
	errs    []error
}

// note records the result of a write, and says whether it was fenced: the
// reconcile then stops. A conflict means the object changed since it was
// read: it is written again soon.
func (w *writes) note(err error) (fenced bool) {
	switch {
	case errors.Is(err, errFenced):
		return true
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		w.changed = true
	case err != nil:
		w.errs = append(w.errs, err)
	}
	return false
}

// errFenced and fenceRetry are internal/manager's, which package routing
// shares.
var errFenced = manager.ErrFenced

const fenceRetry = manager.FenceRetry

// fenced returns errFenced while Fence fails.
func (r *Reconciler) fenced() error { return manager.Fenced(r.Fence) }

// read gathers the fold's input from the cache, and says what becomes of the
// Gateway's ListenerSets: only when they are folded does the input hold them.
func (r *Reconciler) read(ctx context.Context, key types.NamespacedName) (fold.Input, listenerSetMode, error) {
	in := fold.Input{NamespaceLabels: map[string]map[string]string{}, Grants: map[string][]gwv1.ReferenceGrant{}}
	gw := &gwv1.Gateway{}
	switch err := r.Client.Get(ctx, key, gw); {
	case apierrors.IsNotFound(err):
		r.carried.forget(key)
		r.refusals.forget(key)
		r.withdrawals.forget(key)
		r.attached.Forget(key)
		r.pools.forget(key)
		r.headSpecs.forget(key)
	case err != nil:
		return in, setsNotFolded, fmt.Errorf("reading Gateway %s: %w", key, err)
	default:
		in.Gateway = gw
		in.Managed = rules.ManagedListeners(gw)
		in.CarriedSince = r.carried.observe(key, gw, in.Managed)
		if head, ok := rules.HeadOf(gw); ok {
			in.Head = &head
		}
	}
	// The fold reads the fragments' specs, which gatefold never writes: it
	// must not wait until the cache has seen every status the status
	// writers wrote. A status it reads stale is checked again by its writer.
	list := &v1alpha1.ListenerFragmentList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{manager.ParentIndex: key.String()}, client.DisableReadYourWritesConsistency); err != nil {
		return in, setsNotFolded, fmt.Errorf("listing fragments of Gateway %s: %w", key, err)
	}
	for _, src := range rules.FromFragments(list.Items) {
		if src.DeletionTimestamp.IsZero() {
			in.Sources = append(in.Sources, src)
		} else {
			in.Deleting = append(in.Deleting, src)
		}
	}
	if in.Head != nil {
		// Nothing folds into a sibling; its statuses read the namespaces.
		return in, setsNotFolded, r.readReferences(ctx, &in)
	}
	if in.Gateway != nil {
		if err := r.readPool(ctx, &in); err != nil {
			return in, setsNotFolded, err
		}
		if err := r.readListenerSetGateway(ctx, &in); err != nil {
			return in, setsNotFolded, err
		}
		if r.Claims != nil {
			claims, err := r.Claims(ctx, key)
			if err != nil {
				return in, setsNotFolded, fmt.Errorf("reading the claims on Gateway %s: %w", key, err)
			}
			in.Claims = claims
		}
	}
	mode, err := r.listenerSetMode(ctx, in.Gateway)
	if err != nil {
		return in, mode, err
	}
	if mode == setsFolded {
		if err := r.readListenerSets(ctx, key, &in); err != nil {
			return in, mode, err
		}
	}
	return in, mode, r.readReferences(ctx, &in)
}

// readReferences reads the labels of the sources' namespaces and the
// ReferenceGrants of the namespaces their certificates are in.
func (r *Reconciler) readReferences(ctx context.Context, in *fold.Input) error {
	for _, src := range in.Sources {
		if err := r.readNamespace(ctx, src.Namespace, in.NamespaceLabels); err != nil {
			return err
		}
		for i, l := range src.Listeners {
			for _, ref := range rules.ForeignCertificateRefs(src.Namespace, i, l) {
				if err := r.readGrants(ctx, ref.Namespace, in.Grants); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// readNamespace reads a namespace's labels, metadata only, once per fold.
func (r *Reconciler) readNamespace(ctx context.Context, name string, labels map[string]map[string]string) error {
	if _, done := labels[name]; done {
		return nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	labels[name] = ns.Labels
	return nil
}

// readGrants reads the ReferenceGrants of a namespace, once per fold.
func (r *Reconciler) readGrants(ctx context.Context, ns string, grants map[string][]gwv1.ReferenceGrant) error {
	if _, done := grants[ns]; done {
		return nil
	}
	list := &gwv1.ReferenceGrantList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing ReferenceGrants in %s: %w", ns, err)
	}
	grants[ns] = list.Items
	return nil
}
