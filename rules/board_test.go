package rules

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestReservedConflictIsTheFirstConflictingReservation checks the indexed
// reservations against their definition: the conflict with the first
// listener, in the order reserved, of another source that e conflicts with.
func TestReservedConflictIsTheFirstConflictingReservation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	protocols := []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType, "example.com/x"}
	hosts := []string{"", "a.example.com", "b.example.com", "*.example.com"}
	random := func() Holder {
		return Holder{
			Namespace: "ns", Fragment: fmt.Sprint("f", r.IntN(6)), Listener: gwv1.SectionName(fmt.Sprint("l", r.IntN(3))),
			Entry: Entry{Port: gwv1.PortNumber(80 + r.IntN(2)), Protocol: protocols[r.IntN(len(protocols))], Hostname: hosts[r.IntN(len(hosts))]},
		}
	}
	for run := range 2000 {
		b := NewBoard()
		var reserved []Holder
		for range r.IntN(12) {
			h := random()
			if firstConflict(reserved, h.Entry, h) == nil {
				reserved = append(reserved, h)
			}
			b.Reserve(h)
		}
		for range 10 {
			q := random()
			if diff := cmp.Diff(firstConflict(reserved, q.Entry, q), b.reservedConflict(q.Entry, q)); diff != "" {
				t.Fatalf("Run %d: the conflict of %s of %s with %v (-scan +board):\n%s", run, q.Entry, q.Fragment, reserved, diff)
			}
		}
	}
}

// firstConflict is reservedConflict by its definition, a scan.
func firstConflict(reserved []Holder, e Entry, src Holder) *Conflict {
	for _, h := range reserved {
		if c := ConflictOf(e, h); c != nil && !h.sameSource(src) {
			return c
		}
	}
	return nil
}
