package folding

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// futureField is a field of a Gateway CRD newer than gatefold's Go types,
// both on the spec and on a listener.
const futureField = "gatefoldTestFuture"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// addFutureField adds futureField to the Gateway CRD's spec and listeners,
// as a newer Gateway API release would add a field, until the test ends.
func addFutureField(t *testing.T) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := env.Client.Get(ctx, types.NamespacedName{Name: "gateways.gateway.networking.k8s.io"}, crd); err != nil {
		t.Fatalf("Reading the Gateway CRD: %v", err)
	}
	original := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		spec := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties"}
		for _, at := range [][]string{spec, append(spec, "listeners", "items", "properties")} {
			if err := unstructured.SetNestedMap(v.(map[string]any), map[string]any{"type": "string"}, append(at, futureField)...); err != nil {
				t.Fatalf("Adding %s to the Gateway CRD: %v", futureField, err)
			}
		}
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatalf("Updating the Gateway CRD: %v", err)
	}
	t.Cleanup(func() {
		current := &unstructured.Unstructured{}
		current.SetGroupVersionKind(crdGVK)
		if err := env.Client.Get(ctx, types.NamespacedName{Name: crd.GetName()}, current); err != nil {
			t.Errorf("Reading the Gateway CRD: %v", err)
			return
		}
		original.SetResourceVersion(current.GetResourceVersion())
		if err := env.Client.Update(ctx, original); err != nil {
			t.Errorf("Restoring the Gateway CRD: %v", err)
		}
	})
	// The API server keeps the field once its new schema is in use.
	testenv.Eventually(t, 30*time.Second, func() error {
		probe := unstructuredGateway(t, fixture.Gateway("default", gwv1.NamespacesFromSame))
		probe.SetName("future-probe")
		_ = unstructured.SetNestedField(probe.Object, "x", "spec", futureField)
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if _, ok, _ := unstructured.NestedString(probe.Object, "spec", futureField); !ok {
			return fmt.Errorf("the API server still prunes spec.%s", futureField)
		}
		return nil
	})
}

func unstructuredGateway(t *testing.T, gw *gwv1.Gateway) *unstructured.Unstructured {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gw)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("Gateway")
	return u
}

// gatewayObject is Gateway ns/name as an unstructured object to read or
// patch whole.
func gatewayObject(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("Gateway")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// readGateway reads Gateway ns/name whole, fields the Go types lack included.
func readGateway(ns, name string) (*unstructured.Unstructured, error) {
	u := gatewayObject(ns, name)
	return u, env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)
}

// hasFuture checks that Gateway ns/name has spec.futureField = spec, and
// futureField = value on each listener named in listeners.
func hasFuture(ns, name, spec string, listeners map[string]string) error {
	gw, err := readGateway(ns, name)
	if err != nil {
		return err
	}
	if got, _, _ := unstructured.NestedString(gw.Object, "spec", futureField); got != spec {
		return fmt.Errorf("Gateway %s: spec.%s is %q, want %q", name, futureField, got, spec)
	}
	ls, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	for want, value := range listeners {
		found := false
		for _, l := range ls {
			l := l.(map[string]any)
			if l["name"] != want {
				continue
			}
			found = true
			if got, _ := l[futureField].(string); got != value {
				return fmt.Errorf("Gateway %s: listener %s has %s %q, want %q", name, want, futureField, got, value)
			}
		}
		if !found {
			return fmt.Errorf("Gateway %s has no listener %s", name, want)
		}
	}
	return nil
}

// TestGatewayFieldsTheTypesLackAreKept: a Gateway CRD newer than gatefold's
// Go types has a field they lack. The head keeps it, on its spec and its own
// listener; each sibling of the pool gets the head's, follows when it
// changes, and keeps one on a listener someone else added to the sibling.
func TestGatewayFieldsTheTypesLackAreKept(t *testing.T) {
	addFutureField(t)
	ns := newNamespace(t, nil)
	head := fixture.PoolHead(ns, gwv1.NamespacesFromSame, fixture.Own("http", 80, gwv1.HTTPProtocolType, ""))
	u := unstructuredGateway(t, head)
	_ = unstructured.SetNestedField(u.Object, "v1", "spec", futureField)
	ls, _, _ := unstructured.NestedSlice(u.Object, "spec", "listeners")
	ls[0].(map[string]any)[futureField] = "own"
	_ = unstructured.SetNestedSlice(u.Object, ls, "spec", "listeners")
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("Creating the head: %v", err)
	}

	createRoutes(t, ns, head, 0, 64)
	sibling := rules.SiblingName(head.Name, 2)
	if landed := landings(t, ns, 64); landed["r0063"] != sibling {
		t.Fatalf("The 64th fragment landed on %q, want %s", landed["r0063"], sibling)
	}
	own := map[string]string{"http": "own"}
	testenv.Eventually(t, 10*time.Second, func() error { return hasFuture(ns, head.Name, "v1", own) })
	testenv.Eventually(t, 10*time.Second, func() error { return hasFuture(ns, sibling, "v1", own) })

	// A sibling without the field and the annotation (written before
	// gatefold kept one, or whose follow-up patch failed) is written again.
	sib := gatewayObject(ns, sibling)
	strip := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{%q:null}}`, v1alpha1.HeadSpecAnnotation, futureField))
	if err := env.Client.Patch(ctx, sib, client.RawPatch(types.MergePatchType, strip)); err != nil {
		t.Fatalf("Stripping the sibling: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() error { return hasFuture(ns, sibling, "v1", own) })

	// The head's field changes: the sibling follows.
	patch := []byte(fmt.Sprintf(`{"spec":{%q:"v2"}}`, futureField))
	if err := env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("Patching the head: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, func() error { return hasFuture(ns, sibling, "v2", own) })
	settled := map[string]string{}
	for name, gw := range pool(t, head) {
		settled[name] = gw.ResourceVersion
	}
	testenv.Holds(t, env, 3*time.Second, unchanged(&gwv1.GatewayList{}, ns, settled))

	// A listener someone else adds to the sibling keeps its field through
	// the next write of the sibling.
	sib, err := readGateway(ns, sibling)
	if err != nil {
		t.Fatal(err)
	}
	sls, _, _ := unstructured.NestedSlice(sib.Object, "spec", "listeners")
	sls = append(sls, map[string]any{"name": "theirs", "port": int64(8081), "protocol": "HTTP", futureField: "theirs"})
	_ = unstructured.SetNestedSlice(sib.Object, sls, "spec", "listeners")
	if err := env.Client.Update(ctx, sib); err != nil {
		t.Fatalf("Adding a listener to the sibling: %v", err)
	}
	createRoutes(t, ns, head, 64, 65)
	if landed := landings(t, ns, 65); landed["r0064"] != sibling {
		t.Fatalf("The 65th fragment landed on %q, want %s", landed["r0064"], sibling)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		return hasFuture(ns, sibling, "v2", map[string]string{"http": "own", "theirs": "theirs"})
	})
	testenv.Eventually(t, 10*time.Second, func() error { return hasFuture(ns, head.Name, "v2", own) })
}
