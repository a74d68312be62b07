package e2e

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

// chartLabels are the labels the chart adds to the objects' own, which
// config/ does not.
var chartLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by"}

// selfSignedValues are the chart's values for config/self-signed.
var selfSignedValues = map[string]any{"certificates": map[string]any{
	"certManager": map[string]any{"enabled": false},
	"selfSigned":  map[string]any{"enabled": true},
}}

// TestChartRendersOverlays renders charts/gatefold with the values of each
// overlay and compares it, object by object and field by field, with what
// kubectl kustomize renders of the overlay: RBAC, webhook configurations,
// Deployment, Services, certificates, PDB and CRDs. Only the chart's own
// labels differ, and the chart leaves the namespace to Helm.
func TestChartRendersOverlays(t *testing.T) {
	assets, err := devenv.FindAssets("")
	if err != nil {
		t.Fatal(err)
	}
	for overlay, values := range map[string]map[string]any{
		"default":     nil,
		"ha":          {"replicaCount": 3},
		"self-signed": selfSignedValues,
	} {
		t.Run(overlay, func(t *testing.T) {
			want, err := testenv.RenderOverlay(assets, overlay)
			if err != nil {
				t.Fatal(err)
			}
			got, err := testenv.RenderChart(values)
			if err != nil {
				t.Fatal(err)
			}
			wantByKey, gotByKey := byKey(want), byKey(got)
			for key, w := range wantByKey {
				g, ok := gotByKey[key]
				switch {
				case !ok && w.GetKind() == "Namespace":
					// helm install --create-namespace, labelled as docs/operations.md says.
				case !ok:
					t.Errorf("The chart lacks %s of config/%s", key, overlay)
				default:
					if diff := cmp.Diff(w.Object, withoutChartLabels(g).Object); diff != "" {
						t.Errorf("The chart's %s differs from config/%s's (-kustomize +chart):\n%s", key, overlay, diff)
					}
				}
			}
			for key := range gotByKey {
				if _, ok := wantByKey[key]; !ok {
					t.Errorf("The chart renders %s, which config/%s lacks", key, overlay)
				}
			}
		})
	}
}

