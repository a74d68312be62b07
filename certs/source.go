package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
)

// Mode says where the webhook's serving certificate comes from.
type Mode string

const (
	// ModeCertManager serves the certificate cert-manager writes into a
	// Secret mounted at a folder, and reloads it when cert-manager renews it.
	ModeCertManager Mode = "cert-manager"
	// ModeSelfSigned provisions the certificate from gatefold's own CA.
	ModeSelfSigned Mode = "self-signed"
)

// Source gives the webhook server its certificate. It is a manager Runnable
// that runs on every replica, leader or not: each serves admission.
type Source interface {
	// Start keeps the certificate current until ctx ends.
	Start(ctx context.Context) error
	// NeedLeaderElection is false: every replica needs a certificate.
	NeedLeaderElection() bool
	// GetCertificate is the webhook server's tls.Config.GetCertificate.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Ready is a readiness check: it fails until a certificate is loaded.
	Ready(*http.Request) error
}

var errNotLoaded = errors.New("no serving certificate loaded yet")
