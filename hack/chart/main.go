// Command chart keeps the Helm chart charts/gatefold in step with config/,
// for the Makefile:
//
//	go run ./hack/chart generate   # make manifests: the chart's generated files
//	go run ./hack/chart lint       # make lint: helm lint --strict and helm template, with each ci/*-values.yaml
//
// generate copies the CRDs into crds/, sets Chart.yaml's appVersion to the
// image tag config/manager names, and writes templates/_generated.tpl (the
// manager's and self-signed mode's RBAC rules and the webhooks, as
// controller-gen wrote them into config/) and templates/clusterroles.yaml
// (config/rbac's ClusterRoles written by hand: metrics, tenants). The
// templates include them; TestChartRendersOverlays compares the whole.
// It is never linked into gatefold.
package main

import (
	"fmt"
	"os"
)

// chartDir is the chart, relative to the repository root the Makefile runs in.
const chartDir = "charts/gatefold"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/chart generate|lint")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "generate":
		err = generate(".", chartDir)
	case "lint":
		err = lint(chartDir)
	default:
		err = fmt.Errorf("unknown command %q: want generate or lint", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
