package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
)

// installField is the field manager the RBAC is applied with.
const installField = "gatefold-test-install"

// rbacKinds are the kinds Install applies from a rendered overlay.
var rbacKinds = map[string]bool{
	"ServiceAccount":     true,
	"Role":               true,
	"RoleBinding":        true,
	"ClusterRole":        true,
	"ClusterRoleBinding": true,
}

// Installed is gatefold's ServiceAccount, with the RBAC of one overlay
// applied, on a running control plane.
type Installed struct {
	// Namespace is the ServiceAccount's, gatefold's own namespace.
	Namespace string
	// User is the ServiceAccount's user name,
	// system:serviceaccount:<namespace>:<name>.
	User string
	// Groups are the groups the API server gives a ServiceAccount.
	Groups []string
	// Config impersonates the ServiceAccount: a manager built on it has
	// exactly the rights the overlay grants.
	Config *rest.Config
	// Env is the environment the overlay's Deployment gives the manager
	// container as literal values (GOMEMLIMIT), "NAME=value"; a replica
	// started as a process gets it too.
	Env []string
	// Args are the manager container's arguments after `manager`, as
	// installed: listening on every interface (see LocalArgs).
	Args []string

	env *devenv.Env
}

// Install renders config/<overlay> ("default", "ha", "self-signed") with
// the control plane's kubectl kustomize and applies, as the administrator,
// exactly the ServiceAccount, Roles, ClusterRoles and bindings it contains
// (creating their namespace if it is missing), nothing else. Applying is
// server-side and forced, so it may follow a kubectl apply of the overlay.
func Install(ctx context.Context, env *devenv.Env, overlay string) (*Installed, error) {
	objs, err := RenderOverlay(env.AssetsDir, overlay)
	if err != nil {
		return nil, err
	}
	i, err := Describe(env, "config/"+overlay, objs)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: i.Namespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	for _, u := range objs {
		if !rbacKinds[u.GetKind()] {
			continue
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(installField), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s %s from config/%s: %w", u.GetKind(), client.ObjectKeyFromObject(u), overlay, err)
		}
	}
	return i, nil
}

// Describe returns the Installed of objs, rendered from source (an overlay
// or the chart): its one ServiceAccount, and the literal environment and
// the arguments of its Deployment's manager container. It applies nothing:
// objs are in the cluster already, or Install applies them.
func Describe(env *devenv.Env, source string, objs []*unstructured.Unstructured) (*Installed, error) {
	var sa *unstructured.Unstructured
	i := &Installed{env: env}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			var err error
			if i.Env, i.Args, err = managerContainer(u); err != nil {
				return nil, fmt.Errorf("reading the Deployment of %s: %w", source, err)
			}
		case "ServiceAccount":
			if sa != nil {
				return nil, fmt.Errorf("%s has more than one ServiceAccount", source)
			}
			sa = u
		}
	}
	if sa == nil {
		return nil, fmt.Errorf("%s has no ServiceAccount", source)
	}
	i.Namespace = sa.GetNamespace()
	i.User = "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName()
	i.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace(), "system:authenticated"}
	i.Config = rest.CopyConfig(env.Config)
	i.Config.Impersonate = rest.ImpersonationConfig{UserName: i.User, Groups: i.Groups}
	return i, nil
}

// RenderOverlay renders config/<overlay> with the kubectl in assetsDir.
func RenderOverlay(assetsDir, overlay string) ([]*unstructured.Unstructured, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	return RenderKustomization(assetsDir, filepath.Join(root, "config", overlay))
}

// RenderKustomization renders the kustomization in dir with the kubectl in
// assetsDir, as kubectl kustomize does.
func RenderKustomization(assetsDir, dir string) ([]*unstructured.Unstructured, error) {
	out, err := exec.Command(filepath.Join(assetsDir, "kubectl"), "kustomize", dir).Output()
	if err != nil {
		return nil, fmt.Errorf("rendering %s with kubectl kustomize: %w", dir, err)
	}
	objs, err := devenv.DecodeObjects(out)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", dir, err)
	}
	return objs, nil
}

// WriteKubeconfig writes to path a kubeconfig that impersonates the
// ServiceAccount (`as` and `as-groups` of its user), for a gatefold process.
// A server (host:port) names another address of the API server; "" keeps it.
func (i *Installed) WriteKubeconfig(path, server string) error {
	b, err := i.env.Kubeconfig()
	if err != nil {
		return err
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		return fmt.Errorf("reading the administrator's kubeconfig: %w", err)
	}
	for _, user := range kc.AuthInfos {
		user.Impersonate = i.User
		user.ImpersonateGroups = i.Groups
	}
	for _, cluster := range kc.Clusters {
		if cluster.Server, err = serverURL(cluster.Server, server); err != nil {
			return err
		}
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing the kubeconfig of %s: %w", i.User, err)
	}
	return os.Chmod(path, 0o600)
}

// serverURL is the API server URL raw with its host:port replaced by server;
// "" keeps raw.
func serverURL(raw, server string) (string, error) {
	if server == "" {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing the API server's URL %q: %w", raw, err)
	}
	u.Host = server
	return u.String(), nil
}

// managerContainer returns the literal environment ("NAME=value") and
// the arguments after the `manager` command of Deployment d's manager
// container.
func managerContainer(d *unstructured.Unstructured) (env, args []string, err error) {
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return nil, nil, err
	}
	for _, c := range containers {
		c, ok := c.(map[string]any)
		if !ok || c["name"] != "manager" {
			continue
		}
		vars, _, err := unstructured.NestedSlice(c, "env")
		if err != nil {
			return nil, nil, err
		}
		for _, e := range vars {
			if e, ok := e.(map[string]any); ok && e["valueFrom"] == nil {
				env = append(env, fmt.Sprintf("%v=%v", e["name"], e["value"]))
			}
		}
		if args, _, err = unstructured.NestedStringSlice(c, "args"); err != nil {
			return nil, nil, err
		}
		if len(args) > 0 && args[0] == "manager" {
			args = args[1:]
		}
	}
	return env, args, nil
}

// ClientAs is a client of env's API server that impersonates user in
// groups (the API server adds system:authenticated): it has exactly the
// rights RBAC gives them.
func ClientAs(env *devenv.Env, user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a client as %s: %w", user, err)
	}
	return c, nil
}
