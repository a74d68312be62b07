package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

func TestParseOnly(t *testing.T) {
	names := []string{"limit", "floor", "crd-floor", "native", "update", "ssa-per-writer", "gatefold", "gatefold-pool"}
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
			notStrats:  []string{"limit", "floor", "crd-floor", "native", "update", "ssa-per-writer", "gatefold-pool"},
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
			want: []string{"| 24 fragment creates through admission, 4 writers | 1.00 s | crd-floor: not run | – | ≤ 2.5× | – |",
				"| the same, against ConfigMap creates | | floor: 0.25 s | 4.00× | | |",
				"| every listener folded | 2.00 s | ideal: not run (needs crd-floor and limit) | – | ≤ 1.5× | – |",
				"| the same, against the limit | | limit: 0.50 s | 4.00× | | |"},
			absent: []string{"gatefold-pool"},
		},
		"gatefold and its pool against crd-floor, ideal and native": {
			report: Report{Params: Params{Routes: 1008, Gateways: 16, Writers: 32}, Contention: []StrategyResult{
				{Strategy: "limit", Writers: 1, Gateways: 16, Add: Phase{Converged: true, WriteSeconds: 3, Seconds: 3, GatewayWrites: 16}},
				{Strategy: "floor", Writers: 32, Add: Phase{Converged: true, WriteSeconds: 0.75, Seconds: 0.8}},
				{Strategy: "crd-floor", Writers: 32, Add: Phase{Converged: true, WriteSeconds: 1.5, Seconds: 1.6}},
				{Strategy: "native", Writers: 32, Add: Phase{Converged: true, WriteSeconds: 1.2, Seconds: 1.3}},
				{Strategy: "gatefold", Writers: 32, Gateways: 16, Add: Phase{Converged: true, WriteSeconds: 3, Seconds: 7, GatewayWrites: 40, Writes: writes{Conflicts: 1}}},
				{Strategy: "gatefold-pool", Writers: 32, Gateways: 17, Add: Phase{Converged: true, WriteSeconds: 4.5, Seconds: 6, GatewayWrites: 20}},
			}},
			want: []string{"`crd-floor`: the writers create the same fragments as gatefold's rows in a namespace labelled `gatefold.dev/admission=disabled`",
				"`ideal` = crd-floor's writes returned + limit's all there",
				"| crd-floor | 32 | 1.50 s | 2.00× | 1.00× | – | – | – | – | – |",
				"| native | 32 | 1.20 s | 1.60× | 0.80× | – | – | – | – | – |",
				"| gatefold | 32 | 3.00 s | 4.00× | 2.00× | 7.00 s | 2.33× | 16 | 40 | 2.5 |",
				"| 1008 fragment creates through admission, 32 writers | 3.00 s | crd-floor: 1.50 s | 2.00× | ≤ 2.5× | yes |",
				"| 1008 fragment creates through admission, 32 writers | 4.50 s | crd-floor: 1.50 s | 3.00× | ≤ 2.5× | **not met** |",
				"| the same, against native ListenerSet creates | | native: 1.20 s | 2.50× | | |",
				"| every listener folded | 7.00 s | ideal: 1.50 s + 3.00 s = 4.50 s | 1.56× | ≤ 1.5× | **not met** |",
				"| every listener folded | 6.00 s | ideal: 1.50 s + 3.00 s = 4.50 s | 1.33× | ≤ 1.5× | yes |",
				"| the same, against native ListenerSet creates | | native: 1.20 s | 5.83× | | |",
				"| Gateways the pool ended with | 17 | ⌈1008 / 63⌉ = 16 | | no more | **not met** |",
				"| Gateway writes per Gateway | 2.5 | 1 | | ≤ 2 | **not met** |",
				"| 409 conflicts | 1 | | | 0 | **not met** |",
				"| crd-floor | 0.00 s | – | – | – |",
				"| native | – | – | – | none |"},
		},
		"a pool beside the limit, per Gateway it ended with": {
			report: Report{Params: Params{Routes: 130, Gateways: 2, Writers: 4}, Contention: []StrategyResult{
				{Strategy: "limit", Writers: 1, Gateways: 2, Add: Phase{Converged: true, WriteSeconds: 0.5, Seconds: 0.5, GatewayWrites: 2}},
				{Strategy: "gatefold-pool", Writers: 4, Gateways: 3, Add: Phase{Converged: true, WriteSeconds: 1, Seconds: 2, GatewayWrites: 6}},
			}},
			want: []string{"**gatefold-pool against the limit and the floor**", "| the same, against the limit | | limit: 0.50 s | 4.00× | | |",
				"| Gateways the pool ended with | 3 | ⌈130 / 63⌉ = 3 |", "| Gateway writes per Gateway | 2.0 |",
				"| gatefold-pool | 4 | 1.00 s | – | – | 2.00 s | 4.00× | 3 | 6 | 2.0 |"},
			absent: []string{"**gatefold against"},
		},
		"scale on a pool against issue 25's targets": {
			report: Report{Params: Params{Settle: 2 * time.Second}, Scale: &ScaleResult{Fragments: 2000, Pool: true, Gateways: 32,
				Install: InstallResult{CreateSeconds: 10, Converged: true, ConvergeSeconds: 16, Settled: true, SettleSeconds: 20, PeakRSSBytes: 600 << 20},
				Restart: RestartResult{Converged: true, ConvergeSeconds: 4}},
				Steady: &SteadyResult{Fragments: 2000, Seconds: 10, Reads: reads{Gatefold: 15}, ReadsPerSecond: 1.5, PeakRSSBytes: 300 << 20}},
			want: []string{"### Scale: 2000 fragments on one Gateway heading a pool, which ended with 32 Gateways",
				"| Gateways the pool ended with | 32 | ⌈2000 / 63⌉ = 32, no more | yes |",
				"| that, as a ratio of the creates | 1.60× | ≤ 1.5× | **not met** |",
				"| peak RSS of the leader | 600 MiB | ≤ 512 MiB | **not met** |",
				"| leader start → converged | 4.00 s (converged: yes) | ≤ 10 s | yes |",
				"| gatefold writes until 2s after | 0 | 0 | yes |",
				"| gatefold reads (get, list; not watch) | 15, 1.50 per second | ≤ 1 per second | **not met** |",
				"| peak RSS of the leader | 300 MiB | ≤ 512 MiB | yes |"},
		},
		"a warm restart that did not converge has not met its target": {
			report: Report{Params: p, Scale: &ScaleResult{Fragments: 200, Gateways: 4, Restart: RestartResult{ConvergeSeconds: 3}}},
			want:   []string{"### Scale: 200 fragments on 4 Gateways", "| leader start → converged | 3.00 s (converged: **no**) | ≤ 10 s | **not met** |"},
			absent: []string{"Gateways the pool ended with"},
		},
		"admission p99 against its target": {
			report: Report{Params: p, Admission: &AdmissionResult{Without: Latency{P50: 2, P90: 3, P99: 4}, With: Latency{P50: 4, P90: 6, P99: 8}}},
			want:   []string{"| ratio | 2.00× | 2.00× | 2.00× |", "| target (issue 25) | | | ≤ 1.5×, met: **not met** |"},
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
		"routes by fragment beside the generated name and Traefik alone": {
			report: Report{Params: p, Routes: &RoutesResult{Traefik: "v3.6.12", Routes: 8, Writers: 4, ProbeMillis: 25, SteadySeconds: 3,
				Alone: RouteWay{Accepted: Latency{Requests: 8, P50: 60}, FirstRequest: Latency{Requests: 8, P50: 2000, P90: 2000, P99: 2000, Max: 2000},
					TraefikWrites: map[string]int{"httproutes/status": 8}},
				ByName: RouteWay{Gateways: 1, Fold: Latency{Requests: 8}, Accepted: Latency{Requests: 8, P50: 400}, FirstRequest: Latency{Requests: 8, P50: 1000}},
				ByFragment: RouteWay{Gateways: 2, Fold: Latency{Requests: 8, P50: 250}, Accepted: Latency{Requests: 8, P50: 480},
					FirstRequest: Latency{Requests: 8, P50: 3000, P90: 3000, P99: 3000, Max: 3000}, Seconds: 3.5,
					Writes: writes{Gatefold: 16, ByResource: map[string]int{"httproutes": 8, "httproutes/status": 8}}}}},
			want: []string{"### Routes by fragment parentRef: 8 routes on a pool, through Traefik", "(2 Gateways at the end)",
				"`go run ./test/bench --only routes`",
				"| create → listener on a Gateway's spec | by fragment | 8 of 8 | 250 ms |",
				"| create → route Accepted | by fragment | 8 of 8 | 480 ms |",
				"| first answer, by fragment / Traefik alone | | | 1.50× | 1.50× | 1.50× | 1.50× |",
				"| first answer, by fragment / by generated name | | | 3.00× |",
				"| by fragment | 3.50 s | 16 (httproutes 8, httproutes/status 8) | 2.00 | 0 | 0.00 |",
				"| Traefik alone | 0.00 s | 0 | 0.00 | 8 (httproutes/status 8) | 1.00 |",
				"the 3 s after that: gatefold writes 0 (target 0)", "correct: yes."},
			absent: []string{"### Data plane"},
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

func TestFailuresNameEachRowNotCorrect(t *testing.T) {
	p := Params{Routes: 24, Gateways: 2, Writers: 4, PhaseTimeout: 30 * time.Second}
	ok := Phase{Converged: true}
	correct := Report{Params: p,
		Contention: []StrategyResult{{Strategy: "limit", Add: ok, Remove: ok}, {Strategy: "gatefold", Add: ok, Remove: ok}},
		Admission:  &AdmissionResult{ThroughputWith: Throughput{Creates: 24, Writers: 4}},
		Scale:      &ScaleResult{Install: InstallResult{Converged: true, Settled: true}, Restart: RestartResult{Converged: true}},
		Failover:   &FailoverResult{Converged: true},
		Dataplane:  &DataplaneResult{Fragments: 20, Folded: 20, Served: 20, AloneServed: 20},
		Routes: &RoutesResult{Routes: 8, Alone: RouteWay{Accepted: Latency{Requests: 8}, FirstRequest: Latency{Requests: 8}},
			ByName:     RouteWay{Fold: Latency{Requests: 8}, Accepted: Latency{Requests: 8}, FirstRequest: Latency{Requests: 8}},
			ByFragment: RouteWay{Fold: Latency{Requests: 8}, Accepted: Latency{Requests: 8}, FirstRequest: Latency{Requests: 8}}},
	}
	tests := map[string]struct {
		breakIt func(r *Report)
		want    []string
	}{
		"every row correct": {breakIt: func(*Report) {}},
		"a strategy that did not converge": {
			breakIt: func(r *Report) { r.Contention[1].Add = Phase{Missing: 3} },
			want:    []string{"contention gatefold, adding every route: not converged, 3 missing and 0 extra at the end"},
		},
		"a converged phase whose writers got errors": {
			breakIt: func(r *Report) {
				r.Contention[0].Remove = Phase{Converged: true, WriterErrors: 7, Errors: []string{"writer: conflict"}}
			},
			want: []string{"contention limit, removing half: 7 writer errors, e.g. writer: conflict"},
		},
		"a phase that did not converge and got writer errors is one row": {
			breakIt: func(r *Report) {
				r.Contention[0].Add = Phase{Missing: 1, WriterErrors: 1, Errors: []string{"route-5: refused"}}
			},
			want: []string{"contention limit, adding every route: not converged, 1 missing and 0 extra at the end; 1 writer error, e.g. route-5: refused"},
		},
		"admission creates that failed": {
			breakIt: func(r *Report) {
				r.Admission.ThroughputWith = Throughput{Creates: 24, Writers: 4, Errors: 1, FirstErrorMsg: "denied"}
			},
			want: []string{"admission, 24 creates by 4 writers with webhooks: 1 error, e.g. denied"},
		},
		"a pool of 50,000 that did not converge waits 30 ms per fragment": {
			breakIt: func(r *Report) {
				r.Params.ScaleFragments, r.Params.ScalePool, r.Scale.Install.Converged = 50000, true, false
			},
			want: []string{"scale, first install: not every listener folded (on 794 Gateways) and every fragment Accepted within 25m0s"},
		},
		"scale and failover that did not converge": {
			breakIt: func(r *Report) {
				r.Scale.Install.Settled, r.Scale.Restart.Converged, r.Failover.Converged = false, false, false
			},
			want: []string{"scale, first install: not every claim backfilled and the leader quiet within 30s",
				"scale, warm restart: the new leader did not fold every Gateway within 30s",
				"failover: the fragment created after the kill was not on its Gateway within 30s"},
		},
		"a data plane that did not serve every fragment": {
			breakIt: func(r *Report) { r.Dataplane.Served = 19 },
			want:    []string{"data plane: of 20, 20 folded, 19 served, 20 served by Traefik alone"},
		},
		"routes not all Accepted by fragment": {
			breakIt: func(r *Report) { r.Routes.ByFragment.Accepted.Requests = 7 },
			want: []string{"routes: of 8 each way, served 8 alone, 8 by name, 8 by fragment; Accepted 8, 8, 7; folded 8 by name, 8 by fragment; " +
				"gatefold wrote 0 in the steady state"},
		},
		"routes whose steady state gatefold wrote in": {
			breakIt: func(r *Report) { r.Routes.SteadyWrites.Gatefold = 1 },
			want: []string{"routes: of 8 each way, served 8 alone, 8 by name, 8 by fragment; Accepted 8, 8, 8; folded 8 by name, 8 by fragment; " +
				"gatefold wrote 1 in the steady state"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := correct
			r.Contention = slices.Clone(correct.Contention)
			admission, scale, failover, dataplane, routes := *correct.Admission, *correct.Scale, *correct.Failover, *correct.Dataplane, *correct.Routes
			r.Admission, r.Scale, r.Failover, r.Dataplane, r.Routes = &admission, &scale, &failover, &dataplane, &routes
			tc.breakIt(&r)
			if got := r.failures(); !slices.Equal(got, tc.want) {
				t.Errorf("failures:\ngot  %q\nwant %q", got, tc.want)
			}
			if failed := strings.Contains(r.markdown(), "**The run failed**"); failed != (len(tc.want) > 0) {
				t.Errorf("the report says the run failed: %v, want %v", failed, len(tc.want) > 0)
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

func TestParseGoBenchCountsEachPackage(t *testing.T) {
	out := `goos: linux
pkg: github.com/gatefold/gatefold/webhook
--- SKIP: BenchmarkValidateCreate
PASS
pkg: github.com/gatefold/gatefold/fold
BenchmarkFold/fragments=63-2         	     100	   1660411 ns/op
BenchmarkFold/fragments=1000-2       	       3	  17741197 ns/op	   9000000 cpu-ns/op
PASS
`
	results, byPackage, err := parseGoBench(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []GoBenchmark{{Name: "BenchmarkFold/fragments=63-2", NsPerOp: 1660411}, {Name: "BenchmarkFold/fragments=1000-2", NsPerOp: 17741197, CPUNsPerOp: 9e6}}
	if !reflect.DeepEqual(results, want) {
		t.Errorf("results:\ngot  %+v\nwant %+v", results, want)
	}
	if got := byPackage[modulePath+"/webhook"]; got != 0 {
		t.Errorf("the skipped package gave %d results, want 0", got)
	}
	if got := byPackage[modulePath+"/fold"]; got != 2 {
		t.Errorf("fold gave %d results, want 2", got)
	}
}

func TestPoolAdmissionCPUJudgesTheLargestPoolAgainstTheSmallest(t *testing.T) {
	dry := func(pool string, cpu float64) GoBenchmark {
		return GoBenchmark{Name: "BenchmarkValidateCreate/pool=" + pool + "/dry-run-2", NsPerOp: 2 * cpu, CPUNsPerOp: cpu}
	}
	tests := map[string]struct {
		results []GoBenchmark
		want    string
	}{
		"flat":       {results: []GoBenchmark{dry("100", 30000), dry("10000", 32000), dry("50000", 33000)}, want: "head of 50000 fragments against 100: 1.10× (target ≤ 1.2×): yes"},
		"grows":      {results: []GoBenchmark{dry("50000", 90000), dry("100", 30000)}, want: "head of 50000 fragments against 100: 3.00× (target ≤ 1.2×): **not met**"},
		"one pool":   {results: []GoBenchmark{dry("100", 30000)}},
		"no cpu":     {results: []GoBenchmark{{Name: "BenchmarkValidateCreate/pool=100/dry-run-2", NsPerOp: 1}, {Name: "BenchmarkValidateCreate/pool=50000/dry-run-2", NsPerOp: 9}}},
		"not a pool": {results: []GoBenchmark{{Name: "BenchmarkValidateCreate/fragments=100/dry-run-2", NsPerOp: 1, CPUNsPerOp: 1}, dry("100", 1)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			md := (&Report{GoBench: tc.results}).markdown()
			got := ""
			if _, line, ok := strings.Cut(md, "Admission CPU per request (dry run) on a pool's "); ok {
				got, _, _ = strings.Cut(line, "\n")
			}
			if got != tc.want {
				t.Errorf("The pool's CPU line = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlacementCountsAPoolAsOne(t *testing.T) {
	gw := func(name, head string, hosts ...string) gwv1.Gateway {
		g := gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{{Name: "http"}}}}
		if head != "" {
			g.Labels = map[string]string{v1alpha1.PoolLabel: rules.PoolLabelValue(head)}
			g.OwnerReferences = []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: head, Controller: ptr.To(true)}}
		}
		for _, h := range hosts {
			g.Spec.Listeners = append(g.Spec.Listeners, gwv1.Listener{Name: gwv1.SectionName(h), Hostname: ptr.To(gwv1.Hostname(h))})
		}
		return g
	}
	want := map[string]map[string]bool{"pool": {"a": true, "b": true, "c": true}, "own": {"d": true}}
	tests := map[string]struct {
		gws            []gwv1.Gateway
		missing, extra int
	}{
		"spread over a head and its sibling": {gws: []gwv1.Gateway{gw("pool", "", "a"), gw("pool-2", "pool", "b", "c"), gw("own", "", "d")}},
		"on a Gateway that is no sibling": {gws: []gwv1.Gateway{gw("pool", "", "a"), gw("other", "", "b", "c"), gw("own", "", "d")},
			missing: 2, extra: 2},
		"twice in the pool":         {gws: []gwv1.Gateway{gw("pool", "", "a", "b"), gw("pool-2", "pool", "b", "c"), gw("own", "", "d")}, extra: 1},
		"not yet folded, and stale": {gws: []gwv1.Gateway{gw("pool", "", "a", "x"), gw("own", "")}, missing: 3, extra: 1},
		"no Gateway yet":            {missing: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if missing, extra := placement(tc.gws, want); missing != tc.missing || extra != tc.extra {
				t.Errorf("placement: %d missing, %d extra; want %d, %d", missing, extra, tc.missing, tc.extra)
			}
		})
	}
}
