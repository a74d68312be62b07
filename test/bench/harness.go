package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/scheme"
	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

const systemNamespace = "gatefold-system"

// stopGrace is how long a replica has to exit after SIGTERM: one killed
// does not release its lease, which would skew the warm-restart figures.
const stopGrace = 30 * time.Second

// harness holds the control plane and the gatefold processes under test.
type harness struct {
	env       *devenv.Env
	bin       string
	dir       string
	installed *testenv.Installed
	audit     string
	// auditOffset is how far audited has read the log; events are those
	// it read and keeps.
	auditMu     sync.Mutex
	auditOffset int64
	events      []testenv.AuditEvent
	// webhooks are the webhook configurations envtest installed, kept so
	// that phases can run with and without them.
	webhooks []client.Object
	managers []*manager
	// serving is the replica that serves the webhooks the API server
	// calls, when one runs.
	serving *manager
	// observer reads for the harness itself; it is never counted.
	observer client.WithWatch
	// args are the flags every replica gets besides its own addresses:
	// the leader election timings and Params.GatefoldArgs.
	args []string
	// namespaces are those the phases wrote into, which cleanUp empties.
	namespaces []string
	// profiler takes CPU profiles of the timed phases, with --profile.
	profiler *profiler
	// readyTimeout is Params.readyTimeout.
	readyTimeout time.Duration
}

func newHarness(env *devenv.Env, bin, dir string, p Params) (*harness, error) {
	h := &harness{env: env, bin: bin, dir: dir, audit: filepath.Join(dir, "audit.log"), args: managerArgs(p), readyTimeout: p.readyTimeout()}
	var err error
	if h.observer, err = client.NewWithWatch(h.config("bench-observer"), client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}); err != nil {
		return nil, err
	}
	// gatefold runs as the ServiceAccount and RBAC of config/default, as
	// installed; the writers and the observer are the administrator.
	if h.installed, err = testenv.Install(ctx, env, "default"); err != nil {
		return nil, err
	}
	m := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := env.Client.List(ctx, m); err != nil {
		return nil, err
	}
	if err := env.Client.List(ctx, v); err != nil {
		return nil, err
	}
	for i := range m.Items {
		h.webhooks = append(h.webhooks, &m.Items[i])
	}
	for i := range v.Items {
		h.webhooks = append(h.webhooks, &v.Items[i])
	}
	return h, h.setWebhooks(ctx, false)
}

// config is a rest config whose requests the audit log attributes to agent,
// unthrottled so that the client never limits what is measured.
func (h *harness) config(agent string) *rest.Config {
	cfg := rest.CopyConfig(h.env.Config)
	cfg.UserAgent = agent
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

func (h *harness) client(agent string) (client.Client, error) {
	return client.New(h.config(agent), client.Options{Scheme: scheme.New()})
}

// setWebhooks installs or removes gatefold's webhook configurations, and
// waits until the API server uses the change.
func (h *harness) setWebhooks(ctx context.Context, on bool) error {
	for _, w := range h.webhooks {
		obj := w.DeepCopyObject().(client.Object)
		obj.SetResourceVersion("")
		obj.SetUID("")
		var err error
		if on {
			err = client.IgnoreAlreadyExists(h.env.Client.Create(ctx, obj))
		} else {
			err = client.IgnoreNotFound(h.env.Client.Delete(ctx, obj))
		}
		if err != nil {
			return fmt.Errorf("switching webhooks: %w", err)
		}
	}
	return h.waitWebhooks(ctx, on)
}

// waitWebhooks waits until a dry-run create of a fragment whose hostname
// only the mutating webhook makes valid is admitted (on) or refused by the
// schema (off): the API server's webhook informer has then seen the change.
func (h *harness) waitWebhooks(ctx context.Context, on bool) error {
	probe := &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bench-webhook-probe"},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: "bench-webhook-probe"},
			Listeners: []gwv1.ListenerEntry{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("Probe.Example.COM."))}},
		},
	}
	var err error
	if testenv.Poll(30*time.Second, 50*time.Millisecond, func() error {
		err = h.env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return pending((on && err == nil) || (!on && apierrors.IsInvalid(err)))
	}) != nil {
		return fmt.Errorf("the API server did not switch gatefold's webhooks %s within 30s: %v", map[bool]string{true: "on", false: "off"}[on], err)
	}
	// The validating configuration is read by an informer of its own.
	time.Sleep(200 * time.Millisecond)
	return nil
}

