package claims

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

const (
	claimLabel        = "gatefold.dev/claim"
	claimGatewayLabel = "gatefold.dev/gateway"
	claimAnnotation   = "gatefold.dev/claim"
	listenerClaim     = "listener"
	// unknownHolder stands for the holder of a claim gatefold cannot
	// decode: a denial describes it as a fragment in another namespace.
	unknownHolder = "?"
)

var namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")

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

func gatewayLabel(gw types.NamespacedName) string { return shortHash(gw.String()) }

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

func (h Holder) fragment() types.NamespacedName {
	return types.NamespacedName{Namespace: h.Namespace, Name: h.Name}
}

// rules is the holder as the listener rules describe it.
func (h Holder) rules() rules.Holder {
	return rules.Holder{Namespace: h.Namespace, Fragment: h.Name, Listener: gwv1.SectionName(h.Listener), Entry: h.Entry}
}

// Store takes, checks, releases and backfills claims. Every replica's
// webhook uses it; the leader also runs its collector (Run).
type Store struct {
	// Client writes claims. It must not be a cached client: a cache would
	// watch Leases cluster-wide, and gatefold may read them in Namespace only.
	Client client.Client
	// Collector writes the collector's releases and backfills, Client when
	// nil: its own user agent tells them from admission's in an audit log.
	Collector client.Client
	// Claims is this replica's informer of the claims in Namespace, which
	// claims are read from.
	Claims *Informer
	// Reader reads from the API server the claim a write of which failed on
	// a conflict, and the fragment whose existence decides a takeover.
	Reader client.Reader
	// Cache is the informer cache that fragments, Gateways and namespaces
	// are read from, to judge whether a claim's holder still wants it.
	Cache client.Reader
	// Namespace holds the claims.
	Namespace string
	// Grace is how long this replica must have judged a claim unwanted, at
	// one version, before it releases or takes it over: longer than any
	// admission request is in flight, plus cache lag.
	Grace time.Duration
	// Period is how often the leader's collector runs: a release this
	// replica expects may come that much later.
	Period time.Duration
	// OptedOut, when set, says whether a namespace, by its labels, has
	// opted out of admission: the collector gives its fragments no claims.
	OptedOut func(namespaceLabels map[string]string) bool

	// Now is this replica's clock, time.Now when nil; tests replace it.
	Now func() time.Time

	once sync.Once
	seen *sightings
	// deletedUIDs are the fragments this replica saw deleted, and when.
	deletedMu   sync.Mutex
	deletedUIDs map[types.UID]time.Time
}

// collector is the client of the collector's writes.
func (s *Store) collector() client.Client {
	if s.Collector != nil {
		return s.Collector
	}
	return s.Client
}

func (s *Store) sightings() *sightings {
	s.once.Do(func() {
		now := s.Now
		if now == nil {
			now = time.Now
		}
		s.seen = newSightings(s.Grace, now)
	})
	return s.seen
}

type claimRecord struct {
	Claim    Claim       `json:"claim"`
	Listener string      `json:"listener"`
	Entry    rules.Entry `json:"entry"`
}

