package e2e

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// startInstalledManager runs `gatefold manager --cert-mode=self-signed` as
// the ServiceAccount of config/self-signed, applied as a user does (see
// runInstalledManager); it returns the webhook server's address.
func startInstalledManager(t *testing.T, env *devenv.Env, flags ...string) (webhookAddr string) {
	t.Helper()
	return runInstalledManager(t, env, testenv.Gatefold{Overlay: "self-signed", Apply: true,
		Args: append([]string{"--cert-mode=self-signed", "--webhook-cert-hosts=127.0.0.1"}, flags...)})
}

// runInstalledManager runs one `gatefold manager` process as g says, without
// leader election, with the overlay's webhooks pointed at it by URL on
// loopback, waits until it is ready, and checks its log for refused
// requests at the end; it returns the webhook server's address.
func runInstalledManager(t *testing.T, env *devenv.Env, g testenv.Gatefold) (webhookAddr string) {
	t.Helper()
	g.Binary, g.Env, g.PointWebhooks = testenv.MustBuildGatefold(t), []string{"POD_NAMESPACE=" + installNamespace}, true
	g.Args = append([]string{"--leader-elect=false"}, g.Args...)
	return testenv.MustStart(t, env, g)[0].WebhookAddr
}
