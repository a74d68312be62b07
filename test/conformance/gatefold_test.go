package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

const (
	// overlay is the install the suite judges: gatefold serving its own
	// webhooks without cert-manager.
	overlay = "self-signed"
	// installNamespace is the overlay's namespace.
	installNamespace = "gatefold-system"
)

// startGatefold installs the overlay with kubectl as a user does, points its
// webhooks at a local port, and runs `gatefold manager` there as the
// overlay's ServiceAccount (never as cluster-admin), folding the
// ListenerSets of the classes of controller, logging into
// logDir/gatefold.log. It stops gatefold at the end of the test, within the
// 30s a pod has after SIGTERM, and then fails it for every request the API
// server refused gatefold. It returns the version
// of the gatefold it runs: $GATEFOLD_BINARY (make conformance passes
// bin/gatefold), or the working tree's.
func startGatefold(t *testing.T, env *devenv.Env, logDir, controller string) string {
	t.Helper()
	bin := testenv.MustBuildGatefold(t)
	testenv.MustStart(t, env, testenv.Gatefold{
		Overlay: overlay, Apply: true, PointWebhooks: true, Binary: bin, Dir: logDir, StopGrace: 30 * time.Second,
		Env:  []string{"POD_NAMESPACE=" + installNamespace},
		Args: []string{"--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1", "--leader-elect=false", "--listenerset-controllers=" + controller},
	})
	waitCABundles(t, env.Client)
	return gatefoldVersion(t, bin)
}

// waitCABundles waits until gatefold has given every webhook the CA bundle
// that lets the API server call it, so that no request the suite makes is
// refused, or let through unchecked, for want of it.
func waitCABundles(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, 60*time.Second, func() error {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-mutating-webhook-configuration"}, m); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "gatefold-validating-webhook-configuration"}, v); err != nil {
			t.Fatal(err)
		}
		injected := true
		for _, w := range m.Webhooks {
			injected = injected && len(w.ClientConfig.CABundle) > 0
		}
		for _, w := range v.Webhooks {
			injected = injected && len(w.ClientConfig.CABundle) > 0
		}
		if !injected {
			return errors.New("gatefold has not injected its CA bundle into its webhook configurations")
		}
		return nil
	})
}
