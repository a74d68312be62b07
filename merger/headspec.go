package merger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/rules"
)

// headSpec is what a head's siblings copy from it, read whole from the API
// server: fields gatefold's Go types lack (a newer Gateway CRD's) included.
type headSpec struct {
	// generation is the head's when it was read.
	generation int64
	// rest is the head's spec but for its listeners and the addresses that
	// have a value (see siblingSpec).
	rest map[string]any
	// own are the head's listeners gatefold did not fold, by name.
	own map[gwv1.SectionName]map[string]any
	// digest identifies rest and own, restDigest rest alone; a Gateway
	// written from them carries the one it copies (target.digest).
	digest, restDigest string
	// typed says whether gatefold's Go types hold every field of the head's
	// spec.
	typed bool
}

// headSpecMemo keeps each head's last headSpec until its generation moves.
type headSpecMemo struct {
	mu    sync.Mutex
	specs map[types.NamespacedName]*headSpec
}

func (m *headSpecMemo) recall(key types.NamespacedName, generation int64) *headSpec {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.specs[key]; s != nil && s.generation == generation {
		return s
	}
	return nil
}

func (m *headSpecMemo) remember(key types.NamespacedName, s *headSpec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.specs == nil {
		m.specs = map[types.NamespacedName]*headSpec{}
	}
	m.specs[key] = s
}

func (m *headSpecMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.specs, key)
}

// headSpecOf returns head's headSpec, read from the API server once per
// generation of the head; the cache holds only what the Go types know.
func (r *Reconciler) headSpecOf(ctx context.Context, head *gwv1.Gateway) (*headSpec, error) {
	key := client.ObjectKeyFromObject(head)
	if s := r.headSpecs.recall(key, head.Generation); s != nil {
		return s, nil
	}
	u, err := r.readWhole(ctx, key)
	if err != nil {
		return nil, err
	}
	s, err := newHeadSpec(u)
	if err != nil {
		return nil, fmt.Errorf("reading Gateway %s whole: %w", key, err)
	}
	r.headSpecs.remember(key, s)
	return s, nil
}

// readWhole reads Gateway key from the API server, fields gatefold's Go
// types lack included.
func (r *Reconciler) readWhole(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("Gateway")
	if err := r.APIReader.Get(ctx, key, u); err != nil {
		return nil, fmt.Errorf("reading Gateway %s whole: %w", key, err)
	}
	return u, nil
}

// newHeadSpec is the headSpec of head as stored; its managedFields say
// which listeners gatefold folded into it.
func newHeadSpec(head *unstructured.Unstructured) (*headSpec, error) {
	typed := &gwv1.Gateway{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(head.Object, typed); err != nil {
		return nil, err
	}
	managed := rules.ManagedListeners(typed)
	spec, _, err := unstructured.NestedMap(head.Object, "spec")
	if err != nil {
		return nil, err
	}
	s := &headSpec{generation: head.GetGeneration(), rest: spec, own: map[gwv1.SectionName]map[string]any{}}
	if s.typed, err = typedOnly(typed.Spec, spec); err != nil {
		return nil, err
	}
	listeners, _ := spec["listeners"].([]any)
	delete(spec, "listeners")
	var own []any
	for _, l := range listeners {
		l, ok := l.(map[string]any)
		if name, _ := l["name"].(string); ok && !managed.Has(gwv1.SectionName(name)) {
			s.own[gwv1.SectionName(name)] = l
			own = append(own, l)
		}
	}
	var addresses []any
	stored, _ := spec["addresses"].([]any)
	for i, a := range typed.Spec.Addresses {
		if copiedAddress(a) && i < len(stored) {
			addresses = append(addresses, stored[i])
		}
	}
	delete(spec, "addresses")
	if len(addresses) > 0 {
		spec["addresses"] = addresses
	}
	if s.digest, err = digestOf(map[string]any{"spec": spec, "own": own}); err != nil {
		return nil, err
	}
	if s.restDigest, err = digestOf(map[string]any{"spec": spec}); err != nil {
		return nil, err
	}
	return s, nil
}

// digestOf is a short digest of v's JSON, whose maps' keys are sorted.
func digestOf(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8]), nil
}

// storedSpec is a sibling's spec as stored: the head's (spec.rest), and its
// listeners: the head's own as stored where they are still those the fold
// placed, then the folded ones, then those others added, as stored in
// current, the sibling's stored form (nil when none is kept).
func storedSpec(spec *headSpec, own, folded, kept []gwv1.Listener, current *unstructured.Unstructured) (map[string]any, error) {
	stored := map[gwv1.SectionName]map[string]any{}
	if current != nil {
		ls, _, _ := unstructured.NestedSlice(current.Object, "spec", "listeners")
		for _, l := range ls {
			if l, ok := l.(map[string]any); ok {
				name, _ := l["name"].(string)
				stored[gwv1.SectionName(name)] = l
			}
		}
	}
	var listeners []any
	for _, group := range []struct {
		ls     []gwv1.Listener
		stored map[gwv1.SectionName]map[string]any
	}{{own, spec.own}, {folded, nil}, {kept, stored}} {
		for i := range group.ls {
			l, err := storedOr(&group.ls[i], group.stored)
			if err != nil {
				return nil, err
			}
			listeners = append(listeners, l)
		}
	}
	out := runtime.DeepCopyJSON(spec.rest)
	out["listeners"] = listeners
	return out, nil
}

// typedOnly says whether the Go types carry all of stored, the spec typed
// is of: then a typed write loses nothing. Both are compared as the JSON
// the API server would get.
func typedOnly(typed gwv1.GatewaySpec, stored map[string]any) (bool, error) {
	a, err := json.Marshal(typed)
	if err != nil {
		return false, fmt.Errorf("encoding a Gateway spec: %w", err)
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return false, fmt.Errorf("encoding a Gateway spec: %w", err)
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(x, y), nil
}

// storedOr is l as stored, when stored holds it with the fields l has, or l.
func storedOr(l *gwv1.Listener, stored map[gwv1.SectionName]map[string]any) (map[string]any, error) {
	if s, ok := stored[l.Name]; ok {
		known := gwv1.Listener{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s, &known); err == nil && equality.Semantic.DeepEqual(known, *l) {
			return runtime.DeepCopyJSON(s), nil
		}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
	if err != nil {
		return nil, fmt.Errorf("encoding listener %s: %w", l.Name, err)
	}
	return m, nil
}
