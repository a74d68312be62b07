package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	gfmanager "github.com/gatefold/gatefold/internal/manager"
)

// AdmissionLabel on a namespace, set to AdmissionDisabled, keeps gatefold's
// webhooks away from the namespace's fragments (config/webhook selects on
// it), for break-glass repairs. Its fragments hold no new claims until the
// label goes; then the collector backfills them.
const (
	AdmissionLabel    = "gatefold.dev/admission"
	AdmissionDisabled = "disabled"
)

// optedOut says whether a namespace, by its labels, keeps gatefold's
// webhooks away (AdmissionLabel).
func optedOut(namespaceLabels map[string]string) bool {
	return namespaceLabels[AdmissionLabel] == AdmissionDisabled
}

// Options configure the webhooks.
type Options struct {
	// ClaimsNamespace holds the claims; only gatefold may write there.
	ClaimsNamespace string
	// ClaimGrace is how long a replica must have judged a claim unwanted, at
	// one version, before it releases or takes it over; longer than the
	// slowest admission chain plus cache lag.
	ClaimGrace time.Duration
	// CollectPeriod is how often the leader releases claims no fragment
	// wants and backfills claims stored fragments lack; shorter than
	// ClaimGrace, or a claim is never judged unwanted without a break.
	CollectPeriod time.Duration
	// Fence, when set, fails while this replica may no longer lead: the
	// collector then skips its round.
	Fence func() error
	// ListenerSetControllers are the controllerNames of the GatewayClasses
	// whose ListenerSets gatefold folds, which a fragment is also checked
	// against; manager.IndexListenerSetParents must be registered for them.
	ListenerSetControllers sets.Set[string]
}

// +kubebuilder:webhook:path=/validate-gatefold-dev-v1alpha1-listenerfragment,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=gatefold.dev,resources=listenerfragments,verbs=create;update,versions=v1alpha1,name=vlistenerfragment.gatefold.dev,admissionReviewVersions=v1,timeoutSeconds=10

// The defaulting webhook is called only for a fragment DefaultFragment would
// change or deny: its matchCondition is DefaultFragment's test of whether
// there is anything to do (matchcondition_test.go proves they agree), so a
// fragment written in full, as route controllers write it, costs no round
// trip. One with more listeners or longer hostnames than the schema admits
// is passed on unread, so that the schema's message, not CEL's cost limit,
// denies it. The webhook is registered for creates and updates, whose object
// is never null.
// +kubebuilder:webhook:path=/mutate-gatefold-dev-v1alpha1-listenerfragment,mutating=true,failurePolicy=fail,sideEffects=None,groups=gatefold.dev,resources=listenerfragments,verbs=create;update,versions=v1alpha1,name=mlistenerfragment.gatefold.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"needs-defaulting","expression":"object.?spec.?parentRef.?group.orValue('') == '' || object.?spec.?parentRef.?kind.orValue('') == '' || object.?spec.?parentRef.?name.orValue('') == '' || object.?spec.?parentRef.?namespace.orValue('') == '' || size(object.?spec.?listeners.orValue([])) > 64 || object.?spec.?listeners.orValue([]).exists(l, (has(l.hostname) && (size(l.hostname) > 253 || l.hostname.matches('^$|[A-Z]|[.]$|[[:^ascii:]]'))) || (l.?protocol.orValue('') in ['HTTPS', 'TLS'] && has(l.tls) && l.tls.?mode.orValue('') == '') || !l.?allowedRoutes.?namespaces.?from.hasValue())"}]}`

// The Gateway webhook only warns, so it must never stand between a Gateway's
// owner and the Gateway: it is ignored on failure or after 3s, and gatefold's
// own ServiceAccount, which applies the folded listeners, skips it.
// +kubebuilder:webhook:path=/validate-gateway-networking-k8s-io-v1-gateway,mutating=false,failurePolicy=ignore,sideEffects=None,groups=gateway.networking.k8s.io,resources=gateways,verbs=create;update,versions=v1,name=vgateway.gatefold.dev,admissionReviewVersions=v1,timeoutSeconds=3,patch=`{"matchConditions":[{"name":"not-gatefold","expression":"request.userInfo.username != 'system:serviceaccount:gatefold-system:gatefold-controller-manager'"}]}`

// +kubebuilder:rbac:groups=gatefold.dev,resources=listenerfragments,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=gatefold-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=gatefold-system

