package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
	"github.com/gatefold/gatefold/webhook"
)

// wantExactly checks that err's message is want, as the client prints it.
func wantExactly(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Errorf("Got error\n%v\nwant\n%s", err, want)
	}
}

// TestValuesGatewayAPIDisallowsAreDenied: what the schema admits and
// Gateway API does not is denied before it is stored, naming the field, the
// value and the fix; what the schema rejects first gets a message that
// quotes no pattern.
func TestValuesGatewayAPIDisallowsAreDenied(t *testing.T) {
	ns := newNamespace(t, nil)
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	const protocolFix = ": use HTTP, HTTPS, TLS, TCP or UDP, or a domain-prefixed one such as example.com/name"
	withProtocol := func(p gwv1.ProtocolType) *v1alpha1.ListenerFragment {
		return newFragment(ns, "f", gw, fixture.Entry("web", 8081, p, "a.example.com"))
	}
	withKind := func(kind gwv1.Kind) *v1alpha1.ListenerFragment {
		l := https("https", "a.example.com")
		l.TLS.CertificateRefs[0].Kind = ptr.To(kind)
		return newFragment(ns, "f", gw, l)
	}
	noParent := newFragment(ns, "f", gw, https("https", "a.example.com"))
	noParent.Spec.ParentRef = gwv1.ParentGatewayReference{}
	// The mutating webhook denies what the schema would reject with its
	// pattern; the validating webhook what the schema admits.
	const (
		mutating = `admission webhook "mlistenerfragment.gatefold.dev" denied the request: ListenerFragment.gatefold.dev "f" is invalid: `
		invalid  = `admission webhook "vlistenerfragment.gatefold.dev" denied the request: ListenerFragment.gatefold.dev "f" is invalid: `
	)
	tests := map[string]struct {
		lf   *v1alpha1.ListenerFragment
		want string // the whole message; "" when admitted
	}{
		"a lower-case core protocol": {lf: withProtocol("http"),
			want: invalid + `spec.listeners[0].protocol: Invalid value: "http": not a Gateway API protocol (did you mean HTTP?)` + protocolFix},
		"a mixed-case core protocol": {lf: withProtocol("HTTPs"),
			want: invalid + `spec.listeners[0].protocol: Invalid value: "HTTPs": not a Gateway API protocol (did you mean HTTPS?)` + protocolFix},
		"a misspelt core protocol": {lf: withProtocol("HTPP"),
			want: invalid + `spec.listeners[0].protocol: Invalid value: "HTPP": not a Gateway API protocol (did you mean HTTP?)` + protocolFix},
		"an unprefixed protocol": {lf: withProtocol("GRPC"),
			want: invalid + `spec.listeners[0].protocol: Invalid value: "GRPC": not a Gateway API protocol` + protocolFix},
		"a prefix the schema admits only because its pattern is not anchored": {lf: withProtocol("Example.com/x"),
			want: invalid + `spec.listeners[0].protocol: Invalid value: "Example.com/x": not a Gateway API protocol` + protocolFix},
		"a domain-prefixed protocol": {lf: withProtocol("example.com/quic")},
		"an IP address as hostname": {lf: newFragment(ns, "f", gw, https("https", "1.2.3.4")),
			want: invalid + `spec.listeners[0].hostname: Invalid value: "1.2.3.4": a Gateway API hostname may not be an IP address: set the DNS name clients connect to, or leave hostname out to match every hostname`},
		"a Unicode hostname": {lf: newFragment(ns, "f", gw, https("https", "ünï.example.com")),
			want: mutating + `spec.listeners[0].hostname: Invalid value: "ünï.example.com": a hostname must be ASCII: write it in its IDNA (punycode) form, "xn--n-nga1b.example.com"`},
		"no parentRef": {lf: noParent,
			want: mutating + `spec.parentRef.name: Required value: set spec.parentRef.name to the name of the Gateway that should carry these listeners`},
		"a certificateRef of kind secret": {lf: withKind("secret"),
			want: invalid + `spec.listeners[0].tls.certificateRefs[0].kind: Invalid value: "secret": kind must be "Secret" (kinds are case-sensitive)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tc.lf, client.DryRunAll)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				return
			}
			wantExactly(t, err, tc.want)
		})
	}

	// The schema rejects an upper-case prefix before any webhook could.
	err := env.Client.Create(context.Background(), withProtocol("HTTP/2"), client.DryRunAll)
	wantDenied(t, err, `spec.listeners[0].protocol: Invalid value: "HTTP/2": spec.listeners[0].protocol in body should match`)
}

// TestKubectlPrintsWhatIsWrongWithAValue: kubectl prints the field, the
// value and the fix, not the schema's pattern or length.
func TestKubectlPrintsWhatIsWrongWithAValue(t *testing.T) {
	ns := newNamespace(t, nil)
	newGateway(t, ns, gwv1.NamespacesFromSame)
	_, stderr, err := testenv.Kubectl(t, env, fragmentYAML(ns, "by-ip", "1.2.3.4"), "apply", "-f", "-")
	want := `The ListenerFragment "by-ip" is invalid: spec.listeners[0].hostname: Invalid value: "1.2.3.4": a Gateway API hostname may not be an IP address: set the DNS name clients connect to, or leave hostname out to match every hostname`
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("kubectl apply (%v) printed:\n%s\nwant it to contain:\n%s", err, stderr, want)
	}

	noParent := strings.Replace(fragmentYAML(ns, "orphan", "a.example.com"), "  parentRef:\n    name: shared\n", "", 1)
	_, stderr, err = testenv.Kubectl(t, env, noParent, "apply", "-f", "-")
	want = `The ListenerFragment "orphan" is invalid: spec.parentRef.name: Required value: set spec.parentRef.name to the name of the Gateway that should carry these listeners`
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("kubectl apply (%v) printed:\n%s\nwant it to contain:\n%s", err, stderr, want)
	}
}

// TestFragmentStoredWithADisallowedValueStaysEditable: a value stored
// before admission denied it (here while its namespace had opted out) does
// not block an update that leaves it as it was; changing it is checked.
func TestFragmentStoredWithADisallowedValueStaysEditable(t *testing.T) {
	ns := newNamespace(t, map[string]string{webhook.AdmissionLabel: webhook.AdmissionDisabled})
	gw := newGateway(t, ns, gwv1.NamespacesFromSame)
	lf := newFragment(ns, "legacy", gw, fixture.Entry("web", 8081, "http", "1.2.3.4"))
	mustCreate(t, lf)
	optBackIn(t, ns)
	waitReplicas(t, "see "+ns+" opted back in", func(c client.Reader) bool {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		return c.Get(context.Background(), client.ObjectKey{Name: ns}, meta) == nil && meta.Labels[webhook.AdmissionLabel] == ""
	})

	stored := &v1alpha1.ListenerFragment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(lf), stored); err != nil {
		t.Fatal(err)
	}
	stored.Spec.Listeners = append(stored.Spec.Listeners, fixture.Entry("more", 8082, gwv1.HTTPProtocolType, "more.example.com"))
	if err := env.Client.Update(context.Background(), stored, client.DryRunAll); err != nil {
		t.Errorf("An update that keeps the stored listener as it was: %v", err)
	}
	stored.Spec.Listeners[0].Protocol = "HTTp"
	err := env.Client.Update(context.Background(), stored, client.DryRunAll)
	wantDenied(t, err, `spec.listeners[0].protocol: Invalid value: "HTTp": not a Gateway API protocol (did you mean HTTP?)`)
}

// TestNamespaceTheGatewayDoesNotAdmitLearnsOnlyThat: a dry run from a
// namespace the Gateway does not admit learns that the Gateway exists and
// does not admit it; not its allowedListeners rule, its listeners, the
// tuples taken on it, nor its pool.
func TestNamespaceTheGatewayDoesNotAdmitLearnsOnlyThat(t *testing.T) {
	infra := newNamespace(t, nil)
	shop := newNamespace(t, map[string]string{"team": "shop"})
	blog := newNamespace(t, map[string]string{"team": "blog"})
	gw := fixture.PoolHead(infra, gwv1.NamespacesFromSelector, gatewayHTTPS("main", "app.example.com"))
	gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
	mustCreate(t, gw)
	waitCached(t, gw)
	mustCreate(t, newFragment(shop, "checkout", gw, https("https", "checkout.example.com")))
	sibling := gw.DeepCopy()
	sibling.ObjectMeta = metav1.ObjectMeta{Namespace: infra, Name: rules.SiblingName(gw.Name, 2), Labels: map[string]string{v1alpha1.PoolLabel: gw.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID, Controller: ptr.To(true)}}}
	mustCreate(t, sibling)
	waitCached(t, sibling)

	probe := func(target *gwv1.Gateway) error {
		return env.Client.Create(context.Background(), newFragment(blog, "probe", target,
			https("own", "app.example.com"), https("taken", "checkout.example.com")), client.DryRunAll)
	}
	notAllowed := func(name string) string {
		return fmt.Sprintf(`admission webhook "vlistenerfragment.gatefold.dev" denied the request: ListenerFragment.gatefold.dev "probe" is invalid: spec.parentRef: Forbidden: Gateway %s/%s does not allow listeners from namespace %s: ask the Gateway's owner to admit this namespace in spec.allowedListeners, or choose another Gateway`, infra, name, blog)
	}
	wantExactly(t, probe(gw), notAllowed(gw.Name))
	wantExactly(t, probe(sibling), notAllowed(sibling.Name))

	// An admitted namespace is told a tuple of the Gateway itself is taken,
	// not by which of its listeners.
	err := env.Client.Create(context.Background(), newFragment(shop, "probe", gw, https("own", "app.example.com")), client.DryRunAll)
	wantExactly(t, err, fmt.Sprintf(`admission webhook "vlistenerfragment.gatefold.dev" denied the request: ListenerFragment.gatefold.dev "probe" is invalid: spec.listeners[0].hostname: Duplicate value: "app.example.com": Hostname app.example.com on port 443 (HTTPS) is already taken on Gateway %s/shared by a listener of the Gateway itself (HTTPS): choose another hostname or port`, infra))
}
