package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseOnly(t *testing.T) {
	names := []string{"limit", "floor", "update", "ssa-per-writer", "gatefold", "gatefold-pool"}
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
			notPhases:  []string{"admission", "scale", "steady", "failover", "dataplane", "go"},
			strategies: []string{"gatefold"},
			notStrats:  []string{"limit", "floor", "update", "ssa-per-writer", "gatefold-pool"},
		},
		"strategies and phases mix": {
			only:       "contention:limit, contention:gatefold,scale",
			phases:     []string{"contention", "scale"},
			notPhases:  []string{"admission", "steady"},
			strategies: []string{"limit", "gatefold"},
			notStrats:  []string{"floor", "update"},
		},
		"the data plane alone": {
			only:      "dataplane",
			phases:    []string{"dataplane"},
			notPhases: []string{"contention", "admission", "scale", "steady", "failover", "go"},
			notStrats: names,
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
	gatefold := StrategyResult{Strategy: "gatefold", Writers: 4, Gateways: 2,
		Add: Phase{Converged: true, WriteSeconds: 1, Seconds: 2, GatewayWrites: 3}}
	tests := map[string]struct {
		report Report
		want   []string
		absent []string
	}{
		"gatefold alone has no references to compare with": {
			report: Report{Params: p, Contention: []StrategyResult{gatefold}},
			want:   []string{"### Contention", "floor: not run", "limit: not run", "| Gateway writes per Gateway | 1.5 |"},
			absent: []string{"### Admission", "### Scale", "### Steady", "### Failover", "### Data plane", "### Go"},
		},
		"gatefold beside the limit and the floor": {
			report: Report{Params: p, Contention: []StrategyResult{
				{Strategy: "limit", Writers: 1, Gateways: 2, Add: Phase{Converged: true, WriteSeconds: 0.5, Seconds: 0.5, GatewayWrites: 2}},
				{Strategy: "floor", Writers: 4, Add: Phase{Converged: true, WriteSeconds: 0.25, Seconds: 0.25}},
				gatefold,
			}},
			want: []string{"| 24 fragment creates through admission, 4 writers | 1.00 s | floor: 0.25 s | 4.00× |",
				"| every listener folded | 2.00 s | limit: 0.50 s | 4.00× |"},
			absent: []string{"gatefold-pool"},
		},
		"a pool beside the limit, per Gateway it ended with": {
			report: Report{Params: Params{Routes: 130, Gateways: 2, Writers: 4}, Contention: []StrategyResult{
				{Strategy: "limit", Writers: 1, Gateways: 2, Add: Phase{Converged: true, WriteSeconds: 0.5, Seconds: 0.5, GatewayWrites: 2}},
				{Strategy: "gatefold-pool", Writers: 4, Gateways: 3, Add: Phase{Converged: true, WriteSeconds: 1, Seconds: 2, GatewayWrites: 6}},
			}},
			want: []string{"**gatefold-pool against the limit and the floor**", "| every listener folded | 2.00 s | limit: 0.50 s | 4.00× |",
				"| Gateways the pool ended with | 3 | ⌈130 / 63⌉ = 3 |", "| Gateway writes per Gateway | 2.0 |",
				"| gatefold-pool | 4 | 1.00 s | – | 2.00 s | 4.00× | 3 | 6 | 2.0 |"},
			absent: []string{"**gatefold against"},
		},
		"scale and steady state alone": {
			report: Report{Params: p, Scale: &ScaleResult{Fragments: 200, Gateways: 4},
				Steady: &SteadyResult{Fragments: 200, Seconds: 3, Reads: reads{Gatefold: 1, ByResource: map[string]int{"list leases": 1}}}},
			want:   []string{"### Scale", "First install", "Warm restart", "### Steady state", "(list leases (claims) 1)"},
			absent: []string{"### Contention", "### Admission", "### Failover"},
		},
		"the data plane beside the fold and Traefik alone": {
			report: Report{Params: p, Dataplane: &DataplaneResult{Traefik: "v3.6.12", Fragments: 20, Gateways: 1, Writers: 4, ProbeMillis: 25,
				Fold:         Latency{Requests: 20, P50: 400, P90: 500, P99: 560, Max: 570},
				FirstRequest: Latency{Requests: 20, P50: 4800, P90: 5000, P99: 5600, Max: 5700},
				TraefikAlone: Latency{Requests: 20, P50: 2400, P90: 2450, P99: 2800, Max: 4100},
				Folded:       20, Served: 20, AloneServed: 20, GatewaySpecWrites: 1,
				Writes:        writes{Gatefold: 41, ByResource: map[string]int{"listenerfragments/status": 40, "gateways": 1}},
				TraefikWrites: map[string]int{"httproutes/status": 40}}},
			want: []string{"### Data plane: fragment create to first request through Traefik", "on 1 Gateway of class `traefik`, served by Traefik v3.6.12",
				"`go run ./test/bench --only dataplane`",
				"| fold: create → listener on the Gateway's spec | 20 of 20 | 400 ms | 500 ms | 560 ms | 570 ms |",
				"| first request: create → first answer through Traefik | 20 of 20 | 4.80 s | 5.00 s | 5.60 s | 5.70 s |",
				"| Traefik alone: route create → first answer | 20 of 20 | 2.40 s | 2.45 s | 2.80 s | 4.10 s |",
				"| first request / fold | | 12.00× | 10.00× | 10.00× | 10.00× |",
				"| first request / Traefik alone | | 2.00× |",
				"Gateway spec writes until the last hostname was served: 1 (1.0 per Gateway)",
				"Traefik 40 (httproutes/status 40)", "correct: yes."},
			absent: []string{"### Contention", "### Scale"},
		},
		"a data plane that did not serve every fragment is not correct": {
			report: Report{Params: p, Dataplane: &DataplaneResult{Fragments: 20, Gateways: 1, Folded: 20, Served: 19, AloneServed: 20}},
			want:   []string{"| first request: create → first answer through Traefik | 19 of 20 |", "correct: **no**."},
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
