package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// startInstalledManager runs `gatefold manager --cert-mode=self-signed` as
// the ServiceAccount of config/self-signed, applied as a user does (see
// runInstalledManager); it returns the webhook server's address.
func startInstalledManager(t *testing.T, env *devenv.Env, flags ...string) (webhookAddr string) {
	t.Helper()
	return runInstalledManager(t, env, testenv.Gatefold{Overlay: "self-signed", Apply: true,
		Args: append([]string{"--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1"}, flags...)})
}

// runInstalledManager runs one `gatefold manager` process as g says, without
// leader election, with the overlay's webhooks pointed at it by URL on
// loopback, waits until it is ready, and checks its log for refused
// requests at the end; it returns the webhook server's address.
func runInstalledManager(t *testing.T, env *devenv.Env, g testenv.Gatefold) (webhookAddr string) {
	t.Helper()
	g.Binary, g.Env, g.PointWebhooks = testenv.MustBuildGatefold(t), []string{"POD_NAMESPACE=" + installNamespace}, true
	g.Args = append([]string{"--leader-elect=false"}, g.Args...)
	return testenv.MustStart(t, env, g)[0].WebhookAddr
}

// installNamespace is the namespace the overlays install gatefold into.
const installNamespace = "gatefold-system"

// certManagerCRDs is the deploy/crds folder of the cert-manager module in
// go.mod: the real CRDs the default overlay's objects must satisfy.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	return filepath.Join(moduleDir(t, ".", "github.com/cert-manager/cert-manager"), "deploy", "crds")
}

// moduleDir is the folder of module, as the go.mod of the repository's
// folder dir requires it, in the module cache.
func moduleDir(t *testing.T, dir, module string) string {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(root, dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Finding module %s of %s: %v", module, cmd.Dir, err)
	}
	return strings.TrimSpace(string(out))
}

// overlay is the folder of config/<name>.
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

// get reads key into obj, and stops the test when it cannot.
func get(t *testing.T, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), key, obj); err != nil {
		t.Fatalf("Reading %T %s: %v", obj, key, err)
	}
}

// claimsHeldBy lists the claims in gatefold's namespace whose holder
// identity (namespace/name/uid of a fragment) starts with prefix.
func claimsHeldBy(t *testing.T, c client.Client, prefix string) []string {
	t.Helper()
	leases := &coordinationv1.LeaseList{}
	if err := c.List(context.Background(), leases, client.InNamespace(installNamespace), client.HasLabels{"gatefold.dev/claim"}); err != nil {
		t.Fatalf("Listing claims: %v", err)
	}
	var held []string
	for _, l := range leases.Items {
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); strings.HasPrefix(holder, prefix) {
			held = append(held, l.Name+" held by "+holder)
		}
	}
	return held
}
