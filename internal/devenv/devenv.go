package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatefold/gatefold/api/scheme"
)

// AssetsEnv is the variable that names the folder holding the control plane's
// binaries, as envtest and setup-envtest use it.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// GatewayAPICRDsEnv names the folder of the Gateway API CRDs to install; unset,
// the standard channel of the gateway-api module in go.mod is used.
const GatewayAPICRDsEnv = "GATEFOLD_GATEWAY_API_CRDS"

// controlPlaneBinaries are the files `make controlplane` builds.
var controlPlaneBinaries = []string{"kube-apiserver", "kube-controller-manager", "etcd", "kubectl"}

// Options says where the control plane's parts are. Empty fields are found.
type Options struct {
	// AssetsDir holds kube-apiserver, kube-controller-manager, etcd and
	// kubectl.
	AssetsDir string
	// GatewayAPICRDDir holds the Gateway API CRDs.
	GatewayAPICRDDir string
	// CRDDir holds gatefold's own CRDs.
	CRDDir string
	// Webhooks installs gatefold's webhook configurations from
	// config/webhook, pointed at a local server that the caller starts on
	// Env.WebhookPort() with the certificate in Env.WebhookCertDir().
	Webhooks bool
	// AuditLog makes the API server log, at Metadata level (which carries
	// the user agent), every write to Gateways and their status,
	// ReferenceGrants, ListenerFragments and their status, ListenerSets'
	// status, HTTPRoutes and GRPCRoutes and their status, and Leases into
	// this file, one JSON event a line.
	AuditLog string
	// AuditAll logs every request but watches, of any resource, instead:
	// the benchmarks count all that a controller reads and writes with it.
	AuditAll bool
	// AuditRouteStatusBodies logs the writes of HTTPRoutes' and GRPCRoutes'
	// status at Request level, with the object written, so that the log
	// says which entries of status.parents each writer wrote.
	AuditRouteStatusBodies bool
	// AdvertiseAddress is the address kube-apiserver advertises; empty, it
	// takes the one of the default route's interface. A network namespace
	// without a default route needs one.
	AdvertiseAddress string
}

const auditHeader = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
`

// auditWrites records who wrote what gatefold writes.
const auditWrites = `- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - group: gateway.networking.k8s.io
    resources: [gateways, gateways/status, referencegrants, listenersets/status, httproutes, httproutes/status, grpcroutes, grpcroutes/status,
      tlsroutes, tlsroutes/status, tcproutes, tcproutes/status, udproutes, udproutes/status]
  - group: gatefold.dev
    resources: [listenerfragments, listenerfragments/status]
  - group: coordination.k8s.io
    resources: [leases]
`

// auditRouteStatusBodies records routes' status as it is written.
const auditRouteStatusBodies = `- level: Request
  verbs: [create, update, patch]
  resources:
  - group: gateway.networking.k8s.io
    resources: [httproutes/status, grpcroutes/status]
`

// auditAll records every request that is not a watch.
const auditAll = `- level: Metadata
  verbs: [create, update, patch, delete, deletecollection, get, list]