// Lease is the object that holds claim c for h, as the store writes it.
// RenewTime says when it was last written, for people; gatefold never
// compares it with a clock.
func (s *Store) Lease(c Claim, h Holder) *coordinationv1.Lease {
	rec, _ := json.Marshal(claimRecord{Claim: c, Listener: h.Listener, Entry: h.Entry})
	t := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   s.Namespace,
			Name:        c.Name(),
			Labels:      map[string]string{claimLabel: listenerClaim, claimGatewayLabel: gatewayLabel(c.Gateway)},
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

// held is a claim as read.
type held struct {
	lease  *coordinationv1.Lease
	claim  Claim
	holder Holder
	// decoded is false for a claim gatefold cannot read: no holder wants
	// it, so once stale it protects nothing.
	decoded bool
}

func readClaim(l *coordinationv1.Lease) *held {
	h := &held{lease: l}
	var rec claimRecord
	if json.Unmarshal([]byte(l.Annotations[claimAnnotation]), &rec) != nil || rec.Claim.Name() != l.Name || rec.Entry.Tuple() != rec.Claim.Tuple {
		return h
	}
	parts := strings.SplitN(ptr.Deref(l.Spec.HolderIdentity, ""), "/", 3)
	if len(parts) != 3 {
		return h
	}
	h.claim, h.decoded = rec.Claim, true
	h.holder = Holder{Namespace: parts[0], Name: parts[1], UID: types.UID(parts[2]), Listener: rec.Listener, Entry: rec.Entry}
	return h
}

// Wait bounds a request's claim work, and releaseWait the release of what a
// denied request wrote: together well inside the webhooks' 10s timeout, so
// that the requester reads why instead of a timeout.
const Wait, releaseWait = 5 * time.Second, 2 * time.Second

// claimsAgainst reads, from the informer once it has synced and seen every
// claim write up to resourceVersion since ("" for none), the claims on the
// request's Gateway that may conflict with its listeners, and its own.
func (s *Store) claimsAgainst(ctx context.Context, req *Request, since string) ([]*held, error) {
	if err := s.Claims.CaughtUp(ctx, since); err != nil {
		return nil, err
	}
	entries := make([]rules.Entry, 0, len(req.holders))
	keys := make([]string, 0, len(req.claims))
	for i, c := range req.claims {
		entries = append(entries, req.holders[i].Entry)
		keys = append(keys, s.Namespace+"/"+c.Name())
	}
	return s.Claims.against(req.gateway, entries, keys)
}

// Holders returns, of the given tuples on Gateway gw, those claimed and the
// fragments holding them, as this replica's claims informer shows them; an
// error until it has synced. Admission reserves these tuples as the fold
// does.
func (s *Store) Holders(gw types.NamespacedName, tuples []rules.Tuple) (map[rules.Tuple]types.NamespacedName, error) {
	if !s.Claims.HasSynced() {
		return nil, errors.New("this replica's claims informer has not synced yet")
	}
	keys := make([]string, 0, len(tuples))
	for _, t := range tuples {
		keys = append(keys, s.Namespace+"/"+Claim{Gateway: gw, Tuple: t}.Name())
	}
	claims, err := s.Claims.against(gw, nil, keys)
	if err != nil {
		return nil, err
	}
	return holders(claims, gw), nil
}

// HoldersNow is Holders read from the API server: the merger folds with
// every claim written before the fragments it read, which the informer may
// not show yet, and no claim event would bring the fold back.
func (s *Store) HoldersNow(ctx context.Context, gw types.NamespacedName) (map[rules.Tuple]types.NamespacedName, error) {
	list := &coordinationv1.LeaseList{}
	if err := s.Reader.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{claimLabel: listenerClaim, claimGatewayLabel: gatewayLabel(gw)}); err != nil {
		return nil, fmt.Errorf("listing the claims on Gateway %s: %w", gw, err)
	}
	claims := make([]*held, 0, len(list.Items))
	for i := range list.Items {
		claims = append(claims, readClaim(&list.Items[i]))
	}
	return holders(claims, gw), nil
}

// holders returns, by tuple, the fragments holding the decoded claims of gw
// that carry its label: the merger lists claims by it, and admission
// reserves what the fold reserves.
func holders(claims []*held, gw types.NamespacedName) map[rules.Tuple]types.NamespacedName {
	out := make(map[rules.Tuple]types.NamespacedName, len(claims))
	for _, h := range claims {
		if h.decoded && h.claim.Gateway == gw && h.lease.Labels[claimGatewayLabel] == gatewayLabel(gw) {
			out[h.claim.Tuple] = h.holder.fragment()
		}
	}
	return out
}

// get reads one claim; nil when there is none.
func (s *Store) get(ctx context.Context, name string) (*held, error) {
	l := &coordinationv1.Lease{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading claim %s: %w", name, err)
	}
	return readClaim(l), nil
}

