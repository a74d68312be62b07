package webhook

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// Options configure the webhooks.
type Options struct {
	// ClaimsNamespace holds the claims; only gatefold may write there.
	ClaimsNamespace string
	// ClaimGrace is how long a replica must have seen a claim unchanged
	// before it releases, or takes over, a claim no fragment wants; longer
	// than any admission request can be in flight.
	ClaimGrace time.Duration
	// CollectPeriod is how often the leader releases claims no fragment
	// wants and backfills claims stored fragments lack.
	CollectPeriod time.Duration
}

// +kubebuilder:webhook:path=/mutate-gatefold-dev-v1alpha1-listenerfragment,mutating=true,failurePolicy=fail,sideEffects=None,groups=gatefold.dev,resources=listenerfragments,verbs=create;update,versions=v1alpha1,name=mlistenerfragment.gatefold.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-gatefold-dev-v1alpha1-listenerfragment,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=gatefold.dev,resources=listenerfragments,verbs=create;update,versions=v1alpha1,name=vlistenerfragment.gatefold.dev,admissionReviewVersions=v1,timeoutSeconds=10

// The Gateway webhook only warns, so it must never stand between a Gateway's
// owner and the Gateway: it is ignored when it fails or takes more than 3s,
// and gatefold's own ServiceAccount (as config/default names it), which
// applies the folded listeners, skips it.
// +kubebuilder:webhook:path=/validate-gateway-networking-k8s-io-v1-gateway,mutating=false,failurePolicy=ignore,sideEffects=None,groups=gateway.networking.k8s.io,resources=gateways,verbs=create;update,versions=v1,name=vgateway.gatefold.dev,admissionReviewVersions=v1,timeoutSeconds=3,patch=`{"matchConditions":[{"name":"not-gatefold","expression":"request.userInfo.username != 'system:serviceaccount:gatefold-system:gatefold-controller-manager'"}]}`

// +kubebuilder:rbac:groups=gatefold.dev,resources=listenerfragments,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=gatefold-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=gatefold-system

// Setup registers the webhooks with the manager's webhook server, and the
// claim collector, which releases and backfills claims on the leader only.
// rules.IndexFragmentParents must have been registered. The webhooks read the
// informer cache itself, not the client: they must not wait for the merger's
// writes to reach the cache, which they do not need to see.
func Setup(mgr ctrl.Manager, opts Options) (*ClaimStore, error) {
	// Claims are written uncached: the manager's cached client would start a
	// cluster-wide Lease informer, which gatefold's RBAC rightly forbids (it
	// may use Leases in the claims namespace only).
	claimClient, claimErr := client.New(mgr.GetConfig(), client.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
	})
	if claimErr != nil {
		return nil, fmt.Errorf("creating the claims client: %w", claimErr)
	}
	claims := &ClaimStore{
		Client:    claimClient,
		Reader:    mgr.GetAPIReader(),
		Cache:     mgr.GetCache(),
		Namespace: opts.ClaimsNamespace,
		Grace:     opts.ClaimGrace,
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ListenerFragment{}).
		WithDefaulter(fragmentDefaulter{}).
		WithValidator(&fragmentValidator{cache: mgr.GetCache(), claims: claims}).
		Complete(); err != nil {
		return nil, err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &gwv1.Gateway{}).
		WithValidator(&gatewayValidator{cache: mgr.GetCache()}).
		Complete(); err != nil {
		return nil, err
	}
	err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		claims.Run(ctx, opts.CollectPeriod)
		return nil
	}))
	return claims, err
}
