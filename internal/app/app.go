package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gatefold/gatefold/certs"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/merger"
	"github.com/gatefold/gatefold/routing"
	"github.com/gatefold/gatefold/webhook"
)

// Run runs one replica until ctx ends or it loses the leader Lease, which
// ends it with an error so that the process exits.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	mgr, err := New(ctx, cfg, o)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting manager", "version", o.version(), "identity", o.identity(), "leaderElection", o.LeaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// New builds one replica as o says, without starting it. ctx bounds the
// setup of its indexes only.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	// The audit log then tells which replica made a write.
	cfg.UserAgent = fmt.Sprintf("gatefold/%s (%s)", o.version(), o.identity())
	var source certs.Source
	if !o.SkipWebhooks {
		var err error
		if source, err = o.Certs.source(cfg, o.CertDir); err != nil {
			return nil, err
		}
	}
	// The leader's writes are fenced by when it last renewed its lease.
	var lease *manager.Lease
	if o.LeaderElect {
		var err error
		if lease, err = manager.NewLease(cfg, o.LeaderElectionNamespace, o.LeaderElectionID, o.identity()+"_"+string(uuid.NewUUID()), o.RenewDeadline); err != nil {
			return nil, err
		}
		o.Merger.Fence, o.Webhook.Fence = lease.Fence, lease.Fence
	}
	mgr, err := ctrl.NewManager(cfg, o.managerOptions(source, lease))
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := manager.IndexFragments(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("indexing fragments: %w", err)
	}
	if len(o.ListenerSetControllers) > 0 {
		if err := manager.IndexListenerSetParents(ctx, mgr.GetFieldIndexer()); err != nil {
			return nil, fmt.Errorf("indexing ListenerSets: %w", err)
		}
		o.Merger.ListenerSetControllers = sets.New(o.ListenerSetControllers...)
		o.Webhook.ListenerSetControllers = o.Merger.ListenerSetControllers
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if o.SkipWebhooks {
		// Ready once serving, so that /readyz answers as in a cluster.
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, fmt.Errorf("adding readiness check: %w", err)
		}
	} else if err := setupWebhooks(mgr, source, &o); err != nil {
		return nil, err
	}
	if !o.SkipMerger {
		if err := manager.IndexPoolHeads(ctx, mgr.GetFieldIndexer()); err != nil {
			return nil, fmt.Errorf("indexing Gateways by pool head: %w", err)
		}
		if err := merger.Setup(ctx, mgr, o.Merger); err != nil {
			return nil, fmt.Errorf("setting up the merger: %w", err)
		}
		// Routes that name a source are served beside the fold, as fenced.
		if err := routing.Setup(ctx, mgr, routing.Options{Workers: o.Merger.Workers, Resync: o.Merger.Resync,
			Fence: o.Merger.Fence, ListenerSetControllers: o.Merger.ListenerSetControllers}); err != nil {
			return nil, fmt.Errorf("setting up the routing controllers: %w", err)
		}
	}
	return mgr, nil
}

// managerOptions are the controller-runtime options of the replica: those
// of every gatefold manager, with o's addresses and leader election.
func (o *Options) managerOptions(source certs.Source, lease *manager.Lease) ctrl.Options {
	opts := manager.Options()
	if len(o.ListenerSetControllers) > 0 {
		opts = manager.WithListenerSets(opts)
	}
	opts.Metrics = o.Metrics.serverOptions()
	opts.HealthProbeBindAddress = o.ProbeAddr
	opts.PprofBindAddress = o.PprofAddr
	if source != nil {
		opts.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Host: o.WebhookHost, Port: o.WebhookPort,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = source.GetCertificate }, http1Only}})
	}
	opts.LeaderElection = o.LeaderElect
	opts.LeaderElectionResourceLockInterface = leaseLock(lease)
	opts.LeaderElectionID = o.LeaderElectionID
	opts.LeaderElectionNamespace = o.LeaderElectionNamespace
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &o.LeaseDuration, &o.RenewDeadline, &o.RetryPeriod
	opts.LeaderElectionReleaseOnCancel = true // a replica that stops hands over at once
	return opts
}

// setupWebhooks serves the webhooks with the certificate of source, ready
// once both serve; the merger reads the claims they take unless o.Merger
// has its own Claims.
func setupWebhooks(mgr ctrl.Manager, source certs.Source, o *Options) error {
	if err := mgr.Add(source); err != nil {
		return fmt.Errorf("adding the certificate source: %w", err)
	}
	claims, err := webhook.Setup(mgr, o.Webhook)
	if err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	if o.Merger.Claims == nil {
		o.Merger.Claims = claims.HoldersNow
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("certificate", source.Ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
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

// version is o.Version, "dev" when unset.
func (o *Options) version() string {
	if o.Version == "" {
		return "dev"
	}
	return o.Version
}

// identity names this replica: o.Identity, else the pod's name in a
// cluster, else the host's.
func (o *Options) identity() string {
	if o.Identity != "" {
		return o.Identity
	}
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	host, _ := os.Hostname()
	return host
}
