package devenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindAssetsNamesWhatIsMissing(t *testing.T) {
	// A bin/controlplane built before kube-controller-manager joined it.
	old := t.TempDir()
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if err := os.WriteFile(filepath.Join(old, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(AssetsEnv, "")
	t.Chdir(t.TempDir()) // outside the repository, whose bin/controlplane would be found
	_, err := FindAssets(old)
	if err == nil || !strings.Contains(err.Error(), old+" has no kube-controller-manager: run `make controlplane`") {
		t.Errorf("FindAssets(%s) = %v, want it to name kube-controller-manager and `make controlplane`", old, err)
	}
	if err := os.WriteFile(filepath.Join(old, "kube-controller-manager"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindAssets(old); err != nil || got != old {
		t.Errorf("FindAssets(%s) = %q, %v, want the folder", old, got, err)
	}
}
