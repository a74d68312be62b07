package certs

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func verify(t *testing.T, bundle []byte, leaf *x509.Certificate, at time.Time) error {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("The bundle holds no certificate")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "gatefold-webhook-service.gatefold-system.svc", CurrentTime: at})
	return err
}

func TestServingCertificateVerifiesAgainstTheBundle(t *testing.T) {
	ca, err := newAuthority(t0, 365*24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.issue(t0, 30*24*time.Hour, []string{"gatefold-webhook-service.gatefold-system.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, ca.bundle, serving.Leaf, t0.Add(time.Hour)); err != nil {
		t.Errorf("Serving certificate does not verify: %v", err)
	}
	if got, want := renewAt(serving.Leaf), t0.Add(20*24*time.Hour); !got.Equal(want) {
		t.Errorf("Renewal at %v, want two thirds into its life, %v", got, want)
	}
}

func TestRotatedCAKeepsTheOldOneTrustedUntilItExpires(t *testing.T) {
	old, err := newAuthority(t0, 90*24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldServing, err := old.issue(t0, 30*24*time.Hour, []string{"gatefold-webhook-service.gatefold-system.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(61 * 24 * time.Hour)
	rotated, err := newAuthority(later, 90*24*time.Hour, old.bundle)
	if err != nil {
		t.Fatal(err)
	}
	// A replica that has not renewed yet still serves the old CA's certificate.
	if err := verify(t, rotated.bundle, oldServing.Leaf, t0.Add(24*time.Hour)); err != nil {
		t.Errorf("Old serving certificate does not verify against the rotated bundle: %v", err)
	}
	newServing, err := rotated.issue(later, 30*24*time.Hour, []string{"gatefold-webhook-service.gatefold-system.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, rotated.bundle, newServing.Leaf, later); err != nil {
		t.Errorf("New serving certificate does not verify: %v", err)
	}
	// Once the old CA expired, the next rotation drops it.
	again, err := newAuthority(t0.Add(200*24*time.Hour), 90*24*time.Hour, rotated.bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, again.bundle, oldServing.Leaf, t0.Add(24*time.Hour)); err == nil {
		t.Errorf("An expired CA is still in the bundle")
	}
}

func TestCAStoredAndReadBack(t *testing.T) {
	ca, err := newAuthority(t0, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ca.secretData()
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseAuthority(data)
	if err != nil {
		t.Fatal(err)
	}
	if !back.cert.Equal(ca.cert) || string(back.bundle) != string(ca.bundle) {
		t.Errorf("The CA read back differs from the one stored")
	}
	other, err := newAuthority(t0, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	otherData, err := other.secretData()
	if err != nil {
		t.Fatal(err)
	}
	data["tls.key"] = otherData["tls.key"]
	if _, err := parseAuthority(data); err == nil {
		t.Errorf("A key that does not match the certificate was accepted")
	}
}

func TestServingCertificateNeverOutlivesItsCA(t *testing.T) {
	ca, err := newAuthority(t0, 24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.issue(t0, 30*24*time.Hour, []string{"a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if serving.Leaf.NotAfter.After(ca.cert.NotAfter) {
		t.Errorf("Serving certificate ends %v, after its CA %v", serving.Leaf.NotAfter, ca.cert.NotAfter)
	}
}
