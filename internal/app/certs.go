package app

import (
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/certs"
)

// CertOptions choose and configure where the webhook's certificate comes from.
type CertOptions struct {
	Mode              certs.Mode
	Namespace         string
	CASecret          string
	Service           string
	Hosts             string
	MutatingWebhook   string
	ValidatingWebhook string
	CAValidity        time.Duration
	ServingValidity   time.Duration
	CheckPeriod       time.Duration
}

func (o *CertOptions) bindFlags(fs *flag.FlagSet, ns string) {
	o.Mode = certs.ModeCertManager
	fs.Func("cert-mode", "Where the webhook's certificate comes from: cert-manager (files in --webhook-cert-dir, written by cert-manager) or self-signed (gatefold's own CA, in Secret --ca-secret) (default cert-manager)", func(v string) error {
		switch m := certs.Mode(v); m {
		case certs.ModeCertManager, certs.ModeSelfSigned:
			o.Mode = m
			return nil
		}
		return fmt.Errorf("must be %s or %s", certs.ModeCertManager, certs.ModeSelfSigned)
	})
	o.Namespace = ns
	fs.StringVar(&o.CASecret, "ca-secret", "gatefold-webhook-ca", "With --cert-mode=self-signed, the Secret in gatefold's namespace that keeps the CA all replicas share")
	fs.StringVar(&o.Service, "webhook-service", "gatefold-webhook-service", "With --cert-mode=self-signed, the webhook Service whose DNS names the serving certificate carries")
	fs.StringVar(&o.Hosts, "webhook-cert-hosts", "", "With --cert-mode=self-signed, more DNS names or IP addresses for the serving certificate, comma-separated (for a webhook reached by URL)")
	fs.StringVar(&o.MutatingWebhook, "mutating-webhook-configuration", "gatefold-mutating-webhook-configuration", "With --cert-mode=self-signed, the MutatingWebhookConfiguration that gets the CA bundle")
	fs.StringVar(&o.ValidatingWebhook, "validating-webhook-configuration", "gatefold-validating-webhook-configuration", "With --cert-mode=self-signed, the ValidatingWebhookConfiguration that gets the CA bundle")
	fs.DurationVar(&o.CAValidity, "ca-validity", 365*24*time.Hour, "With --cert-mode=self-signed, the CA's lifetime; it is rotated two thirds into it")
	fs.DurationVar(&o.ServingValidity, "serving-cert-validity", 30*24*time.Hour, "With --cert-mode=self-signed, the serving certificate's lifetime; it is renewed two thirds into it")
	fs.DurationVar(&o.CheckPeriod, "cert-check-period", time.Minute, "With --cert-mode=self-signed, how often the CA Secret and the webhook configurations' CA bundles are checked")
}

// source builds the certificate source the flags ask for.
func (o *CertOptions) source(cfg *rest.Config, certDir string) (certs.Source, error) {
	switch o.Mode {
	case certs.ModeCertManager:
		return &certs.Files{Dir: certDir}, nil
	case certs.ModeSelfSigned:
	default:
		return nil, fmt.Errorf("unknown certificate mode %q", o.Mode)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("creating the certificate client: %w", err)
	}
	s := &certs.SelfSigned{
		Client:            c,
		Namespace:         o.Namespace,
		SecretName:        o.CASecret,
		DNSNames:          []string{o.Service + "." + o.Namespace + ".svc", o.Service + "." + o.Namespace + ".svc.cluster.local"},
		MutatingWebhook:   o.MutatingWebhook,
		ValidatingWebhook: o.ValidatingWebhook,
		CAValidity:        o.CAValidity,
		ServingValidity:   o.ServingValidity,
		CheckPeriod:       o.CheckPeriod,
	}
	for _, h := range strings.Split(o.Hosts, ",") {
		switch h = strings.TrimSpace(h); {
		case h == "":
		case net.ParseIP(h) != nil:
			s.IPs = append(s.IPs, net.ParseIP(h))
		default:
			s.DNSNames = append(s.DNSNames, h)
		}
	}
	return s, nil
}
