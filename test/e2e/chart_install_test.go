package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// TestChartInstallUpgradeUninstall installs charts/gatefold with Helm's SDK
// in self-signed mode, as a user does, runs gatefold as installed (the
// chart's ServiceAccount, the Deployment's args and env, the webhooks
// pointed at it), upgrades the release and uninstalls it, then removes
// what gatefold made as docs/operations.md says.
func TestChartInstallUpgradeUninstall(t *testing.T) {
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	ctx := context.Background()
	cfg, chrt := helmConfig(t, kubeconfig)
	rendered, installed := helmInstall(t, env, cfg, chrt, selfSignedValues)
	if installed.User != "system:serviceaccount:gatefold-system:gatefold-controller-manager" {
		t.Errorf("The chart's manager runs as %s, not the ServiceAccount the webhooks' matchConditions name", installed.User)
	}
	replicas := testenv.MustStart(t, env, testenv.Gatefold{Installed: installed, PointWebhooks: true,
		Binary: testenv.MustBuildGatefold(t), Env: []string{"POD_NAMESPACE=" + installNamespace},
		// A check period short enough to inject the CA bundle again soon
		// after the webhooks are pointed again, after the upgrade.
		Args: append(testenv.LocalArgs(installed.Args), "--webhook-cert-hosts=127.0.0.1", "--cert-check-period=1s")})

	var gw *gwv1.Gateway
	t.Run("installed: the webhooks answer and a fragment is folded", func(t *testing.T) {
		gw = checkFragmentAdmission(t, c)
		// An upper-case hostname needs defaulting, so the mutating webhook
		// is called (its matchConditions skip a fragment that needs none).
		upper := fixture.Fragment("shop", "upper", gw, fixture.HTTPS("web", "Upper.Example.com"))
		upper.Spec.ParentRef.Namespace = ptr.To(gwv1.Namespace("infra"))
		create(t, c, upper)
		if h := upper.Spec.Listeners[0].Hostname; h == nil || *h != "upper.example.com" {
			t.Errorf("The fragment was stored with hostname %v, want it defaulted to upper.example.com", ptrString(h))
		}
		lf := &v1alpha1.ListenerFragment{}
		get(t, c, client.ObjectKey{Namespace: "shop", Name: "first"}, lf)
		waitListenerNames(t, c, lf, "web")
		get(t, c, client.ObjectKeyFromObject(lf), lf)
		if !meta.IsStatusConditionTrue(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)) {
			t.Errorf("The folded fragment is not Accepted: %+v", lf.Status.Conditions)
		}
		current := &gwv1.Gateway{}
		get(t, c, client.ObjectKeyFromObject(gw), current)
		if !slices.ContainsFunc(current.Spec.Listeners, func(l gwv1.Listener) bool {
			return l.Name == v1alpha1.ListenerName("shop", "first", "web")
		}) {
			t.Errorf("Gateway infra/%s lacks the folded listener: %+v", gw.Name, current.Spec.Listeners)
		}
	})

	t.Run("upgrade: two replicas, a PDB, an extra arg", func(t *testing.T) {
		// In a cluster the webhooks call the Service, as the release left them.
		testenv.PointWebhooksAtService(t, c, installNamespace)
		applyChangedCRD(t, env, kubeconfig)
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = testenv.ChartNamespace
		values := map[string]any{"certificates": selfSignedValues["certificates"], "replicaCount": 2, "extraArgs": []any{"--merger-workers=8"}}
		rel, err := upgrade.Run(testenv.ChartRelease, chrt, values)
		if err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		if rel.Version != 2 {
			t.Errorf("The upgraded release is revision %d, want 2", rel.Version)
		}
		rendered = append(rendered, releaseObjects(t, rel)...)
		d := &appsv1.Deployment{}
		get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-controller-manager"}, d)
		if ptr.Deref(d.Spec.Replicas, 0) != 2 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--merger-workers=8") {
			t.Errorf("After the upgrade the Deployment has %v replicas and args %v, want 2 and --merger-workers=8",
				ptr.Deref(d.Spec.Replicas, 0), d.Spec.Template.Spec.Containers[0].Args)
		}
		get(t, c, client.ObjectKey{Namespace: installNamespace, Name: "gatefold-controller-manager"}, &policyv1.PodDisruptionBudget{})

		// Pointed again, the webhooks answer once gatefold has injected its
		// CA bundle again (--cert-check-period).
		testenv.PointWebhooksAt(t, c, "https://"+replicas[0].WebhookAddr)
		testenv.Eventually(t, servedWithin, func() error {
			dup := fixture.Fragment("shop", "copy", gw, fixture.HTTPS("web", "App.Example.com"))
			if err := c.Create(ctx, dup, client.DryRunAll); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Duplicate value") {
				return fmt.Errorf("after the upgrade a duplicate, defaulted to lower case, is %v, want denied as a duplicate", err)
			}
			return nil
		})
	})

	t.Run("uninstall: nothing the chart made is left", func(t *testing.T) {
		// Helm deletes the Deployment, whose pods stop.
		if err := testenv.StopAll(replicas); err != nil {
			t.Error(err)
		}
		// As docs/operations.md says: helm uninstall --cascade=foreground
		// --wait (no pod runs here: the replicas are processes).
		uninstall := action.NewUninstall(cfg)
		uninstall.DeletionPropagation, uninstall.Wait, uninstall.Timeout = "foreground", true, time.Minute
		if _, err := uninstall.Run(testenv.ChartRelease); err != nil {
			t.Fatalf("helm uninstall: %v", err)
		}
		if _, err := action.NewGet(cfg).Run(testenv.ChartRelease); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("After helm uninstall the release is %v, want not found", err)
		}
		for _, o := range byKey(rendered) {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())
			if !apierrors.IsNotFound(err) {
				t.Errorf("After helm uninstall %s %s is left: %v", o.GetKind(), client.ObjectKeyFromObject(o), err)
			}
		}
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, client.InNamespace(installNamespace), client.MatchingLabels{"owner": "helm"}); err != nil || len(secrets.Items) > 0 {
			t.Errorf("After helm uninstall Helm's release Secrets are left: %d (%v)", len(secrets.Items), err)
		}

		waitTenantRulesGone(t, c, "helm uninstall")
		if out, err := runLeftovers(env, kubeconfig); err == nil || !strings.Contains(out, "after helm uninstall: kubectl delete crd listenerfragments.gatefold.dev") {
			t.Errorf("With the CRD left, config/uninstall-leftovers.sh: %v, want it to refuse and say to delete the CRD:\n%s", err, out)
		}

		// Helm keeps the CRDs of crds/; docs/operations.md: delete it, then
		// run config/uninstall-leftovers.sh.
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName("listenerfragments.gatefold.dev")
		if err := c.Delete(ctx, crd); err != nil {
			t.Fatalf("Deleting the CRD Helm keeps: %v", err)
		}
		testenv.Eventually(t, servedWithin, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()); !apierrors.IsNotFound(err) {
				return fmt.Errorf("waiting for the CRD to be deleted; last: %v", err)
			}
			return nil
		})
		leftovers(t, env, kubeconfig)
		gw := &gwv1.Gateway{}
		get(t, c, client.ObjectKey{Namespace: "infra", Name: fixture.Gateway("infra", gwv1.NamespacesFromAll).Name}, gw)
		var names []gwv1.SectionName
		for _, l := range gw.Spec.Listeners {
			names = append(names, l.Name)
		}
		if slices.Contains(names, v1alpha1.ListenerName("shop", "first", "web")) {
			t.Errorf("After uninstall-leftovers.sh the Gateway keeps the folded listener: %v", names)
		}
		checkNamespaceLeftovers(t, env, kubeconfig)
	})
}

