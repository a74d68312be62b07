package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseOnly(t *testing.T) {
	names := []string{"limit", "floor", "update", "ssa-per-writer", "gatefold"}
	tests := map[string]struct {
		only       string
		wantErr    string
		phases     []string
		notPhases  []string
		strategies []string
		notStrats  []string
	}{
		"nothing runs everything": {
			phases:     phases,
			strategies: names,
		},
		"one strategy runs contention with it alone": {
			only:       "contention:gatefold",
			phases:     []string{"contention"},
			notPhases:  []string{"admission", "scale", "steady", "failover", "go"},
			strategies: []string{"gatefold"},
			notStrats:  []string{"limit", "floor", "update", "ssa-per-writer"},
		},
		"strategies and phases mix": {
			only:       "contention:limit, contention:gatefold,scale",
			phases:     []string{"contention", "scale"},
			notPhases:  []string{"admission", "steady"},
			strategies: []string{"limit", "gatefold"},
			notStrats:  []string{"floor", "update"},
		},
		"a whole phase runs every strategy": {
			only:       "contention",
			strategies: names,
		},
		"a phase that is not one": {
			only:    "scales",
			wantErr: `no phase "scales"`,
		},
		"a strategy that is not one": {
			only:    "contention:ssa",
			wantErr: `no contention strategy "ssa"`,
		},
		"only contention has parts": {
			only:    "scale:warm",
			wantErr: "only contention has",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sel, err := parseOnly(tc.only, names)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, names []string, runs func(string) bool, want bool) {
				for _, n := range names {
					if runs(n) != want {
						t.Errorf("%s %s runs: %v, want %v", what, n, !want, want)
					}
				}
			}
			check("phase", tc.phases, sel.phase, true)
			check("phase", tc.notPhases, sel.phase, false)
			check("strategy", tc.strategies, sel.strategy, true)
			check("strategy", tc.notStrats, sel.strategy, false)
		})
	}
}

func TestMarkdownShowsOnlyWhatRan(t *testing.T) {
	p := Params{Routes: 24, Gateways: 2, Writers: 4, Settle: time.Second}
	gatefold := StrategyResult{Strategy: "gatefold", Writers: 4,
		Add: Phase{Converged: true, WriteSeconds: 1, Seconds: 2, GatewayWrites: 3}}
	tests := map[string]struct {
		report Report
		want   []string
		absent []string
	}{
		"gatefold alone has no references to compare with": {
			report: Report{Params: p, Contention: []StrategyResult{gatefold}},
			want:   []string{"### Contention", "floor: not run", "limit: not run", "| Gateway writes per Gateway | 1.5 |"},
			absent: []string{"### Admission", "### Scale", "### Steady", "### Failover", "### Go"},
		},
		"gatefold beside the limit and the floor": {
			report: Report{Params: p, Contention: []StrategyResult{
				{Strategy: "limit", Writers: 1, Add: Phase{Converged: true, WriteSeconds: 0.5, Seconds: 0.5, GatewayWrites: 2}},
				{Strategy: "floor", Writers: 4, Add: Phase{Converged: true, WriteSeconds: 0.25, Seconds: 0.25}},
				gatefold,
			}},
			want: []string{"| 24 fragment creates through admission, 4 writers | 1.00 s | floor: 0.25 s | 4.00× |",
				"| every listener folded | 2.00 s | limit: 0.50 s | 4.00× |"},
		},
		"scale and steady state alone": {
			report: Report{Params: p, Scale: &ScaleResult{Fragments: 200, Gateways: 4},
				Steady: &SteadyResult{Fragments: 200, Seconds: 3, Reads: reads{Gatefold: 1, ByResource: map[string]int{"list leases": 1}}}},
			want:   []string{"### Scale", "First install", "Warm restart", "### Steady state", "(list leases (claims) 1)"},
			absent: []string{"### Contention", "### Admission", "### Failover"},
		},
		"profiles show the API server's top functions": {
			report: Report{Params: p, Profiles: []PhaseProfile{
				{Phase: "scale-install", Seconds: 2, Files: map[string]string{"apiserver": "scale-install-apiserver.pprof"},
					APIServer: &TopProfile{Duration: "2.01s", Samples: "2710ms (134.88%)",
						Functions: []TopFunction{{Flat: "130ms", FlatPercent: "4.80%", Cum: "270ms", Function: "runtime.scanSpan"}}}},
				{Phase: "steady", Seconds: 3},
			}},
			want: []string{"### CPU profiles", "**scale-install** (2.00 s; scale-install-apiserver.pprof): API server CPU 2710ms (134.88%) in 2.01s",
				"| 130ms | 4.80% | 270ms | `runtime.scanSpan` |", "**steady** (3.00 s): no API server profile"},
			absent: []string{"### Contention"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			md := tc.report.markdown()
			for _, w := range tc.want {
				if !strings.Contains(md, w) {
					t.Errorf("the report lacks %q:\n%s", w, md)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(md, a) {
					t.Errorf("the report has %q:\n%s", a, md)
				}
			}
		})
	}
}

func TestParseTop(t *testing.T) {
	out := `File: kube-apiserver
Type: cpu
Duration: 2.01s, Total samples = 2710ms (134.88%)
Showing nodes accounting for 860ms, 31.73% of 2710ms total
      flat  flat%   sum%        cum   cum%
     130ms  4.80%  4.80%      270ms  9.96%  runtime.tryDeferToSpanScan
      90ms  3.32% 11.81%       90ms  3.32%  runtime.nextFreeFast (inline)
`
	top := parseTop(out)
	want := TopProfile{Duration: "2.01s", Samples: "2710ms (134.88%)", Functions: []TopFunction{
		{Flat: "130ms", FlatPercent: "4.80%", Cum: "270ms", Function: "runtime.tryDeferToSpanScan"},
		{Flat: "90ms", FlatPercent: "3.32%", Cum: "90ms", Function: "runtime.nextFreeFast (inline)"},
	}}
	if !reflect.DeepEqual(*top, want) {
		t.Errorf("parseTop:\ngot  %+v\nwant %+v", *top, want)
	}
}
