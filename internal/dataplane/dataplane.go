package dataplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/internal/process"
)

// BinaryEnv names the traefik executable; the Makefile sets it to
// bin/traefik/traefik.
const BinaryEnv = "GATEFOLD_TRAEFIK"

// ControllerName is the controllerName Traefik's Gateway provider answers
// to (its default; the static configuration has no option for it).
const ControllerName = "traefik.io/gateway-controller"

// DefaultGatewayClass is the GatewayClass Start creates when Options names
// none.
const DefaultGatewayClass = "traefik"

// Default entryPoint ports. Traefik's Gateway provider maps a listener to the
// entryPoint whose address ends in ":<port>", so a listener must use one of
// these ports to be served.
const (
	DefaultHTTPPort  = 8000
	DefaultHTTPSPort = 8443
)

// ErrNoBinary says that no traefik executable was found.
var ErrNoBinary = errors.New("no Traefik binary")

// Options says what to start. Kubeconfig and Dir are required.
type Options struct {
	// Binary is the traefik executable; empty, FindBinary finds it.
	Binary string
	// Kubeconfig is the path of the kubeconfig Traefik reads the control
	// plane with.
	Kubeconfig string
	// Dir receives Traefik's configuration files and its logs.
	Dir string
	// HTTPPort and HTTPSPort are the ports of the entryPoints web and
	// websecure; 0 means DefaultHTTPPort and DefaultHTTPSPort.
	HTTPPort, HTTPSPort int
	// Address is the IP address the entryPoints listen on and the one
	// Traefik writes into its Gateways' status.addresses; empty means
	// 127.0.0.1. Any other is for a network namespace of the caller's own.
	Address string
	// ExperimentalChannel turns on Traefik's experimentalChannel, with
	// which it serves TLS and TCP listeners and reads TLSRoutes and TCPRoutes
	// at v1alpha2: the control plane must then serve Gateway API's
	// experimental-channel CRDs.
	ExperimentalChannel bool
	// Backends names the echo backends to start. Each answers every request
	// with "backend=<name> host=<Host header> path=<path>" and is Traefik
	// service <name>@file: see BackendRef.
	Backends []string
	// GatewayClass is the GatewayClass of controller ControllerName to
	// create (or keep, if it exists); empty means DefaultGatewayClass.
	GatewayClass string
	// CRDProvider turns on Traefik's kubernetesCRD provider too, through
	// which an HTTPRoute's ExtensionRef filter names a Traefik Middleware
	// (group traefik.io) of the route's namespace: the control plane must
	// then serve Traefik's CRDs (its
	// docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml).
	CRDProvider bool
}

// DataPlane is a running Traefik with its echo backends.
type DataPlane struct {
	// HTTPPort and HTTPSPort are the entryPoints' ports on Address.
	HTTPPort, HTTPSPort int
	// Address is the entryPoints' IP address, Options.Address or 127.0.0.1.
	Address string
	// GatewayClass is the class Traefik accepted.
	GatewayClass string
	// Backends maps each echo backend's name to its URL.
	Backends map[string]string
	// LogPath is Traefik's log (stdout and stderr); AccessLogPath its
	// access log.
	LogPath, AccessLogPath string

	experimental bool
	crdProvider  bool
	cmd          *exec.Cmd
	exited       chan struct{}
	waitErr      error
	logFile      *os.File
	backends     []*http.Server
}

// FindBinary returns the traefik executable: path when set, else
// $GATEFOLD_TRAEFIK, else bin/traefik/traefik in the repository. When none is
// set and the repository has none, the error wraps ErrNoBinary (a test skips
// on it); a path that is set but holds no executable is an error of its own.
func FindBinary(path string) (string, error) {
	for _, p := range []string{path, os.Getenv(BinaryEnv)} {
		if p == "" {
			continue
		}
		if !isExecutable(p) {
			return "", fmt.Errorf("%s is not a Traefik executable: run `make traefik`", p)
		}
		return filepath.Abs(p)
	}
	if root, err := devenv.RepoRoot(); err == nil {
		if p := filepath.Join(root, "bin", "traefik", "traefik"); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: run `make traefik` (it builds one into bin/traefik), or set $%s", ErrNoBinary, BinaryEnv)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// BackendRef is an HTTPRoute backendRef to echo backend name through
// Traefik's file provider.
func BackendRef(name string) gwv1.HTTPBackendRef {
	return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Group: ptr.To(gwv1.Group("traefik.io")),
		Kind:  ptr.To(gwv1.Kind("TraefikService")),
		Name:  gwv1.ObjectName(name + "@file"),
	}}}
}