// serve makes sure a replica serves the webhooks and they are installed,
// as gatefold runs when installed; phases that measure admission, or
// anything with the webhooks running, call it.
func (h *harness) serve(ctx context.Context, name string) (*manager, error) {
	if h.serving == nil || !h.serving.alive() {
		m, err := h.startManager(name, h.env.WebhookPort())
		if err != nil {
			return nil, err
		}
		h.serving = m
	}
	return h.serving, h.setWebhooks(ctx, true)
}

// manager is one `gatefold manager` process.
type manager struct {
	*testenv.Replica
	metrics string
	// pprof serves Go's profiles, with --profile only.
	pprof string
}

func (m *manager) alive() bool {
	select {
	case <-m.Exited():
		return false
	default:
		return true
	}
}

// startManager starts a replica and waits until it is ready. The one on
// the env's webhook port serves the webhooks the control plane calls,
// others serve on ports nobody calls.
func (h *harness) startManager(name string, webhookPort int) (*manager, error) {
	m, err := h.launch(name, webhookPort)
	if err != nil {
		return nil, err
	}
	return m, m.WaitReadyWithin(context.Background(), h.readyTimeout)
}

// launch starts a replica and returns at once.
func (h *harness) launch(name string, webhookPort int) (*manager, error) {
	metrics, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	m := &manager{metrics: fmt.Sprintf("127.0.0.1:%d", metrics)}
	args := []string{"--metrics-bind-address", m.metrics, "--metrics-secure=false",
		"--webhook-port", strconv.Itoa(webhookPort), "--webhook-cert-dir", h.env.WebhookCertDir()}
	if h.profiler != nil {
		port, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		m.pprof = fmt.Sprintf("127.0.0.1:%d", port)
		args = append(args, "--pprof-bind-address", m.pprof)
	}
	replicas, err := testenv.Start(context.Background(), h.env, testenv.Gatefold{
		Installed: h.installed, Binary: h.bin, Name: name, Dir: h.dir, Args: append(args, h.args...), NoWait: true,
		StopGrace: stopGrace,
	})
	if err != nil {
		return nil, err
	}
	m.Replica = replicas[0]
	h.managers = append(h.managers, m)
	h.profiler.launched(m)
	return m, nil
}

// managerArgs are the flags every replica gets besides its own addresses
// and files: gatefold's defaults but for the lease (renew deadline 2/3,
// retry period 2/15 of it, gatefold's ratios) and whatever the run adds.
func managerArgs(p Params) []string {
	return append([]string{
		"--leader-election-namespace=" + systemNamespace, "--claims-namespace=" + systemNamespace,
		"--leader-election-lease-duration=" + p.LeaseDuration.String(),
		"--leader-election-renew-deadline=" + (p.LeaseDuration * 2 / 3).String(),
		"--leader-election-retry-period=" + (p.LeaseDuration * 2 / 15).String(),
		"--zap-log-level=error",
	}, p.GatefoldArgs...)
}

func (h *harness) stopManagers() {
	for _, m := range h.managers {
		if m.alive() {
			_ = m.Cmd.Process.Kill()
		}
	}
}

