package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// The verbs the tenant roles grant on listenerfragments.
var (
	editorVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	viewerVerbs = []string{"get", "list", "watch"}
)

// TestOverlaysShipTheTenantRoles renders every overlay and checks that each
// ships gatefold-fragment-editor and -viewer, labelled to aggregate into
// admin and edit, and view, granting only listenerfragments and a read of
// their status.
func TestOverlaysShipTheTenantRoles(t *testing.T) {
	assets, err := devenv.FindAssets("")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "ha", "self-signed"} {
		t.Run(name, func(t *testing.T) {
			rendered, err := testenv.RenderOverlay(assets, name)
			if err != nil {
				t.Fatal(err)
			}
			roles := map[string]rbacv1.ClusterRole{}
			for _, r := range objectsOf[rbacv1.ClusterRole](t, rendered, "ClusterRole") {
				roles[r.Name] = r
			}
			for role, want := range map[string]struct {
				aggregateTo []string
				verbs       []string
			}{
				"gatefold-fragment-editor": {aggregateTo: []string{"admin", "edit"}, verbs: editorVerbs},
				"gatefold-fragment-viewer": {aggregateTo: []string{"view"}, verbs: viewerVerbs},
			} {
				got, ok := roles[role]
				if !ok {
					t.Errorf("config/%s has no ClusterRole %s", name, role)
					continue
				}
				var aggregateTo []string
				for label, v := range got.Labels {
					if to, ok := strings.CutPrefix(label, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
						aggregateTo = append(aggregateTo, to)
					}
				}
				slices.Sort(aggregateTo)
				if !slices.Equal(aggregateTo, want.aggregateTo) {
					t.Errorf("ClusterRole %s aggregates into %v, want %v", role, aggregateTo, want.aggregateTo)
				}
				wantRules := []rbacv1.PolicyRule{
					{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"listenerfragments"}, Verbs: want.verbs},
					{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"listenerfragments/status"}, Verbs: []string{"get"}},
				}
				if !reflect.DeepEqual(got.Rules, wantRules) {
					t.Errorf("ClusterRole %s rules %+v, want %+v", role, got.Rules, wantRules)
				}
			}
		})
	}
}

