package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

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
		checkMetrics(t, c, d)
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
		checkMetrics(t, c, d)
		role := &rbacv1.ClusterRole{}
		get(t, c, client.ObjectKey{Name: "gatefold-self-signed-role"}, role)
		if names := role.Rules[0].ResourceNames; !slices.Equal(names, []string{"gatefold-mutating-webhook-configuration", "gatefold-validating-webhook-configuration"}) {
			t.Errorf("The webhook configuration rule is not limited to gatefold's: %v", names)
		}
		checkSecretReads(t, c, d.Spec.Template.Spec.ServiceAccountName)
	})

	t.Run("make deploy", func(t *testing.T) {
		out := makeDeploy(t, env, kubeconfig, "deploy", "IMG=example/gatefold:v9", "OVERLAY=ha")
		if !strings.Contains(out, "deployment.apps/gatefold-controller-manager serverside-applied") {
			t.Errorf("make deploy did not apply the Deployment:\n%s", out)
		}
		d := managerDeployment(t, c)
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "example/gatefold:v9" {
			t.Errorf("After make deploy IMG=example/gatefold:v9 the Deployment runs %q", got)
		}
		if *d.Spec.Replicas != 3 {
			t.Errorf("make deploy OVERLAY=ha installed %d replicas, want 3", *d.Spec.Replicas)
		}
	})
}

// makeDeploy runs a target of the Makefile's deploy section with the
// control plane's kubectl and kubeconfig, its overlay in a folder of the
// test's, and returns make's output.
func makeDeploy(t *testing.T, env *devenv.Env, kubeconfig string, args ...string) string {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"-s", "-C", root, "KUBECTL=" + filepath.Join(env.AssetsDir, "kubectl"), "DEPLOY_DIR=" + t.TempDir()}, args...)
	cmd := exec.Command("make", args...)
	cmd.Env = append(makeEnv(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestInstallImageFollowsIMG renders the overlay `make deploy` writes for an
// IMG, as kubectl applies it, and checks the image the Deployment runs.
func TestInstallImageFollowsIMG(t *testing.T) {
	assets, err := devenv.FindAssets("")
	if err != nil {
		t.Fatal(err)
	}
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for name, tc := range map[string]struct {
		args      []string
		wantImage string
	}{
		"no IMG: the image config/manager names": {wantImage: "gatefold:latest"},
		"repository and tag":                     {args: []string{"IMG=example/gatefold:v9"}, wantImage: "example/gatefold:v9"},
		"registry with a port, ha overlay":       {args: []string{"IMG=localhost:5000/team/gatefold:1.10", "OVERLAY=ha"}, wantImage: "localhost:5000/team/gatefold:1.10"},
		"digest, self-signed overlay":            {args: []string{"IMG=example/gatefold@" + digest, "OVERLAY=self-signed"}, wantImage: "example/gatefold@" + digest},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"-s", "-C", root, "deploy-overlay", "DEPLOY_DIR=" + dir}, tc.args...)
			cmd := exec.Command("make", args...)
			cmd.Env = makeEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("make %v: %v\n%s", args, err, out)
			}
			rendered, err := testenv.RenderKustomization(assets, dir)
			if err != nil {
				t.Fatal(err)
			}
			var images []string
			for _, d := range objectsOf[appsv1.Deployment](t, rendered, "Deployment") {
				for _, c := range d.Spec.Template.Spec.Containers {
					images = append(images, c.Image)
					// A :latest image defaults to Always, and a locally
					// built and loaded image would not run.
					if c.ImagePullPolicy != corev1.PullIfNotPresent {
						t.Errorf("Container %s pulls %q, want IfNotPresent", c.Name, c.ImagePullPolicy)
					}
				}
			}
			if !slices.Equal(images, []string{tc.wantImage}) {
				t.Errorf("The rendered overlay runs images %v, want [%s]", images, tc.wantImage)
			}
		})
	}

	t.Run("an overlay that does not exist", func(t *testing.T) {
		cmd := exec.Command("make", "-s", "-C", root, "deploy-overlay", "DEPLOY_DIR="+t.TempDir(), "OVERLAY=prod")
		cmd.Env = makeEnv()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "OVERLAY must be default, ha or self-signed") {
			t.Errorf("make deploy-overlay OVERLAY=prod: %v\n%s", err, out)
		}
	})
}

// makeEnv is the test's environment without the variables the deploy
// targets read, so that only the test's arguments set them.
func makeEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"IMG", "OVERLAY", "DEPLOY_DIR", "KUBECTL", "KUBECONFIG"}, name)
	})
}

// objectsOf converts the objects of kind among objs to T.
func objectsOf[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) []T {
	t.Helper()
	var out []T
	for _, u := range objs {
		if u.GetKind() != kind {
			continue
		}
		var obj T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
			t.Fatalf("Decoding %s %s: %v", kind, u.GetName(), err)
		}
		out = append(out, obj)
	}
	return out
}