// crdUpgrade is the command docs/operations.md gives to apply a newer
// version's CRDs over those Helm installed, run in the repository's root.
var crdUpgrade = []string{"apply", "--server-side", "--force-conflicts", "-f", "charts/gatefold/crds/"}

// applyChangedCRD applies with crdUpgrade the chart's CRD with another
// description, as a newer version's, and checks that the API server has it.
func applyChangedCRD(t *testing.T, env *devenv.Env, kubeconfig string) {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const file, desc = "charts/gatefold/crds/gatefold.dev_listenerfragments.yaml", "A ListenerFragment, as a newer version describes it."
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := devenv.DecodeObjects(b)
	if err != nil || len(objs) != 1 {
		t.Fatalf("Reading %s: %d objects, %v", file, len(objs), err)
	}
	crd := objs[0]
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err := unstructured.SetNestedField(versions[0].(map[string]any), desc, "schema", "openAPIV3Schema", "description"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err = crd.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(file)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectlIn(t, env, kubeconfig, dir, crdUpgrade...)
	got := crd.DeepCopy()
	get(t, env.Client, client.ObjectKeyFromObject(crd), got)
	versions, _, _ = unstructured.NestedSlice(got.Object, "spec", "versions")
	if d, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "description"); d != desc {
		t.Errorf("After kubectl %v the CRD's description is %q, want %q", crdUpgrade, d, desc)
	}
}

