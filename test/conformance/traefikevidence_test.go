package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/test/testenv"
)

// statusWrite is an update of a route's status that the API server
// accepted, as its audit log records it: when, by whom (gatefold or
// Traefik), and the entry it wrote for one parentRef, nil for none.
type statusWrite struct {
	at    time.Time
	by    string
	entry *gwv1.RouteParentStatus
}

// writerOf is who sent a request with userAgent: gatefold, Traefik, or
// "" for anyone else.
func writerOf(userAgent string) string {
	switch {
	case strings.HasPrefix(userAgent, "gatefold/"):
		return "gatefold"
	case strings.HasPrefix(userAgent, "traefik/"):
		return "Traefik"
	}
	return ""
}

// statusWrites are gatefold's and Traefik's updates of route's status in
// events, in the order the API server logged them, each with its entry for
// parent. The log must hold the objects written
// (devenv.Options.AuditRouteStatusBodies).
func statusWrites(events []testenv.AuditEvent, route types.NamespacedName, parent gwv1.ParentReference) ([]statusWrite, error) {
	var out []statusWrite
	for _, e := range events {
		ref := e.ObjectRef
		by := writerOf(e.UserAgent)
		if ref.Resource != "httproutes" || ref.Subresource != "status" || ref.Namespace != route.Namespace || ref.Name != route.Name ||
			e.Verb != "update" || e.ResponseStatus.Code != http.StatusOK || by == "" {
			continue
		}
		if len(e.RequestObject) == 0 {
			return nil, fmt.Errorf("the audit log has no object for %s's update of %s's status: it needs AuditRouteStatusBodies", by, route)
		}
		var obj gwv1.HTTPRoute
		if err := json.Unmarshal(e.RequestObject, &obj); err != nil {
			return nil, fmt.Errorf("reading %s's update of %s's status in the audit log: %w", by, route, err)
		}
		w := statusWrite{at: e.StageTimestamp, by: by}
		for i, p := range obj.Status.Parents {
			if sameParentRef(p.ParentRef, parent, route.Namespace) {
				w.entry = &obj.Status.Parents[i]
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// sameParentRef says whether a and b, parentRefs of a route in namespace,
// name the same parent and section, with the API's defaults. The harness
// judges this apart from gatefold's own code, as the stub does grants.
func sameParentRef(a, b gwv1.ParentReference, namespace string) bool {
	ns := gwv1.Namespace(namespace)
	return ptr.Deref(a.Group, gwv1.GroupName) == ptr.Deref(b.Group, gwv1.GroupName) &&
		ptr.Deref(a.Kind, "Gateway") == ptr.Deref(b.Kind, "Gateway") &&
		ptr.Deref(a.Namespace, ns) == ptr.Deref(b.Namespace, ns) && a.Name == b.Name &&
		ptr.Deref(a.SectionName, "") == ptr.Deref(b.SectionName, "") && ptr.Deref(a.Port, 0) == ptr.Deref(b.Port, 0)
}

// traefikEvidence says, from writes, how often gatefold and Traefik wrote
// f's route's status, and each one's last entry for f's parentRef. It fails
// unless gatefold's last entry is Accepted=True, the verdict the test
// wants: only then is Traefik's the verdict that fails it.
func traefikEvidence(writes []statusWrite, f traefikFailure) ([]string, error) {
	count := map[string]int{}
	last := map[string]statusWrite{}
	for _, w := range writes {
		count[w.by]++
		if w.entry != nil {
			last[w.by] = w
		}
	}
	out := []string{fmt.Sprintf("%s's status: %d updates by gatefold, %d by Traefik; the last entry each wrote for parentRef %s:",
		f.route, count["gatefold"], count["Traefik"], parentRefString(f.parent))}
	for _, by := range []string{"gatefold", "Traefik"} {
		w, ok := last[by]
		if !ok {
			out = append(out, fmt.Sprintf("  %s: none", by))
			continue
		}
		out = append(out, fmt.Sprintf("  %s at %s: controllerName %s", by, w.at.UTC().Format("15:04:05.000"), w.entry.ControllerName))
		for _, c := range w.entry.Conditions {
			out = append(out, "    "+conditionString(c))
		}
	}
	g, ok := last["gatefold"]
	if !ok {
		return out, errors.New("gatefold wrote no entry for parentRef " + parentRefString(f.parent))
	}
	for _, c := range g.entry.Conditions {
		if c.Type == string(gwv1.RouteConditionAccepted) && c.Status != metav1.ConditionTrue {
			return out, fmt.Errorf("gatefold's last entry for parentRef %s is %s", parentRefString(f.parent), conditionString(c))
		}
		if c.Type == string(gwv1.RouteConditionAccepted) {
			return out, nil
		}
	}
	return out, fmt.Errorf("gatefold's last entry for parentRef %s has no Accepted condition", parentRefString(f.parent))
}

// addEvidence gives each outcome of r.failing what gatefold and Traefik
// wrote into its route's status, read from the audit log at auditPath.
func addEvidence(outcomes map[string]outcome, r suiteRun, auditPath string) {
	events, readErr := testenv.ReadAuditLog(auditPath)
	for name, o := range outcomes {
		f := r.failing[name]
		writes, err := statusWrites(events, f.route, f.parent)
		switch {
		case readErr != nil:
			o.writesErr = readErr
		case err != nil:
			o.writesErr = err
		default:
			o.writes, o.writesErr = traefikEvidence(writes, f)
		}
		outcomes[name] = o
	}
}

// parentRefString is ref as `kind namespace/name, sectionName s`.
func parentRefString(ref gwv1.ParentReference) string {
	s := fmt.Sprintf("%s %s/%s", ptr.Deref(ref.Kind, "Gateway"), ptr.Deref(ref.Namespace, ""), ref.Name)
	if ref.SectionName != nil {
		s += ", sectionName " + string(*ref.SectionName)
	}
	return s
}

// conditionString is c as `Type=Status Reason (generation n): message`.
func conditionString(c metav1.Condition) string {
	s := fmt.Sprintf("%s=%s %s (generation %d)", c.Type, c.Status, c.Reason, c.ObservedGeneration)
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