// checkMetrics checks that an overlay serves the metrics on 8443 behind a
// Service, lets the manager ask the API server who a scraper is and what it
// may do, and gives scrapers a role to be bound to.
func checkMetrics(t *testing.T, c client.Client, d *appsv1.Deployment) {
	t.Helper()
	container := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(container.Args, "--metrics-bind-address=:8443") {
		t.Errorf("Manager args %v do not serve metrics on :8443", container.Args)
	}
	if i := slices.IndexFunc(container.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }); i < 0 || container.Ports[i].ContainerPort != 8443 {
		t.Errorf("Manager ports %+v, want metrics on 8443", container.Ports)
	}
	svc := &corev1.Service{}
	get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-metrics-service"}, svc)
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Name != "https" || p[0].Port != 8443 || p[0].TargetPort.StrVal != "metrics" {
		t.Errorf("Metrics Service ports %+v, want https 8443 to the metrics port", p)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Metrics Service selector %v does not select the manager's pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}

	auth := &rbacv1.ClusterRole{}
	get(t, c, client.ObjectKey{Name: "gatefold-metrics-auth-role"}, auth)
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	} {
		if !slices.ContainsFunc(auth.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, want.APIGroups) && slices.Equal(r.Resources, want.Resources) && slices.Equal(r.Verbs, want.Verbs)
		}) {
			t.Errorf("ClusterRole gatefold-metrics-auth-role lacks %v", want)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{}
	get(t, c, client.ObjectKey{Name: "gatefold-metrics-auth-rolebinding"}, binding)
	if s := binding.Subjects; binding.RoleRef.Name != "gatefold-metrics-auth-role" || len(s) != 1 ||
		s[0].Kind != "ServiceAccount" || s[0].Namespace != installNamespace || s[0].Name != d.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("ClusterRoleBinding gatefold-metrics-auth-rolebinding binds %v to %+v, want the manager's ServiceAccount", binding.RoleRef.Name, s)
	}
	reader := &rbacv1.ClusterRole{}
	get(t, c, client.ObjectKey{Name: "gatefold-metrics-reader"}, reader)
	if r := reader.Rules; len(r) != 1 || !slices.Equal(r[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(r[0].Verbs, []string{"get"}) {
		t.Errorf("ClusterRole gatefold-metrics-reader rules %+v, want get /metrics only", r)
	}
}

// checkSecretReads asks the API server's authorizer what the manager's
// ServiceAccount, with every binding the overlays installed, may read: the
// CA Secret, and no other Secret by any verb that reads (get, list, watch),
// in its namespace, another or all.
func checkSecretReads(t *testing.T, c client.Client, serviceAccount string) {
	t.Helper()
	user := "system:serviceaccount:" + installNamespace + ":" + serviceAccount
	allowed := func(verb, ns, name string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + installNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "secrets", Namespace: ns, Name: name},
		}}
		if err := c.Create(context.Background(), sar); err != nil {
			t.Fatalf("Asking whether %s may %s Secrets: %v", user, verb, err)
		}
		return sar.Status.Allowed
	}
	if !allowed("get", installNamespace, "gatefold-webhook-ca") {
		t.Errorf("%s may not get Secret %s/gatefold-webhook-ca, its CA", user, installNamespace)
	}
	// update and patch answer with the Secret, so they read it too.
	for _, verb := range []string{"get", "list", "watch", "update", "patch"} {
		for _, ns := range []string{installNamespace, "default", metav1.NamespaceAll} {
			name := ""
			if verb != "list" && verb != "watch" {
				name = "other"
			}
			if allowed(verb, ns, name) {
				t.Errorf("Secrets can be read beyond the CA Secret: %s may %s Secrets %q in namespace %q", user, verb, name, ns)
			}
		}
	}
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

