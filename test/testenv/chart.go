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

// ServiceMonitorAPI is Prometheus Operator's ServiceMonitor, as
// .Capabilities.APIVersions names it: the chart renders one only for a
// cluster that serves it.
const ServiceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"

// RenderChart renders charts/gatefold with values as `helm template
// --include-crds --api-versions ServiceMonitorAPI` does, release
// ChartRelease in ChartNamespace, values checked against
// values.schema.json, and returns its objects, CRDs first.
func RenderChart(values map[string]any) ([]*unstructured.Unstructured, error) {
	return RenderChartFor(ChartNamespace, []string{ServiceMonitorAPI}, values)
}

// RenderChartFor is RenderChart into namespace, for a cluster that serves
// apis (group/version/kind) besides Kubernetes' own.
func RenderChartFor(namespace string, apis []string, values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := LoadChart()
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace, install.APIVersions = ChartRelease, namespace, apis
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, fmt.Errorf("rendering charts/gatefold: %w", err)
	}
	return devenv.DecodeObjects([]byte(rel.Manifest))
}