// checkRefusals fails the run when a replica logged that the API server
// refused it a request: the shipped RBAC would then not carry what was
// measured.
func (h *harness) checkRefusals() error {
	var refused []string
	for _, m := range h.managers {
		lines, err := testenv.ForbiddenInFile(m.Log)
		if err != nil {
			return err
		}
		for _, line := range lines {
			refused = append(refused, m.Name+": "+line)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("gatefold, run as installed, was refused requests:\n%s", strings.Join(refused, "\n"))
	}
	return nil
}

// peakRSS is the process's peak resident set, from /proc.
func (m *manager) peakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", m.Cmd.Process.Pid)
}

// counter sums a counter of the replica's metrics over series whose labels
// include every given label.
func (m *manager) counter(name string, labels map[string]string) (float64, error) {
	resp, err := http.Get("http://" + m.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0.0
	f, ok := families[name]
	if !ok {
		return 0, nil
	}
series:
	for _, s := range f.GetMetric() {
		for _, l := range s.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
				continue series
			}
		}
		total += s.GetCounter().GetValue()
	}
	return total, nil
}

// writes counts the API writes audited between from and to, by who made
// them: "writers", "gatefold" or other, and how many were 409 conflicts.
type writes struct {
	Writers   int `json:"writers"`
	Gatefold  int `json:"gatefold"`
	Conflicts int `json:"conflicts"`
	// LeaderLease are gatefold's renewals of its leader Lease, apart.
	LeaderLease int `json:"leaderLease"`
	// ByResource splits gatefold's writes by resource (leases are claims).
	ByResource map[string]int `json:"byResource,omitempty"`
}

// reads counts the gets and lists (not watches) gatefold sent between from
// and to, its leader Lease apart.
type reads struct {
	Gatefold    int            `json:"gatefold"`
	LeaderLease int            `json:"leaderLease"`
	ByResource  map[string]int `json:"byResource,omitempty"`
}

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// leaderLease is the name of gatefold's leader election Lease.
const leaderLease = "gatefold-leader"

// audited returns the audit events whose stage ended between from and to.
// It reads each line of the log once, as the log grows, and keeps the
// events that ended at from or later: a window asked for must start no
// earlier than the one asked for before it.
func (h *harness) audited(from, to time.Time) ([]testenv.AuditEvent, error) {
	h.auditMu.Lock()
	defer h.auditMu.Unlock()
	more, offset, err := testenv.ReadAuditLogFrom(h.audit, h.auditOffset)
	if err != nil {
		return nil, err
	}
	h.auditOffset = offset
	h.events = slices.DeleteFunc(append(h.events, more...), func(e testenv.AuditEvent) bool { return e.StageTimestamp.Before(from) })
	var in []testenv.AuditEvent
	for _, e := range h.events {
		if !e.StageTimestamp.After(to) {
			in = append(in, e)
		}
	}
	return in, nil
}

