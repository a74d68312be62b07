package admission

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// createAtOnce creates the fragments concurrently, released together, and
// returns each create's error and what was stored in the namespaces.
func createAtOnce(t *testing.T, fragments []*v1alpha1.ListenerFragment, namespaces []string) ([]error, []v1alpha1.ListenerFragment) {
	t.Helper()
	creates := make([]func() error, len(fragments))
	for i, lf := range fragments {
		creates[i] = func() error { return env.Client.Create(context.Background(), lf) }
	}
	errs := race(creates...)
	var stored []v1alpha1.ListenerFragment
	for _, ns := range namespaces {
		list := &v1alpha1.ListenerFragmentList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, list.Items...)
	}
	for i, err := range errs {
		if err != nil && !apierrors.IsInvalid(err) {
			t.Errorf("Create %d failed with something other than a denial: %v", i, err)
		}
	}
	return errs, stored
}

// TestConcurrentCreatesStoreExactlyOne is the race a cache-only check loses:
// many fragments that want one tuple, created at once through both replicas.
func TestConcurrentCreatesStoreExactlyOne(t *testing.T) {
	const creates = 60
	namespaces := []string{newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)}
	gw := newGateway(t, namespaces[0], gwv1.NamespacesFromAll)
	validatedBefore := [replicas]int64{validated[0].Load(), validated[1].Load()}

	var fragments []*v1alpha1.ListenerFragment
	for i := range creates {
		fragments = append(fragments, newFragment(namespaces[i%len(namespaces)], fmt.Sprintf("racer-%d", i), gw, https("https", "contended.example.com")))
	}
	errs, stored := createAtOnce(t, fragments, namespaces)
	allowed := 0
	for _, err := range errs {
		if err == nil {
			allowed++
		}
	}
	t.Logf("%d concurrent creates of one tuple: %d allowed, %d stored; validations per replica %d and %d", creates, allowed, len(stored),
		validated[0].Load()-validatedBefore[0], validated[1].Load()-validatedBefore[1])
	if allowed != 1 || len(stored) != 1 {
		t.Errorf("%d creates of one tuple: %d allowed and %d stored, want exactly 1", creates, allowed, len(stored))
	}
	for i := range replicas {
		if validated[i].Load() == validatedBefore[i] {
			t.Errorf("Replica %d validated none of the creates: the race did not span replicas", i)
		}
	}
}

// TestConcurrentProtocolClassesNeverBothLand races HTTP listeners (distinct
// hostnames) against TCP listeners on one port: one class wins, so the port
// ends up carrying either HTTP listeners only or one TCP listener, and every
// allowed create is stored.
func TestConcurrentProtocolClassesNeverBothLand(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	var fragments []*v1alpha1.ListenerFragment
	for i := range 20 {
		fragments = append(fragments,
			newFragment(ns, fmt.Sprintf("web-%d", i), gw, gwv1.ListenerEntry{Name: "http", Port: 7000, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname(fmt.Sprintf("h%d.example.com", i)))}),
			newFragment(ns, fmt.Sprintf("tcp-%d", i), gw, gwv1.ListenerEntry{Name: "tcp", Port: 7000, Protocol: gwv1.TCPProtocolType}))
	}
	errs, stored := createAtOnce(t, fragments, []string{ns})
	allowed := sets.New[string]()
	for i, err := range errs {
		if err == nil {
			allowed.Insert(fragments[i].Name)
		}
	}
	classes := map[gwv1.ProtocolType]int{}
	for _, lf := range stored {
		classes[lf.Spec.Listeners[0].Protocol]++
		allowed.Delete(lf.Name)
	}
	t.Logf("Stored per protocol: %v", classes)
	switch {
	case len(stored) == 0:
		t.Errorf("None of the %d creates was stored, want one protocol class to win port 7000; the first denial: %v", len(fragments), errs[0])
	case classes[gwv1.HTTPProtocolType] > 0 && classes[gwv1.TCPProtocolType] > 0:
		t.Errorf("Port 7000 carries both HTTP and TCP listeners: %v", classes)
	case classes[gwv1.TCPProtocolType] > 1:
		t.Errorf("%d TCP listeners stored on one port, want at most 1", classes[gwv1.TCPProtocolType])
	}
	if allowed.Len() > 0 {
		t.Errorf("Allowed creates are not stored: %v", sets.List(allowed))
	}
}
