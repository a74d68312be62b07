package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// Options returns the scheme, cache and client options of a gatefold
// manager; the caller adds its addresses, webhook server and leader election.
// The cache strips managedFields except on Gateways, whose managedFields say
// which listeners gatefold applied, and ListenerFragments' annotations, which
// gatefold never reads nor writes back; claims are not in it (see package
// claims).
func Options() ctrl.Options {
	return ctrl.Options{
		Scheme: scheme.New(),
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&gwv1.Gateway{}:              {Transform: keep},
				&v1alpha1.ListenerFragment{}: {Transform: stripFragment},
			},
		},
		// After a write, the next fold reads what it wrote, not a stale cache
		// that would make it write the same thing again.
		// Routes are read as unstructured (package routing), from the cache.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true, EnableReadYourWritesConsistency: ptr.To(true)}},
	}
}

// keep caches an object as the API server sent it.
func keep(obj any) (any, error) { return obj, nil }

// stripFragment caches a ListenerFragment without its managedFields and
// annotations: at tens of thousands of fragments, a kubectl
// last-applied-configuration annotation alone, a copy of the spec, would be
// about a third of the cache.
func stripFragment(obj any) (any, error) {
	if lf, ok := obj.(*v1alpha1.ListenerFragment); ok {
		lf.ManagedFields, lf.Annotations = nil, nil
	}
	return obj, nil
}

// Lease is a replica's leader election lock that remembers when the replica
// last renewed it. A leader writes only while its last renewal, by its own
// clock, is younger than the renew deadline, as client-go's elector judges it,
// so that a leader frozen past its lease writes nothing when it wakes.
type Lease struct {
	resourcelock.Interface
	renewDeadline time.Duration
	mu            sync.Mutex
	renewed       time.Time
	// holder is the holder the lease had when it was last read.
	holder string
}

// NewLease returns the Lease lock namespace/name for a replica named
// identity, as controller-runtime would build it.
func NewLease(cfg *rest.Config, namespace, name, identity string, renewDeadline time.Duration) (*Lease, error) {
	cfg = rest.CopyConfig(cfg)
	// The replica's own user agent names it: an audit log then says which
	// replica held the lease.
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.UserAgent += " leader-election"
	// One hung request must not cost the lease.
	cfg.Timeout = max(renewDeadline/2, time.Second)
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	return &Lease{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     coordination,
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		renewDeadline: renewDeadline,
	}, nil
}

// Create takes the lease, and remembers when.
func (l *Lease) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.mark(time.Now(), l.Interface.Create(ctx, r))
}

// Get reads the lease, and remembers its holder.
func (l *Lease) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if err == nil {
		l.mu.Lock()
		l.holder = r.HolderIdentity
		l.mu.Unlock()
	}
	return r, raw, err
}

// ErrNotHolder is a release of the lease refused because another replica
// held it when it was last read.
var ErrNotHolder = errors.New("not releasing the leader lease: another replica holds it")

// Update renews or takes the lease, and remembers when; or releases it,
// which closes the fence at once. client-go releases a lease its last
// renewal says it holds, on a record read just before: a replica that lost
// the lease while frozen would empty its successor's, so that is refused.
func (l *Lease) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.HolderIdentity == l.Identity() {
		return l.mark(time.Now(), l.Interface.Update(ctx, r))
	}
	l.mu.Lock()
	l.renewed = time.Time{}
	holder := l.holder
	l.mu.Unlock()
	if holder != l.Identity() {
		return ErrNotHolder
	}
	return l.Interface.Update(ctx, r)
}

// mark records a renewal sent at sent that succeeded. The time it was sent,
// not answered: the answer may arrive long after, to a replica frozen in
// between, when another has taken the lease.
func (l *Lease) mark(sent time.Time, err error) error {
	if err == nil {
		l.mu.Lock()
		l.renewed = sent
		l.mu.Unlock()
	}
	return err
}

// ErrNotLeading says a replica's lease may have passed to another.
var ErrNotLeading = errors.New("this replica has not renewed its leader lease within the renew deadline")

// Fence returns ErrNotLeading unless the replica renewed its lease within
// the renew deadline.
func (l *Lease) Fence() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.renewed.IsZero() || time.Since(l.renewed) >= l.renewDeadline {
		return ErrNotLeading
	}
	return nil
}

// ErrFenced is a write not made because this replica may no longer lead.
var ErrFenced = errors.New("not written: this replica may no longer lead")

// FenceRetry is when a fenced write is looked at again: the replica may
// still renew its lease (client-go's elector gives up a retry period after
// the renew deadline), or has exited by then.
const FenceRetry = 2 * time.Second

