package admission

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
)

func TestGatewayWebhookOnlyWarnsAndSkipsGatefold(t *testing.T) {
	list := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := env.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, cfg := range list.Items {
		for _, wh := range cfg.Webhooks {
			switch wh.Name {
			case "vgateway.gatefold.dev":
				seen++
				if p := ptr.Deref(wh.FailurePolicy, ""); p != admissionregistrationv1.Ignore {
					t.Errorf("The Gateway webhook's failurePolicy is %s, want Ignore: it only warns", p)
				}
				if s := ptr.Deref(wh.TimeoutSeconds, 0); s > 3 {
					t.Errorf("The Gateway webhook's timeout is %ds, want at most 3", s)
				}
			case "vlistenerfragment.gatefold.dev":
				seen++
				if p := ptr.Deref(wh.FailurePolicy, ""); p != admissionregistrationv1.Fail {
					t.Errorf("The fragment webhook's failurePolicy is %s, want Fail", p)
				}
			}
		}
	}
	if seen != 2 {
		t.Fatalf("Found %d of gatefold's two validating webhooks", seen)
	}

	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	app := newFragment(ns, "app", gw, https("https", "app.example.com"), https("other", "other.example.com"))
	mustCreate(t, app)
	waitCached(t, app)

	// gatefold itself, as installed, writing a Gateway: the webhook is
	// not called, so it does not warn.
	cfg := rest.CopyConfig(installed.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	asGatefold, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	before := gw.DeepCopy()
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayHTTPS("main", "app.example.com"))
	if err := asGatefold.Patch(context.Background(), gw, client.MergeFrom(before)); err != nil {
		t.Fatalf("Patching the Gateway as gatefold: %v", err)
	}
	if len(w.seen) != 0 {
		t.Errorf("gatefold's own Gateway write went through the Gateway webhook: warnings %q", w.seen)
	}
	// gatefold as another identity (`gatefold dev` runs it as
	// cluster-admin) writes with its field manager: it is not warned of
	// the conflict it reports on the fragment, so it logs no warning.
	c, w := warningClient(t)
	before = gw.DeepCopy()
	gw.Labels = map[string]string{"folded": "again"}
	if err := c.Patch(context.Background(), gw, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		t.Fatalf("Patching the Gateway with gatefold's field manager: %v", err)
	}
	if len(w.seen) != 0 {
		t.Errorf("A write with gatefold's field manager got warnings %q, want none", w.seen)
	}
	// Anyone else is warned.
	c, w = warningClient(t)
	before = gw.DeepCopy()
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayHTTPS("second", "other.example.com"))
	if err := c.Patch(context.Background(), gw, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if len(w.seen) != 2 {
		t.Errorf("A Gateway owner's write shadowing two fragment listeners got warnings %q, want two", w.seen)
	}
}
