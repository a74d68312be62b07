package certs

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
)

// The PKI here is pure: time comes in, certificates go out. cert-manager's
// pki package does the key generation, signing, encoding and the renewal
// time (two thirds into a certificate's life, cert-manager's default).

// CABundleKey is the Secret key holding the CAs clients must trust: the
// current CA and, after a rotation, the previous one until it expires.
const CABundleKey = "ca.crt"

// clockSkew backdates certificates so that a peer whose clock runs behind
// accepts them at once.
const clockSkew = 5 * time.Minute

// authority is gatefold's CA as kept in its Secret.
type authority struct {
	cert   *x509.Certificate
	key    crypto.Signer
	bundle []byte
}

// newAuthority creates a CA valid from now for `validity`; previous is the
// bundle it replaces, whose unexpired CAs stay trusted beside it.
func newAuthority(now time.Time, validity time.Duration, previous []byte) (*authority, error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("gatefold-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          keyID(key.Public()),
	}
	certPEM, cert, err := pki.SignCertificate(template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA: %w", err)
	}
	return &authority{cert: cert, key: key, bundle: append(certPEM, unexpired(previous, now)...)}, nil
}

// parseAuthority reads the CA from its Secret's data.
func parseAuthority(data map[string][]byte) (*authority, error) {
	cert, err := pki.DecodeX509CertificateBytes(data[corev1.TLSCertKey])
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", corev1.TLSCertKey, err)
	}
	key, err := pki.DecodePrivateKeyBytes(data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", corev1.TLSPrivateKeyKey, err)
	}
	if ok, err := pki.PublicKeyMatchesCertificate(key.Public(), cert); err != nil || !ok {
		return nil, fmt.Errorf("%s does not match %s", corev1.TLSPrivateKeyKey, corev1.TLSCertKey)
	}
	bundle := data[CABundleKey]
	if len(bundle) == 0 {
		bundle = data[corev1.TLSCertKey]
	}
	return &authority{cert: cert, key: key, bundle: bundle}, nil
}

// secretData is the CA as its Secret keeps it.
func (a *authority) secretData() (map[string][]byte, error) {
	certPEM, err := pki.EncodeX509(a.cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.EncodePKCS8PrivateKey(a.key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, CABundleKey: a.bundle}, nil
}

// issue signs a serving certificate for the names, valid from now for
// `validity` but never past the CA.
func (a *authority) issue(now time.Time, validity time.Duration, dnsNames []string, ips []net.IP) (*tls.Certificate, error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generating the serving key: %w", err)
	}
	notAfter := now.Add(validity)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	cn := "gatefold-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	template := &x509.Certificate{
		SerialNumber:   serial(),
		Subject:        pkix.Name{CommonName: cn},
		DNSNames:       dnsNames,
		IPAddresses:    ips,
		NotBefore:      now.Add(-clockSkew),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: a.cert.SubjectKeyId,
	}
	certPEM, _, err := pki.SignCertificate(template, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyPEM, err := pki.EncodePKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	return &pair, nil
}

// renewAt is when a certificate is renewed: two thirds into the life it was
// issued for, not counting the backdating.
func renewAt(c *x509.Certificate) time.Time {
	t, err := pki.RenewalTime(c.NotBefore.Add(clockSkew), c.NotAfter, nil, nil, nil)
	if err != nil || t == nil {
		return c.NotAfter
	}
	return t.Time
}

// unexpired keeps the certificates of a PEM bundle still valid at now.
func unexpired(bundle []byte, now time.Time) []byte {
	certs, err := pki.DecodeX509CertificateSetBytes(bundle)
	if err != nil {
		return nil
	}
	var out bytes.Buffer
	for _, c := range certs {
		if now.Before(c.NotAfter) {
			_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
	}
	return out.Bytes()
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("reading randomness: %v", err))
	}
	return n
}

// keyID is the RFC 5280 subject key identifier of a public key.
func keyID(pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil
	}
	sum := sha1.Sum(der)
	return sum[:]
}
