package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/webhook"
)

// managerOptions are the settings of one gatefold replica: `gatefold
// manager` takes them all as flags, `gatefold dev` sets most of them itself.
type managerOptions struct {
	metrics     metricsOptions
	probeAddr   string
	pprofAddr   string
	webhookHost string
	webhookPort int
	certDir     string
	certs       certOptions
	webhook     webhook.Options
	merger      merger.Options
	// listenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets gatefold folds.
	listenerSetControllers []string

	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
}

func (o *managerOptions) bindFlags(fs *flag.FlagSet) {
	ns := envOr("POD_NAMESPACE", "gatefold-system")
	o.metrics.bindFlags(fs)
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address Go's /debug/pprof profiles are served on, without authentication: bind it to loopback (127.0.0.1:6060) and only while profiling; \"0\" serves none")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the admission webhook server listens on")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "With --cert-mode=cert-manager, the folder holding the webhook server's tls.crt and tls.key, reloaded when they change")
	o.certs.bindFlags(fs, ns)
	fs.StringVar(&o.webhook.ClaimsNamespace, "claims-namespace", ns, "Namespace holding the listener claims (gatefold's own; tenants must have no rights there)")
	fs.DurationVar(&o.webhook.ClaimGrace, "claim-grace", 60*time.Second, "How long a replica must have judged a claim unwanted, at one version and by its own clock, before it releases or takes it over; longer than the slowest admission chain plus cache lag (at least 10s)")
	fs.DurationVar(&o.webhook.CollectPeriod, "claim-collect-period", 15*time.Second, "How often the leader releases claims no fragment wants and backfills claims stored fragments lack (from the claims informer: no request when nothing is to change)")
	fs.BoolVar(&o.merger.ManageReferenceGrants, "manage-reference-grants", true, "Keep a ReferenceGrant per fragment that lets its Gateway read the fragment's certificate Secrets; false leaves granting to you")
	fs.IntVar(&o.merger.Workers, "merger-workers", 4, "How many Gateways the merger folds at once")
	fs.IntVar(&o.merger.StatusWorkers, "merger-status-workers", 16, "How many fragment statuses the merger writes at once, apart from its folds")
	fs.DurationVar(&o.merger.Debounce, "merger-debounce", 200*time.Millisecond, "How long a Gateway's events must stay quiet before it is folded: a burst of fragment changes costs one Gateway write")
	fs.DurationVar(&o.merger.DebounceMax, "merger-debounce-max", 10*time.Second, "The longest a burst of events delays a Gateway's fold, however busy it stays")
	fs.DurationVar(&o.merger.Resync, "merger-resync-period", 10*time.Minute, "How often every Gateway is folded again without an event, which repairs statuses someone else changed; a current one writes nothing")
	fs.DurationVar(&o.merger.PoolGrace, "pool-sibling-grace", 5*time.Minute, "How long a Gateway gatefold created for a pool (annotation gatefold.dev/pool: \"true\" on its head) stays with no folded listener before gatefold deletes it")
	fs.Func("listenerset-controllers", "Comma-separated controllerNames of GatewayClasses whose ListenerSets gatefold folds into their Gateways, for implementations without ListenerSet support (e.g. traefik.io/gateway-controller); a class whose status lists the ListenerSet feature is left alone. Empty, ListenerSets are neither watched nor read", func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				o.listenerSetControllers = append(o.listenerSetControllers, c)
			}
		}
		return nil
	})
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect one leader among the replicas to run the merger; false runs it in every replica, for a single replica only")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "gatefold-leader", "Name of the Lease the replicas elect the leader with")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", ns, "Namespace of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a leader's Lease lasts without renewal; the bound on failover")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before it gives up leadership and exits")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "How often replicas try to take or renew the Lease")
}

func runManager(args []string) error {
	fs := newFlagSet("manager", "Run the webhook server and the leader-elected merger against a cluster")
	var o managerOptions
	o.bindFlags(fs)
	config.RegisterFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	return startManager(ctrl.SetupSignalHandler(), cfg, o)
}

