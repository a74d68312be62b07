package folding

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/test/testenv"
)

// unchanged is the invariant that the objects of list's kind in ns are
// those of versions, by name, at those resourceVersions: none is written,
// made or deleted.
func unchanged(list client.ObjectList, ns string, versions map[string]string) testenv.Invariant {
	return testenv.Invariant{List: list, Namespace: ns, Check: func(objs map[string]client.Object) error {
		for name, obj := range objs {
			if rv, ok := versions[name]; !ok || rv != obj.GetResourceVersion() {
				return fmt.Errorf("%T %s was written in a steady state: resourceVersion %q became %s", obj, name, rv, obj.GetResourceVersion())
			}
		}
		for name := range versions {
			if _, ok := objs[name]; !ok {
				return fmt.Errorf("%s was deleted in a steady state", name)
			}
		}
		return nil
	}}
}

// unwritten is the invariant that the objects of list's kind in ns stay as
// they are now.
func unwritten(t *testing.T, list client.ObjectList, ns string) testenv.Invariant {
	t.Helper()
	if err := watcher.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatalf("Listing %T in %s: %v", list, ns, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, o := range items {
		obj := o.(client.Object)
		versions[obj.GetName()] = obj.GetResourceVersion()
	}
	return unchanged(list.DeepCopyObject().(client.ObjectList), ns, versions)
}
