package rules

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// MaxListeners is the most listeners a Gateway's spec may hold.
const MaxListeners = 64

// Group is a set of protocols whose listeners on one port are told apart by
// hostname alone. Listeners of two groups on one port conflict unless the
// groups can share it (see CanSharePort).
type Group string

const (
	GroupHTTP Group = "http"
	// GroupTLS holds HTTPS and TLS: both are routed by SNI, so an HTTPS and
	// a TLS listener with one hostname on one port are not distinct.
	GroupTLS Group = "https-tls"
	GroupTCP Group = "tcp"
	GroupUDP Group = "udp"
	// GroupCustom holds implementation-specific protocols (example.com/x):
	// gatefold cannot know what they share, so it compares them only on
	// their exact (port, protocol, hostname).
	GroupCustom Group = "custom"
)

// GroupOf returns the group of a protocol.
func GroupOf(p gwv1.ProtocolType) Group {
	switch p {
	case gwv1.HTTPProtocolType:
		return GroupHTTP
	case gwv1.HTTPSProtocolType, gwv1.TLSProtocolType:
		return GroupTLS
	case gwv1.TCPProtocolType:
		return GroupTCP
	case gwv1.UDPProtocolType:
		return GroupUDP
	}
	return GroupCustom
}

// usesHostname says whether listeners of the group are told apart by
// hostname; TCP and UDP listeners only by port.
func (g Group) usesHostname() bool { return g != GroupTCP && g != GroupUDP }

// CanSharePort says whether listeners of groups a and b may share a port;
// within a group the tuple decides. UDP shares a port with anything TCP-based
// (HTTP/3 beside HTTPS); no two TCP-based groups do, stricter than upstream,
// as no mainstream implementation serves plaintext HTTP and TLS on one port.
func CanSharePort(a, b Group) bool {
	return a == b || a == GroupUDP || b == GroupUDP || a == GroupCustom || b == GroupCustom
}

// Entry is what the rules read of a listener.
type Entry struct {
	Port     gwv1.PortNumber
	Protocol gwv1.ProtocolType
	// Hostname is "" when the listener has none.
	Hostname string
}

// EntryOf returns the rules' view of a listener's port, protocol and hostname.
func EntryOf(port gwv1.PortNumber, protocol gwv1.ProtocolType, hostname *gwv1.Hostname) Entry {
	e := Entry{Port: port, Protocol: protocol}
	if hostname != nil {
		e.Hostname = string(*hostname)
	}
	return e
}

// Tuple is what a listener takes on a Gateway: two listeners with equal
// tuples are not distinct.
type Tuple struct {
	Port  gwv1.PortNumber `json:"port"`
	Group Group           `json:"group"`
	// Protocol is set for GroupCustom only.
	Protocol gwv1.ProtocolType `json:"protocol,omitempty"`
	// Hostname is "" for groups told apart by port alone.
	Hostname string `json:"hostname,omitempty"`
}

// Tuple returns the tuple the entry takes.
func (e Entry) Tuple() Tuple {
	g := GroupOf(e.Protocol)
	t := Tuple{Port: e.Port, Group: g}
	if g == GroupCustom {
		t.Protocol = e.Protocol
	}
	if g.usesHostname() {
		t.Hostname = e.Hostname
	}
	return t
}

// String names what the entry takes, in the user's terms: its protocol, port
// and, where it counts, hostname; never a group.
func (e Entry) String() string {
	switch {
	case !GroupOf(e.Protocol).usesHostname():
		return fmt.Sprintf("port %d (%s)", e.Port, e.Protocol)
	case e.Hostname == "":
		return fmt.Sprintf("port %d (%s) with no hostname", e.Port, e.Protocol)
	}
	return fmt.Sprintf("hostname %s on port %d (%s)", e.Hostname, e.Port, e.Protocol)
}

// Holder is a listener that took a tuple, as a fragment's owner may read of
// it.
type Holder struct {
	// Kind is the kind of source, KindListenerFragment when empty.
	Kind string
	// Namespace and Fragment name the source; Namespace is "" for the
	// Gateway's own listeners.
	Namespace string
	// Gateway is, for a listener someone added to a Gateway gatefold created
	// beside the parent (TakeAdded), that Gateway as namespace/name.
	Gateway  string
	Fragment string
	Listener gwv1.SectionName
	Entry    Entry
	// ReleasedIn, when set, says the holder no longer wants the tuple and
	// its claim is released within this time.
	ReleasedIn time.Duration
}

// Describe names the holder to a requester in namespace requesterNS, as
// little as lets it choose another tuple: another tenant's fragment is never
// named, nor a listener of the Gateway itself, which a requester that may
// not read the Gateway would otherwise learn of.
func (h Holder) Describe(requesterNS string) string {
	kind := cmp.Or(h.Kind, KindListenerFragment)
	switch {
	case h.Namespace == "" && h.Gateway != "":
		return fmt.Sprintf("a listener (%s) someone added to Gateway %s", h.Entry.Protocol, h.Gateway)
	case h.Namespace == "":
		return fmt.Sprintf("a listener of the Gateway itself (%s)", h.Entry.Protocol)
	case h.Namespace == requesterNS:
		return fmt.Sprintf("listener %q (%s) of %s %s", h.Listener, h.Entry.Protocol, kind, h.Fragment)
	}
	return fmt.Sprintf("a listener (%s) of a %s in another namespace", h.Entry.Protocol, kind)
}

// Conflict is why a listener cannot join the listeners already taken: an
// upstream reason and the holder that was there first.
type Conflict struct {
	Reason gwv1.ListenerConditionReason
	Holder Holder
}

// ConflictOf says whether e conflicts with h, which holds a listener on the
// same Gateway; nil when they are distinct.
func ConflictOf(e Entry, h Holder) *Conflict {
	if e.Port != h.Entry.Port {
		return nil
	}
	if !CanSharePort(GroupOf(e.Protocol), GroupOf(h.Entry.Protocol)) {
		return &Conflict{Reason: gwv1.ListenerReasonProtocolConflict, Holder: h}
	}
	if e.Tuple() != h.Entry.Tuple() {
		return nil
	}
	if GroupOf(e.Protocol).usesHostname() {
		return &Conflict{Reason: gwv1.ListenerReasonHostnameConflict, Holder: h}
	}
	// Two TCP or two UDP listeners on one port: the port is the conflict.
	return &Conflict{Reason: gwv1.ListenerReasonProtocolConflict, Holder: h}
}

// Message explains the conflict of e on Gateway gateway to a requester in
// namespace requesterNS, and says what to do.
func (c *Conflict) Message(e Entry, gateway, requesterNS string) string {
	holder := c.Holder.Describe(requesterNS)
	if c.Holder.Entry.Tuple() == e.Tuple() {
		fix := "choose another hostname or port"
		if !GroupOf(e.Protocol).usesHostname() {
			fix = "choose another port"
		}
		if c.Holder.ReleasedIn > 0 {
			return fmt.Sprintf("%s is still taken on Gateway %s by %s, which no longer wants it: retry in about %v",
				capitalise(e.String()), gateway, holder, c.Holder.ReleasedIn.Round(time.Second))
		}
		return fmt.Sprintf("%s is already taken on Gateway %s by %s: %s", capitalise(e.String()), gateway, holder, fix)
	}
	return fmt.Sprintf("Port %d on Gateway %s carries %s, which cannot share a port with %s: choose another port",
		e.Port, gateway, holder, e.Protocol)
}

func capitalise(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