// minClaimGrace is the fragment webhooks' timeout: a claim must outlast the
// request that wrote it.
const minClaimGrace = 10 * time.Second

// validate refuses flag values the manager cannot run with.
func (o *managerOptions) validate() error {
	switch grace, period := o.webhook.ClaimGrace, o.webhook.CollectPeriod; {
	case grace < minClaimGrace:
		return fmt.Errorf("--claim-grace is %v: it must be at least %v, the fragment webhooks' timeout", grace, minClaimGrace)
	case period <= 0:
		return fmt.Errorf("--claim-collect-period is %v: it must be positive", period)
	case period > grace/2:
		return fmt.Errorf("--claim-collect-period is %v: it must be at most half of --claim-grace (%v), or a slow round breaks the collector's view of a claim unwanted for the whole grace", period, grace)
	}
	switch m := o.merger; {
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
	}
	return nil
}

// startManager runs one replica until ctx ends or it loses the leader
// Lease, which ends it with an error so that the process exits.
func startManager(ctx context.Context, cfg *rest.Config, o managerOptions) error {
	cfg = rest.CopyConfig(cfg)
	// The audit log then tells which replica made a write.
	cfg.UserAgent = fmt.Sprintf("gatefold/%s (%s)", version, identity())
	source, err := o.certs.source(cfg, o.certDir)
	if err != nil {
		return err
	}
	// The leader's writes are fenced by when it last renewed its lease.
	var lease *manager.Lease
	if o.leaderElect {
		if lease, err = manager.NewLease(cfg, o.leaderElectionNamespace, o.leaderElectionID, identity()+"_"+string(uuid.NewUUID()), o.renewDeadline); err != nil {
			return err
		}
		o.merger.Fence, o.webhook.Fence = lease.Fence, lease.Fence
	}
	// The scheme, cache and client that tests run gatefold as installed with.
	installed := manager.Options()
	if len(o.listenerSetControllers) > 0 {
		installed = manager.WithListenerSets(installed)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 installed.Scheme,
		Cache:                  installed.Cache,
		Client:                 installed.Client,
		Metrics:                o.metrics.serverOptions(),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: o.webhookHost, Port: o.webhookPort,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = source.GetCertificate }}}),
		LeaderElection:                      o.leaderElect,
		LeaderElectionResourceLockInterface: leaseLock(lease),
		LeaderElectionID:                    o.leaderElectionID,
		LeaderElectionNamespace:             o.leaderElectionNamespace,
		LeaseDuration:                       &o.leaseDuration,
		RenewDeadline:                       &o.renewDeadline,
		RetryPeriod:                         &o.retryPeriod,
		LeaderElectionReleaseOnCancel:       true, // a replica that stops hands over at once
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.Add(source); err != nil {
		return fmt.Errorf("adding the certificate source: %w", err)
	}
	if err := manager.IndexFragmentParents(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing fragments: %w", err)
	}
	if len(o.listenerSetControllers) > 0 {
		if err := manager.IndexListenerSetParents(ctx, mgr.GetFieldIndexer()); err != nil {
			return fmt.Errorf("indexing ListenerSets: %w", err)
		}
		o.merger.ListenerSetControllers = sets.New(o.listenerSetControllers...)
		o.webhook.ListenerSetControllers = o.merger.ListenerSetControllers
	}
	claims, err := webhook.Setup(mgr, o.webhook)
	if err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	o.merger.Claims = claims.HoldersNow
	if err := merger.Setup(ctx, mgr, o.merger); err != nil {
		return fmt.Errorf("setting up the merger: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("certificate", source.Ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}

	ctrl.Log.WithName("setup").Info("Starting manager", "version", version, "identity", identity(), "leaderElection", o.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// leaseLock is the lease as the manager takes it: nil without leader
// election.
func leaseLock(l *manager.Lease) resourcelock.Interface {
	if l == nil {
		return nil
	}
	return l
}

// identity names this replica: the pod's name in a cluster, else the host's.
func identity() string {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	host, _ := os.Hostname()
	return host
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