// Setup registers the webhooks with the manager's webhook server and the claim
// collector (leader only); manager.IndexFragments must be registered. It
// creates the informers the webhooks read, so that the cache starts them on
// every replica, runs the claim informer, and adds the readiness check
// "informers", which fails until all have synced. The webhooks read the cache
// itself: they must never wait for the merger's writes to reach it.
func Setup(mgr ctrl.Manager, opts Options) (*claims.Store, error) {
	informers, err := webhookInformers(mgr.GetCache(), opts.ListenerSetControllers.Len() > 0)
	if err != nil {
		return nil, err
	}
	store, err := newClaimStore(mgr, opts)
	if err != nil {
		return nil, err
	}
	informers["claims"] = store.Claims
	if err := watchDeletions(mgr.GetCache(), store); err != nil {
		return nil, err
	}
	if err := mgr.Add(store.Claims); err != nil {
		return nil, fmt.Errorf("adding the claims informer: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", informersSynced(informers)); err != nil {
		return nil, fmt.Errorf("adding the informers' readiness check: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ListenerFragment{}).
		WithDefaulter(fragmentDefaulter{}).
		WithValidator(&fragmentValidator{cache: mgr.GetCache(), claims: store, listenerSetControllers: opts.ListenerSetControllers}).
		Complete(); err != nil {
		return nil, err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &gwv1.Gateway{}).
		WithValidator(&gatewayValidator{cache: mgr.GetCache(), listenerSetControllers: opts.ListenerSetControllers}).
		Complete(); err != nil {
		return nil, err
	}
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		store.Run(ctx, opts.CollectPeriod, opts.Fence)
		return nil
	}))
	return store, err
}

// newClaimStore returns the claim store of opts, with its client and claim
// informer. Claims are not in the manager's cache, which would watch Leases
// cluster-wide, nor rate-limited on this side: each admission request waits on
// its claim writes, and the API server's priority and fairness limits them.
func newClaimStore(mgr ctrl.Manager, opts Options) (*claims.Store, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	newClient := func(cfg *rest.Config) (client.Client, error) {
		c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
		if err != nil {
			return nil, fmt.Errorf("creating the claims client: %w", err)
		}
		return c, nil
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	collectorCfg := rest.CopyConfig(cfg)
	collectorCfg.UserAgent += " claim-collector"
	collector, err := newClient(collectorCfg)
	if err != nil {
		return nil, err
	}
	lw, err := claims.ListWatch(cfg, mgr.GetHTTPClient(), opts.ClaimsNamespace)
	if err != nil {
		return nil, err
	}
	informer, err := claims.NewInformer(lw)
	if err != nil {
		return nil, err
	}
	return &claims.Store{
		Client:    c,
		Collector: gfmanager.FencedClient(collector, opts.Fence),
		Claims:    informer,
		Reader:    c,
		Cache:     mgr.GetCache(),
		Namespace: opts.ClaimsNamespace,
		Grace:     opts.ClaimGrace,
		Period:    opts.CollectPeriod,
		OptedOut:  optedOut,
	}, nil
}

// webhookInformers gets from the cache, creating them, the informers of what
// the webhooks read: Gateways, namespaces as metadata, ReferenceGrants and
// ListenerFragments, and with listenerSets ListenerSets and GatewayClasses.
func webhookInformers(c cache.Informers, listenerSets bool) (map[string]syncer, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	informers := map[string]syncer{}
	objs := map[string]client.Object{
		"Gateways":          &gwv1.Gateway{},
		"namespaces":        ns,
		"ReferenceGrants":   &gwv1.ReferenceGrant{},
		"ListenerFragments": &v1alpha1.ListenerFragment{},
	}
	if listenerSets {
		objs["ListenerSets"], objs["GatewayClasses"] = &gwv1.ListenerSet{}, &gwv1.GatewayClass{}
	}
	for name, obj := range objs {
		i, err := c.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("creating the informer of %s: %w", name, err)
		}
		informers[name] = i
	}
	return informers, nil
}

// watchDeletions tells the claim store of every fragment the cache sees
// deleted, so that its claims protect nothing from then on.
func watchDeletions(c cache.Informers, store *claims.Store) error {
	i, err := c.GetInformer(context.Background(), &v1alpha1.ListenerFragment{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("creating the informer of ListenerFragments: %w", err)
	}
	_, err = i.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if lf, ok := obj.(*v1alpha1.ListenerFragment); ok {
			store.FragmentDeleted(lf.UID)
		}
	}})
	if err != nil {
		return fmt.Errorf("watching ListenerFragment deletions: %w", err)
	}
	return nil
}

// syncer is an informer, as far as readiness asks.
type syncer interface{ HasSynced() bool }

// informersSynced is a readiness check that fails until every informer has
// synced, naming those that have not.
func informersSynced(informers map[string]syncer) healthz.Checker {
	return func(*http.Request) error {
		var waiting []string
		for name, i := range informers {
			if !i.HasSynced() {
				waiting = append(waiting, name)
			}
		}
		if len(waiting) > 0 {
			slices.Sort(waiting)
			return fmt.Errorf("the informers of %s have not synced", strings.Join(waiting, ", "))
		}
		return nil
	}
}
