package rules

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// EntryKeys returns the keys a listener taking e on Gateway gateway
// ("namespace/name") is indexed under: its tuple, and its port and group
// where another group cannot share the port. ConflictKeys are the keys to
// look up to find every listener that conflicts with e (ConflictOf).
func EntryKeys(gateway string, e Entry) []string {
	g := GroupOf(e.Protocol)
	keys := []string{tupleKey(gateway, e.Tuple())}
	if excludes(g) {
		keys = append(keys, portGroupKey(gateway, e.Port, g))
	}
	return keys
}

// ConflictKeys returns the keys under which EntryKeys indexes every
// listener that conflicts with e on Gateway gateway: e's tuple, and the
// groups that cannot share e's port.
func ConflictKeys(gateway string, e Entry) []string {
	g := GroupOf(e.Protocol)
	keys := []string{tupleKey(gateway, e.Tuple())}
	if !excludes(g) {
		return keys
	}
	for _, other := range []Group{GroupHTTP, GroupTLS, GroupTCP} {
		if other != g {
			keys = append(keys, portGroupKey(gateway, e.Port, other))
		}
	}
	return keys
}

// excludes says whether listeners of g keep some other group off their
// port (CanSharePort).
func excludes(g Group) bool { return g == GroupHTTP || g == GroupTLS || g == GroupTCP }

func tupleKey(gateway string, t Tuple) string {
	return fmt.Sprintf("%s|t|%d|%s|%s|%s", gateway, t.Port, t.Group, t.Protocol, t.Hostname)
}

func portGroupKey(gateway string, port gwv1.PortNumber, g Group) string {
	return fmt.Sprintf("%s|p|%d|%s", gateway, port, g)
}

// NameKey is the AdmissionKeys key of the sources of Gateway gateway with a
// listener that gets name on it.
func NameKey(gateway string, name gwv1.SectionName) string {
	return fmt.Sprintf("%s|n|%s", gateway, name)
}

// AdmissionKeys returns the keys source src, whose parent is Gateway
// gateway, is found under by RelatedSources: each listener's EntryKeys and
// the name it gets on the Gateway.
func AdmissionKeys(gateway string, src *Source) []string {
	ref := src.Ref()
	var keys []string
	for _, l := range src.Listeners {
		keys = append(keys, EntryKeys(gateway, EntryOf(l.Port, l.Protocol, l.Hostname))...)
		keys = append(keys, NameKey(gateway, GatewayListenerName(ref, l.Name)))
	}
	return keys
}

// Lookup returns the stored sources found under an AdmissionKeys key that
// the fold places (not being deleted, of a namespace the Gateway admits):
// what it leaves out decides nothing, so is not followed.
type Lookup func(key string) ([]Source, error)

// RelatedSources returns the stored sources of pool head gw that
// StoredBoard needs to check entries as it would with all of them: seeds,
// every source with a listener that conflicts with one of entries or with a
// listener of a source returned, and every source named by a listener of gw
// or of listenerSets (the Gateway of its ListenerSets, nil when there is
// none) that gatefold does not manage (OwnListeners). On a pool's head room
// is unlimited, so a listener's place depends only on the listeners it
// conflicts with: admission reads what a request touches, not the pool.
func RelatedSources(gw, listenerSets *gwv1.Gateway, entries []Entry, seeds []Source, lookup Lookup) ([]Source, error) {
	gateway := gw.Namespace + "/" + gw.Name
	var keys []string
	for _, g := range []*gwv1.Gateway{gw, listenerSets} {
		if g == nil {
			continue
		}
		managed := ManagedListeners(g)
		for _, l := range g.Spec.Listeners {
			if !managed.Has(l.Name) {
				keys = append(keys, NameKey(gateway, l.Name))
			}
		}
	}
	seen := map[SourceRef]bool{}
	var out []Source
	add := func(src Source) {
		if seen[src.Ref()] {
			return
		}
		seen[src.Ref()] = true
		out = append(out, src)
		for _, l := range src.Listeners {
			keys = append(keys, ConflictKeys(gateway, EntryOf(l.Port, l.Protocol, l.Hostname))...)
		}
	}
	for _, e := range entries {
		keys = append(keys, ConflictKeys(gateway, e)...)
	}
	for _, src := range seeds {
		add(src)
	}
	looked := map[string]bool{}
	for len(keys) > 0 {
		key := keys[len(keys)-1]
		keys = keys[:len(keys)-1]
		if looked[key] {
			continue
		}
		looked[key] = true
		found, err := lookup(key)
		if err != nil {
			return nil, err
		}
		for _, src := range found {
			add(src)
		}
	}
	return out, nil
}
