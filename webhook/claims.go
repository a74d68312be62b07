package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// A cache read alone cannot make "one listener per tuple" race-free: two
// concurrent creates both see nothing. The API server makes exactly one thing
// unique, an object's name, so a listener's tuple on a Gateway is claimed by
// creating a Lease whose name hashes (Gateway, tuple): of two concurrent
// creates one gets AlreadyExists. Claims live in gatefold's namespace, where
// tenants have no rights, and outlive webhook restarts.
//
// Listeners of groups that cannot share a port (HTTP against TCP) conflict
// too. That is not one name, so after taking its own claim a listener lists
// the live claims of those groups on its port, read from etcd: of two racing
// listeners at least one sees the other and backs off.
//
// A claim is released when its holder no longer wants it: the fragment is
// gone, was re-created, or dropped the listener. Because a fragment's create
// is still in flight while its claim exists, a claim is only released once
// its holder has not renewed it for the grace period.

const (
	claimLabel      = "gatefold.dev/claim"
	claimPortLabel  = "gatefold.dev/port"
	claimGroupLabel = "gatefold.dev/group"
	claimAnnotation = "gatefold.dev/claim"
	listenerClaim   = "listener"
)

var claimBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return claimBase32.EncodeToString(sum[:])[:26]
}

// Claim is one tuple on one Gateway.
type Claim struct {
	Gateway types.NamespacedName `json:"gateway"`
	Tuple   rules.Tuple          `json:"tuple"`
}

// Name is the claim's Lease name: equal claims, equal names.
func (c Claim) Name() string {
	return "lfc-" + shortHash(fmt.Sprintf("%s/%d/%s/%s/%s", c.Gateway, c.Tuple.Port, c.Tuple.Group, c.Tuple.Protocol, c.Tuple.Hostname))
}

func portKey(gw types.NamespacedName, port int32) string {
	return shortHash(fmt.Sprintf("%s/%d", gw, port))
}

// Holder is the fragment listener that holds a claim.
type Holder struct {
	Namespace string
	Name      string
	UID       types.UID
	Listener  string
	// Entry is what the listener takes.
	Entry rules.Entry
}

func (h Holder) identity() string { return h.Namespace + "/" + h.Name + "/" + string(h.UID) }

// HeldError says a claim is held by another fragment's listener.
type HeldError struct {
	Claim  Claim
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s on Gateway %s is held by listener %q of ListenerFragment %s/%s", e.Holder.Entry, e.Claim.Gateway, e.Holder.Listener, e.Holder.Namespace, e.Holder.Name)
}

// RulesHolder is the holder as the listener rules describe it.
func (e *HeldError) RulesHolder() rules.Holder {
	return rules.Holder{Namespace: e.Holder.Namespace, Fragment: e.Holder.Name, Listener: gwv1.SectionName(e.Holder.Listener), Entry: e.Holder.Entry}
}

// ClaimStore takes, checks and releases claims.
type ClaimStore struct {
	// Client writes claims.
	Client client.Client
	// Reader reads claims and fragments from the API server, not a cache:
	// a stale read would release a claim that is still wanted.
	Reader client.Reader
	// Namespace holds the claims.
	Namespace string
	// Grace is how long a claim whose holder does not want it is kept.
	Grace time.Duration
}

type claimRecord struct {
	Claim    Claim       `json:"claim"`
	Listener string      `json:"listener"`
	Entry    rules.Entry `json:"entry"`
}

func (s *ClaimStore) lease(c Claim, h Holder, now time.Time) *coordinationv1.Lease {
	rec, _ := json.Marshal(claimRecord{Claim: c, Listener: h.Listener, Entry: h.Entry})
	t := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      c.Name(),
			Labels: map[string]string{
				claimLabel:      listenerClaim,
				claimPortLabel:  portKey(c.Gateway, int32(c.Tuple.Port)),
				claimGroupLabel: string(c.Tuple.Group),
			},
			Annotations: map[string]string{claimAnnotation: string(rec)},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(h.identity()),
			LeaseDurationSeconds: ptr.To(int32(s.Grace.Seconds())),
			AcquireTime:          &t,
			RenewTime:            &t,
		},
	}
}

func decodeClaim(l *coordinationv1.Lease) (claimRecord, Holder, error) {
	var rec claimRecord
	if err := json.Unmarshal([]byte(l.Annotations[claimAnnotation]), &rec); err != nil {
		return rec, Holder{}, fmt.Errorf("decoding claim %s: %w", klog.KObj(l), err)
	}
	parts := strings.SplitN(ptr.Deref(l.Spec.HolderIdentity, ""), "/", 3)
	if len(parts) != 3 {
		return rec, Holder{}, fmt.Errorf("claim %s has no valid holder", klog.KObj(l))
	}
	return rec, Holder{Namespace: parts[0], Name: parts[1], UID: types.UID(parts[2]), Listener: rec.Listener, Entry: rec.Entry}, nil
}

// Acquire takes claim c for h, or renews it when h holds it already. It
// returns a *HeldError when another live holder has c or holds the other
// class on c's port, and whether it created the claim.
func (s *ClaimStore) Acquire(ctx context.Context, c Claim, h Holder) (bool, error) {
	created, err := s.acquireName(ctx, c, h)
	if err != nil {
		return false, err
	}
	if err := s.checkPortGroups(ctx, c, h); err != nil {
		if created {
			_ = s.release(ctx, c.Name(), "")
		}
		return false, err
	}
	return created, nil
}

