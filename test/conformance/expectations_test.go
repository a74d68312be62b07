package conformance

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
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
			wantErr: "the suite's ListenerSet test ListenerSetNew is in neither passing nor skipped: add it to one",
		},
		"a test the suite renamed": {
			change: func(ts []suite.ConformanceTest) []suite.ConformanceTest {
				ts[0].ShortName += "Renamed"
				return ts
			},
			wantErr: "is in neither passing nor skipped",
		},
		"a test the suite removed": {
			change: func(ts []suite.ConformanceTest) []suite.ConformanceTest {
				return ts[1:]
			},
			wantErr: "is not among the suite's ListenerSet tests: remove it or rename it",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := expectations(tc.change(listenerSetTests()))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("expectations: %v", err)
				}
				if got := len(want); got != len(passing)+len(skipped) {
					t.Errorf("expectations has %d tests, want %d", got, len(passing)+len(skipped))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("expectations: error %v, want one containing %q", err, tc.wantErr)
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
			want:      "needs " + skipped["ListenerSetHTTPRouting"],
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
			if got := skipReason(tc.test, s); got != tc.want {
				t.Errorf("skipReason: %q, want %q", got, tc.want)
			}
		})
	}
}
