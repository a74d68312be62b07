package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
)

const installNamespace = "gatefold-system"

// certManagerCRDs is the deploy/crds folder of the cert-manager module in
// go.mod: the real CRDs the default overlay's objects must satisfy.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Finding the cert-manager module: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
}

func overlay(t *testing.T, name string) string {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config", name)
}

// emptyCRDDir keeps testenv from installing gatefold's CRD: the overlays do.
func emptyCRDDir(t *testing.T) string { return t.TempDir() }

func get(t *testing.T, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), key, obj); err != nil {
		t.Fatalf("Reading %T %s: %v", obj, key, err)
	}
}

func managerDeployment(t *testing.T, c client.Client) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-controller-manager"}, d)
	return d
}

// TestOverlaysInstall applies each overlay with kubectl server-side apply, as
// a user does, one after another on one control plane (so each apply is also
// an upgrade from the previous), and checks what each installs.
func TestOverlaysInstall(t *testing.T) {
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-f", certManagerCRDs(t))

	t.Run("default", func(t *testing.T) {
		out := kubectl(t, env, kubeconfig, "apply", "--server-side", "-k", overlay(t, "default"))
		for _, want := range []string{
			"customresourcedefinition.apiextensions.k8s.io/listenerfragments.gatefold.dev serverside-applied",
			"deployment.apps/gatefold-controller-manager serverside-applied",
			"certificate.cert-manager.io/gatefold-serving-cert serverside-applied",
			"issuer.cert-manager.io/gatefold-selfsigned-issuer serverside-applied",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/gatefold-validating-webhook-configuration serverside-applied",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
			}
		}
		d := managerDeployment(t, c)
		checkHardened(t, d)
		container := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(container.Args, "--cert-mode=cert-manager") || !slices.Contains(container.Args, "--webhook-cert-dir=/etc/gatefold/webhook-cert") {
			t.Errorf("Manager args %v do not serve cert-manager's certificate", container.Args)
		}
		if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != "gatefold-webhook-server-cert" {
			t.Errorf("Manager volumes %+v do not mount Secret gatefold-webhook-server-cert", v)
		}

		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
		get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-serving-cert"}, cert)
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if want := []string{"gatefold-webhook-service.gatefold-system.svc", "gatefold-webhook-service.gatefold-system.svc.cluster.local"}; !slices.Equal(dns, want) {
			t.Errorf("Certificate dnsNames = %v, want %v", dns, want)
		}
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		if issuer != "gatefold-selfsigned-issuer" || secret != "gatefold-webhook-server-cert" {
			t.Errorf("Certificate issuer %q secret %q, want gatefold-selfsigned-issuer and gatefold-webhook-server-cert", issuer, secret)
		}

		for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
			name := "gatefold-validating-webhook-configuration"
			if _, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
				name = "gatefold-mutating-webhook-configuration"
			}
			get(t, c, client.ObjectKey{Name: name}, obj)
			if got := obj.GetAnnotations()[cmapi.WantInjectAnnotation]; got != "gatefold-system/gatefold-serving-cert" {
				t.Errorf("%s inject-ca-from = %q, want gatefold-system/gatefold-serving-cert", name, got)
			}
		}
		svc := &corev1.Service{}
		get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-webhook-service"}, svc)
		if svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "webhook" {
			t.Errorf("Webhook Service ports %+v, want 443 to the webhook port", svc.Spec.Ports)
		}
	})

	t.Run("ha", func(t *testing.T) {
		kubectl(t, env, kubeconfig, "apply", "--server-side", "-k", overlay(t, "ha"))
		d := managerDeployment(t, c)
		checkHardened(t, d)
		if *d.Spec.Replicas != 3 {
			t.Errorf("HA replicas = %d, want 3", *d.Spec.Replicas)
		}
		var keys []string
		for _, s := range d.Spec.Template.Spec.TopologySpreadConstraints {
			keys = append(keys, s.TopologyKey)
		}
		if want := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}; !slices.Equal(keys, want) {
			t.Errorf("Topology spread keys = %v, want %v", keys, want)
		}
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-elect=true") {
			t.Errorf("HA replicas do not elect a leader: %v", d.Spec.Template.Spec.Containers[0].Args)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-controller-manager"}, pdb)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
		}
	})

	t.Run("self-signed", func(t *testing.T) {
		kubectl(t, env, kubeconfig, "apply", "--server-side", "-k", overlay(t, "self-signed"))
		d := managerDeployment(t, c)
		checkHardened(t, d)
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--cert-mode=self-signed") || slices.Contains(args, "--cert-mode=cert-manager") {
			t.Errorf("Manager args %v, want --cert-mode=self-signed", args)
		}
		if len(d.Spec.Template.Spec.Volumes) != 0 {
			t.Errorf("The self-signed manager mounts %+v, want nothing", d.Spec.Template.Spec.Volumes)
		}
		role := &rbacv1.ClusterRole{}
		get(t, c, client.ObjectKey{Name: "gatefold-self-signed-role"}, role)
		if names := role.Rules[0].ResourceNames; !slices.Equal(names, []string{"gatefold-mutating-webhook-configuration", "gatefold-validating-webhook-configuration"}) {
			t.Errorf("The webhook configuration rule is not limited to gatefold's: %v", names)
		}
		secretRole := &rbacv1.Role{}
		get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-self-signed-role"}, secretRole)
		for _, r := range secretRole.Rules {
			if slices.Contains(r.Verbs, "get") && !slices.Equal(r.ResourceNames, []string{"gatefold-webhook-ca"}) {
				t.Errorf("Secrets can be read beyond the CA Secret: %+v", r)
			}
		}
	})
}

// checkHardened checks the Deployment runs the way the restricted Pod
// Security Standard and the issue ask.
func checkHardened(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		*pod.SecurityContext.RunAsUser != 65532 || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("Pod security context %+v is not nonroot 65532 with seccomp RuntimeDefault", pod.SecurityContext)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("Container security context %+v is not read-only, unprivileged, with every capability dropped", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("Probes are not /healthz and /readyz: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("Resources %+v lack requests or a memory limit", c.Resources)
	}
}
