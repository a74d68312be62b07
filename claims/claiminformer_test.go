package claims_test

import (
	"context"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/rules"
)

func TestClaimInformerReadsAClaimOncePerVersion(t *testing.T) {
	s := newStore(t, tenants(gateway("infra", "shared", gwv1.NamespacesFromAll))...)
	s.mustCreate(onShared("shop", "app", 1, appHTTPS))
	s.Watch.Settle(t)
	claimOn := func() *claims.Held {
		on, err := s.Claims.Claims.Against(shared, []rules.Entry{rules.EntryOf(appHTTPS.Port, appHTTPS.Protocol, appHTTPS.Hostname)})
		if err != nil || len(on) != 1 {
			t.Fatalf("Claims on the Gateway: %v, %v", on, err)
		}
		return on[0]
	}
	// The informer reads a claim as its event is handled, just after the
	// store changed.
	first := claimOn()
	for deadline := time.Now().Add(5 * time.Second); claimOn() != first; first = claimOn() {
		if time.Now().After(deadline) {
			t.Fatal("The informer reads a claim again at every read at the version it has")
		}
		time.Sleep(time.Millisecond)
	}
	l := s.Claim(claimName(appHTTPS))
	l.Annotations["touched"] = "yes"
	if err := s.C.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	s.Watch.Settle(t)
	if h := claimOn(); h == first || h.Lease().ResourceVersion != l.ResourceVersion || !h.Decoded() {
		t.Errorf("After a write the informer gives the claim at version %s, want it read again at %s", h.Lease().ResourceVersion, l.ResourceVersion)
	}
}
