package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The flag rules themselves are tested in internal/app; this checks that
// `gatefold manager` applies them before it reaches a cluster.
func TestManagerRefusesFlagsBeforeItStarts(t *testing.T) {
	// A kubeconfig that does not exist: a manager past its flags fails on it.
	kubeconfig := "--kubeconfig=" + filepath.Join(t.TempDir(), "none")
	tests := map[string]struct {
		args []string
		want string
	}{
		"a flag value app.Options refuses": {args: []string{kubeconfig, "--claim-grace=5s"}, want: "--claim-grace is 5s: it must be at least 10s"},
		"valid flags, no cluster":          {args: []string{kubeconfig}, want: "loading kubeconfig"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := runManager(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("gatefold manager %s: got %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}