// TestUndeployLeavesNothingBehind: `make undeploy` removes, besides the
// overlay, what gatefold made outside its namespace while it ran: the
// derived routes of routes naming a fragment or a ListenerSet, the Gateway
// of the ListenerSets, the listeners folded into the user's Gateway and the
// statuses gatefold applied. The user's own objects stay.
func TestUndeployLeavesNothingBehind(t *testing.T) {
	const controller = "example.com/undeploy"
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	ctx := context.Background()
	// Not testenv.MustStart: undeploy takes the replica's rights while it
	// runs, as deleting the Deployment does, and its log then says so.
	replicas, err := testenv.Start(ctx, env, testenv.Gatefold{Overlay: "self-signed", Apply: true, PointWebhooks: true,
		Binary: testenv.MustBuildGatefold(t), Dir: t.TempDir(), Env: []string{"POD_NAMESPACE=" + installNamespace},
		Args: []string{"--leader-elect=false", "--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1", "--listenerset-controllers=" + controller}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testenv.StopAll(replicas) })

	for _, ns := range []string{"infra", "shop"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	gc := fixture.GatewayClass(controller)
	create(t, c, gc)
	gw := fixture.PoolHead("infra", gwv1.NamespacesFromAll)
	gw.Spec.GatewayClassName = gwv1.ObjectName(gc.Name)
	create(t, c, gw)
	lf := fixture.Fragment("shop", "checkout", gw, fixture.Entry("http", 8080, gwv1.HTTPProtocolType, "checkout.example.com"))
	create(t, c, lf)
	ls := fixture.ListenerSet("shop", "deals", gw, fixture.Entry("http", 8080, gwv1.HTTPProtocolType, "deals.example.com"))
	create(t, c, ls)
	create(t, c, routeTo("shop", "checkout", "", "checkout", gwv1.ParentReference{
		Group: ptr.To(gwv1.Group(v1alpha1.GroupVersion.Group)), Kind: ptr.To(gwv1.Kind("ListenerFragment")), Name: "checkout"}))
	create(t, c, routeTo("shop", "deals", "", "deals", gwv1.ParentReference{Kind: ptr.To(gwv1.Kind("ListenerSet")), Name: "deals"}))

	derived := func() []string {
		list := &gwv1.HTTPRouteList{}
		if err := c.List(ctx, list, client.MatchingLabels{v1alpha1.DerivedLabel: "true"}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range list.Items {
			names = append(names, r.Namespace+"/"+r.Name)
		}
		return names
	}
	gateways := func() []string {
		list := &gwv1.GatewayList{}
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range list.Items {
			var names []string
			for _, l := range g.Spec.Listeners {
				names = append(names, string(l.Name))
			}
			out = append(out, g.Namespace+"/"+g.Name+" "+strings.Join(names, ","))
		}
		return out
	}
	// The Gateway's count of ListenerSets and the ListenerSet's Accepted
	// reason: gatefold's while it runs.
	statuses := func() string {
		got, set := &gwv1.Gateway{}, &gwv1.ListenerSet{}
		get(t, c, client.ObjectKeyFromObject(gw), got)
		get(t, c, client.ObjectKeyFromObject(ls), set)
		reason := "none"
		if cond := meta.FindStatusCondition(set.Status.Conditions, string(gwv1.ListenerSetConditionAccepted)); cond != nil {
			reason = cond.Reason
		}
		return fmt.Sprintf("attachedListenerSets=%s ListenerSet %s", ptrString(got.Status.AttachedListenerSets), reason)
	}
	folded := []string{"infra/shared default," + string(v1alpha1.ListenerName("shop", "checkout", "http")),
		"infra/" + rules.ListenerSetGatewayName(gw.Name) + " " + string(v1alpha1.ListenerSetListenerName("shop", "deals", "http"))}
	testenv.Eventually(t, time.Minute, func() error {
		if got := gateways(); !slices.Equal(got, folded) {
			return fmt.Errorf("gateways and their listeners are %v, want %v", got, folded)
		}
		if got := derived(); len(got) != 2 {
			return fmt.Errorf("derived routes are %v, want one per route", got)
		}
		if got := statuses(); got != "attachedListenerSets=1 ListenerSet Accepted" {
			return fmt.Errorf("statuses are %s, want gatefold's", got)
		}
		return nil
	})

	t.Log(makeDeploy(t, env, kubeconfig, "undeploy", "OVERLAY=self-signed"))
	if got := derived(); len(got) != 0 {
		t.Errorf("After make undeploy derived routes are left: %v", got)
	}
	if got, want := gateways(), []string{"infra/shared default"}; !slices.Equal(got, want) {
		t.Errorf("After make undeploy the Gateways and their listeners are %v, want only the user's, with its own listener: %v", got, want)
	}
	if got, want := statuses(), "attachedListenerSets=unset ListenerSet Pending"; got != want {
		t.Errorf("After make undeploy the statuses are %s, want %s: what gatefold wrote released", got, want)
	}
	for _, obj := range []client.Object{&gwv1.HTTPRoute{}, &gwv1.ListenerSet{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "deals"}, obj); err != nil {
			t.Errorf("make undeploy took the user's %T shop/deals: %v", obj, err)
		}
	}
	// The tenant roles went with the overlay, and their rules with them.
	waitTenantRulesGone(t, c, "make undeploy")
}

// waitTenantRulesGone waits until admin, edit and view no longer grant
// anything on listenerfragments, after the tenant roles were deleted by
// what says.
func waitTenantRulesGone(t *testing.T, c client.Client, what string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, name := range []string{"admin", "edit", "view"} {
			role := &rbacv1.ClusterRole{}
			get(t, c, client.ObjectKey{Name: name}, role)
			if grants(role.Rules, []string{"get"}) {
				return fmt.Errorf("after %s ClusterRole %s still grants listenerfragments: %+v", what, name, role.Rules)
			}
		}
		return nil
	})
}
