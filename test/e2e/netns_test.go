package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/netns"
	"github.com/gatefold/gatefold/test/testenv"
)

// servicePort and backendPort are the port of every backend Service and
// the one its echo server listens on, which its EndpointSlice names.
const (
	servicePort = 80
	backendPort = 8080
)

// nsCluster is what startInNetNS runs in the test's network namespace.
type nsCluster struct {
	env        *devenv.Env
	kubeconfig string
	dp         *dataplane.DataPlane
	// audit is the control plane's audit log of every request but watches.
	audit string
	// backends is how many echo servers serve Services so far.
	backends int
}

// startInNetNS runs t's test in a network namespace and a PID namespace of
// its own (netns.Enter) and returns false in the process that started it:
// the caller returns then. In those namespaces it returns true with, running
// until t ends: a control plane (auditing every request but watches),
// gatefold as installed (startInstalledManager) folding the ListenerSets of
// Traefik's class, and Traefik on netns.GatewayAddress at ports 80 and 443,
// with experimentalChannel on the experimental channel's CRDs (TLS
// listeners, TLSRoutes), and its kubernetesCRD provider and Traefik's CRDs
// from its Go module, so that an ExtensionRef filter can name a Middleware.
// Backend Services get echo servers behind EndpointSlices (serve, serveTLS). It skips t, or fails it with
// $GATEFOLD_REQUIRE_TRAEFIK=1, without a Traefik binary or namespaces.
func startInNetNS(t *testing.T) (*nsCluster, bool) {
	t.Helper()
	traefik, err := dataplane.FindBinary("")
	if errors.Is(err, dataplane.ErrNoBinary) {
		netns.Skip(t, "Skipping the test with Traefik: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if !netns.Enter(t) {
		return nil, false
	}
	n := &nsCluster{audit: filepath.Join(t.TempDir(), "audit.log")}
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	standard, err := devenv.GatewayAPICRDDir(root)
	if err != nil {
		t.Fatal(err)
	}
	// Traefik serves TLS listeners and reads TLSRoutes (at v1alpha2) only
	// with experimentalChannel, which needs the experimental channel's CRDs.
	n.env, n.kubeconfig = startControlPlane(t, devenv.Options{
		CRDDir: emptyCRDDir(t), GatewayAPICRDDir: filepath.Join(filepath.Dir(standard), "experimental"),
		AuditLog: n.audit, AuditAll: true, AdvertiseAddress: netns.APIServerAddress,
	})
	crds := traefikCRDs(t)
	kubectl(t, n.env, n.kubeconfig, "apply", "--server-side", "-f", crds)
	kubectl(t, n.env, n.kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds)

	startInstalledManager(t, n.env, "--listenerset-controllers="+dataplane.ControllerName)

	n.dp, err = dataplane.Start(context.Background(), n.env.Client, dataplane.Options{
		Binary: traefik, Kubeconfig: n.kubeconfig, Dir: t.TempDir(),
		HTTPPort: 80, HTTPSPort: 443, Address: netns.GatewayAddress,
		CRDProvider: true, ExperimentalChannel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.StopDataPlaneAtCleanup(t, n.dp)
	t.Logf("Traefik %s serves class %s on %s:80 (HTTP) and :443 (HTTPS), in the test's network namespace", traefik, n.dp.GatewayClass, netns.GatewayAddress)
	return n, true
}

// traefikCRDs is the file of Traefik's CRDs (Middleware among them) in the
// Traefik module test/traefik requires, which `make traefik` builds from.
func traefikCRDs(t *testing.T) string {
	t.Helper()
	dir := moduleDir(t, filepath.Join("test", "traefik"), "github.com/traefik/traefik/v3")
	return filepath.Join(dir, "docs", "content", "reference", "dynamic-configuration", "kubernetes-crd-definition-v1.yml")
}

// serve runs an echo server for backend ns/name (dataplane.Echo: it answers
// "backend=<name> ...") on an address of its own in netns.PodNetwork, and
// creates Service ns/name (port servicePort) with an EndpointSlice naming
// that address, Ready, as the EndpointSlice controller the control plane
// lacks would.
func (n *nsCluster) serve(t *testing.T, ns, name string) {
	t.Helper()
	n.serveTLS(t, ns, name, nil)
}

// serveTLS is serve with an echo server that speaks HTTPS with cert, when
// cert is set: a backend behind TLS passthrough.
func (n *nsCluster) serveTLS(t *testing.T, ns, name string, cert *tls.Certificate) {
	t.Helper()
	n.backends++
	ip, err := netns.PodAddress(n.backends)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(backendPort)))
	if err != nil {
		t.Fatalf("Listening for backend %s/%s: %v", ns, name, err)
	}
	if cert != nil {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	}
	srv := &http.Server{Handler: dataplane.Echo(name), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := n.env.Client
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: servicePort, TargetPort: intstr.FromInt32(backendPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	create(t, c, svc)
	create(t, c, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-echo", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "gatefold-e2e",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](backendPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	})
}

// serviceRef is a backendRef to Service name (of the route's namespace) at
// servicePort.
func serviceRef(name string) gwv1.HTTPBackendRef {
	return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(servicePort)),
	}}}
}