// live says whether a claim still protects its tuple: its holder wants it, or
// this replica has not yet judged it unwanted, at its version, for the grace
// period (each call is a judgment sightings records). A holder provably done
// with it (see View.wants) protects nothing at once.
func (s *Store) live(ctx context.Context, v *View, h *held) (bool, error) {
	wanted := false
	if h.decoded {
		var gone bool
		var err error
		if wanted, gone, err = v.wants(ctx, h, s.deleted); err != nil {
			return true, err
		}
		if gone {
			return false, nil
		}
	}
	return !s.sightings().stale(h.lease.Name, h.lease.ResourceVersion, wanted), nil
}

// FragmentDeleted records that this replica saw the fragment with uid
// deleted: a claim it holds protects nothing from then on.
func (s *Store) FragmentDeleted(uid types.UID) {
	s.deletedMu.Lock()
	defer s.deletedMu.Unlock()
	if s.deletedUIDs == nil {
		s.deletedUIDs = map[types.UID]time.Time{}
	}
	now := time.Now()
	s.deletedUIDs[uid] = now
	for u, at := range s.deletedUIDs {
		if now.Sub(at) > forgetAfter {
			delete(s.deletedUIDs, u)
		}
	}
}

// deleted says whether this replica saw the fragment with uid deleted.
func (s *Store) deleted(uid types.UID) bool {
	s.deletedMu.Lock()
	defer s.deletedMu.Unlock()
	_, ok := s.deletedUIDs[uid]
	return ok
}

// release deletes a claim with c on condition that it is still at the
// version this replica wrote or judged, and says whether it did.
func (s *Store) release(ctx context.Context, c client.Client, name, resourceVersion string) (bool, error) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}}
	err := c.Delete(ctx, l, client.Preconditions{ResourceVersion: &resourceVersion})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Someone wrote or released it since: it is theirs to judge now.
		return false, nil
	}
	return false, fmt.Errorf("releasing claim %s: %w", name, err)
}

// Request is one admission request's claims: one per listener of the
// fragment, on its Gateway.
type Request struct {
	lf      *v1alpha1.ListenerFragment
	gateway types.NamespacedName
	create  bool
	claims  []Claim
	holders []Holder
	// kept marks, on an update, the listeners whose tuple the stored
	// fragment already had on this Gateway: they are not checked against
	// other holders again (see Conflicts).
	kept []bool
}

// NewRequest is the request that creates (create) or updates lf; kept marks,
// on an update, the listeners whose tuple the stored fragment already had on
// this Gateway (nil for none).
func NewRequest(lf *v1alpha1.ListenerFragment, create bool, kept []bool) *Request {
	if kept == nil {
		kept = make([]bool, len(lf.Spec.Listeners))
	}
	r := &Request{lf: lf, gateway: rules.ParentOf(lf), create: create, claims: claimsOf(lf), kept: kept}
	for _, l := range lf.Spec.Listeners {
		r.holders = append(r.holders, Holder{Namespace: lf.Namespace, Name: lf.Name, UID: lf.UID, Listener: string(l.Name), Entry: rules.EntryOf(l.Port, l.Protocol, l.Hostname)})
	}
	return r
}

func (r *Request) fragment() types.NamespacedName {
	return types.NamespacedName{Namespace: r.lf.Namespace, Name: r.lf.Name}
}

// against returns the holder of claim h as the request's listeners meet it
// on a board, and whether it conflicts with any of them. A claim gatefold
// cannot decode meets only the listener whose claim has its name.
func (r *Request) against(h *held) (rules.Holder, bool) {
	if h.decoded {
		rh := h.holder.rules()
		for _, mine := range r.holders {
			if rules.ConflictOf(mine.Entry, rh) != nil {
				return rh, true
			}
		}
		return rh, false
	}
	for i, c := range r.claims {
		if c.Name() == h.lease.Name {
			return rules.Holder{Namespace: unknownHolder, Fragment: unknownHolder, Listener: unknownHolder, Entry: r.holders[i].Entry}, true
		}
	}
	return rules.Holder{}, false
}

// holder is the holder of live claim h as the request's listeners meet it,
// with when its claim is released if this replica judged it unwanted.
func (s *Store) holder(req *Request, h *held) rules.Holder {
	rh, _ := req.against(h)
	if in := s.sightings().releaseIn(h.lease.Name, h.lease.ResourceVersion); in > 0 {
		rh.ReleasedIn = in + s.Period
	}
	return rh
}