func (s *ClaimStore) acquireName(ctx context.Context, c Claim, h Holder) (bool, error) {
	for range 5 {
		want := s.lease(c, h, time.Now())
		err := s.Client.Create(ctx, want)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating claim %s: %w", want.Name, err)
		}
		have := &coordinationv1.Lease{}
		if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("reading claim %s: %w", want.Name, err)
		}
		mine, err := s.mineOrStale(ctx, have, c, h)
		if err != nil {
			return false, err
		}
		if mine {
			// Renewing tells the collector that the holder still wants it,
			// even while its update is in flight.
			have.Spec.RenewTime = want.Spec.RenewTime
			have.Annotations = want.Annotations
			if err := s.Client.Update(ctx, have); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					continue
				}
				return false, fmt.Errorf("renewing claim %s: %w", want.Name, err)
			}
			return false, nil
		}
		if err := s.release(ctx, have.Name, have.ResourceVersion); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("claim %s kept changing: retry", c.Name())
}

// checkPortGroups fails when a live claim of a group that cannot share a
// port with c's holds c's port.
func (s *ClaimStore) checkPortGroups(ctx context.Context, c Claim, h Holder) error {
	list := &coordinationv1.LeaseList{}
	if err := s.Reader.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{
		claimLabel:     listenerClaim,
		claimPortLabel: portKey(c.Gateway, int32(c.Tuple.Port)),
	}); err != nil {
		return fmt.Errorf("listing claims on port %d of Gateway %s: %w", c.Tuple.Port, c.Gateway, err)
	}
	for i := range list.Items {
		if rules.CanSharePort(c.Tuple.Group, rules.Group(list.Items[i].Labels[claimGroupLabel])) {
			continue
		}
		rec, holder, err := decodeClaim(&list.Items[i])
		if err != nil || holder.identity() == h.identity() || rec.Claim.Gateway != c.Gateway {
			continue
		}
		stale, err := s.Stale(ctx, &list.Items[i])
		if err != nil {
			return err
		}
		if !stale {
			return &HeldError{Claim: rec.Claim, Holder: holder}
		}
	}
	return nil
}

// Check is Acquire without writes, for dry-run requests.
func (s *ClaimStore) Check(ctx context.Context, c Claim, h Holder) error {
	have := &coordinationv1.Lease{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: c.Name()}, have)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading claim %s: %w", c.Name(), err)
	default:
		if _, err := s.mineOrStale(ctx, have, c, h); err != nil {
			return err
		}
	}
	return s.checkPortGroups(ctx, c, h)
}

// mineOrStale says whether h holds the existing claim l on c, and returns a
// *HeldError when another holder does and still wants it. Neither means l is
// stale and may be taken over.
func (s *ClaimStore) mineOrStale(ctx context.Context, l *coordinationv1.Lease, c Claim, h Holder) (bool, error) {
	_, holder, err := decodeClaim(l)
	if err != nil {
		return false, err
	}
	if holder.identity() == h.identity() {
		return true, nil
	}
	stale, err := s.Stale(ctx, l)
	if err != nil {
		return false, err
	}
	if !stale {
		return false, &HeldError{Claim: c, Holder: holder}
	}
	return false, nil
}

// Release gives up a claim that h created in a request that was then denied.
func (s *ClaimStore) Release(ctx context.Context, c Claim) error {
	return s.release(ctx, c.Name(), "")
}

func (s *ClaimStore) release(ctx context.Context, name, resourceVersion string) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}}
	var opts []client.DeleteOption
	if resourceVersion != "" {
		opts = append(opts, client.Preconditions{ResourceVersion: &resourceVersion})
	}
	if err := s.Client.Delete(ctx, l, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing claim %s: %w", name, err)
	}
	return nil
}

// Stale says whether a claim may be released: its holder has not renewed it
// for the grace period and no longer wants it.
func (s *ClaimStore) Stale(ctx context.Context, l *coordinationv1.Lease) (bool, error) {
	if l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < s.Grace {
		return false, nil
	}
	rec, holder, err := decodeClaim(l)
	if err != nil {
		// An undecodable claim protects nothing.
		return true, nil
	}
	lf := &v1alpha1.ListenerFragment{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: holder.Namespace, Name: holder.Name}, lf); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading holder of claim %s: %w", l.Name, err)
	}
	if lf.UID != holder.UID || !lf.DeletionTimestamp.IsZero() {
		return true, nil
	}
	for _, c := range claimsOf(lf) {
		if c == rec.Claim {
			return false, nil
		}
	}
	return true, nil
}

// CollectOrphans releases every stale claim, and returns how many it released.
func (s *ClaimStore) CollectOrphans(ctx context.Context) (int, error) {
	list := &coordinationv1.LeaseList{}
	if err := s.Reader.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{claimLabel: listenerClaim}); err != nil {
		return 0, fmt.Errorf("listing claims: %w", err)
	}
	released := 0
	var errs []error
	for i := range list.Items {
		l := &list.Items[i]
		stale, err := s.Stale(ctx, l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !stale {
			continue
		}
		if err := s.release(ctx, l.Name, l.ResourceVersion); err != nil {
			errs = append(errs, err)
			continue
		}
		released++
	}
	return released, errors.Join(errs...)
}

// Run collects orphaned claims every period until ctx ends.
func (s *ClaimStore) Run(ctx context.Context, period time.Duration) {
	log := logf.FromContext(ctx).WithName("claims")
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.CollectOrphans(ctx)
			if err != nil {
				log.Error(err, "Collecting orphaned claims")
			}
			if n > 0 {
				log.V(1).Info("Released orphaned claims", "count", n)
			}
		}
	}
}

// claimsOf returns the claims a fragment's listeners need, in spec order.
func claimsOf(lf *v1alpha1.ListenerFragment) []Claim {
	gw := rules.ParentOf(lf)
	out := make([]Claim, 0, len(lf.Spec.Listeners))
	for _, l := range lf.Spec.Listeners {
		out = append(out, Claim{Gateway: gw, Tuple: entryOf(l).Tuple()})
	}
	return out
}
