package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	apiwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/test/fixture"
)

// shippedMatcher is the matcher the API server builds from the defaulting
// webhook's matchConditions in config/webhook/manifests.yaml: the same
// compiler, CEL environment, cost budget and failure policy.
func shippedMatcher(t testing.TB) matchconditions.Matcher {
	t.Helper()
	raw, err := os.ReadFile("../config/webhook/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(raw)))
	defer dec.Close()
	for buf := make([]byte, len(raw)); ; {
		n, err := dec.Read(buf)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := yaml.Unmarshal(buf[:n], m); err != nil || m.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		for i := range m.Webhooks {
			if w := &m.Webhooks[i]; w.Name == "mlistenerfragment.gatefold.dev" {
				if len(w.MatchConditions) == 0 {
					t.Fatalf("The shipped %s has no matchConditions", w.Name)
				}
				compiler := cel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
				return apiwebhook.NewMutatingWebhookAccessor("uid", m.Name, w).GetCompiledMatcher(compiler)
			}
		}
	}
	t.Fatal("config/webhook/manifests.yaml has no mlistenerfragment.gatefold.dev")
	return nil
}

// calls says whether the API server calls the defaulting webhook for the
// create of lf's JSON, and the matcher's error, which denies the create.
func calls(t testing.TB, m matchconditions.Matcher, raw []byte) (bool, error) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	gvk := v1alpha1.GroupVersion.WithKind("ListenerFragment")
	attr := admission.NewAttributesRecord(obj, nil, gvk, obj.GetNamespace(), obj.GetName(), v1alpha1.GroupVersion.WithResource("listenerfragments"),
		"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "route-controller"})
	versioned, err := admission.NewVersionedAttributes(attr, gvk, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := m.Match(context.Background(), versioned, nil, nil)
	return res.Matches, res.Error
}

// defaultingActs says whether DefaultFragment changes or denies the
// fragment the webhook decodes from raw.
func defaultingActs(t testing.TB, raw []byte) bool {
	t.Helper()
	lf := &v1alpha1.ListenerFragment{}
	if err := json.Unmarshal(raw, lf); err != nil {
		t.Fatal(err)
	}
	before := lf.DeepCopy()
	errs := DefaultFragment(lf)
	return len(errs) > 0 || !equality.Semantic.DeepEqual(before, lf)
}

// oversized says whether the schema denies lf for its size alone: more than
// 64 listeners, or a hostname longer than 253 characters.
func oversized(lf *v1alpha1.ListenerFragment) bool {
	return len(lf.Spec.Listeners) > 64 || slices.ContainsFunc(lf.Spec.Listeners, func(l gwv1.ListenerEntry) bool {
		return utf8.RuneCountInString(string(ptr.Deref(l.Hostname, ""))) > 253
	})
}

// agree checks that the API server calls the defaulting webhook for lf
// exactly when DefaultFragment would change or deny it, or the schema will
// deny it for its size, and returns whether it does.
func agree(t testing.TB, m matchconditions.Matcher, lf *v1alpha1.ListenerFragment) bool {
	t.Helper()
	raw, err := json.Marshal(lf)
	if err != nil {
		t.Fatal(err)
	}
	called, err := calls(t, m, raw)
	if err != nil {
		t.Fatalf("Evaluating the matchCondition denies %.300s: %v", raw, err)
	}
	if acts := defaultingActs(t, raw) || oversized(lf); called != acts {
		t.Fatalf("The defaulting webhook is called: %t, DefaultFragment changes or denies (or the schema denies its size): %t, for %.2000s", called, acts, raw)
	}
	return called
}

// withListeners sets lf's listeners to n copies of its first, of unique
// names and ports, with hostname host.
func withListeners(lf *v1alpha1.ListenerFragment, n int, host string) {
	l := lf.Spec.Listeners[0]
	lf.Spec.Listeners = nil
	for i := range n {
		l.Name, l.Port, l.Hostname = gwv1.SectionName(fmt.Sprintf("l%d", i)), gwv1.PortNumber(1000+i), ptr.To(gwv1.Hostname(host))
		lf.Spec.Listeners = append(lf.Spec.Listeners, l)
	}
}

// normal is a fragment as route controllers write it, which defaulting
// leaves as it is.
func normal() *v1alpha1.ListenerFragment {
	lf := fragment("shop", "web", fixture.HTTPS("https", "app.example.com"), gwv1.ListenerEntry{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType})
	if errs := DefaultFragment(lf); len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	return lf
}

func TestDefaultingWebhookIsCalledExactlyWhenItActs(t *testing.T) {
	m := shippedMatcher(t)
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	tests := map[string]struct {
		change func(*v1alpha1.ListenerFragment)
		called bool
	}{
		"a normal fragment": {change: func(*v1alpha1.ListenerFragment) {}},
		"a wildcard hostname": {change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("*.example.com"))
		}},
		"a passthrough TLS listener": {change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[0].Protocol = gwv1.TLSProtocolType
			lf.Spec.Listeners[0].TLS = &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)}
		}},
		"64 listeners of 253-character hostnames, the most the schema admits": {change: func(lf *v1alpha1.ListenerFragment) {
			withListeners(lf, 64, long)
		}},
		// Past what CEL's cost limit allows the API server to evaluate:
		// the schema, not the matchCondition, denies it.
		"64 listeners of 40,000-character hostnames": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			withListeners(lf, 64, strings.Repeat("a", 40000))
		}},
		"65 listeners":       {called: true, change: func(lf *v1alpha1.ListenerFragment) { withListeners(lf, 65, "app.example.com") }},
		"no parentRef group": {called: true, change: func(lf *v1alpha1.ListenerFragment) { lf.Spec.ParentRef.Group = nil }},
		"an empty parentRef group": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.ParentRef.Group = ptr.To(gwv1.Group(""))
		}},
		"no parentRef kind":      {called: true, change: func(lf *v1alpha1.ListenerFragment) { lf.Spec.ParentRef.Kind = nil }},
		"no parentRef name":      {called: true, change: func(lf *v1alpha1.ListenerFragment) { lf.Spec.ParentRef.Name = "" }},
		"no parentRef namespace": {called: true, change: func(lf *v1alpha1.ListenerFragment) { lf.Spec.ParentRef.Namespace = nil }},
		"an upper-case hostname": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("App.example.com"))
		}},
		"a hostname with a trailing dot": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("app.example.com."))
		}},
		"an empty hostname": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname(""))
		}},
		"a Kelvin sign": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("\u212a.example.com"))
		}},
		"HTTPS without tls.mode": {called: true, change: func(lf *v1alpha1.ListenerFragment) { lf.Spec.Listeners[0].TLS.Mode = nil }},
		"no allowedRoutes on the last listener": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[1].AllowedRoutes = nil
		}},
		"no allowedRoutes.namespaces.from": {called: true, change: func(lf *v1alpha1.ListenerFragment) {
			lf.Spec.Listeners[1].AllowedRoutes.Namespaces.From = nil
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lf := normal()
			tc.change(lf)
			if called := agree(t, m, lf); called != tc.called {
				t.Errorf("The defaulting webhook is called: %t, want %t", called, tc.called)
			}
		})
	}
}

