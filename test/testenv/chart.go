package testenv

import (
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatefold/gatefold/internal/devenv"
)

// ChartRelease and ChartNamespace are the release and namespace the tests
// install charts/gatefold as: the namespace is the overlays'.
const (
	ChartRelease   = "gatefold"
	ChartNamespace = "gatefold-system"
)

// LoadChart loads charts/gatefold from the repository.
func LoadChart() (*chart.Chart, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	c, err := loader.Load(filepath.Join(root, "charts", "gatefold"))
	if err != nil {
		return nil, fmt.Errorf("loading charts/gatefold: %w", err)
	}
	return c, nil
}

// RenderChart renders charts/gatefold with values as `helm template
// --include-crds` does, release ChartRelease in ChartNamespace, values
// checked against values.schema.json, and returns its objects, CRDs first.
func RenderChart(values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := LoadChart()
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace = ChartRelease, ChartNamespace
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, fmt.Errorf("rendering charts/gatefold: %w", err)
	}
	return devenv.DecodeObjects([]byte(rel.Manifest))
}