// Start starts the echo backends and Traefik, creates the GatewayClass with
// client c, and returns once Traefik has accepted the class and its
// entryPoints answer, or ctx is done. On failure it stops what it started;
// the error quotes the end of Traefik's log.
func Start(ctx context.Context, c client.Client, opts Options) (*DataPlane, error) {
	if opts.Kubeconfig == "" || opts.Dir == "" {
		return nil, errors.New("starting Traefik: Options.Kubeconfig and Options.Dir are required")
	}
	binary, err := FindBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	d := newDataPlane(opts)
	// Traefik would exit with a line in its log; a port already taken is
	// most often another `make dev`, which the error says.
	for _, port := range []int{d.HTTPPort, d.HTTPSPort} {
		l, err := net.Listen("tcp", net.JoinHostPort(d.Address, strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("port %d on %s, which Traefik's entryPoints need, is taken (is another `make dev` running?): %w", port, d.Address, err)
		}
		_ = l.Close()
	}
	ok := false
	defer func() {
		if !ok {
			_ = d.Stop()
		}
	}()
	for _, name := range opts.Backends {
		url, srv, err := startEcho(name)
		if err != nil {
			return nil, err
		}
		d.Backends[name] = url
		d.backends = append(d.backends, srv)
	}
	static, err := d.writeConfig(opts.Dir)
	if err != nil {
		return nil, err
	}
	if d.logFile, err = os.Create(d.LogPath); err != nil {
		return nil, fmt.Errorf("creating Traefik's log: %w", err)
	}
	d.cmd = exec.Command(binary, "--configFile="+static)
	d.cmd.Dir = opts.Dir
	d.cmd.Env = append(withoutInCluster(os.Environ()), "KUBECONFIG="+opts.Kubeconfig)
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()

	if err := ensureGatewayClass(ctx, c, d.GatewayClass); err != nil {
		return nil, err
	}
	if err := d.waitReady(ctx, c); err != nil {
		return nil, fmt.Errorf("%w; Traefik's log ends:\n%s", err, d.LogTail(40))
	}
	ok = true
	return d, nil
}

// withoutInCluster drops the variables that make Traefik read the cluster
// from inside a Pod: in a test's environment they would win over KUBECONFIG.
func withoutInCluster(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KUBERNETES_SERVICE_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			out = append(out, kv)
		}
	}
	return out
}

// startEcho serves name's answers on a random loopback port.
func startEcho(name string) (string, *http.Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listening for echo backend %s: %w", name, err)
	}
	srv := &http.Server{Handler: Echo(name), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), srv, nil
}

// Echo answers every request as echo backend name does:
// "backend=<name> host=<Host header> path=<path>".
func Echo(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "backend=%s host=%s path=%s\n", name, r.Host, r.URL.Path)
	})
}

// newDataPlane is the DataPlane Start runs for opts, not started: opts
// with their defaults, 127.0.0.1 for Address among them.
func newDataPlane(opts Options) *DataPlane {
	return &DataPlane{
		HTTPPort:      cmp.Or(opts.HTTPPort, DefaultHTTPPort),
		HTTPSPort:     cmp.Or(opts.HTTPSPort, DefaultHTTPSPort),
		Address:       cmp.Or(opts.Address, "127.0.0.1"),
		experimental:  opts.ExperimentalChannel,
		crdProvider:   opts.CRDProvider,
		GatewayClass:  cmp.Or(opts.GatewayClass, DefaultGatewayClass),
		Backends:      map[string]string{},
		LogPath:       filepath.Join(opts.Dir, "traefik.log"),
		AccessLogPath: filepath.Join(opts.Dir, "traefik-access.log"),
		exited:        make(chan struct{}),
	}
}

