package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// Collected is what one round of the collector did.
type Collected struct {
	// Released is how many claims no holder wanted.
	Released int
	// Backfilled is how many claims stored fragments were given.
	Backfilled int
	// Relabelled is how many claims without their Gateway's label were given it.
	Relabelled int
}

// Collect is one round of the leader's collector, reading the claim informer
// and the informer cache only: it releases each claim judged unwanted, at one
// version, for the grace period (on condition of that version), then gives
// stored fragments the claims they lack (backfill); see docs/architecture.md,
// "The collector".
func (s *Store) Collect(ctx context.Context) (Collected, error) {
	var done Collected
	if err := s.Claims.CaughtUp(ctx, ""); err != nil {
		return done, err
	}
	claims := s.Claims.all()
	names := sets.New[string]()
	for _, h := range claims {
		names.Insert(h.lease.Name)
	}
	s.sightings().keepOnly(names)

	v := NewView(s.Cache)
	var kept []*held
	var errs []error
	for _, h := range claims {
		live, err := s.live(ctx, v, h)
		if err == nil && !live {
			var released bool
			if released, err = s.release(ctx, s.collector(), h.lease.Name, h.lease.ResourceVersion); released {
				done.Released++
				logf.FromContext(ctx).Info("Released a claim its holder no longer wants", claimKeys(h)...)
				continue
			}
		}
		if err == nil && live {
			var relabelled bool
			if relabelled, err = s.relabel(ctx, h); relabelled {
				done.Relabelled++
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		kept = append(kept, h)
	}
	backfilled, err := s.backfill(ctx, v, kept)
	done.Backfilled = backfilled
	return done, errors.Join(append(errs, err)...)
}

// relabel gives a claim without its Gateway's label, by which admission lists
// a Gateway's claims, that label, on condition that the claim is still at the
// version read. It says whether it did.
func (s *Store) relabel(ctx context.Context, h *held) (bool, error) {
	want := gatewayLabel(h.claim.Gateway)
	if !h.decoded || h.lease.Labels[claimGatewayLabel] == want {
		return false, nil
	}
	l := h.lease.DeepCopy()
	l.Labels[claimGatewayLabel] = want
	switch err := s.collector().Update(ctx, l); {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	default:
		return false, fmt.Errorf("labelling claim %s: %w", l.Name, err)
	}
}

// backfill gives stored fragments the unclaimed tuples they want and the fold
// gave them (their status says so), in precedence order: a claim never goes to
// a listener the fold did not place, which would take the tuple from the one it
// placed. It writes nothing when every wanted tuple is claimed.
func (s *Store) backfill(ctx context.Context, v *View, kept []*held) (int, error) {
	// Every fragment, shared with the cache, not copied: backfill only
	// reads them, and a copy of each would double gatefold's memory once a
	// period.
	list := &v1alpha1.ListenerFragmentList{}
	if err := s.Cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	fragments, sources := list.Items, rules.FromFragments(list.Items)
	claimed := sets.New[string]()
	for _, h := range kept {
		claimed.Insert(h.lease.Name)
	}
	boards := map[types.NamespacedName]*rules.Board{}
	board := func(gw *gwv1.Gateway) *rules.Board {
		key := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
		if b, ok := boards[key]; ok {
			return b
		}
		var mates []rules.Source
		for _, src := range sources {
			if src.Parent() == key {
				mates = append(mates, src)
			}
		}
		b := rules.OwnBoard(rules.OwnListeners(gw, v.managedOn(gw), mates))
		for _, h := range kept {
			if h.decoded && h.claim.Gateway == key {
				b.Take(h.holder.rules())
			}
		}
		boards[key] = b
		return b
	}

	log := logf.FromContext(ctx)
	n := 0
	var errs []error
	for _, i := range rules.PrecedenceOrder(sources) {
		lf := &fragments[i]
		req := NewRequest(lf, false, nil)
		var gw *gwv1.Gateway
		for j, c := range req.claims {
			if claimed.Has(c.Name()) {
				continue
			}
			if gw == nil {
				ok, err := s.admitted(ctx, v, lf)
				if err != nil || !ok {
					if err != nil {
						errs = append(errs, err)
					}
					break
				}
				gw, _ = v.Gateway(ctx, req.gateway)
			}
			h := req.holders[j]
			b := board(gw)
			if !rules.ListenerFolded(lf, lf.Spec.Listeners[j].Name) || b.Conflict(h.Entry) != nil {
				continue
			}
			if err := s.collector().Create(ctx, s.Lease(c, h)); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, err)
				continue
			} else if err == nil {
				n++
				log.Info("Backfilled a claim for a listener the fold placed", "claim", c.Name(), "gateway", c.Gateway, "fragment", klog.KObj(lf), "listener", h.Listener, "tuple", h.Entry.String())
			}
			claimed.Insert(c.Name())
			b.Take(h.rules())
		}
	}
	return n, errors.Join(errs...)
}

// claimKeys are the log keys that name a claim, its Gateway, holder and
// tuple.
func claimKeys(h *held) []any {
	if !h.decoded {
		return []any{"claim", klog.KObj(h.lease)}
	}
	return []any{"claim", klog.KObj(h.lease), "gateway", h.claim.Gateway, "fragment", klog.KRef(h.holder.Namespace, h.holder.Name), "listener", h.holder.Listener, "tuple", h.holder.Entry.String()}
}

// admitted says whether gatefold's admission would claim for lf now: it is
// not being deleted, its namespace has not opted out (OptedOut), and its
// Gateway exists and admits its namespace.
func (s *Store) admitted(ctx context.Context, v *View, lf *v1alpha1.ListenerFragment) (bool, error) {
	if !lf.DeletionTimestamp.IsZero() {
		return false, nil
	}
	labels, ok, err := v.NamespaceLabels(ctx, lf.Namespace)
	if err != nil || !ok || (s.OptedOut != nil && s.OptedOut(labels)) {
		return false, err
	}
	gw, err := v.Gateway(ctx, rules.ParentOf(lf))
	if err != nil || gw == nil {
		return false, err
	}
	allowed, _ := rules.NamespaceAllowed(gw, lf.Namespace, labels)
	return allowed, nil
}

// Run collects every period until ctx ends, skipping a round while fence,
// when set, fails.
func (s *Store) Run(ctx context.Context, period time.Duration, fence func() error) {
	log := logf.FromContext(ctx).WithName("claims")
	ctx = logf.IntoContext(ctx, log)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if fence != nil && fence() != nil {
				continue
			}
			done, err := s.Collect(ctx)
			if err != nil && ctx.Err() == nil {
				log.Error(err, "Collecting claims")
			}
			if done.Released > 0 || done.Backfilled > 0 || done.Relabelled > 0 {
				log.V(1).Info("Collected claims", "released", done.Released, "backfilled", done.Backfilled, "relabelled", done.Relabelled)
			}
		}
	}
}
