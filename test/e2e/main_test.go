package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gatefold/gatefold/internal/devenv"
)

// startControlPlane starts a control plane for one test and writes an
// administrator's kubeconfig for the processes the test runs.
func startControlPlane(t *testing.T, opts devenv.Options) (*devenv.Env, string) {
	t.Helper()
	env, err := devenv.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := env.WriteKubeconfig(filepath.Join(t.TempDir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return env, kubeconfig
}

// kubectl runs the kubectl built beside the control plane and returns its
// combined output, failing the test when it fails.
func kubectl(t *testing.T, env *devenv.Env, kubeconfig string, args ...string) string {
	t.Helper()
	return kubectlIn(t, env, kubeconfig, "", args...)
}

// kubectlIn is kubectl run in folder dir, the current one when empty.
func kubectlIn(t *testing.T, env *devenv.Env, kubeconfig, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.AssetsDir, "kubectl"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
