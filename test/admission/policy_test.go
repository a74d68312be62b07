package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// policyFromDocs returns the objects of the ValidatingAdmissionPolicy that
// docs/operations.md shows, so the page shows what this test checks.
func policyFromDocs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(page), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "kind: ValidatingAdmissionPolicy\n") {
			continue
		}
		var objs []*unstructured.Unstructured
		for _, doc := range strings.Split(block, "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("The policy in docs/operations.md does not parse: %v", err)
			}
			objs = append(objs, u)
		}
		return objs
	}
	t.Fatal("docs/operations.md shows no ValidatingAdmissionPolicy")
	return nil
}

// TestOnlyClusterAdminsMaySetTheAdmissionLabel applies the policy the docs
// show and checks it as a tenant who may update its own namespace and as a
// cluster admin.
func TestOnlyClusterAdminsMaySetTheAdmissionLabel(t *testing.T) {
	ctx := context.Background()
	for _, obj := range policyFromDocs(t) {
		mustCreate(t, obj)
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	ns := newNamespace(t, map[string]string{"team": "shop"})
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "namespace-owner-"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{ns}, Verbs: []string{"get", "update", "patch"}}},
	}
	mustCreate(t, role)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "namespace-owner-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "shop-owner"}},
	}
	mustCreate(t, binding)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding); _ = env.Client.Delete(ctx, role) })
	tenant, err := testenv.ClientAs(env, "shop-owner", "tenants")
	if err != nil {
		t.Fatal(err)
	}

	// relabel changes the namespace's labels as c, dry-run or not.
	relabel := func(c client.Client, change func(map[string]string), opts ...client.UpdateOption) error {
		n := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		change(n.Labels)
		return c.Update(ctx, n, opts...)
	}
	optOut := func(l map[string]string) { l[webhook.AdmissionLabel] = webhook.AdmissionDisabled }
	const denied = "ValidatingAdmissionPolicy 'gatefold-admission-label' with binding 'gatefold-admission-label' denied request: only cluster administrators may set, change or remove the namespace label gatefold.dev/admission"
	// The API server enforces a new policy once it has compiled it.
	testenv.Eventually(t, 15*time.Second, func() error {
		if err := relabel(tenant, optOut, client.DryRunAll); err == nil || !strings.Contains(err.Error(), denied) {
			return fmt.Errorf("the tenant's dry-run opt-out gets %v, want the policy's denial", err)
		}
		return nil
	})

	if err := relabel(tenant, optOut); err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("The tenant set the opt-out label: got %v", err)
	} else {
		t.Logf("The tenant's opt-out: %v", err)
	}
	if err := relabel(tenant, func(l map[string]string) { l["team"] = "checkout" }); err != nil {
		t.Errorf("The tenant changed another label of its namespace: %v", err)
	}
	if err := relabel(env.Client, optOut); err != nil {
		t.Fatalf("A cluster admin set the opt-out label: %v", err)
	}
	if err := relabel(tenant, func(l map[string]string) { l["team"] = "shop" }); err != nil {
		t.Errorf("The tenant changed another label of its opted-out namespace: %v", err)
	}
	if err := relabel(tenant, func(l map[string]string) { delete(l, webhook.AdmissionLabel) }); err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("The tenant removed the opt-out label: got %v", err)
	}
	if err := relabel(tenant, func(l map[string]string) { l[webhook.AdmissionLabel] = "enabled" }); err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("The tenant changed the opt-out label: got %v", err)
	}
}
