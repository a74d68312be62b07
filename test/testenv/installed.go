package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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

	env *devenv.Env
}

// Install renders config/<overlay> ("default", "ha", "self-signed") with
// the control plane's kubectl kustomize and applies, as the administrator,
// exactly the ServiceAccount, Roles, ClusterRoles and bindings it contains
// (creating their namespace if it is missing), nothing else. Applying is
// server-side and forced, so it may follow a kubectl apply of the overlay.
func Install(ctx context.Context, env *devenv.Env, overlay string) (*Installed, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(filepath.Join(env.AssetsDir, "kubectl"), "kustomize", filepath.Join(root, "config", overlay)).Output()
	if err != nil {
		return nil, fmt.Errorf("rendering config/%s with kubectl kustomize: %w", overlay, err)
	}
	var objs []*unstructured.Unstructured
	var sa *unstructured.Unstructured
	var literals []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding config/%s: %w", overlay, err)
		}
		if u.GetKind() == "Deployment" {
			if literals, err = managerEnv(u); err != nil {
				return nil, fmt.Errorf("reading the Deployment of config/%s: %w", overlay, err)
			}
		}
		if !rbacKinds[u.GetKind()] {
			continue
		}
		if u.GetKind() == "ServiceAccount" {
			if sa != nil {
				return nil, fmt.Errorf("config/%s has more than one ServiceAccount", overlay)
			}
			sa = u
		}
		objs = append(objs, u)
	}
	if sa == nil {
		return nil, fmt.Errorf("config/%s has no ServiceAccount", overlay)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sa.GetNamespace()}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	for _, u := range objs {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(installField), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s %s from config/%s: %w", u.GetKind(), client.ObjectKeyFromObject(u), overlay, err)
		}
	}

	i := &Installed{
		Namespace: sa.GetNamespace(),
		User:      "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName(),
		Groups:    []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace(), "system:authenticated"},
		Env:       literals,
		env:       env,
	}
	i.Config = rest.CopyConfig(env.Config)
	i.Config.Impersonate = rest.ImpersonationConfig{UserName: i.User, Groups: i.Groups}
	return i, nil
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

// managerEnv returns the literal environment of Deployment d's manager
// container, "NAME=value".
func managerEnv(d *unstructured.Unstructured) ([]string, error) {
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range containers {
		c, ok := c.(map[string]any)
		if !ok || c["name"] != "manager" {
			continue
		}
		env, _, err := unstructured.NestedSlice(c, "env")
		if err != nil {
			return nil, err
		}
		for _, e := range env {
			if e, ok := e.(map[string]any); ok && e["valueFrom"] == nil {
				out = append(out, fmt.Sprintf("%v=%v", e["name"], e["value"]))
			}
		}
	}
	return out, nil
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
