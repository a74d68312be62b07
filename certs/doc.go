// Package certs provides the webhook server's serving certificate: mounted
// from cert-manager's Secret and reloaded on rotation, or provisioned by
// gatefold itself from a CA kept in a Secret where cert-manager is absent.
// It never serves a certificate it cannot renew.
package certs
