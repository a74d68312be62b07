package admission

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/test/testenv"
)

func fragmentYAML(ns, name, host string) string {
	return fmt.Sprintf(`apiVersion: gatefold.dev/v1alpha1
kind: ListenerFragment
metadata:
  namespace: %s
  name: %s
spec:
  parentRef:
    name: shared
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: %s
    tls:
      certificateRefs:
      - name: cert
`, ns, name, host)
}

func TestKubectlApplyOfDuplicatePrintsTheReason(t *testing.T) {
	ns := newNamespace(t, nil)
	newGateway(t, ns, gwv1.NamespacesFromSame)

	out, stderr, err := testenv.Kubectl(t, env, fragmentYAML(ns, "shop", "Shop.Example.com."), "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply of the first fragment: %v\n%s", err, stderr)
	}
	if want := "listenerfragment.gatefold.dev/shop created"; !strings.Contains(out, want) {
		t.Errorf("kubectl printed %q, want %q", out, want)
	}

	_, stderr, err = testenv.Kubectl(t, env, fragmentYAML(ns, "shop-copy", "shop.example.com"), "apply", "-f", "-")
	if err == nil {
		t.Fatal("kubectl apply of a duplicate succeeded")
	}
	want := fmt.Sprintf(`The ListenerFragment "shop-copy" is invalid: spec.listeners[0].hostname: Duplicate value: "shop.example.com": Hostname shop.example.com on port 443 (HTTPS) is already taken on Gateway %s/shared by listener "https" (HTTPS) of ListenerFragment shop: choose another hostname or port`, ns)
	if !strings.Contains(stderr, want) {
		t.Errorf("kubectl printed:\n%s\nwant it to contain:\n%s", stderr, want)
	}

	out, stderr, err = testenv.Kubectl(t, env, "", "get", "listenerfragments", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "GATEWAY") || !strings.Contains(out, "shop ") || strings.Contains(out, "shop-copy") {
		t.Errorf("kubectl get listenerfragments printed:\n%s", out)
	}
	// The fragment leaves parentRef.namespace out: admission defaults it to
	// the fragment's own, so -o wide shows the Gateway's namespace
	// (LANDED is blank: no merger runs here).
	out, stderr, err = testenv.Kubectl(t, env, "", "get", "listenerfragments", "-n", ns, "shop", "-o", "wide")
	if err != nil {
		t.Fatalf("kubectl get -o wide: %v\n%s", err, stderr)
	}
	row := regexp.MustCompile(`(?m)^shop +shared +Unknown +Unknown +\S+ +` + ns + ` +Pending +Pending +Waiting for controller$`)
	if !strings.Contains(out, "GATEWAY NAMESPACE") || !row.MatchString(out) {
		t.Errorf("kubectl get listenerfragments -o wide printed:\n%s\nwant a row matching %s", out, row)
	}
}

func TestGatewayShadowingAFragmentGetsAWarning(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	app := newFragment(ns, "app", gw, https("https", "app.example.com"))
	mustCreate(t, app)
	waitCached(t, app)

	c, w := warningClient(t)
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayHTTPS("main", "app.example.com"))
	if err := c.Update(context.Background(), gw); err != nil {
		t.Fatalf("Updating the Gateway must never be denied by gatefold: %v", err)
	}
	want := `spec.listeners[1] ("main", hostname app.example.com on port 443 (HTTPS)) conflicts with 1 ListenerFragment listener(s): the Gateway's own listener wins and those are reported Conflicted`
	if len(w.seen) != 1 || w.seen[0] != want {
		t.Errorf("Warnings = %q, want [%q]", w.seen, want)
	}
}

// TestUpdateOfAShadowedFragmentIsAllowed: a Gateway change made one of a
// fragment's listeners conflicted. The fragment's owner can still relabel it
// and change its other listeners (rotate a Secret): only a tuple the stored
// fragment did not have is checked again, and the merger reports the
// shadowed listener Conflicted.
func TestUpdateOfAShadowedFragmentIsAllowed(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	app := newFragment(ns, "app", gw, https("https", "late.example.com"), https("other", "other.example.com"))
	mustCreate(t, app)
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayHTTPS("main", "late.example.com"), gatewayHTTPS("second", "second.example.com"))
	if err := env.Client.Update(context.Background(), gw); err != nil {
		t.Fatal(err)
	}
	waitCachedListeners(t, gw, 3)

	app.Labels = map[string]string{"route": "app"}
	if err := env.Client.Update(context.Background(), app); err != nil {
		t.Errorf("Relabelling a fragment whose listener the Gateway now shadows: %v", err)
	}
	app.Spec.Listeners[1].TLS.CertificateRefs[0].Name = "cert-2"
	if err := env.Client.Update(context.Background(), app); err != nil {
		t.Errorf("Rotating the Secret of a listener the Gateway does not shadow: %v", err)
	}
	app.Spec.Listeners = append(app.Spec.Listeners, https("again", "second.example.com"))
	err := env.Client.Update(context.Background(), app)
	wantDenied(t, err, `spec.listeners[2].hostname: Duplicate value: "second.example.com"`, `by a listener of the Gateway itself (HTTPS)`)
	if strings.Contains(err.Error(), "spec.listeners[0]") {
		t.Errorf("The update was denied for the shadowed listener it did not change: %v", err)
	}
}