// choices hands out the bytes of a fuzz input as small choices, 0 once
// they run out.
type choices []byte

func (c *choices) pick(n int) int {
	if len(*c) == 0 {
		return 0
	}
	b := (*c)[0]
	*c = (*c)[1:]
	return int(b) % n
}

func pickOf[T any](c *choices, options ...T) T { return options[c.pick(len(options))] }

// randomHostname is a hostname of up to 7 characters that may need
// lowercasing, trimming or denying, or may not be UTF-8.
func (c *choices) randomHostname() string {
	var b strings.Builder
	for range c.pick(8) {
		b.WriteString(pickOf(c, "a", "Z", ".", "-", "*", "é", "\x80", "K"))
	}
	return b.String()
}

// randomFragment is a fragment of up to 3 listeners whose every field
// DefaultFragment reads is left out, empty, normal or otherwise.
func randomFragment(c *choices) *v1alpha1.ListenerFragment {
	lf := fragment("shop", "web")
	lf.Spec.Listeners = []gwv1.ListenerEntry{}
	ref := &lf.Spec.ParentRef
	ref.Group = pickOf(c, nil, ptr.To(gwv1.Group("")), ptr.To(gwv1.Group(gwv1.GroupName)), ptr.To(gwv1.Group("example.com")))
	ref.Kind = pickOf(c, nil, ptr.To(gwv1.Kind("")), ptr.To(gwv1.Kind("Gateway")), ptr.To(gwv1.Kind("Service")))
	ref.Name = pickOf[gwv1.ObjectName](c, "", "shared")
	ref.Namespace = pickOf(c, nil, ptr.To(gwv1.Namespace("")), ptr.To(gwv1.Namespace("infra")))
	for i := range c.pick(4) {
		l := gwv1.ListenerEntry{Name: gwv1.SectionName("l" + strings.Repeat("x", i)), Port: 443}
		l.Protocol = pickOf[gwv1.ProtocolType](c, "", gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, "https")
		hostnames := []*gwv1.Hostname{nil, ptr.To(gwv1.Hostname("")), ptr.To(gwv1.Hostname("app.example.com")), ptr.To(gwv1.Hostname("*.Example.com."))}
		if h := c.pick(len(hostnames) + 1); h < len(hostnames) {
			l.Hostname = hostnames[h]
		} else {
			l.Hostname = ptr.To(gwv1.Hostname(c.randomHostname()))
		}
		l.TLS = pickOf(c, nil, &gwv1.ListenerTLSConfig{}, &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeType(""))},
			&gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate)}, &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)})
		l.AllowedRoutes = pickOf(c, nil, &gwv1.AllowedRoutes{}, &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{}},
			&gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.FromNamespaces(""))}},
			&gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
			&gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}})
		lf.Spec.Listeners = append(lf.Spec.Listeners, l)
	}
	return lf
}

// FuzzDefaultingWebhookIsCalledExactlyWhenItActs evaluates the shipped
// matchCondition on random fragments: the API server must call the
// defaulting webhook for every fragment it would change or deny, and, so
// that normal fragments cost no round trip, for no other.
func FuzzDefaultingWebhookIsCalledExactlyWhenItActs(f *testing.F) {
	for _, seed := range []string{"", "\x02\x02\x01\x02\x01\x02\x02\x03\x04", "\x02\x02\x01\x02\x03\x02\x04\x05\x03\x07\x01\x06\x04\x03\x02\x02\x02\x03",
		"\x01\x01\x01\x01\x02\x01\x04\x02\x00\x00"} {
		f.Add([]byte(seed))
	}
	m := shippedMatcher(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := choices(data)
		agree(t, m, randomFragment(&c))
	})
}