// Plan is what a request writes once its check found nothing to deny.
type Plan struct {
	req *Request
	// have is the claim each listener found, nil where there was none.
	have []*held
	// yield marks the kept listeners that another holder on the board
	// conflicts with: the request leaves their claims as they are, and the
	// collector gives an unclaimed tuple to the first in precedence.
	yield []bool
	// nameExists says the request creates a fragment whose name is stored:
	// the API server answers AlreadyExists, so the request claims nothing.
	nameExists *bool
}

// board returns base, a board of what the request is checked against
// besides claims (nil for nothing), with every claim of another fragment
// that conflicts with one of the request's listeners and is still live.
func (s *Store) board(ctx context.Context, v *View, req *Request, claims []*held, base *rules.Board) (*rules.Board, error) {
	b := rules.NewBoard()
	if base != nil {
		b = base.Clone()
	}
	for _, h := range claims {
		if h.decoded && h.holder.fragment() == req.fragment() {
			// The request's own listeners are checked against each other.
			continue
		}
		if _, conflicts := req.against(h); !conflicts {
			continue
		}
		live, err := s.live(ctx, v, h)
		if err != nil {
			return nil, err
		}
		if live {
			b.Take(s.holder(req, h))
		}
	}
	return b, nil
}

// Check decides, reading only, whether the request's listeners can be
// claimed: it reads once the claims its listeners may meet, and checks
// every listener against base (the Gateway's own listeners and its stored
// fragments) and the live claims of other fragments. It returns the conflicts of the
// listeners that cannot be claimed (see Conflicts), or the plan to acquire.
func (s *Store) Check(ctx context.Context, req *Request, base *rules.Board) (*Plan, []*rules.Conflict, error) {
	// Any recent version will do: the writes and the check after them decide.
	claims, err := s.claimsAgainst(ctx, req, "")
	if err != nil {
		return nil, nil, err
	}
	v := NewView(s.Cache)
	b, err := s.board(ctx, v, req, claims, base)
	if err != nil {
		return nil, nil, err
	}
	if conflicts := Conflicts(req.lf, b, req.kept); conflicts != nil {
		return nil, conflicts, nil
	}
	byName := make(map[string]*held, len(claims))
	for _, h := range claims {
		byName[h.lease.Name] = h
	}
	p := &Plan{req: req, have: make([]*held, len(req.claims)), yield: make([]bool, len(req.claims))}
	for i, c := range req.claims {
		p.yield[i] = req.kept[i] && b.Conflict(req.holders[i].Entry) != nil
		p.have[i] = byName[c.Name()]
		if h := p.have[i]; h != nil && p.formerSelf(h) {
			if _, err := p.exists(ctx, s.Reader); err != nil {
				return nil, nil, err
			}
		}
	}
	return p, nil, nil
}

// formerSelf says h is held by the requested fragment's name under another
// UID: an earlier object of that name, or an earlier attempt of this create.
func (p *Plan) formerSelf(h *held) bool {
	return h.decoded && h.holder.fragment() == p.req.fragment() && h.holder.UID != p.req.lf.UID
}

// exists says, for a create, whether the fragment's name is stored, from
// one live read made at most once per request. An update's object is
// stored by definition.
func (p *Plan) exists(ctx context.Context, r client.Reader) (bool, error) {
	if !p.req.create {
		return false, nil
	}
	if p.nameExists == nil {
		lf := &v1alpha1.ListenerFragment{}
		err := r.Get(ctx, client.ObjectKey{Namespace: p.req.lf.Namespace, Name: p.req.lf.Name}, lf)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading ListenerFragment %s: %w", p.req.fragment(), err)
		}
		p.nameExists = ptr.To(err == nil)
	}
	return *p.nameExists, nil
}

// written is a claim a request wrote, at the version it wrote.
type written struct {
	name, version string
	// releasable: the request created it or took it from another fragment,
	// so a denial gives it back.
	releasable bool
}

