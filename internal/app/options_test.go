package app

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestValidateRefusesFlagsTheManagerCannotRunWith(t *testing.T) {
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
		"a negative resync period":                        {args: []string{"--merger-resync-period=-1m"}, want: "--merger-resync-period is -1m0s: it must not be negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := parse(t, tc.args...).Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("gatefold manager %s: got %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}

func TestDefaultsLeaveAMarginForTheAdmissionChain(t *testing.T) {
	o := parse(t)
	if err := o.Validate(); err != nil {
		t.Errorf("The defaults are refused: %v", err)
	}
	if o.Webhook.ClaimGrace != time.Minute {
		t.Errorf("--claim-grace defaults to %v, want 1m: longer than parallel 10s webhooks plus storage and cache lag", o.Webhook.ClaimGrace)
	}
}

// parse returns the Options of the `gatefold manager` flags args.
func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &o
}
