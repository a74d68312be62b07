package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/fixture"
	"github.com/gatefold/gatefold/test/testenv"
)

// TestNewLeaderAdoptsDerivedRoutes runs two replicas, as installed. The
// first leader serves an HTTPRoute by fragment parentRef through a derived
// route, which the test, standing in for the implementation, accepts; the
// leader is killed. The second leader adopts what the first made: the
// derived route stays the same object (one create in the audit log, no
// delete), the user route's status is not written again, and an edit of
// the user route reaches the derived route under the new leader.
func TestNewLeaderAdoptsDerivedRoutes(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.log")
	env, _ := startControlPlane(t, devenv.Options{AuditLog: audit})
	c := env.Client
	for _, ns := range []string{haNamespace, "infra", "team-a"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// The class is Traefik's, so that parentsStatus judges the entries; no
	// Traefik runs: the test writes the derived route's status.
	create(t, c, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "example"}, Spec: gwv1.GatewayClassSpec{ControllerName: dataplane.ControllerName}})
	gw := fixture.Gateway("infra", gwv1.NamespacesFromAll)
	create(t, c, gw)

	replicas := startReplicas(t, env, dir, 2)
	first := waitLeader(t, replicas)
	lf := fixture.Fragment("team-a", "shop", gw, fixture.Entry("web", 80, gwv1.HTTPProtocolType, "shop.example.com"))
	create(t, c, lf)
	ref := gwv1.ParentReference{Group: ptr.To(gwv1.Group(v1alpha1.GroupVersion.Group)), Kind: ptr.To(gwv1.Kind("ListenerFragment")),
		Namespace: ptr.To(gwv1.Namespace(lf.Namespace)), Name: gwv1.ObjectName(lf.Name), SectionName: ptr.To(gwv1.SectionName("web"))}
	r := routeTo("team-a", "shop", "/", "echo", ref)
	r.Spec.Hostnames = []gwv1.Hostname{"shop.example.com"}
	create(t, c, r)
	listener := v1alpha1.ListenerName(lf.Namespace, lf.Name, "web")
	made := waitDerivedRoute(t, c, r, gw, listener)
	acceptDerived(t, c, made)
	waitParentsStatus(t, c, r, metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	before := &gwv1.HTTPRoute{}
	get(t, c, client.ObjectKeyFromObject(r), before)

	if err := first.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	second := waitLeader(t, slices.DeleteFunc(slices.Clone(replicas), func(r *replica) bool { return r == first }))
	waitRoutingStarted(t, second)
	// The new leader reconciles every route when its routing controllers
	// start; give it time to write what it would.
	time.Sleep(3 * time.Second)
	adopted := waitDerivedRoute(t, c, r, gw, listener)
	if adopted.UID != made.UID {
		t.Errorf("Derived route %s (UID %s) replaced %s (UID %s) under the new leader, want it adopted", adopted.Name, adopted.UID, made.Name, made.UID)
	}
	after := &gwv1.HTTPRoute{}
	get(t, c, client.ObjectKeyFromObject(r), after)
	if after.ResourceVersion != before.ResourceVersion {
		accepted := func(r *gwv1.HTTPRoute) string {
			if len(r.Status.Parents) == 0 {
				return "no entry"
			}
			return testenv.ConditionString(meta.FindStatusCondition(r.Status.Parents[0].Conditions, string(gwv1.RouteConditionAccepted)))
		}
		t.Errorf("HTTPRoute %s was written after the failover (resourceVersion %s, was %s): Accepted %s, was %s",
			r.Name, after.ResourceVersion, before.ResourceVersion, accepted(after), accepted(before))
	}
	edited := time.Now()

	// A new path reaches the derived route, under the new leader.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, c, client.ObjectKeyFromObject(r), r)
		r.Spec.Rules[0].Matches[0].Path.Value = ptr.To("/v2")
		return c.Update(context.Background(), r)
	}); err != nil {
		t.Fatal(err)
	}
	changed := waitDerivedRoute(t, c, r, gw, listener)
	if changed.UID != made.UID || changed.Annotations[v1alpha1.SourceGenerationAnnotation] != "2" {
		t.Errorf("Derived route %s (UID %s) copies generation %s of the route, want %s updated to generation 2", changed.Name, changed.UID, changed.Annotations[v1alpha1.SourceGenerationAnnotation], made.UID)
	}
	acceptDerived(t, c, changed)
	waitParentsStatus(t, c, r, metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))

	checkDerivedAdopted(t, audit, made, first, second, edited)
	checkDeposedWroteNothing(t, audit, first, ledSince(t, second))
	checkOnlyLeadersWrote(t, audit, first, second, []*replica{second})
}

