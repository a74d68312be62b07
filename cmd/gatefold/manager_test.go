package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestManagerRefusesFlagsItCannotRunWith(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"a grace shorter than the webhooks' timeout":      {args: []string{"--claim-grace=5s"}, want: "--claim-grace is 5s: it must be at least 10s, the fragment webhooks' timeout"},
		"a grace under a second (leaseDurationSeconds 0)": {args: []string{"--claim-grace=500ms"}, want: "--claim-grace is 500ms: it must be at least 10s"},
		"no collect period (time.NewTicker panics)":       {args: []string{"--claim-collect-period=0"}, want: "--claim-collect-period is 0s: it must be positive"},
		"a negative collect period":                       {args: []string{"--claim-collect-period=-1s"}, want: "--claim-collect-period is -1s: it must be positive"},
		"a collect period over half the grace":            {args: []string{"--claim-grace=20s", "--claim-collect-period=11s"}, want: "--claim-collect-period is 11s: it must be at most half of --claim-grace (20s)"},
		"no status workers":                               {args: []string{"--merger-status-workers=0"}, want: "--merger-status-workers is 0: it must be at least 1"},
		"a debounce longer than its maximum":              {args: []string{"--merger-debounce=2s", "--merger-debounce-max=1s"}, want: "--merger-debounce-max is 1s: it must be at least --merger-debounce (2s)"},
		"a negative pool sibling grace":                   {args: []string{"--pool-sibling-grace=-1s"}, want: "--pool-sibling-grace is -1s: it must not be negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// A kubeconfig that does not exist: a manager that got past its
			// flags fails on it and never reaches a cluster.
			args := append([]string{"--kubeconfig=" + filepath.Join(t.TempDir(), "none")}, tc.args...)
			err := runManager(args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("gatefold manager %s: got %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}

func TestManagerDefaultsLeaveAMarginForTheAdmissionChain(t *testing.T) {
	var o managerOptions
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Errorf("The defaults are refused: %v", err)
	}
	if o.webhook.ClaimGrace != time.Minute {
		t.Errorf("--claim-grace defaults to %v, want 1m: longer than parallel 10s webhooks plus storage and cache lag", o.webhook.ClaimGrace)
	}
}
