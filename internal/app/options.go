package app

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/webhook"
)

// Options are the settings of one gatefold replica: `gatefold manager`
// takes them as flags (BindFlags), `gatefold dev` and tests set some
// themselves. The fields from WebhookHost on have no flag.
type Options struct {
	Metrics     MetricsOptions
	ProbeAddr   string
	PprofAddr   string
	WebhookPort int
	CertDir     string
	Certs       CertOptions
	Webhook     webhook.Options
	Merger      merger.Options
	// ListenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets gatefold folds.
	ListenerSetControllers []string

	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	// WebhookHost is the address the webhook server listens on; "" is
	// every interface.
	WebhookHost string
	// Version names the build in the user agent and the log; "" is "dev".
	Version string
	// Identity names the replica in the user agent and the leader Lease;
	// "" is $POD_NAME, else the host's name.
	Identity string
	// SkipWebhooks and SkipMerger leave out a part, for tests that run the
	// other alone. Without webhooks, the merger reads Merger.Claims only.
	SkipWebhooks bool
	SkipMerger   bool
}

// BindFlags binds the `gatefold manager` flags to o and sets o to their
// defaults; gatefold's namespace defaults to $POD_NAMESPACE.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	ns := envOr("POD_NAMESPACE", "gatefold-system")
	o.Metrics.bindFlags(fs)
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "Address Go's /debug/pprof profiles are served on, without authentication: bind it to loopback (127.0.0.1:6060) and only while profiling; \"0\" serves none")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port the admission webhook server listens on")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "With --cert-mode=cert-manager, the folder holding the webhook server's tls.crt and tls.key, reloaded when they change")
	o.Certs.bindFlags(fs, ns)
	fs.StringVar(&o.Webhook.ClaimsNamespace, "claims-namespace", ns, "Namespace holding the listener claims (gatefold's own; tenants must have no rights there)")
	fs.DurationVar(&o.Webhook.ClaimGrace, "claim-grace", 60*time.Second, "How long a replica must have judged a claim unwanted, at one version and by its own clock, before it releases or takes it over; longer than the slowest admission chain plus cache lag (at least 10s)")
	fs.DurationVar(&o.Webhook.CollectPeriod, "claim-collect-period", 15*time.Second, "How often the leader releases claims no fragment wants and backfills claims stored fragments lack (from the claims informer: no request when nothing is to change)")
	fs.BoolVar(&o.Merger.ManageReferenceGrants, "manage-reference-grants", true, "Keep a ReferenceGrant per fragment that lets its Gateway read the fragment's certificate Secrets; false leaves granting to you")
	fs.IntVar(&o.Merger.Workers, "merger-workers", 4, "How many Gateways the merger folds at once, and how many routes of each kind the routing controllers reconcile at once")
	fs.IntVar(&o.Merger.StatusWorkers, "merger-status-workers", 16, "How many fragment statuses the merger writes at once, apart from its folds")
	fs.DurationVar(&o.Merger.Debounce, "merger-debounce", 200*time.Millisecond, "How long a Gateway's events must stay quiet before it is folded: a burst of fragment changes costs one Gateway write")
	fs.DurationVar(&o.Merger.DebounceMax, "merger-debounce-max", 10*time.Second, "The longest a burst of events delays a Gateway's fold, however busy it stays, and a status write waits behind folds")
	fs.DurationVar(&o.Merger.Resync, "merger-resync-period", 10*time.Minute, "How often every Gateway is folded, and every route reconciled, again without an event, which repairs statuses someone else changed; a current one writes nothing")
	fs.DurationVar(&o.Merger.PoolGrace, "pool-sibling-grace", 5*time.Minute, "How long a Gateway gatefold created for a pool (annotation gatefold.dev/pool: \"true\" on its head) stays with no folded listener before gatefold deletes it")
	fs.Func("listenerset-controllers", "Comma-separated controllerNames of GatewayClasses whose ListenerSets gatefold folds into their Gateways, for implementations without ListenerSet support (e.g. traefik.io/gateway-controller); a class whose status lists the ListenerSet feature is left alone. Empty, ListenerSets are neither watched nor read", func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				o.ListenerSetControllers = append(o.ListenerSetControllers, c)
			}
		}
		return nil
	})
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "Elect one leader among the replicas to run the merger; false runs it in every replica, for a single replica only")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "gatefold-leader", "Name of the Lease the replicas elect the leader with")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", ns, "Namespace of the leader election Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a leader's Lease lasts without renewal; the bound on failover")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before it gives up leadership and exits")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often replicas try to take or renew the Lease")
}

// minClaimGrace is the fragment webhooks' timeout: a claim must outlast the
// request that wrote it.
const minClaimGrace = 10 * time.Second

// Validate refuses flag values the manager cannot run with.
func (o *Options) Validate() error {
	switch grace, period := o.Webhook.ClaimGrace, o.Webhook.CollectPeriod; {
	case grace < minClaimGrace:
		return fmt.Errorf("--claim-grace is %v: it must be at least %v, the fragment webhooks' timeout", grace, minClaimGrace)
	case period <= 0:
		return fmt.Errorf("--claim-collect-period is %v: it must be positive", period)
	case period > grace/2:
		return fmt.Errorf("--claim-collect-period is %v: it must be at most half of --claim-grace (%v): lower it or raise the grace", period, grace)
	}
	switch m := o.Merger; {
	case m.Workers < 1:
		return fmt.Errorf("--merger-workers is %d: it must be at least 1", m.Workers)
	case m.StatusWorkers < 1:
		return fmt.Errorf("--merger-status-workers is %d: it must be at least 1", m.StatusWorkers)
	case m.Debounce < 0:
		return fmt.Errorf("--merger-debounce is %v: it must not be negative", m.Debounce)
	case m.DebounceMax < m.Debounce:
		return fmt.Errorf("--merger-debounce-max is %v: it must be at least --merger-debounce (%v)", m.DebounceMax, m.Debounce)
	case m.PoolGrace < 0:
		return fmt.Errorf("--pool-sibling-grace is %v: it must not be negative (0 deletes an empty sibling at once)", m.PoolGrace)
	case m.Resync < 0:
		return fmt.Errorf("--merger-resync-period is %v: it must not be negative (0 turns the resync off)", m.Resync)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