// Fenced returns ErrFenced while fence, when set, fails: a Lease's Fence.
func Fenced(fence func() error) error {
	if fence != nil && fence() != nil {
		return ErrFenced
	}
	return nil
}

// Soonest is the shortest of the positive waits, or resync when none is
// shorter; a resync of 0 is none: a reconcile's RequeueAfter.
func Soonest(resync time.Duration, waits ...time.Duration) time.Duration {
	next := resync
	for _, w := range waits {
		if w > 0 && (next == 0 || w < next) {
			next = w
		}
	}
	return next
}

// ParentIndex indexes ListenerFragments and ListenerSets by "namespace/name"
// of their Gateway.
const ParentIndex = "gatefold.dev/parent-gateway"

// NoGatewayParent is the ParentIndex value of the ListenerSets whose
// parentRef names another kind than Gateway: no Gateway's fold reads them,
// and what gatefold wrote for them before their parentRef changed must
// still be taken back.
const NoGatewayParent = "!no-gateway"

// AdmissionIndex indexes ListenerFragments by rules.AdmissionKeys under
// their Gateway: admission on a pool's head finds what a request touches.
const AdmissionIndex = "gatefold.dev/admission-keys"

// IndexFragments registers ParentIndex and AdmissionIndex on
// ListenerFragments, once for both the webhooks and the merger.
func IndexFragments(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.ListenerFragment{}, ParentIndex, func(o client.Object) []string {
		return []string{rules.ParentOf(o.(*v1alpha1.ListenerFragment)).String()}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &v1alpha1.ListenerFragment{}, AdmissionIndex, func(o client.Object) []string {
		lf := o.(*v1alpha1.ListenerFragment)
		src := rules.FromFragment(lf)
		return rules.AdmissionKeys(rules.ParentOf(lf).String(), &src)
	})
}

// PoolIndex indexes Gateways by "namespace/name" of the Gateway that heads
// them (rules.HeadOf): a pool's siblings and the Gateway of its ListenerSets.
const PoolIndex = "gatefold.dev/pool-head"

// IndexPoolHeads registers PoolIndex on Gateways, once for the merger and
// the routing controllers.
func IndexPoolHeads(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &gwv1.Gateway{}, PoolIndex, PoolHeadOf)
}

// PoolHeadOf is a Gateway's PoolIndex value.
func PoolHeadOf(o client.Object) []string {
	if head, ok := rules.HeadOf(o.(*gwv1.Gateway)); ok {
		return []string{head.String()}
	}
	return nil
}

// IndexListenerSetParents registers ParentIndex on ListenerSets, for
// a replica that folds them (--listenerset-controllers). A ListenerSet whose
// parentRef names another kind than Gateway is indexed under
// NoGatewayParent, so never folded.
func IndexListenerSetParents(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &gwv1.ListenerSet{}, ParentIndex, func(o client.Object) []string {
		if gw, ok := rules.ListenerSetParent(o.(*gwv1.ListenerSet)); ok {
			return []string{gw.String()}
		}
		return []string{NoGatewayParent}
	})
}

// WithListenerSets returns o with ListenerSets cached with their
// managedFields, for a replica that folds them: the merger reads which
// statuses it wrote, to take them back when it stops folding a class.
func WithListenerSets(o ctrl.Options) ctrl.Options {
	o.Cache.ByObject[&gwv1.ListenerSet{}] = cache.ByObject{Transform: keep}
	return o
}

// GatewaysOfClass lists, from the cache, the Gateways of GatewayClass class,
// for an event of the class.
func GatewaysOfClass(ctx context.Context, c client.Reader, class string) ([]*gwv1.Gateway, error) {
	list := &gwv1.GatewayList{}
	if err := c.List(ctx, list, client.DisableReadYourWritesConsistency); err != nil {
		return nil, fmt.Errorf("listing the Gateways of GatewayClass %s: %w", class, err)
	}
	var out []*gwv1.Gateway
	for i := range list.Items {
		if string(list.Items[i].Spec.GatewayClassName) == class {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// FencedClient is c refusing every write with ErrFenced while fence, when
// set, fails: for a writer, such as the claim collector, whose round of
// writes may outlast a check made once before it.
func FencedClient(c client.Client, fence func() error) client.Client {
	return fencedClient{Client: c, fence: fence}
}

type fencedClient struct {
	client.Client
	fence func() error
}

func (c fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := Fenced(c.fence); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := Fenced(c.fence); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := Fenced(c.fence); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := Fenced(c.fence); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}
