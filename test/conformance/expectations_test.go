package conformance

import (
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/gatefold/gatefold/test/testenv"
)

func TestExpectations(t *testing.T) {
	cases := map[string]struct {
		change  func([]suite.ConformanceTest) []suite.ConformanceTest
		wantErr string
	}{
		"the suite's tests, each expected once": {
			change: func(ts []suite.ConformanceTest) []suite.ConformanceTest { return ts },
		},
		"a test the suite added": {
			change: func(ts []suite.ConformanceTest) []suite.ConformanceTest {
				return append(ts, suite.ConformanceTest{ShortName: "ListenerSetNew"})
			},
			wantErr: "the suite's ListenerSet test ListenerSetNew is in none of passing, skipped and failing: add it to one",
		},
		"a test the suite renamed": {
			change: func(ts []suite.ConformanceTest) []suite.ConformanceTest {
				ts[0].ShortName += "Renamed"
				return ts
			},
			wantErr: "is in none of passing, skipped and failing",
		},
		"a test the suite removed": {
			change: func(ts []suite.ConformanceTest) []suite.ConformanceTest {
				return ts[1:]
			},
			wantErr: "is not among the suite's ListenerSet tests: remove it or rename it",
		},
	}
	for runName, r := range map[string]suiteRun{"stub": stubRun, "traefik": traefikRun} {
		for name, tc := range cases {
			t.Run(runName+": "+name, func(t *testing.T) {
				want, err := expectations(tc.change(listenerSetTests()), r)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("expectations: %v", err)
					}
					if got, n := len(want), len(r.passing)+len(r.skipped)+len(r.failing); got != n {
						t.Errorf("expectations has %d tests, want %d", got, n)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("expectations: error %v, want one containing %q", err, tc.wantErr)
				}
			})
		}
	}
	t.Run("a test both passing and failing", func(t *testing.T) {
		r := traefikRun
		r.failing = map[string]traefikFailure{"ListenerSetHTTPRouting": {}}
		_, err := expectations(listenerSetTests(), r)
		if want := "ListenerSetHTTPRouting is expected twice"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("expectations: error %v, want one containing %q", err, want)
		}
	})
	t.Run("the stub run skips what needs traffic", func(t *testing.T) {
		if got, want := len(stubRun.skipped), len(passingWithTraffic)+len(failsInTraefik); got != want {
			t.Errorf("the stub run skips %d tests, want %d", got, want)
		}
	})
}

