package webhook

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/internal/manager"
	"github.com/gatefold/gatefold/rules"
)

// BenchmarkValidateCreate is the validating handler's cost for one new
// fragment with 100 and with 10,000 fragments in its informer cache (50 to a
// Gateway), and with 100, 10,000 and 50,000 on one pool's head
// (GATEFOLD_BENCH_POOL_MAX lowers the largest), on the real control plane:
// cached reads through the real cache and its indexes, claims read from the
// real claim informer, as in production. The dry run reads the claims as a
// create does but leaves none behind; the create writes its claim and waits
// until the informer has seen it, and each iteration's fragment has a
// hostname of its own, on the next Gateway in turn. cpu-ns/op is this
// process's CPU time per request, the informers' included.
func BenchmarkValidateCreate(b *testing.B) {
	logf.SetLogger(logr.Discard())
	env, err := devenv.Start(devenv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: claimsNS}}); err != nil {
		b.Fatal(err)
	}
	poolMax := 50000
	if s := os.Getenv("GATEFOLD_BENCH_POOL_MAX"); s != "" {
		if poolMax, err = strconv.Atoi(s); err != nil {
			b.Fatalf("GATEFOLD_BENCH_POOL_MAX=%q: %v", s, err)
		}
	}
	cases := []struct {
		n, perGateway int
		name          string
	}{{100, 50, "fragments=100"}, {10000, 50, "fragments=10000"}}
	for _, n := range []int{100, 10000, 50000} {
		if n = min(n, poolMax); n > cases[len(cases)-1].perGateway {
			cases = append(cases, struct {
				n, perGateway int
				name          string
			}{n, n, fmt.Sprintf("pool=%d", n)})
		}
	}
	created := 0
	for _, tc := range cases {
		n := tc.n
		// The sub-benchmark's body runs several times; its fixture once.
		v, lf := validatorWithFragments(ctx, b, cfg, c, n, tc.perGateway)
		dryRun := admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{DryRun: ptr.To(true)}})
		b.Run(tc.name+"/dry-run", func(b *testing.B) {
			defer reportCPU(b)()
			for range b.N {
				if _, err := v.ValidateCreate(dryRun, lf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/create", func(b *testing.B) {
			defer reportCPU(b)()
			for range b.N {
				created++
				lf := fragment(lf.Namespace, fmt.Sprintf("new-%d", created), entry("web", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("new-%d.example.com", created)))
				lf.Spec.ParentRef = gwv1.ParentGatewayReference{Name: gwv1.ObjectName(fmt.Sprintf("gw-%d", created%(n/tc.perGateway)))}
				if _, err := v.ValidateCreate(ctx, lf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reportCPU starts counting this process's CPU time; the function it
// returns reports it per op as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	b.ResetTimer()
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// validatorWithFragments stores n fragments, perGateway to a Gateway, each
// with its claim, and returns a validator over a synced informer cache of them, and a new
// fragment to validate. A Gateway for more than 63 heads a pool.
func validatorWithFragments(ctx context.Context, b *testing.B, cfg *rest.Config, c client.Client, n, perGateway int) (*fragmentValidator, *v1alpha1.ListenerFragment) {
	b.Helper()
	ns := fmt.Sprintf("bench-%d-%d", n, perGateway)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	var objs []client.Object
	var annotations map[string]string
	if perGateway > rules.MaxListeners-1 {
		annotations = map[string]string{v1alpha1.PoolAnnotation: "true"}
	}
	for g := range n / perGateway {
		objs = append(objs, &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("gw-%d", g), Annotations: annotations},
			Spec: gwv1.GatewaySpec{
				GatewayClassName: "example",
				Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
				AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
			},
		})
	}
	for i := range n {
		lf := fragment(ns, fmt.Sprintf("f-%d", i), entry("web", 443, gwv1.HTTPSProtocolType, fmt.Sprintf("f-%d.example.com", i)))
		lf.Spec.ParentRef = gwv1.ParentGatewayReference{Name: gwv1.ObjectName(fmt.Sprintf("gw-%d", i%(n/perGateway)))}
		objs = append(objs, lf)
	}
	createAll(b, c, objs)
	// Each stored fragment holds its claim, as admission left it.
	store := &claims.Store{Client: c, Reader: c, Namespace: claimsNS, Grace: time.Minute}
	var leases []client.Object
	for _, obj := range objs {
		if lf, ok := obj.(*v1alpha1.ListenerFragment); ok {
			l := lf.Spec.Listeners[0]
			e := rules.EntryOf(l.Port, l.Protocol, l.Hostname)
			c := claims.Claim{Gateway: rules.ParentOf(lf), Tuple: e.Tuple()}
			leases = append(leases, store.Lease(c, claims.Holder{Namespace: lf.Namespace, Name: lf.Name, UID: lf.UID, Listener: string(l.Name), Entry: e}))
		}
	}
	createAll(b, c, leases)

	informers, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	if err := manager.IndexFragments(ctx, informers); err != nil {
		b.Fatal(err)
	}
	namespaces := &metav1.PartialObjectMetadata{}
	namespaces.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	for _, obj := range []client.Object{&v1alpha1.ListenerFragment{}, &gwv1.Gateway{}, namespaces, &gwv1.ReferenceGrant{}} {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		b.Fatal("The cache did not sync")
	}
	lf := fragment(ns, "new", entry("web", 443, gwv1.HTTPSProtocolType, "new.example.com"))
	lf.Spec.ParentRef = gwv1.ParentGatewayReference{Name: "gw-0"}
	informer := startClaimInformer(ctx, b, cfg)
	store.Claims, store.Cache = informer, informers
	return &fragmentValidator{cache: informers, claims: store}, lf
}

// startClaimInformer runs a claim informer on the real control plane until
// ctx ends, and waits until it has synced.
func startClaimInformer(ctx context.Context, b *testing.B, cfg *rest.Config) *claims.Informer {
	b.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	lw, err := claims.ListWatch(cfg, hc, claimsNS)
	if err != nil {
		b.Fatal(err)
	}
	informer, err := claims.NewInformer(lw)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = informer.Start(ctx) }()
	if err := informer.CaughtUp(ctx, ""); err != nil {
		b.Fatal(err)
	}
	return informer
}

func createAll(b *testing.B, c client.Client, objs []client.Object) {
	b.Helper()
	work := make(chan client.Object)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range work {
				if err := c.Create(context.Background(), obj); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, obj := range objs {
		work <- obj
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