// checkNamespaceLeftovers checks that, after helm uninstall of the
// self-signed release and the CRD's deletion, gatefold's namespace holds
// exactly the Leases and Secrets docs/operations.md lists, and that the
// commands it gives for a shared namespace delete them.
func checkNamespaceLeftovers(t *testing.T, env *devenv.Env, kubeconfig string) {
	t.Helper()
	left := func() []string {
		var out []string
		leases := &coordinationv1.LeaseList{}
		secrets := &corev1.SecretList{}
		if err := env.Client.List(context.Background(), leases, client.InNamespace(installNamespace)); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.List(context.Background(), secrets, client.InNamespace(installNamespace)); err != nil {
			t.Fatal(err)
		}
		for _, l := range leases.Items {
			if _, ok := l.Labels["gatefold.dev/claim"]; ok {
				l.Name = "claims labelled gatefold.dev/claim"
			}
			out = append(out, "Lease "+l.Name)
		}
		for _, s := range secrets.Items {
			out = append(out, "Secret "+s.Name)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	want := []string{"Lease claims labelled gatefold.dev/claim", "Lease gatefold-leader", "Secret gatefold-webhook-ca"}
	if got := left(); !slices.Equal(got, want) {
		t.Errorf("After helm uninstall and the CRD's deletion namespace %s holds %v, want what docs/operations.md lists: %v", installNamespace, got, want)
	}
	for _, cmd := range [][]string{
		{"-n", installNamespace, "delete", "lease", "-l", "gatefold.dev/claim"},
		{"-n", installNamespace, "delete", "lease", "gatefold-leader"},
		{"-n", installNamespace, "delete", "secret", "gatefold-webhook-ca", "gatefold-webhook-server-cert", "--ignore-not-found"},
	} {
		kubectl(t, env, kubeconfig, cmd...)
	}
	if got := left(); len(got) > 0 {
		t.Errorf("After the commands docs/operations.md gives, namespace %s holds %v", installNamespace, got)
	}
}

// TestChartWithCertManager installs charts/gatefold with Helm's SDK with
// its default values: cert-manager, running in process as in
// TestCertManagerIssuesTheWebhookCertificate, issues the chart's
// Certificate from the chart's Issuer and injects its CA into the chart's
// webhook configurations, and gatefold, run as installed, serves it.
func TestChartWithCertManager(t *testing.T) {
	env, kubeconfig := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c, ctx := env.Client, context.Background()
	kubectl(t, env, kubeconfig, "apply", "--server-side", "-f", certManagerCRDs(t))
	cfg, chrt := helmConfig(t, kubeconfig)
	_, installed := helmInstall(t, env, cfg, chrt, nil)
	cm, err := cmclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The webhooks are called by URL on loopback (see
	// TestCertManagerIssuesTheWebhookCertificate).
	if _, err := cm.CertmanagerV1().Certificates(installNamespace).Patch(ctx, servingCertificate, types.MergePatchType,
		[]byte(`{"spec":{"ipAddresses":["127.0.0.1"]}}`), metav1.PatchOptions{FieldManager: "gatefold-test"}); err != nil {
		t.Fatal(err)
	}
	startCertManager(t, kubeconfig)
	dir := t.TempDir()
	mountSecret(t, c, client.ObjectKey{Namespace: installNamespace, Name: servingSecret}, dir, 0)
	args := slices.DeleteFunc(testenv.LocalArgs(installed.Args), func(a string) bool { return strings.HasPrefix(a, "--webhook-cert-dir=") })
	if !slices.Contains(installed.Args, "--cert-mode=cert-manager") || len(args) == len(testenv.LocalArgs(installed.Args)) {
		t.Fatalf("The chart's manager args %v do not serve cert-manager's certificate from a folder", installed.Args)
	}
	testenv.MustStart(t, env, testenv.Gatefold{Installed: installed, PointWebhooks: true,
		Binary: testenv.MustBuildGatefold(t), Env: []string{"POD_NAMESPACE=" + installNamespace},
		Args: append(args, "--webhook-cert-dir="+dir)})
	// Only now: pointing the webhooks rewrites them whole.
	startCAInjector(t, env.Config)
	waitCertificateReady(t, cm, servingCertificate, 0)
	testenv.Eventually(t, servedWithin, func() error {
		_, bundles := webhookBundles(t, c)
		for _, b := range bundles {
			if len(b) == 0 {
				return errors.New("waiting for cert-manager to inject its CA into every webhook")
			}
		}
		return nil
	})
	checkFragmentAdmission(t, c)
}

// helmConfig is Helm's action configuration on the control plane of the
// administrator's kubeconfig, releases in ChartNamespace, and the chart.
func helmConfig(t *testing.T, kubeconfig string) (*action.Configuration, *chart.Chart) {
	t.Helper()
	cfg := &action.Configuration{}
	if err := cfg.Init(kube.GetConfig(kubeconfig, "", testenv.ChartNamespace), testenv.ChartNamespace, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	chrt, err := testenv.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, chrt
}

// helmInstall installs the chart with values, as helm install
// --create-namespace does, checks that every object it rendered is in the
// cluster, and returns them and the installation they describe.
func helmInstall(t *testing.T, env *devenv.Env, cfg *action.Configuration, chrt *chart.Chart, values map[string]any) ([]*unstructured.Unstructured, *testenv.Installed) {
	t.Helper()
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = testenv.ChartRelease, testenv.ChartNamespace, true
	rel, err := install.Run(chrt, values)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	rendered := releaseObjects(t, rel)
	checkExist(t, env.Client, rendered)
	installed, err := testenv.Describe(env, "charts/gatefold", rendered)
	if err != nil {
		t.Fatal(err)
	}
	return rendered, installed
}

// releaseObjects decodes the objects of a release's manifest.
func releaseObjects(t *testing.T, rel *release.Release) []*unstructured.Unstructured {
	t.Helper()
	objs, err := devenv.DecodeObjects([]byte(rel.Manifest))
	if err != nil {
		t.Fatalf("Decoding the manifest of release %s: %v", rel.Name, err)
	}
	return objs
}

// checkExist checks that each of objs is in the cluster.
func checkExist(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopy()); err != nil {
			t.Errorf("%s %s the chart renders is not in the cluster: %v", o.GetKind(), client.ObjectKeyFromObject(o), err)
		}
	}
}

// leftovers runs config/uninstall-leftovers.sh, failing the test when it
// fails.
func leftovers(t *testing.T, env *devenv.Env, kubeconfig string) {
	t.Helper()
	out, err := runLeftovers(env, kubeconfig)
	if err != nil {
		t.Fatalf("config/uninstall-leftovers.sh: %v\n%s", err, out)
	}
	t.Logf("config/uninstall-leftovers.sh:\n%s", out)
}

// runLeftovers runs config/uninstall-leftovers.sh with the control plane's
// kubectl, as the administrator, and returns its combined output.
func runLeftovers(env *devenv.Env, kubeconfig string) (string, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "config", "uninstall-leftovers.sh"))
	cmd.Env = append(os.Environ(), "KUBECTL="+filepath.Join(env.AssetsDir, "kubectl"), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
