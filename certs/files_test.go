package certs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
)

// writePair writes a fresh certificate and key where cert-manager's Secret
// would be mounted, and returns the certificate's serial number.
func writePair(t *testing.T, dir string) string {
	t.Helper()
	ca, err := newAuthority(time.Now(), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.issue(time.Now(), time.Hour, []string{"gatefold-webhook-service.gatefold-system.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := pki.EncodeX509(pair.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodePKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet swaps a Secret volume's files atomically; so does this.
	for name, data := range map[string][]byte{"tls.key": keyPEM, "tls.crt": certPEM} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return pair.Leaf.SerialNumber.String()
}

func served(f *Files) string {
	c, err := f.GetCertificate(nil)
	if err != nil || c.Leaf == nil {
		return ""
	}
	return c.Leaf.SerialNumber.String()
}

func TestFilesWaitForTheCertificateAndReloadIt(t *testing.T) {
	dir := t.TempDir()
	f := &Files{Dir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.Start(ctx) }()

	time.Sleep(200 * time.Millisecond)
	if err := f.Ready(nil); err == nil {
		t.Fatal("Ready before any certificate exists")
	}
	if _, err := f.GetCertificate(nil); err == nil {
		t.Fatal("Served a certificate before any exists")
	}

	first := writePair(t, dir)
	waitFor(t, "the first certificate", func() bool { return f.Ready(nil) == nil && served(f) == first })
	second := writePair(t, dir)
	waitFor(t, "the renewed certificate", func() bool { return served(f) == second })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Not serving %s after 15s", what)
		}
	}
}