// TestNamespaceEditorsWriteFragmentsNotClaims installs gatefold as the
// self-signed overlay does, binds the built-in edit and view roles in one
// namespace, and plays their users: edit may create, patch and delete a
// fragment there, which admission folds, but not write its status, touch a
// claim or write another namespace; view may read fragments and not write
// one. A route controller bound to gatefold-fragment-editor for every
// namespace may touch neither claims nor fragment status.
func TestNamespaceEditorsWriteFragmentsNotClaims(t *testing.T) {
	env, _ := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	ctx := context.Background()
	startInstalledManager(t, env)
	for _, ns := range []string{"infra", "team-a", "team-b"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for user, role := range map[string]string{"alice": "edit", "bob": "view"} {
		create(t, c, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: user + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})
	}
	waitAggregated(t, c, map[string][]string{"admin": editorVerbs, "edit": editorVerbs, "view": viewerVerbs})
	alice, err := testenv.ClientAs(env, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := testenv.ClientAs(env, "bob")
	if err != nil {
		t.Fatal(err)
	}

	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	create(t, c, gw)
	lf := fixture.Fragment("team-a", "app", gw, fixture.Entry("http", 8080, gwv1.HTTPProtocolType, "app.example.com"))
	if err := alice.Create(ctx, lf); err != nil {
		t.Fatalf("alice (edit in team-a) creating fragment team-a/app: %v", err)
	}
	stored := &v1alpha1.ListenerFragment{}
	get(t, c, client.ObjectKeyFromObject(lf), stored)
	waitListenerNames(t, c, stored, "http")
	claims := claimsHeldBy(t, c, "team-a/app/")
	if len(claims) == 0 {
		t.Fatal("The folded fragment team-a/app holds no claim")
	}
	claim, _, _ := strings.Cut(claims[0], " ")

	patch := client.MergeFrom(lf.DeepCopy())
	lf.Labels = map[string]string{"team": "a"}
	if err := alice.Patch(ctx, lf, patch); err != nil {
		t.Fatalf("alice patching fragment team-a/app: %v", err)
	}
	get(t, c, client.ObjectKeyFromObject(lf), stored)
	if stored.Labels["team"] != "a" {
		t.Errorf("After alice's patch fragment team-a/app has labels %v, want team=a", stored.Labels)
	}
	if err := alice.SubResource("status").Get(ctx, lf, &v1alpha1.ListenerFragment{}); err != nil {
		t.Errorf("alice reading the status of fragment team-a/app: %v", err)
	}

	forged := stored.DeepCopy()
	forged.Status.Listeners = nil
	wantForbidden(t, "alice updating the status of fragment team-a/app", alice.Status().Update(ctx, forged),
		`cannot update resource "listenerfragments/status" in API group "gatefold.dev" in the namespace "team-a"`)
	wantForbidden(t, "alice creating a fragment in team-b", alice.Create(ctx, fixture.Fragment("team-b", "app", gw, fixture.HTTPS("https", "b.example.com"))),
		`cannot create resource "listenerfragments" in API group "gatefold.dev" in the namespace "team-b"`)
	checkClaimsForbidden(t, alice, "alice", claim)

	// A route controller bound to the editor role for every namespace, as
	// docs/operations.md shows: still no claims, nor fragment status.
	router := routeControllerClient(t, env)
	testenv.Eventually(t, 30*time.Second, func() error {
		return router.List(ctx, &v1alpha1.ListenerFragmentList{})
	})
	wantForbidden(t, "the route controller updating the status of fragment team-a/app", router.Status().Update(ctx, forged),
		`cannot update resource "listenerfragments/status" in API group "gatefold.dev" in the namespace "team-a"`)
	checkClaimsForbidden(t, router, "the route controller", claim)

	if err := bob.Get(ctx, client.ObjectKeyFromObject(lf), &v1alpha1.ListenerFragment{}); err != nil {
		t.Errorf("bob (view in team-a) reading fragment team-a/app: %v", err)
	}
	if err := bob.List(ctx, &v1alpha1.ListenerFragmentList{}, client.InNamespace("team-a")); err != nil {
		t.Errorf("bob listing the fragments of team-a: %v", err)
	}
	wantForbidden(t, "bob creating a fragment in team-a", bob.Create(ctx, fixture.Fragment("team-a", "bobs", gw, fixture.HTTPS("https", "bob.example.com"))),
		`cannot create resource "listenerfragments" in API group "gatefold.dev" in the namespace "team-a"`)
	checkClaimsForbidden(t, bob, "bob", claim)

	if err := alice.Delete(ctx, lf); err != nil {
		t.Fatalf("alice deleting fragment team-a/app: %v", err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(lf), &v1alpha1.ListenerFragment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("waiting for fragment team-a/app to be deleted; last: %v", err)
	})
}

// routeControllerClient makes ServiceAccount router-system/router, binds
// it to gatefold-fragment-editor with a ClusterRoleBinding and returns a
// client that acts as it.
func routeControllerClient(t *testing.T, env *devenv.Env) client.Client {
	t.Helper()
	const ns, name = "router-system", "router"
	create(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	create(t, env.Client, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "router-fragments"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gatefold-fragment-editor"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	})
	c, err := testenv.ClientAs(env, "system:serviceaccount:"+ns+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitAggregated waits until each built-in ClusterRole named in want has
// aggregated a rule granting its verbs on listenerfragments.
func waitAggregated(t *testing.T, c client.Client, want map[string][]string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		for name, verbs := range want {
			role := &rbacv1.ClusterRole{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: name}, role); err != nil {
				return err
			}
			if !grants(role.Rules, verbs) {
				ours := slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return !slices.Contains(r.APIGroups, v1alpha1.GroupVersion.Group) })
				return fmt.Errorf("waiting for ClusterRole %s to aggregate %v on listenerfragments.%s; its rules for that group are %+v", name, verbs, v1alpha1.GroupVersion.Group, ours)
			}
		}
		return nil
	})
}

// grants says whether one of rules grants every verb on listenerfragments.
func grants(rules []rbacv1.PolicyRule, verbs []string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, v1alpha1.GroupVersion.Group) && slices.Contains(r.Resources, "listenerfragments") &&
			!slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(r.Verbs, v) })
	})
}

// checkClaimsForbidden checks that user, through c, can neither read, list,
// create, update nor delete claims (Leases) in gatefold's namespace, nor
// list Leases anywhere; claim names a real one.
func checkClaimsForbidden(t *testing.T, c client.Client, user, claim string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: installNamespace, Name: claim}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: claim}}
	in := ` in API group "coordination.k8s.io" in the namespace "` + installNamespace + `"`
	wantForbidden(t, user+" reading claim "+claim, c.Get(ctx, key, &coordinationv1.Lease{}), `cannot get resource "leases"`+in)
	wantForbidden(t, user+" listing claims", c.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(installNamespace)), `cannot list resource "leases"`+in)
	wantForbidden(t, user+" listing Leases in all namespaces", c.List(ctx, &coordinationv1.LeaseList{}), `cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope`)
	wantForbidden(t, user+" creating a claim", c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: "lfc-forged"}}), `cannot create resource "leases"`+in)
	wantForbidden(t, user+" updating claim "+claim, c.Update(ctx, lease), `cannot update resource "leases"`+in)
	wantForbidden(t, user+" deleting claim "+claim, c.Delete(ctx, lease), `cannot delete resource "leases"`+in)
}

// wantForbidden fails t unless err is Forbidden and says want.
func wantForbidden(t *testing.T, doing string, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want Forbidden: %s", doing, err, want)
	}
}