// Acquire writes the plan's claims in listener order (creates, renewals not
// held as is, takeovers of claims no longer live), checks the Gateway's claims
// again (recheck) and, when a racing request took a conflicting tuple, releases
// what it created or took over and returns the conflicts by listener.
func (s *Store) Acquire(ctx context.Context, p *Plan) ([]*rules.Conflict, error) {
	req := p.req
	if p.nameExists != nil && *p.nameExists {
		return nil, nil
	}
	v := NewView(s.Cache)
	var mine []written
	// versions are the versions the request wrote its claims at, by listener.
	versions := make([]string, len(req.claims))
	lastWrite := ""
	release := func() {
		// Also after the claim work ran out of time.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWait)
		defer cancel()
		for _, w := range mine {
			if _, err := s.release(ctx, s.Client, w.name, w.version); err != nil {
				logf.FromContext(ctx).Error(err, "Releasing a claim of a denied request; the collector will release it", "claim", w.name)
			}
		}
	}
	for i := range req.claims {
		if p.yield[i] || s.heldAsIs(p, i) {
			continue
		}
		w, conflict, err := s.take(ctx, v, p, i)
		switch {
		case err != nil:
			release()
			return nil, err
		case conflict != nil && req.kept[i]:
			// Another fragment holds a tuple the stored fragment already
			// had: the merger reports which of them the Gateway takes.
			continue
		case conflict != nil:
			release()
			return conflictAt(len(req.claims), i, conflict), nil
		case w == nil:
			// The name turned out to be stored: AlreadyExists follows.
			release()
			return nil, nil
		}
		lastWrite, versions[i] = w.version, w.version
		if w.releasable {
			mine = append(mine, *w)
		}
	}
	if lastWrite == "" {
		// Every listener is one the stored fragment already had, checked
		// against the fragment's own listeners only, whatever the claims:
		// the check found nothing, and a request that adds no tuple races
		// no one.
		return nil, nil
	}
	conflicts, err := s.recheck(ctx, v, req, versions, lastWrite)
	if err != nil || conflicts != nil {
		release()
	}
	return conflicts, err
}

// heldAsIs says that kept listener i's claim is the stored fragment's exactly
// as the request would write it, so no write is needed: an update that keeps
// its tuples writes nothing.
func (s *Store) heldAsIs(p *Plan, i int) bool {
	have, h := p.have[i], p.req.holders[i]
	if !p.req.kept[i] || have == nil || !have.decoded || have.holder.identity() != h.identity() {
		return false
	}
	want := s.Lease(p.req.claims[i], h)
	return have.lease.Annotations[claimAnnotation] == want.Annotations[claimAnnotation] &&
		have.lease.Labels[claimGatewayLabel] == want.Labels[claimGatewayLabel]
}

// recheck checks each new listener the request claimed, at versions[i],
// against the Gateway's claims once this replica's informer has seen the
// request's last write (lastWrite). A listener backs off from a live
// conflicting claim written before its own, or held by a stored fragment, so
// that of two racers exactly one wins (docs/architecture.md, "The claim
// informer"). Kept listeners are checked against the fragment's own only.
func (s *Store) recheck(ctx context.Context, v *View, req *Request, versions []string, lastWrite string) ([]*rules.Conflict, error) {
	claims, err := s.claimsAgainst(ctx, req, lastWrite)
	if err != nil {
		return nil, err
	}
	var conflicts []*rules.Conflict
	for i, mine := range versions {
		if mine == "" || req.kept[i] {
			continue
		}
		for _, h := range claims {
			if h.decoded && h.holder.fragment() == req.fragment() {
				continue
			}
			rh, _ := req.against(h)
			c := rules.ConflictOf(req.holders[i].Entry, rh)
			if c == nil {
				continue
			}
			first, err := s.cameFirst(ctx, v, h, mine)
			if err != nil {
				return nil, err
			}
			if !first {
				continue
			}
			live, err := s.live(ctx, v, h)
			if err != nil {
				return nil, err
			}
			if live {
				c.Holder = s.holder(req, h)
				if conflicts == nil {
					conflicts = make([]*rules.Conflict, len(versions))
				}
				conflicts[i] = c
				break
			}
		}
	}
	return conflicts, nil
}

