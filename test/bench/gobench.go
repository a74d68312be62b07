package main

import (
	"bufio"
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
}

// goBenchmarks runs the Go benchmarks next to the code: the validating
// handler over a real informer cache, and the fold. The quick run keeps to
// the fold: the handler's fixture needs a control plane of its own.
func goBenchmarks(benchtime string, quick bool) ([]GoBenchmark, error) {
	pkgs := []string{"./webhook", "./merger"}
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
	var results []GoBenchmark
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		ns, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", sc.Text(), err)
		}
		results = append(results, GoBenchmark{Name: f[0], NsPerOp: ns})
	}
	return results, nil
}
