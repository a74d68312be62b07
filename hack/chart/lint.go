package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/gatefold/gatefold/test/testenv"
)

// lint runs helm lint --strict on chart with its default values and with
// each ci/*-values.yaml, the documented combinations, and fails on any
// warning or error, as helm lint --strict does; then renders the chart with
// each as helm template does for a cluster that serves ServiceMonitors
// (testenv.RenderChart), which fails where a template calls fail (lint only
// logs those, and cannot be told which APIs the cluster serves).
func lint(chart string) error {
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if err != nil {
		return err
	}
	var errs []error
	for _, file := range append([]string{""}, files...) {
		vals := map[string]any{}
		if file != "" {
			if vals, err = chartutil.ReadValuesFile(file); err != nil {
				return fmt.Errorf("reading %s: %w", file, err)
			}
		}
		l := action.NewLint()
		l.Strict, l.Namespace = true, testenv.ChartNamespace
		res := l.Run([]string{chart}, vals)
		name := "default values"
		if file != "" {
			name = file
		}
		// Strict, the result's errors are its warnings and errors.
		for _, e := range res.Errors {
			errs = append(errs, fmt.Errorf("helm lint --strict %s (%s): %w", chart, name, e))
		}
		_, err := testenv.RenderChart(vals)
		if err != nil {
			errs = append(errs, fmt.Errorf("helm template %s (%s): %w", chart, name, err))
		}
		if len(res.Errors) == 0 && err == nil {
			fmt.Printf("helm lint --strict and helm template %s (%s): ok\n", chart, name)
		}
	}
	return errors.Join(errs...)
}