func TestMismatches(t *testing.T) {
	lsTests := listenerSetTests()
	want, err := expectations(lsTests, traefikRun)
	if err != nil {
		t.Fatal(err)
	}
	const dual = "ListenerSetDualParentRefIndependence"
	asExpected := func() map[string]outcome {
		outcomes := map[string]outcome{}
		for name, result := range want {
			outcomes[name] = outcome{name: name, result: result}
		}
		outcomes[dual] = outcome{name: dual, result: "FAIL", at: failsInTraefik[dual].at[0]}
		return outcomes
	}
	cases := map[string]struct {
		change func(map[string]outcome)
		want   []string
	}{
		"every test as expected": {change: func(map[string]outcome) {}},
		"Traefik's failure shows at its other assertion": {
			change: func(o map[string]outcome) { o[dual] = outcome{result: "FAIL", at: failsInTraefik[dual].at[1]} },
		},
		"Traefik's failure passes": {
			change: func(o map[string]outcome) { o[dual] = outcome{result: "pass"} },
		},
		"Traefik's failure fails first elsewhere": {
			change: func(o map[string]outcome) {
				o[dual] = outcome{result: "FAIL", at: "listenerset-dual-parentref-independence.go:111"}
			},
			want: []string{"ListenerSet conformance test ListenerSetDualParentRefIndependence fails first at listenerset-dual-parentref-independence.go:111, " +
				"and the implementation's verdict shows at listenerset-dual-parentref-independence.go:116 or listenerset-dual-parentref-independence.go:122 (" +
				failsInTraefik[dual].why + "): see bin/conformance/traefik/expected-failures.log; if that is gatefold's failure, fix it, else update at in failsInTraefik"},
		},
		"Traefik's failure fails without an assertion, as on a panic": {
			change: func(o map[string]outcome) { o[dual] = outcome{result: "FAIL"} },
			want: []string{"ListenerSet conformance test ListenerSetDualParentRefIndependence fails first at no testify assertion, " +
				"and the implementation's verdict shows at listenerset-dual-parentref-independence.go:116 or listenerset-dual-parentref-independence.go:122 (" +
				failsInTraefik[dual].why + "): see bin/conformance/traefik/expected-failures.log; if that is gatefold's failure, fix it, else update at in failsInTraefik"},
		},
		"Traefik's failure where gatefold's own entry is not accepted": {
			change: func(o map[string]outcome) {
				f := o[dual]
				f.writesErr = errors.New("gatefold's last entry for parentRef X is Accepted=False NoMatchingParent (generation 1)")
				o[dual] = f
			},
			want: []string{"ListenerSet conformance test ListenerSetDualParentRefIndependence FAIL: gatefold's last entry for parentRef X is " +
				"Accepted=False NoMatchingParent (generation 1), so the implementation alone cannot be what fails it: see bin/conformance/traefik/audit.log"},
		},
		"Traefik's failure the child did not run": {
			change: func(o map[string]outcome) { delete(o, dual) },
			want:   []string{"ListenerSet conformance test ListenerSetDualParentRefIndependence: not run, want FAIL or pass"},
		},
		"a test that needs traffic fails": {
			change: func(o map[string]outcome) { o["ListenerSetHTTPRouting"] = outcome{result: "FAIL"} },
			want:   []string{"ListenerSet conformance test ListenerSetHTTPRouting: FAIL, want pass"},
		},
		"a test that needs traffic is skipped": {
			change: func(o map[string]outcome) {
				o["ListenerSetHTTPRouting"] = outcome{result: "skip", why: "the suite does not support HTTPRoute"}
			},
			want: []string{"ListenerSet conformance test ListenerSetHTTPRouting: skip (the suite does not support HTTPRoute), want pass"},
		},
		"a passing test fails": {
			change: func(o map[string]outcome) { o["ListenerSetReferenceGrant"] = outcome{result: "FAIL"} },
			want:   []string{"ListenerSet conformance test ListenerSetReferenceGrant: FAIL, want pass"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			outcomes := asExpected()
			tc.change(outcomes)
			if got := mismatches(lsTests, want, outcomes, traefikRun); !slices.Equal(got, tc.want) {
				t.Errorf("mismatches:\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestSkipReason(t *testing.T) {
	routesKinds := suite.ConformanceTest{
		ShortName: "ListenerSetAllowedRoutesSupportedKinds",
		Features:  []features.FeatureName{features.SupportGateway, features.SupportListenerSet, features.SupportTLSRoute},
	}
	routing := suite.ConformanceTest{
		ShortName: "ListenerSetHTTPRouting",
		Features:  []features.FeatureName{features.SupportGateway, features.SupportListenerSet, features.SupportHTTPRoute},
	}
	cases := map[string]struct {
		test      suite.ConformanceTest
		supported []features.FeatureName
		want      string
	}{
		"features missing are named": {
			test:      routesKinds,
			supported: []features.FeatureName{features.SupportGateway},
			want:      "the suite does not support ListenerSet, TLSRoute",
		},
		"a skipped test says what it needs": {
			test:      routing,
			supported: supportedFeatures,
			want:      "needs " + passingWithTraffic["ListenerSetHTTPRouting"],
		},
		"a missing feature comes before the skipped list": {
			test:      routing,
			supported: []features.FeatureName{features.SupportGateway, features.SupportListenerSet},
			want:      "the suite does not support HTTPRoute",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &suite.ConformanceTestSuite{SupportedFeatures: sets.New(tc.supported...)}
			if got := skipReason(tc.test, s, stubRun.skipped); got != tc.want {
				t.Errorf("skipReason: %q, want %q", got, tc.want)
			}
		})
	}
}

// childOutput is the output of a child process of runExpectedFailures,
// `go test -v`, cut short: a subtest's failure, one with what its wait saw
// last, two after an earlier wait's line, a failure not by testify, and a
// pass.
const childOutput = `=== RUN   TestListenerSetConformanceTraefik
    suite.go:389: 2026-12-01T19:04:06.982802256Z: Test Setup: Ensuring GatewayClass has been accepted
=== RUN   TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces
    helpers.go:380: 2026-12-01T19:04:12.694400639Z: gateway gateway-conformance-infra/gw got 0 listeners, want 2
=== RUN   TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces/Same-namespace_ListenerSet
    listenerset-allowed-routes-namespaces.go:79: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/utils/kubernetes/helpers.go:823
        	            				/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/tests/listenerset-allowed-routes-namespaces.go:79
        	Error:      	Received unexpected error:
        	            	error fetching HTTPRoute: client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline
        	Test:       	TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces/Same-namespace_ListenerSet
        	Messages:   	error waiting for HTTPRoute to have parents matching expectations
=== RUN   TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces/Cross-namespace_ListenerSet
    listenerset-allowed-routes-namespaces.go:180: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/tests/listenerset-allowed-routes-namespaces.go:180
        	Error:      	Should be true
        	Test:       	TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces/Cross-namespace_ListenerSet
=== RUN   TestListenerSetConformanceTraefik/ListenerSetDualParentRefIndependence
=== RUN   TestListenerSetConformanceTraefik/ListenerSetDualParentRefIndependence/One_of_two_parentRefs_is_Accepted
    helpers.go:1110: 2026-12-01T19:04:45.000918129Z: Accepted was not in conditions list [[{Accepted False 1 2026-12-01 19:04:42 +0000 UTC NoMatchingParent }]]
    listenerset-dual-parentref-independence.go:116: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/utils/kubernetes/helpers.go:1121
        	            				/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/tests/listenerset-dual-parentref-independence.go:116
        	Error:      	Not equal:
        	            	expected: 1
        	            	actual  : 2
        	Test:       	TestListenerSetConformanceTraefik/ListenerSetDualParentRefIndependence/One_of_two_parentRefs_is_Accepted
        	Messages:   	error waiting for HTTPRoute status to have a Condition matching expectations
=== RUN   TestListenerSetConformanceTraefik/ListenerSetGatewayParentSectionNameNotFound
    helpers.go:380: 2026-12-01T19:04:12.694400639Z: gateway gateway-conformance-infra/gw got 0 listeners, want 1
    listenerset-gateway-parent-section-name-not-found.go:69: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/utils/kubernetes/helpers.go:823
        	            				/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/tests/listenerset-gateway-parent-section-name-not-found.go:69
        	Error:      	Received unexpected error:
        	            	error fetching HTTPRoute: context deadline exceeded
        	Test:       	TestListenerSetConformanceTraefik/ListenerSetGatewayParentSectionNameNotFound
        	Messages:   	error waiting for HTTPRoute to have parents matching expectations
=== RUN   TestListenerSetConformanceTraefik/ListenerSetHTTPRouting
    helpers.go:1030: 2026-12-01T19:04:45.000918129Z: Route gateway-conformance-infra/r Parents matched expectations
    listenerset-http-routing.go:72: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/utils/kubernetes/helpers.go:1040
        	            				/root/go/pkg/mod/sigs.k8s.io/gateway-api/conformance@v1.6.3/tests/listenerset-http-routing.go:72
        	Error:      	Received unexpected error:
        	            	context deadline exceeded
        	Test:       	TestListenerSetConformanceTraefik/ListenerSetHTTPRouting
        	Messages:   	error waiting for HTTPRoute to have parents matching expectations
=== RUN   TestListenerSetConformanceTraefik/ListenerSetRouteStatusScopedToParentRef
    helpers.go:12: 2026-12-01T19:04:45.000918129Z: routes never accepted
=== RUN   TestListenerSetConformanceTraefik/ListenerSetHostnameConflict
--- FAIL: TestListenerSetConformanceTraefik (101.27s)
    --- SKIP: TestListenerSetConformanceTraefik/ListenerSetAllowedNamespaceNone (0.00s)
    --- FAIL: TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces (31.23s)
        --- FAIL: TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces/Same-namespace_ListenerSet (14.80s)
        --- FAIL: TestListenerSetConformanceTraefik/ListenerSetAllowedRoutesNamespaces/Cross-namespace_ListenerSet (15.00s)
    --- FAIL: TestListenerSetConformanceTraefik/ListenerSetDualParentRefIndependence (17.35s)
        --- FAIL: TestListenerSetConformanceTraefik/ListenerSetDualParentRefIndependence/One_of_two_parentRefs_is_Accepted (15.00s)
    --- FAIL: TestListenerSetConformanceTraefik/ListenerSetGatewayParentSectionNameNotFound (15.12s)
    --- FAIL: TestListenerSetConformanceTraefik/ListenerSetHTTPRouting (16.61s)
    --- FAIL: TestListenerSetConformanceTraefik/ListenerSetRouteStatusScopedToParentRef (16.42s)
    --- PASS: TestListenerSetConformanceTraefik/ListenerSetHostnameConflict (1.42s)
FAIL
`

// childPanic is the output of a child process whose test panicked: go test
// reports the test it stopped as failed.
const childPanic = `=== RUN   TestListenerSetConformanceTraefik
=== RUN   TestListenerSetConformanceTraefik/ListenerSetHTTPRouting
--- FAIL: TestListenerSetConformanceTraefik (3.00s)
    --- FAIL: TestListenerSetConformanceTraefik/ListenerSetHTTPRouting (1.00s)
panic: runtime error: invalid memory address or nil pointer dereference [recovered]
	panic: runtime error: invalid memory address or nil pointer dereference
FAIL
`

func TestParseChild(t *testing.T) {
	tests := []string{
		"ListenerSetAllowedRoutesNamespaces", "ListenerSetDualParentRefIndependence", "ListenerSetHTTPRouting",
		"ListenerSetRouteStatusScopedToParentRef", "ListenerSetGatewayParentSectionNameNotFound", "ListenerSetHostnameConflict",
	}
	cases := map[string]struct {
		out  string
		want map[string]childResult
	}{
		"failures, one not by testify, and a pass": {out: childOutput, want: childOutputResults},
		"a panic": {out: childPanic, want: map[string]childResult{
			"ListenerSetHTTPRouting": {result: "FAIL", failure: []string{"(no testify assertion in the output: see the log)"}},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := parseChild(tc.out, tests); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseChild:\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

// childOutputResults are parseChild's results of childOutput.
var childOutputResults = map[string]childResult{
	"ListenerSetAllowedRoutesNamespaces": {result: "FAIL", at: "listenerset-allowed-routes-namespaces.go:79", failure: []string{
		"at listenerset-allowed-routes-namespaces.go:79",
		"Error: Received unexpected error: the wait's deadline passed",
		"Messages: error waiting for HTTPRoute to have parents matching expectations",
	}},
	"ListenerSetDualParentRefIndependence": {result: "FAIL", at: "listenerset-dual-parentref-independence.go:116", failure: []string{
		"at listenerset-dual-parentref-independence.go:116",
		"Error: Not equal:\n  expected: 1\n  actual  : 2",
		"Messages: error waiting for HTTPRoute status to have a Condition matching expectations",
		"What the wait saw last: Accepted was not in conditions list [[{Accepted False 1  NoMatchingParent }]]",
	}},
	"ListenerSetGatewayParentSectionNameNotFound": {result: "FAIL", at: "listenerset-gateway-parent-section-name-not-found.go:69", failure: []string{
		"at listenerset-gateway-parent-section-name-not-found.go:69",
		"Error: Received unexpected error: the wait's deadline passed",
		"Messages: error waiting for HTTPRoute to have parents matching expectations",
	}},
	"ListenerSetHTTPRouting": {result: "FAIL", at: "listenerset-http-routing.go:72", failure: []string{
		"at listenerset-http-routing.go:72",
		"Error: Received unexpected error: the wait's deadline passed",
		"Messages: error waiting for HTTPRoute to have parents matching expectations",
	}},
	"ListenerSetRouteStatusScopedToParentRef": {result: "FAIL", failure: []string{"(no testify assertion in the output: see the log)"}},
	"ListenerSetHostnameConflict":             {result: "pass"},
}

func TestChildExitError(t *testing.T) {
	cases := map[string]struct {
		code    int
		out     string
		wantErr string
	}{
		"tests failed":           {code: 1, out: childOutput},
		"a panic":                {code: 2, out: childPanic, wantErr: "panicked (panic: runtime error: invalid memory address"},
		"a panic, exit status 1": {code: 1, out: "--- FAIL: T/A (1.00s)\npanic: test timed out after 5s\n", wantErr: "panicked (panic: test timed out after 5s)"},
		"every test passed":      {code: 0, out: "PASS\n"},
		"killed by a signal":     {code: -1, wantErr: "exited with status -1, want 0 (tests passed) or 1 (tests failed)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := childExitError(tc.code, tc.out)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("childExitError: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestCapTimeouts checks that capTimeouts caps every duration of
// upstream's TimeoutConfig, a field it adds included, but the poll interval.
func TestCapTimeouts(t *testing.T) {
	duration := reflect.TypeFor[time.Duration]()
	var long config.TimeoutConfig
	v := reflect.ValueOf(&long).Elem()
	for i := range v.NumField() {
		if v.Field(i).Type() == duration {
			v.Field(i).SetInt(int64(time.Hour))
		}
	}
	got := reflect.ValueOf(capTimeouts(long, time.Second))
	for i := range got.NumField() {
		name, want := got.Type().Field(i).Name, time.Second
		if got.Field(i).Type() != duration {
			continue
		}
		if name == "DefaultPollInterval" {
			want = time.Hour
		}
		if d := time.Duration(got.Field(i).Int()); d != want {
			t.Errorf("capTimeouts: %s %s, want %s", name, d, want)
		}
	}
}

// TestListenersHaveEntryPoints checks that Traefik has an entryPoint, in
// the run, for the port of every listener of the suite's ListenerSet tests:
// Traefik serves a listener only on the entryPoint of its port.
func TestListenersHaveEntryPoints(t *testing.T) {
	entryPoints := []int32{traefikHTTPPort, traefikHTTPSPort}
	for _, ct := range listenerSetTests() {
		for _, path := range ct.Manifests {
			b, err := fs.ReadFile(&conformance.Manifests, path)
			if err != nil {
				t.Fatal(err)
			}
			for doc := range strings.SplitSeq(string(b), "\n---") {
				var obj struct {
					Kind     string
					Metadata struct{ Name string }
					Spec     struct {
						Listeners []struct {
							Name string
							Port int32
						}
					}
				}
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if obj.Kind != "Gateway" && obj.Kind != "ListenerSet" {
					continue
				}
				for _, l := range obj.Spec.Listeners {
					if !slices.Contains(entryPoints, l.Port) {
						t.Errorf("%s: %s %s listener %s is on port %d, which has no entryPoint in the Traefik run (ports %v): add one",
							ct.ShortName, obj.Kind, obj.Metadata.Name, l.Name, l.Port, entryPoints)
					}
				}
			}
		}
	}
}

func TestTraefikEvidence(t *testing.T) {
	dual := failsInTraefik["ListenerSetDualParentRefIndependence"]
	gwRef := gwv1.ParentReference{Name: "gateway-dual-parentref", SectionName: ptr.To(gwv1.SectionName("ls-dual-parentref-listener"))}
	// lsRef is dual.parent as the route spells it, namespace left out.
	lsRef := dual.parent
	lsRef.Namespace = nil
	entry := func(ref gwv1.ParentReference, status metav1.ConditionStatus, reason gwv1.RouteConditionReason) gwv1.RouteParentStatus {
		return gwv1.RouteParentStatus{ParentRef: ref, ControllerName: "traefik.io/gateway-controller", Conditions: []metav1.Condition{
			{Type: string(gwv1.RouteConditionAccepted), Status: status, Reason: string(reason), ObservedGeneration: 1},
		}}
	}
	event := func(agent, route string, code int, parents ...gwv1.RouteParentStatus) testenv.AuditEvent {
		e := testenv.AuditEvent{Verb: "update", UserAgent: agent}
		e.ObjectRef.Resource, e.ObjectRef.Subresource = "httproutes", "status"
		e.ObjectRef.Namespace, e.ObjectRef.Name = dual.route.Namespace, route
		e.ResponseStatus.Code = code
		obj := gwv1.HTTPRoute{Status: gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: parents}}}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		e.RequestObject = b
		return e
	}
	const gatefold, traefik = "gatefold/0eedc2f (gatefold)", "traefik/v0.0.0 (linux/amd64) kubernetes/$Format"
	accepted := event(gatefold, dual.route.Name, 200, entry(lsRef, metav1.ConditionTrue, gwv1.RouteReasonAccepted))
	replaced := event(traefik, dual.route.Name, 200,
		entry(gwRef, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent), entry(lsRef, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent))
	noBody := accepted
	noBody.RequestObject = nil
	cases := map[string]struct {
		events    []testenv.AuditEvent
		wantLines []string
		wantErr   string
	}{
		"gatefold accepts, Traefik replaces its entry": {
			events: []testenv.AuditEvent{
				accepted, replaced,
				event(gatefold, dual.route.Name, 409, entry(lsRef, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent)),
				event(gatefold, "another-route", 200, entry(lsRef, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent)),
				event("kubectl/v1.35", dual.route.Name, 200, entry(lsRef, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent)),
				accepted, replaced,
			},
			wantLines: []string{
				"gateway-conformance-infra/route-dual-parentref-one's status: 2 updates by gatefold, 2 by Traefik; the last entry each wrote for " +
					"parentRef ListenerSet gateway-conformance-infra/ls-dual-parentref, sectionName ls-dual-parentref-listener:",
				"  gatefold at 00:00:00.000: controllerName traefik.io/gateway-controller",
				"    Accepted=True Accepted (generation 1)",
				"  Traefik at 00:00:00.000: controllerName traefik.io/gateway-controller",
				"    Accepted=False NoMatchingParent (generation 1)",
			},
		},
		"gatefold's own entry is not accepted": {
			events:  []testenv.AuditEvent{event(gatefold, dual.route.Name, 200, entry(lsRef, metav1.ConditionFalse, gwv1.RouteReasonNotAllowedByListeners)), replaced},
			wantErr: "gatefold's last entry for parentRef ListenerSet gateway-conformance-infra/ls-dual-parentref, sectionName ls-dual-parentref-listener is Accepted=False NotAllowedByListeners (generation 1)",
		},
		"gatefold wrote no entry": {
			events:  []testenv.AuditEvent{replaced},
			wantErr: "gatefold wrote no entry for parentRef ListenerSet",
		},
		"the log has no objects": {
			events:  []testenv.AuditEvent{noBody},
			wantErr: "the audit log has no object for gatefold's update of gateway-conformance-infra/route-dual-parentref-one's status: it needs AuditRouteStatusBodies",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			writes, err := statusWrites(tc.events, dual.route, dual.parent)
			var lines []string
			if err == nil {
				lines, err = traefikEvidence(writes, dual)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(lines, tc.wantLines) {
				t.Errorf("traefikEvidence:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(tc.wantLines, "\n"))
			}
		})
	}
}
