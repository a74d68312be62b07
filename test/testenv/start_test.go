package testenv

import "testing"

func TestFlagValueReadsEachFormTheFlagPackageTakes(t *testing.T) {
	tests := map[string]struct {
		args      []string
		want      string
		wantFound bool
	}{
		"absent":                      {args: []string{"--webhook-port-x=1", "webhook-port"}},
		"two dashes and equals":       {args: []string{"--webhook-port=9443"}, want: "9443", wantFound: true},
		"one dash, value after":       {args: []string{"-webhook-port", "9443"}, want: "9443", wantFound: true},
		"the last one wins":           {args: []string{"--webhook-port", "1", "--leader-elect=false", "--webhook-port=2"}, want: "2", wantFound: true},
		"a value is not taken a flag": {args: []string{"--claims-namespace", "webhook-port"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, found := flagValue(tc.args, "webhook-port")
			if got != tc.want || found != tc.wantFound {
				t.Errorf("flagValue(%q) = %q, %v; want %q, %v", tc.args, got, found, tc.want, tc.wantFound)
			}
		})
	}
}