// conflictAt is the conflicts of n listeners of which only listener i has
// one, c.
func conflictAt(n, i int, c *rules.Conflict) []*rules.Conflict {
	conflicts := make([]*rules.Conflict, n)
	conflicts[i] = c
	return conflicts
}

// Conflicts checks a fragment's listeners, in order, against others and
// against the fragment's earlier listeners, and returns each listener's
// conflict by index, nil where there is none; nil when none conflicts. kept
// marks, on an update, the listeners whose tuple the stored fragment already
// had: those are checked against the fragment's own earlier listeners only.
func Conflicts(lf *v1alpha1.ListenerFragment, others *rules.Board, kept []bool) []*rules.Conflict {
	all, mine := others.Clone(), rules.NewBoard()
	ref := rules.FragmentRef(lf)
	var conflicts []*rules.Conflict
	for i, l := range lf.Spec.Listeners {
		e := rules.EntryOf(l.Port, l.Protocol, l.Hostname)
		against := all
		if i < len(kept) && kept[i] {
			against = mine
		}
		if c := against.Conflict(e); c != nil {
			if conflicts == nil {
				conflicts = make([]*rules.Conflict, len(lf.Spec.Listeners))
			}
			conflicts[i] = c
			continue
		}
		h := rules.HolderOf(ref, l)
		all.Take(h)
		mine.Take(h)
	}
	return conflicts
}

// cameFirst says whether claim h was there before a claim written at
// version mine: it was written earlier (versions that cannot be compared
// count as earlier, the safe side), or its holder is stored already.
func (s *Store) cameFirst(ctx context.Context, v *View, h *held, mine string) (bool, error) {
	if order, err := resourceversion.CompareResourceVersion(h.lease.ResourceVersion, mine); err != nil || order < 0 || !h.decoded {
		return true, nil
	}
	lf := &v1alpha1.ListenerFragment{}
	if err := v.cache.Get(ctx, h.holder.fragment(), lf); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		// Another tenant's fragment: the requester is not told which.
		logf.FromContext(ctx).Error(err, "Reading the holder of a claim", "claim", klog.KObj(h.lease), "fragment", klog.KRef(h.holder.Namespace, h.holder.Name))
		return true, fmt.Errorf("reading the holder of claim %s from the informer cache (gatefold's log has the details)", klog.KObj(h.lease))
	}
	return lf.UID == h.holder.UID, nil
}

// take writes listener i's claim: it creates it, or updates the one the plan
// found (a new version restarts every replica's grace). A claim another
// request wrote meanwhile is read again and judged afresh. It returns the
// conflict when a live holder has it, and no write when the create's name is
// stored.
func (s *Store) take(ctx context.Context, v *View, p *Plan, i int) (*written, *rules.Conflict, error) {
	c, h, have := p.req.claims[i], p.req.holders[i], p.have[i]
	if have != nil && p.req.kept[i] && (!have.decoded || have.holder.fragment() != h.fragment()) {
		// The check let a kept listener pass whoever holds its claim:
		// it takes the claim only from a holder that no longer has it.
		if live, err := s.live(ctx, v, have); err != nil || live {
			if err != nil {
				return nil, nil, err
			}
			return nil, rules.ConflictOf(h.Entry, s.holder(p.req, have)), nil
		}
	}
	// Racers that were denied delete what they created, so under contention
	// the claim may come and go many times: the request's deadline bounds
	// the loop, not a count.
	for ctx.Err() == nil {
		var err error
		if have == nil {
			l := s.Lease(c, h)
			if err = s.Client.Create(ctx, l); err == nil {
				return &written{name: l.Name, version: l.ResourceVersion, releasable: true}, nil, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, nil, fmt.Errorf("creating claim %s: %w", l.Name, err)
			}
		} else {
			l := have.lease.DeepCopy()
			want := s.Lease(c, h)
			l.Labels, l.Annotations, l.Spec = want.Labels, want.Annotations, want.Spec
			if err = s.Client.Update(ctx, l); err == nil {
				other := !have.decoded || have.holder.fragment() != h.fragment()
				if other {
					logf.FromContext(ctx).Info("Took over a claim its holder no longer wants", append(claimKeys(have), "newHolder", klog.KRef(h.Namespace, h.Name))...)
				}
				return &written{name: l.Name, version: l.ResourceVersion, releasable: other}, nil, nil
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return nil, nil, fmt.Errorf("writing claim %s: %w", l.Name, err)
			}
		}
		if have, err = s.get(ctx, c.Name()); err != nil || have == nil {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		if have.decoded && have.holder.fragment() == h.fragment() {
			if p.formerSelf(have) {
				if exists, err := p.exists(ctx, s.Reader); err != nil || exists {
					return nil, nil, err
				}
			}
			continue
		}
		live, err := s.live(ctx, v, have)
		if err != nil {
			return nil, nil, err
		}
		if live {
			return nil, rules.ConflictOf(h.Entry, s.holder(p.req, have)), nil
		}
	}
	return nil, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), c.Name(), fmt.Errorf("the claim kept changing while it was taken: retry"))
}

