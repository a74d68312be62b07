package testenv

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatefold/gatefold/internal/devenv"
)

// Kubectl runs the kubectl built with the control plane, as a cluster admin,
// with stdin, and returns what it printed to stdout and stderr.
func Kubectl(t *testing.T, env *devenv.Env, stdin string, args ...string) (string, string, error) {
	t.Helper()
	path, err := env.WriteKubeconfig(filepath.Join(t.TempDir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(env.AssetsDir, "kubectl"), append([]string{"--kubeconfig", path}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}
