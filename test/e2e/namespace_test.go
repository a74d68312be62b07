package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// claimGrace is the --claim-grace of TestDeletingANamespaceFreesItsTuples:
// the shortest gatefold takes, so that a released tuple is seen taken again
// within the test.
const claimGrace = 10 * time.Second

// TestDeletingANamespaceFreesItsTuples runs gatefold as installed on a
// control plane with kube-controller-manager, as a cluster has: a tenant's
// namespace deleted goes away with its fragment (it does not stay
// Terminating), the fragment's listener leaves the Gateway, its claims are
// released, and another tenant's fragment for the same tuple is then
// admitted and folded.
func TestDeletingANamespaceFreesItsTuples(t *testing.T) {
	env, _ := startControlPlane(t, devenv.Options{CRDDir: emptyCRDDir(t)})
	c := env.Client
	startInstalledManager(t, env, fmt.Sprintf("--claim-grace=%s", claimGrace), "--claim-collect-period=1s")
	ctx := context.Background()
	for _, ns := range []string{"infra", "leaving", "arriving"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	create(t, c, gw)
	tenantFragment := func(ns string) *v1alpha1.ListenerFragment {
		lf := fixture.Fragment(ns, "app", gw, fixture.HTTPS("web", "app.example.com"))
		lf.Spec.ParentRef.Namespace = ptr.To(gwv1.Namespace("infra"))
		return lf
	}
	leaving := tenantFragment("leaving")
	create(t, c, leaving)
	folded := waitListenerNames(t, c, leaving, "web")["web"]
	if held := claimsHeldBy(t, c, "leaving/"); len(held) == 0 {
		t.Fatal("The folded fragment of namespace leaving holds no claim")
	}

	deleted := time.Now()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leaving"}}); err != nil {
		t.Fatalf("Deleting namespace leaving: %v", err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		ns := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKey{Name: "leaving"}, ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("waiting for namespace leaving to be deleted; last: %v, phase %s, conditions %+v", err, ns.Status.Phase, ns.Status.Conditions)
	})
	t.Logf("Namespace leaving was deleted in %s", time.Since(deleted).Round(100*time.Millisecond))
	testenv.Eventually(t, servedWithin, func() error {
		current := &gwv1.Gateway{}
		get(t, c, client.ObjectKeyFromObject(gw), current)
		var names []gwv1.SectionName
		for _, l := range current.Spec.Listeners {
			names = append(names, l.Name)
		}
		if !slices.Contains(names, folded) {
			return nil
		}
		return fmt.Errorf("waiting for the deleted namespace's listener to leave the Gateway; last: listeners %v", names)
	})
	testenv.Eventually(t, claimGrace+20*time.Second, func() error {
		held := claimsHeldBy(t, c, "leaving/")
		if len(held) == 0 {
			return nil
		}
		return fmt.Errorf("waiting for the deleted namespace's claims to be released; last: claims %v", held)
	})
	t.Logf("Its claims were released %s after the delete", time.Since(deleted).Round(100*time.Millisecond))

	arriving := tenantFragment("arriving")
	testenv.Eventually(t, claimGrace+20*time.Second, func() error {
		err := c.Create(ctx, arriving)
		if err == nil {
			return nil
		}
		return fmt.Errorf("waiting for another tenant's fragment for the freed tuple to be admitted; last: denied: %v", err)
	})
	waitListenerNames(t, c, arriving, "web")
}