`

// auditPolicy is the policy opts ask for; what no rule names is not logged.
func auditPolicy(opts Options) string {
	rules := auditWrites
	if opts.AuditAll {
		rules = auditAll
	}
	if opts.AuditRouteStatusBodies {
		rules = auditRouteStatusBodies + rules // the first rule that matches decides
	}
	return auditHeader + rules + "- level: None\n"
}

// Env is a running control plane.
type Env struct {
	Environment *envtest.Environment
	Config      *rest.Config
	Client      client.Client
	AssetsDir   string

	controllerManager *controllerManager
	// dataDir holds etcd's data and kube-apiserver's certificates.
	dataDir string
}

// Start starts etcd and kube-apiserver, installs the CRDs, and starts
// kube-controller-manager. etcd's data and kube-apiserver's certificates
// live in a folder of Env's until Stop, so that Environment.ControlPlane's
// Etcd and APIServer can be stopped and started again with their data, CA
// and ports.
func Start(opts Options) (*Env, error) {
	assets, err := FindAssets(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	root, rootErr := RepoRoot()
	crdDir := opts.CRDDir
	if crdDir == "" {
		if rootErr != nil {
			return nil, fmt.Errorf("finding gatefold's CRDs: %w", rootErr)
		}
		crdDir = filepath.Join(root, "config", "crd", "bases")
	}
	gwDir := opts.GatewayAPICRDDir
	if gwDir == "" {
		if gwDir, err = GatewayAPICRDDir(root); err != nil {
			return nil, err
		}
	}

	webhooks, err := webhookOptions(opts.Webhooks, assets, root)
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		WebhookInstallOptions: webhooks,
		BinaryAssetsDirectory: assets,
		Scheme:                scheme.New(),
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              []string{gwDir, crdDir},
			ErrorIfPathMissing: true,
		},
	}
	dataDir, err := restartable(env)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Env, error) {
		_ = env.Stop()
		_ = os.RemoveAll(dataDir)
		return nil, err
	}
	if opts.AdvertiseAddress != "" {
		env.ControlPlane.GetAPIServer().Configure().Set("advertise-address", opts.AdvertiseAddress)
	}
	if opts.AuditLog != "" {
		policy := filepath.Join(filepath.Dir(opts.AuditLog), "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy(opts)), 0o600); err != nil {
			return fail(fmt.Errorf("writing the audit policy: %w", err))
		}
		env.ControlPlane.GetAPIServer().Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", opts.AuditLog)
	}
	cfg, err := env.Start()
	if err != nil {
		return fail(fmt.Errorf("starting control plane from %s: %w", assets, err))
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return fail(fmt.Errorf("creating client: %w", err))
	}
	cm, err := startControllerManager(context.Background(), env, assets)
	if err != nil {
		return fail(err)
	}
	return &Env{Environment: env, Config: cfg, Client: c, AssetsDir: assets, controllerManager: cm, dataDir: dataDir}, nil
}

// restartable gives env's etcd and kube-apiserver folders of their own,
// which envtest neither creates afresh at a restart nor removes at Stop, and
// returns the folder that holds both. It has kube-apiserver end its watches
// when it stops, so that it stops within seconds.
func restartable(env *envtest.Environment) (string, error) {
	dir, err := os.MkdirTemp("", "gatefold-controlplane-")
	if err != nil {
		return "", fmt.Errorf("creating the control plane's folder: %w", err)
	}
	etcd, apiserver := filepath.Join(dir, "etcd"), filepath.Join(dir, "apiserver")
	for _, d := range []string{etcd, apiserver} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("creating the control plane's folder: %w", err)
		}
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcd}
	s := env.ControlPlane.GetAPIServer()
	s.CertDir = apiserver
	// Without it, kube-apiserver waits for its watches (those of
	// kube-controller-manager, say) until envtest kills it, 20s on.
	s.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	return dir, nil
}

// webhookOptions renders config/webhook with kubectl's kustomize, so tests
// install exactly the webhook configurations a user does.
func webhookOptions(enabled bool, assets, root string) (envtest.WebhookInstallOptions, error) {
	var opts envtest.WebhookInstallOptions
	if !enabled {
		return opts, nil
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(root, "config", "webhook")).Output()
	if err != nil {
		return opts, fmt.Errorf("rendering config/webhook with kubectl kustomize: %w", err)
	}
	objs, err := DecodeObjects(out)
	if err != nil {
		return opts, fmt.Errorf("decoding the rendered webhook configurations: %w", err)
	}
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, m)
			opts.MutatingWebhooks = append(opts.MutatingWebhooks, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v)
			opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, v)
		}
		if err != nil {
			return opts, fmt.Errorf("decoding a %s: %w", o.GetKind(), err)
		}
	}
	return opts, nil
}

// WebhookPort is where the API server calls the webhooks.
func (e *Env) WebhookPort() int { return e.Environment.WebhookInstallOptions.LocalServingPort }

// WebhookHost is the address the API server calls the webhooks on.
func (e *Env) WebhookHost() string { return e.Environment.WebhookInstallOptions.LocalServingHost }

// WebhookCertDir holds the serving certificate the API server trusts.
func (e *Env) WebhookCertDir() string { return e.Environment.WebhookInstallOptions.LocalServingCertDir }

// Stop stops kube-controller-manager, kube-apiserver and etcd and removes
// their data.
func (e *Env) Stop() error {
	var errs []error
	if e.controllerManager != nil {
		errs = append(errs, e.controllerManager.stop())
	}
	errs = append(errs, e.Environment.Stop(), os.RemoveAll(e.dataDir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping control plane: %w", err)
	}
	return nil
}

// Kubeconfig returns a kubeconfig for a cluster administrator.
func (e *Env) Kubeconfig() ([]byte, error) { return adminKubeconfig(e.Environment, "gatefold-admin") }

// adminKubeconfig adds user name, in group system:masters, to env's API
// server and returns its kubeconfig.
func adminKubeconfig(env *envtest.Environment, name string) ([]byte, error) {
	user, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding admin user %s: %w", name, err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig of %s: %w", name, err)
	}
	return kc, nil
}

// FindAssets returns the folder holding the control plane binaries: dir when
// set, else $KUBEBUILDER_ASSETS, else bin/controlplane in the repository.
// The error names what each folder tried lacks: a bin/controlplane built
// before kube-controller-manager joined it lacks that alone.
func FindAssets(dir string) (string, error) {
	var tried []string
	candidates := []string{dir, os.Getenv(AssetsEnv)}
	if root, err := RepoRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "controlplane"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		missing := missingBinaries(c)
		if len(missing) == 0 {
			return filepath.Abs(c)
		}
		tried = append(tried, fmt.Sprintf("%s has no %s", c, strings.Join(missing, ", ")))
	}
	return "", fmt.Errorf("no control plane (%s) found: %s: run `make controlplane`, or set --control-plane or $%s",
		strings.Join(controlPlaneBinaries, ", "), strings.Join(tried, "; "), AssetsEnv)
}

// missingBinaries are the control plane binaries dir lacks.
func missingBinaries(dir string) []string {
	var missing []string
	for _, b := range controlPlaneBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
			missing = append(missing, b)
		}
	}
	return missing
}

// RepoRoot walks up from the working directory to gatefold's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/gatefold/gatefold\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the gatefold repository: run from the clone, or pass the CRD folders")
		}
		dir = parent
	}
}

// GatewayAPICRDDir returns $GATEFOLD_GATEWAY_API_CRDS, or the standard
// channel CRDs of the gateway-api module that gatefold's go.mod requires.
func GatewayAPICRDDir(repoRoot string) (string, error) {
	if d := os.Getenv(GatewayAPICRDsEnv); d != "" {
		return d, nil
	}
	dir, err := GatewayAPIModuleDir(repoRoot)
	if err != nil {
		return "", fmt.Errorf("%w (or set $%s)", err, GatewayAPICRDsEnv)
	}
	return filepath.Join(dir, "config", "crd", "standard"), nil
}

// GatewayAPIModuleDir returns the folder of the gateway-api module that
// gatefold's go.mod requires, as `go list -m` finds it (run under make, or
// with GOTOOLCHAIN=go1.27.3, which go.mod needs).
func GatewayAPIModuleDir(repoRoot string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
		}
		return "", fmt.Errorf("locating the gateway-api module with `go list -m`: %w; run through make, or export GOTOOLCHAIN=go1.27.3", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// DecodeObjects decodes every object of a YAML or JSON stream of
// manifests, skipping empty documents.
func DecodeObjects(manifests []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
