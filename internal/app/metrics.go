package app

import (
	"crypto/tls"
	"flag"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsOptions say where and how the Prometheus metrics are served.
type MetricsOptions struct {
	BindAddress string
	Secure      bool
	CertDir     string
}

func (o *MetricsOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BindAddress, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.BoolVar(&o.Secure, "metrics-secure", true, "Serve metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone")
	fs.StringVar(&o.CertDir, "metrics-cert-dir", "", "Folder holding the metrics server's tls.crt and tls.key, reloaded when they change; empty, a self-signed certificate is generated at start")
}

// serverOptions are the manager's metrics server options, as kubebuilder v4
// scaffolds them.
func (o MetricsOptions) serverOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.BindAddress}
	if !o.Secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	opts.CertDir = o.CertDir
	opts.TLSOpts = []func(*tls.Config){http1Only}
	return opts
}

// http1Only keeps HTTP/2 off a server: its stream cancellation and rapid
// reset attacks (CVE-2023-44487, CVE-2023-39325) need no credentials. On
// the webhook server it also makes the API server open a connection per
// concurrent call, which a Service spreads over the replicas, where one
// HTTP/2 connection would pin admission to one replica.
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
