package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// GoBenchmark is one line of `go test -bench` output.
type GoBenchmark struct {
	Name    string  `json:"name"`
	NsPerOp float64 `json:"nsPerOp"`
	// CPUNsPerOp is the benchmark's own cpu-ns/op metric, 0 without one.
	CPUNsPerOp float64 `json:"cpuNsPerOp,omitempty"`
}

// goBenchmarks runs the Go benchmarks next to the code: the validating
// handler over a real informer cache, and the fold. The quick run keeps to
// the fold: the handler's fixture needs a control plane of its own.
func goBenchmarks(benchtime string, quick bool) ([]GoBenchmark, error) {
	pkgs := []string{"./webhook", "./fold"}
	if quick {
		pkgs = pkgs[1:]
	}
	progress("Go benchmarks: go test -run '^$' -bench . -benchtime %s %s", benchtime, strings.Join(pkgs, " "))
	cmd := exec.Command("go", append([]string{"test", "-run", "^$", "-bench", ".", "-benchtime", benchtime}, pkgs...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test -bench: %w\n%s", err, out.String())
	}
	results, byPackage, err := parseGoBench(out.String())
	if err != nil {
		return nil, err
	}
	// A benchmark that skips leaves no line and go test passes: each
	// package must have given one.
	for _, pkg := range pkgs {
		if byPackage[modulePath+strings.TrimPrefix(pkg, ".")] == 0 {
			return nil, fmt.Errorf("go test -bench ran no benchmark in %s:\n%s", pkg, out.String())
		}
	}
	return results, nil
}

const modulePath = "github.com/gatefold/gatefold"

// parseGoBench reads go test -bench output: each result, and how many each
// package (its "pkg:" line) gave.
func parseGoBench(out string) ([]GoBenchmark, map[string]int, error) {
	var results []GoBenchmark
	byPackage := map[string]int{}
	pkg := ""
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "pkg:" {
			pkg = f[1]
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		ns, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %q: %w", line, err)
		}
		g := GoBenchmark{Name: f[0], NsPerOp: ns}
		for i := 4; i+1 < len(f); i += 2 {
			if f[i+1] == "cpu-ns/op" {
				if g.CPUNsPerOp, err = strconv.ParseFloat(f[i], 64); err != nil {
					return nil, nil, fmt.Errorf("reading %q: %w", line, err)
				}
			}
		}
		results = append(results, g)
		byPackage[pkg]++
	}
	return results, byPackage, nil
}
