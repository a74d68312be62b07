package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatefold/gatefold/test/testenv"
)

// auditHorizon is how far behind the audit log's last event a write is
// judged: events are logged as they complete, so the write of a new term of
// the lease may follow a write received after it.
const auditHorizon = 5 * time.Second

// collectorAgent ends the user agent of the claim collector's writes, which
// only the leader makes; admission's claims are every replica's.
const collectorAgent = " claim-collector"

// auditCheck reads the API server's audit log as it grows and checks that
// every write of a gatefold replica to Gateways, statuses, ReferenceGrants,
// routes and, by its collector, claims was received while that replica held
// the leader Lease: the
// successful writes of the Lease say who held it when (only its holder
// renews it; a replica that takes it over writes it).
type auditCheck struct {
	path   string
	offset int64
	terms  []term
	// pending are writes not judged yet, received within auditHorizon of the
	// last event read.
	pending    []testenv.AuditEvent
	writes     int
	byResource map[string]int
	// claims counts the claims each replica wrote.
	claims map[string]int
}

// term is a replica's time as the holder of the leader Lease.
type term struct {
	holder string
	from   time.Time
}

// check reads what the log gained since the last call and returns the
// writes made by a replica that did not hold the lease; final judges every
// write left, not only those auditHorizon behind the log.
func (a *auditCheck) check(t *testing.T, final bool) []string {
	events, offset, err := testenv.ReadAuditLogFrom(a.path, a.offset)
	if err != nil {
		return []string{err.Error()}
	}
	a.offset = offset
	var last time.Time
	for _, e := range events {
		last = e.StageTimestamp
		r := e.Replica()
		switch {
		case r == "" || e.ResponseStatus.Code >= 300:
		case e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == "gatefold-leader" && e.Verb != "delete":
			a.terms = append(a.terms, term{holder: r, from: e.StageTimestamp})
		case e.ObjectRef.Resource == "leases" && strings.HasSuffix(e.UserAgent, collectorAgent):
			a.pending = append(a.pending, e)
		case e.ObjectRef.Resource == "leases":
			if strings.HasPrefix(e.ObjectRef.Name, "lfc-") && e.Verb != "delete" {
				a.claims[r]++
			}
		default:
			a.pending = append(a.pending, e)
		}
	}
	slices.SortStableFunc(a.terms, func(x, y term) int { return x.from.Compare(y.from) })
	var out []string
	kept := a.pending[:0]
	for _, e := range a.pending {
		if !final && !e.RequestReceivedTimestamp.Before(last.Add(-auditHorizon)) {
			kept = append(kept, e)
			continue
		}
		a.writes++
		resource := strings.TrimSuffix(e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource, "/")
		if e.ObjectRef.Resource == "leases" {
			resource = "claims by the collector"
		}
		a.byResource[resource]++
		if r, holder := e.Replica(), a.holderAt(e.RequestReceivedTimestamp); holder != r {
			out = append(out, fmt.Sprintf("%s wrote %s %s %s/%s at %s while %q held the leader Lease",
				r, e.Verb, resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.RequestReceivedTimestamp.Format("15:04:05.000000"), holder))
		}
	}
	a.pending = kept
	return out
}

// holderAt is the replica that last wrote the leader Lease at or before at.
func (a *auditCheck) holderAt(at time.Time) string {
	i, _ := slices.BinarySearchFunc(a.terms, at, func(tm term, at time.Time) int { return tm.from.Compare(at) })
	for i < len(a.terms) && !a.terms[i].from.After(at) {
		i++
	}
	if i == 0 {
		return ""
	}
	return a.terms[i-1].holder
}

// seen says, after the last check, what the check saw too little of: no
// write or no lease term (it checked nothing), and the replicas that took
// no claim in admission (it never reached them, so no request raced across
// replicas).
func (a *auditCheck) seen(t *testing.T, h *harness) []string {
	t.Logf("Audit: %d writes by gatefold replicas, %d renewals or takeovers of the leader Lease: %v", a.writes, len(a.terms), a.byResource)
	t.Logf("Claims admission wrote, by replica: %v", a.claims)
	var out []string
	if a.writes == 0 || len(a.terms) == 0 {
		out = append(out, fmt.Sprintf("the audit log has %d writes of gatefold and %d of its leader Lease: the check saw nothing", a.writes, len(a.terms)))
	}
	for _, sl := range h.slots {
		if a.claims[sl.name] == 0 {
			out = append(out, fmt.Sprintf("%s took no claim in admission: it never reached it, so no request raced across replicas", sl.name))
		}
	}
	return out
}

func TestAuditCheckJudgesWritesByTheLeaseTerms(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	lease := func(replica string, at time.Duration) string {
		return fmt.Sprintf(`{"verb":"update","userAgent":"gatefold/dev (%s) leader-election","objectRef":{"resource":"leases","namespace":"gatefold-system","name":"gatefold-leader"},"responseStatus":{"code":200},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			replica, t0.Add(at-time.Millisecond).Format(time.RFC3339Nano), t0.Add(at).Format(time.RFC3339Nano))
	}
	write := func(agent, resource, name string, at time.Duration, code int) string {
		return fmt.Sprintf(`{"verb":"patch","userAgent":%q,"objectRef":{"resource":%q,"namespace":"infra","name":%q},"responseStatus":{"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			agent, resource, name, code, t0.Add(at).Format(time.RFC3339Nano), t0.Add(at+time.Millisecond).Format(time.RFC3339Nano))
	}
	tests := map[string]struct {
		lines []string
		want  []string
	}{
		"writes of the holder": {
			lines: []string{lease("replica-0", 0), write("gatefold/dev (replica-0)", "gateways", "shared", time.Second, 200), lease("replica-1", 10*time.Second),
				write("gatefold/dev (replica-1)", "gateways", "shared", 11*time.Second, 200)},
		},
		"a write just before the next term": {
			lines: []string{lease("replica-0", 0), write("gatefold/dev (replica-0)", "gateways", "shared", 10*time.Second-time.Millisecond, 200), lease("replica-1", 10*time.Second)},
		},
		"a deposed leader's write": {
			lines: []string{lease("replica-0", 0), lease("replica-1", 10*time.Second), write("gatefold/dev (replica-0)", "gateways", "shared", 10*time.Second+time.Millisecond, 200)},
			want:  []string{`replica-0 wrote patch gateways infra/shared at 23:00:10.001000 while "replica-1" held the leader Lease`},
		},
		"a refused write of a deposed leader": {
			lines: []string{lease("replica-0", 0), lease("replica-1", 10*time.Second), write("gatefold/dev (replica-0)", "gateways", "shared", 11*time.Second, 409)},
		},
		"a deposed leader's collector": {
			lines: []string{lease("replica-0", 0), lease("replica-1", 10*time.Second), write("gatefold/dev (replica-0) claim-collector", "leases", "lfc-x", 11*time.Second, 200)},
			want:  []string{`replica-0 wrote patch claims by the collector infra/lfc-x at 23:00:11.000000 while "replica-1" held the leader Lease`},
		},
		"claims of admission on any replica": {
			lines: []string{lease("replica-0", 0), lease("replica-1", 10*time.Second), write("gatefold/dev (replica-0)", "leases", "lfc-x", 11*time.Second, 200)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			if err := os.WriteFile(path, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			a := &auditCheck{path: path, claims: map[string]int{}, byResource: map[string]int{}}
			got := a.check(t, true)
			if !slices.Equal(got, tc.want) {
				t.Errorf("check() = %q, want %q", got, tc.want)
			}
		})
	}
}
