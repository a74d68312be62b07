package main

import (
	"crypto/tls"
	"flag"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions say where and how the Prometheus metrics are served.
type metricsOptions struct {
	bindAddress string
	secure      bool
	certDir     string
}

func (o *metricsOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.bindAddress, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.BoolVar(&o.secure, "metrics-secure", true, "Serve metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone")
	fs.StringVar(&o.certDir, "metrics-cert-dir", "", "Folder holding the metrics server's tls.crt and tls.key, reloaded when they change; empty, a self-signed certificate is generated at start")
}

// serverOptions are the manager's metrics server options, as kubebuilder v4
// scaffolds them.
func (o metricsOptions) serverOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.bindAddress}
	if !o.secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	opts.CertDir = o.certDir
	// HTTP/2 stays off: its stream cancellation and rapid reset attacks
	// (CVE-2023-44487, CVE-2023-39325) need no credentials.
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return opts
}