// writeConfig writes Traefik's static configuration and the file provider's
// dynamic one into dir and returns the static one's path.
func (d *DataPlane) writeConfig(dir string) (string, error) {
	services := map[string]any{}
	for name, url := range d.Backends {
		services[name] = map[string]any{"loadBalancer": map[string]any{"servers": []any{map[string]any{"url": url}}}}
	}
	dynamic := filepath.Join(dir, "traefik-dynamic.yaml")
	if err := writeYAML(dynamic, map[string]any{"http": map[string]any{"services": services}}); err != nil {
		return "", err
	}
	// Short grace on stop: nothing here needs in-flight requests to finish.
	entryPoint := func(port int) map[string]any {
		return map[string]any{
			"address":   net.JoinHostPort(d.Address, strconv.Itoa(port)),
			"transport": map[string]any{"lifeCycle": map[string]any{"graceTimeOut": "1s"}},
		}
	}
	providers := map[string]any{
		"kubernetesGateway": map[string]any{
			"statusAddress":       map[string]any{"ip": d.Address},
			"experimentalChannel": d.experimental,
		},
		"file": map[string]any{"filename": dynamic},
	}
	if d.crdProvider {
		providers["kubernetesCRD"] = map[string]any{}
	}
	static := filepath.Join(dir, "traefik.yaml")
	return static, writeYAML(static, map[string]any{
		// Nothing leaves the machine: no version check, no usage report.
		"global": map[string]any{"checkNewVersion": false, "sendAnonymousUsage": false},
		"entryPoints": map[string]any{
			"web":       entryPoint(d.HTTPPort),
			"websecure": entryPoint(d.HTTPSPort),
		},
		"providers": providers,
		"log":       map[string]any{"level": "INFO", "noColor": true},
		"accessLog": map[string]any{"filePath": d.AccessLogPath},
	})
}

func writeYAML(path string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing Traefik's configuration: %w", err)
	}
	return nil
}

// ensureGatewayClass creates the class of controller ControllerName; one
// that exists must be of that controller.
func ensureGatewayClass(ctx context.Context, c client.Client, name string) error {
	gc := &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       gwv1.GatewayClassSpec{ControllerName: ControllerName},
	}
	err := c.Create(ctx, gc)
	if apierrors.IsAlreadyExists(err) {
		if err = c.Get(ctx, client.ObjectKeyFromObject(gc), gc); err == nil && gc.Spec.ControllerName != ControllerName {
			return fmt.Errorf("GatewayClass %s exists with controllerName %s, not Traefik's %s", name, gc.Spec.ControllerName, ControllerName)
		}
	}
	if err != nil {
		return fmt.Errorf("creating GatewayClass %s: %w", name, err)
	}
	return nil
}

// waitReady waits until Traefik accepted the class and both entryPoints
// take connections.
func (d *DataPlane) waitReady(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		gc := &gwv1.GatewayClass{}
		err := c.Get(ctx, client.ObjectKey{Name: d.GatewayClass}, gc)
		accepted := err == nil && meta.IsStatusConditionTrue(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted))
		if accepted && d.listening(d.HTTPPort) && d.listening(d.HTTPSPort) {
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("traefik exited before it was ready: %v", d.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("traefik did not accept GatewayClass %s and listen on ports %d and %d: %w", d.GatewayClass, d.HTTPPort, d.HTTPSPort, ctx.Err())
		case <-tick.C:
		}
	}
}

func (d *DataPlane) listening(port int) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(d.Address, strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// Running returns nil while Traefik runs, and once it exited, an error
// that says how.
func (d *DataPlane) Running() error {
	select {
	case <-d.exited:
		return fmt.Errorf("traefik exited: %v", d.waitErr)
	default:
		return nil
	}
}

// Log returns what Traefik logged so far.
func (d *DataPlane) Log() string {
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading Traefik's log: %v)", err)
	}
	return string(b)
}

// LogTail returns the last n lines Traefik logged, for an error message.
func (d *DataPlane) LogTail(n int) string {
	lines := strings.SplitAfter(d.Log(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// Stop stops Traefik (SIGTERM, then SIGKILL after 10s) and the echo
// backends.
func (d *DataPlane) Stop() error {
	errs := []error{process.Stop("traefik", d.cmd, d.exited)}
	d.cmd = nil
	for _, srv := range d.backends {
		errs = append(errs, srv.Close())
	}
	d.backends = nil
	if d.logFile != nil {
		errs = append(errs, d.logFile.Close())
		d.logFile = nil
	}
	return errors.Join(errs...)
}