// waitDerivedRoute waits until r has exactly one derived route, which names
// listener of Gateway gw and carries r's rules as stored, and returns it.
func waitDerivedRoute(t *testing.T, c client.Client, r *gwv1.HTTPRoute, gw *gwv1.Gateway, listener gwv1.SectionName) *gwv1.HTTPRoute {
	t.Helper()
	want := []gwv1.ParentReference{{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")),
		Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), Name: gwv1.ObjectName(gw.Name), SectionName: ptr.To(listener)}}
	var d *gwv1.HTTPRoute
	testenv.Eventually(t, 30*time.Second, func() error {
		user := &gwv1.HTTPRoute{}
		get(t, c, client.ObjectKeyFromObject(r), user)
		list := &gwv1.HTTPRouteList{}
		if err := c.List(context.Background(), list, client.InNamespace(r.Namespace), client.MatchingLabels{v1alpha1.DerivedLabel: "true"}); err != nil {
			return err
		}
		var mine []*gwv1.HTTPRoute
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], user) {
				mine = append(mine, &list.Items[i])
			}
		}
		if len(mine) != 1 {
			return fmt.Errorf("HTTPRoute %s has %d derived routes, want 1", r.Name, len(mine))
		}
		d = mine[0]
		if !equality.Semantic.DeepEqual(d.Spec.ParentRefs, want) || !equality.Semantic.DeepEqual(d.Spec.Rules, user.Spec.Rules) {
			return fmt.Errorf("derived route %s names %v with rules %+v, want Gateway %s section %s and the rules %+v", d.Name, d.Spec.ParentRefs, d.Spec.Rules, gw.Name, listener, user.Spec.Rules)
		}
		return nil
	})
	return d
}

// acceptDerived writes the derived route's status as Traefik would:
// Accepted with resolved references at its generation.
func acceptDerived(t *testing.T, c client.Client, d *gwv1.HTTPRoute) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(t, c, client.ObjectKeyFromObject(d), d)
		d.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: d.Spec.ParentRefs[0], ControllerName: dataplane.ControllerName, Conditions: []metav1.Condition{
			{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonAccepted), ObservedGeneration: d.Generation, LastTransitionTime: metav1.Now(), Message: "Accepted"},
			{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs), ObservedGeneration: d.Generation, LastTransitionTime: metav1.Now(), Message: "Resolved"},
		}}}
		return c.Status().Update(context.Background(), d)
	}); err != nil {
		t.Fatal(err)
	}
}

// waitRoutingStarted waits until the replica's HTTPRoute routing controller
// runs its workers.
func waitRoutingStarted(t *testing.T, r *replica) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(r.Log)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, `"Starting workers"`) && strings.Contains(line, `"routing-httproute"`) {
				return nil
			}
		}
		return fmt.Errorf("%s has not started its HTTPRoute routing controller", r.Name)
	})
}

// checkDerivedAdopted reads the audit log: derived route d was created
// once, by the first leader, and never deleted; the second leader wrote no
// HTTPRoute between taking the lease and the user's edit at edited, and
// updated d after it.
func checkDerivedAdopted(t *testing.T, audit string, d *gwv1.HTTPRoute, first, second *replica, edited time.Time) {
	t.Helper()
	leads := ledSince(t, second)
	var creates, deletes, updates []string
	for _, e := range auditEvents(t, audit) {
		if e.ObjectRef.Resource != "httproutes" || e.ObjectRef.Namespace != d.Namespace || e.ResponseStatus.Code >= 300 || !strings.HasPrefix(e.UserAgent, "gatefold/") {
			continue
		}
		what := fmt.Sprintf("%s %s %s/%s by %s at %s", e.Verb, e.ObjectRef.Name, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.UserAgent, e.StageTimestamp.Format(time.RFC3339Nano))
		switch {
		case e.Verb == "create":
			creates = append(creates, what)
		case e.Verb == "delete":
			deletes = append(deletes, what)
		}
		if strings.Contains(e.UserAgent, "("+second.Name+")") {
			if e.StageTimestamp.After(leads) && e.StageTimestamp.Before(edited) {
				t.Errorf("The new leader wrote an HTTPRoute before the route changed: %s", what)
			}
			if e.ObjectRef.Name == d.Name && e.Verb == "update" && e.ObjectRef.Subresource == "" {
				updates = append(updates, what)
			}
		}
	}
	if len(creates) != 1 || !strings.Contains(creates[0], d.Name) || !strings.Contains(creates[0], "("+first.Name+")") {
		t.Errorf("gatefold created HTTPRoutes %v, want derived route %s once, by %s", creates, d.Name, first.Name)
	}
	if len(deletes) != 0 {
		t.Errorf("gatefold deleted HTTPRoutes %v, want none", deletes)
	}
	if len(updates) == 0 {
		t.Errorf("%s never updated derived route %s after the route changed", second.Name, d.Name)
	}
	t.Logf("Derived route %s: created %v; updated by the new leader %v", d.Name, creates, updates)
}
