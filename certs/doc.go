// Package certs provides the webhook server's serving certificate, a Source
// run on every replica: mounted from cert-manager's Secret and reloaded on
// rotation (Files), or, where cert-manager is absent, signed per replica from
// a CA kept in a Secret whose bundle it applies to gatefold's webhook
// configurations (SelfSigned, with the pure PKI in pki.go).
//
// It stands beside the data path and imports nothing of gatefold. It never
// serves a certificate it cannot renew.
package certs
