package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
)

// lintNamespace is the namespace the chart is linted for, the overlays'.
const lintNamespace = "gatefold-system"

// lint runs helm lint --strict on chart with its default values and with
// each ci/*-values.yaml, the documented combinations, and fails on any
// warning or error, as helm lint --strict does.
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
		l.Strict, l.Namespace = true, lintNamespace
		res := l.Run([]string{chart}, vals)
		name := "default values"
		if file != "" {
			name = file
		}
		// Strict, the result's errors are its warnings and errors.
		for _, e := range res.Errors {
			errs = append(errs, fmt.Errorf("helm lint --strict %s (%s): %w", chart, name, e))
		}
		if len(res.Errors) == 0 {
			fmt.Printf("helm lint --strict %s (%s): ok\n", chart, name)
		}
	}
	return errors.Join(errs...)
}