// claimsOf returns the claims a fragment's listeners need, in spec order.
func claimsOf(lf *v1alpha1.ListenerFragment) []Claim {
	gw := rules.ParentOf(lf)
	out := make([]Claim, 0, len(lf.Spec.Listeners))
	for _, l := range lf.Spec.Listeners {
		out = append(out, Claim{Gateway: gw, Tuple: rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple()})
	}
	return out
}

// wants says whether fragment lf, as stored, still wants claim c: not being
// deleted, parent c's Gateway gw, gw admits its namespace (labels nsLabels),
// it fits beside gw's own listeners (those not in managed), and one of its
// listeners takes c's tuple; lf and gw are nil when absent. The holder's UID
// does not matter, so a create racing a delete never frees its name's tuple.
func wants(c Claim, lf *v1alpha1.ListenerFragment, gw *gwv1.Gateway, managed sets.Set[gwv1.SectionName], nsLabels map[string]string) bool {
	if lf == nil || gw == nil || !specWants(c, lf) {
		return false
	}
	if gw.Namespace != c.Gateway.Namespace || gw.Name != c.Gateway.Name {
		return false
	}
	if allowed, _ := rules.NamespaceAllowed(gw, lf.Namespace, nsLabels); !allowed {
		return false
	}
	own := rules.OwnListeners(gw, managed, []rules.Source{rules.FromFragment(lf)})
	// One that can never be placed holds no tuple.
	return rules.NeverFits(rules.KindListenerFragment, len(lf.Spec.Listeners), len(own), c.Gateway.String(), rules.PoolHead(gw)) == ""
}

// specWants says whether fragment lf itself, whatever its Gateway and
// namespace, wants claim c: it is not being deleted, its parent is c's
// Gateway, and one of its listeners takes c's tuple.
func specWants(c Claim, lf *v1alpha1.ListenerFragment) bool {
	if !lf.DeletionTimestamp.IsZero() || rules.ParentOf(lf) != c.Gateway {
		return false
	}
	for _, l := range lf.Spec.Listeners {
		if rules.EntryOf(l.Port, l.Protocol, l.Hostname).Tuple() == c.Tuple {
			return true
		}
	}
	return false
}

// View reads fragments' Gateways and namespaces, and claim holders, from the
// informer cache, each Gateway and namespace once: admission and the claims
// read through one View per request (the collector, one per round).
type View struct {
	cache    client.Reader
	gateways map[types.NamespacedName]*gwv1.Gateway
	labels   map[string]*map[string]string
	// managed are the listeners gatefold applied to each Gateway, read from
	// its managedFields once, not once per claim judged.
	managed map[types.NamespacedName]sets.Set[gwv1.SectionName]
}

func NewView(cache client.Reader) *View {
	return &View{cache: cache, gateways: map[types.NamespacedName]*gwv1.Gateway{}, labels: map[string]*map[string]string{},
		managed: map[types.NamespacedName]sets.Set[gwv1.SectionName]{}}
}

// managedOn returns rules.ManagedListeners of gw, read once per View.
func (v *View) managedOn(gw *gwv1.Gateway) sets.Set[gwv1.SectionName] {
	key := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
	if m, ok := v.managed[key]; ok {
		return m
	}
	m := rules.ManagedListeners(gw)
	v.managed[key] = m
	return m
}