func resourceOf(e testenv.AuditEvent) string {
	switch {
	case e.ObjectRef.Resource == "":
		return "(discovery)"
	case e.ObjectRef.Subresource != "":
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

func gatefoldAgent(e testenv.AuditEvent) bool { return strings.HasPrefix(e.UserAgent, "gatefold/") }

func isLeaderLease(e testenv.AuditEvent) bool {
	return e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == leaderLease
}

func (h *harness) countWrites(from, to time.Time) (writes, error) {
	w := writes{ByResource: map[string]int{}}
	events, err := h.audited(from, to)
	if err != nil {
		return w, err
	}
	for _, e := range events {
		if !writeVerbs[e.Verb] {
			continue
		}
		switch {
		case strings.HasPrefix(e.UserAgent, "bench-writer"):
			w.Writers++
		case gatefoldAgent(e) && isLeaderLease(e):
			w.LeaderLease++
			continue
		case gatefoldAgent(e):
			w.Gatefold++
			w.ByResource[resourceOf(e)]++
		default:
			continue
		}
		if e.ResponseStatus.Code == http.StatusConflict {
			w.Conflicts++
		}
	}
	return w, nil
}

func (h *harness) countReads(from, to time.Time) (reads, error) {
	r := reads{ByResource: map[string]int{}}
	events, err := h.audited(from, to)
	if err != nil {
		return r, err
	}
	for _, e := range events {
		switch {
		case e.Verb != "get" && e.Verb != "list", !gatefoldAgent(e):
		case isLeaderLease(e):
			r.LeaderLease++
		default:
			r.Gatefold++
			r.ByResource[e.Verb+" "+resourceOf(e)]++
		}
	}
	return r, nil
}

// applies sums the replica's Gateway and fragment status applies that
// reached the API server, and its ReferenceGrant writes: what it sent.
func (m *manager) applies() (gateways, statuses, grants float64, err error) {
	for _, result := range []string{"written", "noop", "conflict", "error"} {
		g, err1 := m.counter("gatefold_merger_gateway_applies_total", map[string]string{"result": result})
		s, err2 := m.counter("gatefold_merger_status_applies_total", map[string]string{"result": result})
		if err = errors.Join(err1, err2); err != nil {
			return 0, 0, 0, err
		}
		gateways, statuses = gateways+g, statuses+s
	}
	grants, err = m.counter("gatefold_merger_reference_grant_writes_total", nil)
	return gateways, statuses, grants, err
}

// claimLabel marks gatefold's claim Leases (package claims).
const claimLabel = "gatefold.dev/claim"

// cleanUp deletes what the phases before left, with gatefold stopped: their
// routes, fragments, ListenerSets, Gateways and ReferenceGrants, and every
// claim. A later phase then measures gatefold on its own objects alone.
func (h *harness) cleanUp(ctx context.Context) error {
	for _, ns := range h.namespaces {
		for _, obj := range []client.Object{&gwv1.HTTPRoute{}, &v1alpha1.ListenerFragment{}, &gwv1.ListenerSet{}, &gwv1.Gateway{}, &gwv1.ReferenceGrant{}} {
			if err := h.env.Client.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("cleaning up namespace %s: %w", ns, err)
			}
		}
	}
	h.namespaces = nil
	if err := h.env.Client.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(systemNamespace), client.HasLabels{claimLabel}); err != nil {
		return fmt.Errorf("deleting the claims: %w", err)
	}
	return nil
}

// fresh stops every replica, removes the webhooks and cleans up: what comes
// next runs on an API server with no work left over.
func (h *harness) fresh(ctx context.Context) error {
	for _, m := range h.managers {
		_ = m.Stop() // as a rolling update does
	}
	h.serving = nil
	if err := h.setWebhooks(ctx, false); err != nil {
		return err
	}
	return h.cleanUp(ctx)
}

// settle waits until replica m has sent no Gateway, status or grant write
// for quiet: a timed run then measures its own work, not the folds of the
// one before.
func (h *harness) settle(m *manager, timeout time.Duration) error {
	if _, ok := m.quiesce(timeout, nil, nil); !ok {
		return fmt.Errorf("replica %s still writing after %v", m.Name, timeout)
	}
	return nil
}

// quiesce polls replica m until its Gateway, status and grant writes, and
// the count more returns (nil for none), have not changed for quiet and done
// (nil for always) holds of that count. It returns when they last changed,
// and whether that happened within timeout.
func (m *manager) quiesce(timeout time.Duration, more func() float64, done func(more float64) bool) (time.Time, bool) {
	var last [4]float64
	changed := time.Now()
	ok := testenv.Poll(timeout, 250*time.Millisecond, func() error {
		g, s, r, err := m.applies()
		now := [4]float64{g, s, r}
		if more != nil {
			now[3] = more()
		}
		if err != nil || now != last {
			last, changed = now, time.Now()
			return errPending
		}
		return pending(time.Since(changed) >= quiet && (done == nil || done(now[3])))
	}) == nil
	return changed, ok
}

// namespace creates a namespace for a phase, which cleanUp empties later.
func (h *harness) namespace(ctx context.Context, name string, labels map[string]string) error {
	h.namespaces = append(h.namespaces, name)
	return h.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}