// TestChartValues renders the chart with values config/ has no overlay for,
// and with values that contradict each other, which the chart refuses.
func TestChartValues(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for name, tc := range map[string]struct {
		values map[string]any
		// namespace is the release's, testenv.ChartNamespace when empty;
		// noServiceMonitorAPI renders for a cluster without Prometheus
		// Operator's CRD.
		namespace           string
		noServiceMonitorAPI bool
		// check inspects the rendered objects by kind/name; wantErr is
		// the message rendering fails with instead.
		check   func(t *testing.T, objs map[string]*unstructured.Unstructured)
		wantErr string
	}{
		"image by repository, tag and digest": {
			values: map[string]any{"image": map[string]any{"repository": "team/gatefold", "tag": "v1.2.3", "digest": digest, "pullPolicy": "Always"}},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				c := managerContainerOf(t, objs)
				if c["image"] != "team/gatefold:v1.2.3@"+digest || c["imagePullPolicy"] != "Always" {
					t.Errorf("The manager runs %v pulled %v, want team/gatefold:v1.2.3@%s pulled Always", c["image"], c["imagePullPolicy"], digest)
				}
			},
		},
		"flags from values, extra args last": {
			values: map[string]any{
				"listenersetControllers": []any{"traefik.io/gateway-controller", "example.com/gateway"},
				"poolSiblingGrace":       "10m",
				"extraArgs":              []any{"--merger-workers=8"},
				"resources":              map[string]any{"limits": map[string]any{"memory": "1Gi"}},
				"goMemLimit":             "920MiB",
			},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				c := managerContainerOf(t, objs)
				args, _, _ := unstructured.NestedStringSlice(c, "args")
				if want := []string{"--listenerset-controllers=traefik.io/gateway-controller,example.com/gateway", "--pool-sibling-grace=10m", "--merger-workers=8"}; !slices.Equal(args[len(args)-3:], want) {
					t.Errorf("The manager's args end %v, want %v", args, want)
				}
				if limit, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); limit != "1Gi" {
					t.Errorf("The manager's memory limit is %q, want 1Gi", limit)
				}
				env, _, _ := unstructured.NestedSlice(c, "env")
				if !slices.ContainsFunc(env, func(e any) bool { return e.(map[string]any)["value"] == "920MiB" }) {
					t.Errorf("The manager's env %v lacks GOMEMLIMIT=920MiB", env)
				}
			},
		},
		"an issuer of the user's": {
			values: map[string]any{"certificates": map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}}}},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				if _, ok := objs["Issuer/gatefold-selfsigned-issuer"]; ok {
					t.Error("The chart makes its Issuer while the user names one")
				}
				ref, _, _ := unstructured.NestedStringMap(objs["Certificate/gatefold-serving-cert"].Object, "spec", "issuerRef")
				if want := map[string]string{"name": "corp-ca", "kind": "ClusterIssuer"}; !maps.Equal(ref, want) {
					t.Errorf("The Certificate's issuerRef is %v, want %v", ref, want)
				}
			},
		},
		"an external issuer": {
			values: map[string]any{"certificates": map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{
				"name": "corp-pca", "kind": "AWSPCAClusterIssuer", "group": "awspca.cert-manager.io"}}}},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				ref, _, _ := unstructured.NestedStringMap(objs["Certificate/gatefold-serving-cert"].Object, "spec", "issuerRef")
				if want := map[string]string{"name": "corp-pca", "kind": "AWSPCAClusterIssuer", "group": "awspca.cert-manager.io"}; !maps.Equal(ref, want) {
					t.Errorf("The Certificate's issuerRef is %v, want %v", ref, want)
				}
			},
		},
		"a pool sibling grace of 0": {
			values: map[string]any{"poolSiblingGrace": "0"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				args, _, _ := unstructured.NestedStringSlice(managerContainerOf(t, objs), "args")
				if !slices.Contains(args, "--pool-sibling-grace=0") {
					t.Errorf("The manager's args %v lack --pool-sibling-grace=0", args)
				}
			},
		},
		"another namespace": {
			namespace: "other",
			values:    selfSignedValues,
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				for key, o := range objs {
					b, err := json.Marshal(o)
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(string(b), testenv.ChartNamespace) {
						t.Errorf("Released into namespace other, %s names %s: %s", key, testenv.ChartNamespace, b)
					}
				}
			},
		},
		"a ServiceMonitor when enabled": {
			values: map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				sm, ok := objs["ServiceMonitor/gatefold-controller-manager-metrics-monitor"]
				if !ok {
					t.Fatal("No ServiceMonitor is rendered")
				}
				if sm.GetLabels()["release"] != "prometheus" {
					t.Errorf("The ServiceMonitor's labels %v lack release=prometheus", sm.GetLabels())
				}
				sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				if !labels.SelectorFromSet(sel).Matches(labels.Set(objs["Service/gatefold-metrics-service"].GetLabels())) {
					t.Errorf("The ServiceMonitor selects %v, not the metrics Service %v", sel, objs["Service/gatefold-metrics-service"].GetLabels())
				}
			},
		},
		"both certificate modes": {
			values:  map[string]any{"certificates": map[string]any{"selfSigned": map[string]any{"enabled": true}}},
			wantErr: "certManager.enabled and selfSigned.enabled are both true; enable exactly one",
		},
		"no certificate mode": {
			values:  map[string]any{"certificates": map[string]any{"certManager": map[string]any{"enabled": false}}},
			wantErr: "neither certManager.enabled nor selfSigned.enabled is true; enable exactly one",
		},
		"an issuer without a name": {
			values:  map[string]any{"certificates": map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"kind": "ClusterIssuer"}}}},
			wantErr: "certificates.certManager.issuerRef needs a name",
		},
		"an issuer of the user's in self-signed mode": {
			values: map[string]any{"certificates": map[string]any{
				"certManager": map[string]any{"enabled": false, "issuerRef": map[string]any{"name": "corp-ca"}},
				"selfSigned":  map[string]any{"enabled": true},
			}},
			wantErr: "certificates.certManager.issuerRef is set but selfSigned.enabled is true; unset issuerRef or use certManager",
		},
		"an extra arg setting a flag of a value": {
			values:  map[string]any{"extraArgs": []any{"--merger-workers=8", "--pool-sibling-grace=1m"}},
			wantErr: `extraArgs: "--pool-sibling-grace=1m" sets --pool-sibling-grace, which the chart sets: set poolSiblingGrace instead`,
		},
		"a ServiceMonitor without its CRD": {
			values:              map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			noServiceMonitorAPI: true,
			wantErr:             "the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor; install Prometheus Operator's CRD servicemonitors.monitoring.coreos.com first",
		},
		"a memory limit the Go runtime refuses": {
			values:  map[string]any{"goMemLimit": "460M"},
			wantErr: "at '/goMemLimit': '460M' does not match pattern",
		},
		"a scrape interval Prometheus refuses": {
			values:  map[string]any{"serviceMonitor": map[string]any{"interval": "30 seconds"}},
			wantErr: "at '/serviceMonitor/interval': '30 seconds' does not match pattern",
		},
		"no replica": {
			values:  map[string]any{"replicaCount": 0},
			wantErr: "at '/replicaCount': minimum: got 0, want 1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			namespace, apis := tc.namespace, []string{testenv.ServiceMonitorAPI}
			if namespace == "" {
				namespace = testenv.ChartNamespace
			}
			if tc.noServiceMonitorAPI {
				apis = nil
			}
			objs, err := testenv.RenderChartFor(namespace, apis, tc.values)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Rendering with %v: %v, want an error containing %q", tc.values, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*unstructured.Unstructured{}
			for _, o := range objs {
				byName[o.GetKind()+"/"+o.GetName()] = o
			}
			tc.check(t, byName)
		})
	}
}

// byKey indexes objs by kind/namespace/name.
func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

// withoutChartLabels is o without chartLabels.
func withoutChartLabels(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	labels := o.GetLabels()
	for _, l := range chartLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(o.Object, "metadata", "labels")
	} else {
		o.SetLabels(labels)
	}
	return o
}

// managerContainerOf is the manager container of the rendered Deployment.
func managerContainerOf(t *testing.T, objs map[string]*unstructured.Unstructured) map[string]any {
	t.Helper()
	d, ok := objs["Deployment/gatefold-controller-manager"]
	if !ok {
		t.Fatal("No Deployment gatefold-controller-manager is rendered")
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	return containers[0].(map[string]any)
}