// Gateway returns the Gateway, nil when it does not exist.
func (v *View) Gateway(ctx context.Context, key types.NamespacedName) (*gwv1.Gateway, error) {
	if gw, ok := v.gateways[key]; ok {
		return gw, nil
	}
	gw := &gwv1.Gateway{}
	if err := v.cache.Get(ctx, key, gw); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Gateway %s: %w", key, err)
		}
		gw = nil
	}
	v.gateways[key] = gw
	return gw, nil
}

// NamespaceLabels returns a namespace's labels, and false when it does not
// exist.
func (v *View) NamespaceLabels(ctx context.Context, name string) (map[string]string, bool, error) {
	if l, ok := v.labels[name]; ok {
		return ptr.Deref(l, nil), l != nil, nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(namespaceGVK)
	if err := v.cache.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, false, fmt.Errorf("reading namespace %s: %w", name, err)
		}
		v.labels[name] = nil
		return nil, false, nil
	}
	v.labels[name] = &ns.Labels
	return ns.Labels, true, nil
}

// Placed returns those of gw's sources that the fold would place: not
// being deleted, of a namespace gw admits. The others are reported
// NotAllowed, or go, whatever the Gateway's listeners.
func (v *View) Placed(ctx context.Context, gw *gwv1.Gateway, sources []rules.Source) ([]rules.Source, error) {
	var out []rules.Source
	for _, src := range sources {
		if !src.DeletionTimestamp.IsZero() {
			continue
		}
		labels, ok, err := v.NamespaceLabels(ctx, src.Namespace)
		if err != nil {
			return nil, err
		}
		if allowed, _ := rules.NamespaceAllowed(gw, src.Namespace, labels); ok && allowed {
			out = append(out, src)
		}
	}
	return out, nil
}

// wants says whether the holder of h still wants it, as the cache shows it,
// and whether it is provably done with it (gone): seen deleted (deleted), or
// its spec, or another object of its name, stored after the claim's last
// write no longer wants it. A failed read is
// logged in full and returned naming only the claim: the holder may be
// another tenant's.
func (v *View) wants(ctx context.Context, h *held, deleted func(types.UID) bool) (wanted, gone bool, err error) {
	lf, wanted, err := v.holderWants(ctx, h)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Reading the holder of a claim", "claim", klog.KObj(h.lease), "fragment", klog.KRef(h.holder.Namespace, h.holder.Name))
		return false, false, fmt.Errorf("reading the holder of claim %s from the informer cache (gatefold's log has the details)", klog.KObj(h.lease))
	}
	switch {
	case wanted:
		return true, false, nil
	case lf == nil:
		return false, deleted(h.holder.UID), nil
	case lf.UID == h.holder.UID && specWants(h.claim, lf):
		// Unwanted for its Gateway or namespace, which may come back.
		return false, false, nil
	}
	// The holder, or another object of its name, stored after the claim's
	// last write: a request that wrote the claim has ended. One stored
	// before it may be a create of the holder's name still in flight.
	newer, err := resourceversion.CompareResourceVersion(lf.ResourceVersion, h.lease.ResourceVersion)
	return false, err == nil && newer > 0, nil
}

// holderWants reads the holder of h from the cache (nil when none is
// stored) and says whether it wants h.
func (v *View) holderWants(ctx context.Context, h *held) (*v1alpha1.ListenerFragment, bool, error) {
	lf := &v1alpha1.ListenerFragment{}
	if err := v.cache.Get(ctx, h.holder.fragment(), lf); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading ListenerFragment %s: %w", h.holder.fragment(), err)
	}
	gw, err := v.Gateway(ctx, h.claim.Gateway)
	if err != nil || gw == nil {
		return lf, false, err
	}
	labels, ok, err := v.NamespaceLabels(ctx, lf.Namespace)
	if err != nil || !ok {
		return lf, false, err
	}
	return lf, wants(h.claim, lf, gw, v.managedOn(gw), labels), nil
}
