// Package e2e runs the gatefold binary as a user would and checks what they
// see: kubectl output against the control plane it starts, and a clean stop.
package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatefold/gatefold/internal/dataplane"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/test/testenv"
)

// childPIDs lists the processes whose parent is pid, from /proc.
func childPIDs(t *testing.T, pid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses, start
		// with the state and then the parent's pid.
		rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(rest) > 1 && rest[1] == strconv.Itoa(pid) {
			children = append(children, e.Name())
		}
	}
	return children
}

func TestDevServesCRDsAndStopsCleanly(t *testing.T) {
	assets, err := devenv.FindAssets("")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, logFile := filepath.Join(t.TempDir(), "kubeconfig"), filepath.Join(t.TempDir(), "gatefold.log")
	args := []string{"dev", "--kubeconfig-out", kubeconfig, "--log-file", logFile}
	traefik, err := dataplane.FindBinary("")
	if errors.Is(err, dataplane.ErrNoBinary) {
		t.Logf("Running gatefold dev without a data plane: %v", err)
		args = append(args, "--traefik", "none")
	} else if err != nil {
		t.Fatal(err)
	}
	if traefik != "" {
		args = append(args, "--traefik", traefik)
	}
	cmd := exec.Command(testenv.MustBuildGatefold(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupted, not killed, so that gatefold dev stops what it started
	// (Traefik holds fixed ports) even when the test fails half-way.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		exited := make(chan struct{})
		go func() { _, _ = cmd.Process.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})

	ready := make(chan string, 1)
	go func() {
		var seen strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Press Ctrl-C to stop") {
				ready <- seen.String()
				return
			}
		}
		ready <- seen.String()
	}()
	var banner string
	select {
	case banner = <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatalf("gatefold dev did not come up in 2m; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(banner, "export KUBECONFIG="+kubeconfig) {
		t.Errorf("Banner does not tell how to use the kubeconfig:\n%s", banner)
	}
	if !strings.Contains(banner, "in this process\nas cluster-admin") {
		t.Errorf("Banner does not say that the in-process manager runs as cluster-admin:\n%s", banner)
	}
	// The samples are applied and folded: two fragments land, one conflicts
	// with the Gateway's own listener.
	for _, want := range []string{
		`(?m)^  shop-checkout-https-3vawcgqvt6og6c36 +8443 +HTTPS +checkout\.example\.com +ListenerFragment shop/checkout$`,
		`(?m)^  legacy +8443 +HTTPS +legacy\.example\.com +the Gateway$`,
		`(?m)^  shop/catalog +http +True +Accepted +Folded into Gateway infra/shared`,
		`(?m)^  shop/legacy +https +False +HostnameConflict +Hostname legacy\.example\.com on port 8443 \(HTTPS\) is already taken on Gateway infra/shared by a listener of the Gateway itself \(HTTPS\)`,
	} {
		if !regexp.MustCompile(want).MatchString(banner) {
			t.Errorf("gatefold dev output does not match %s:\n%s", want, banner)
		}
	}

	if traefik != "" {
		checkDevCurls(t, banner)
	}
	checkDevMetrics(t, banner)

	// The log is apart from the summary, and reads as text, not JSON.
	if !strings.Contains(banner, "gatefold's log: "+logFile) {
		t.Errorf("Banner does not say where the log is:\n%s", banner)
	}
	log, err := os.ReadFile(logFile)
	if err != nil || !strings.Contains(string(log), "\tINFO\t") || strings.HasPrefix(string(log), "{") {
		t.Errorf("gatefold dev's log is not human-readable (%v):\n%.500s", err, log)
	}
	// The merger, run as cluster-admin, is not warned by the Gateway webhook
	// of the conflict it reports on fragment legacy, so it logs no warning.
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "conflicts with") {
			t.Errorf("gatefold dev's log has the Gateway webhook's warning: %s", line)
		}
	}

	children := childPIDs(t, cmd.Process.Pid)
	if len(children) < 3 {
		t.Errorf("gatefold dev runs %d child processes, want kube-apiserver, etcd, kube-controller-manager and Traefik", len(children))
	}

	kubectl := exec.Command(filepath.Join(assets, "kubectl"), "get", "crd", "-o", "name")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := kubectl.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get crd: %v\n%s", err, out)
	}
	for _, crd := range []string{"gateways.gateway.networking.k8s.io", "listenersets.gateway.networking.k8s.io", "listenerfragments.gatefold.dev"} {
		if !strings.Contains(string(out), "customresourcedefinition.apiextensions.k8s.io/"+crd) {
			t.Errorf("kubectl get crd does not list %s:\n%s", crd, out)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("gatefold dev exited with %v after SIGINT; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("gatefold dev did not stop within 1m of SIGINT")
	}
	for _, pid := range children {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("Process %s (kube-apiserver, etcd, kube-controller-manager or Traefik) outlived gatefold dev", pid)
		}
	}
}

// checkDevCurls runs every curl line gatefold dev printed, once, as a user
// would copy it, and checks that each reaches its sample route's backend
// through Traefik, HTTPS ones with the certificate checked against the
// printed CA: gatefold dev prints them once they work.
func checkDevCurls(t *testing.T, banner string) {
	t.Helper()
	curlPath, err := exec.LookPath("curl")
	if err != nil {
		t.Log("No curl on this machine to run gatefold dev's curl lines with")
		return
	}
	lines := regexp.MustCompile(`(?m)^  curl (.*--resolve .+)$`).FindAllStringSubmatch(banner, -1)
	if len(lines) != 3 {
		t.Fatalf("gatefold dev printed %d curl lines, want 3:\n%s", len(lines), banner)
	}
	for _, l := range lines {
		args := append([]string{"-sS", "--max-time", "5"}, strings.Fields(l[1])...)
		url := args[len(args)-1]
		backend := strings.Split(strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://"), ".")[0]
		out, err := exec.Command(curlPath, args...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "backend="+backend+" ") {
			t.Errorf("curl %s: %v, answered %q; want backend %s", l[1], err, out, backend)
			continue
		}
		t.Logf("curl %s\n  -> %s", l[1], strings.TrimSpace(string(out)))
	}
}

// checkDevMetrics checks that gatefold dev says where its metrics are and
// which to watch, and that the address it prints answers with the samples'
// listeners.
func checkDevMetrics(t *testing.T, banner string) {
	t.Helper()
	for _, name := range []string{"gatefold_merger_listeners", "gatefold_merger_conflicts_total", "gatefold_merger_gateway_applies_total"} {
		if !strings.Contains(banner, name) {
			t.Errorf("gatefold dev does not name the metric %s:\n%s", name, banner)
		}
	}
	line := regexp.MustCompile(`(?m)^  curl -s (http://127\.0\.0\.1:8080/metrics) \| grep \^gatefold_$`).FindStringSubmatch(banner)
	if line == nil {
		t.Errorf("gatefold dev prints no curl line for its metrics on 127.0.0.1:8080:\n%s", banner)
		return
	}
	resp, err := http.Get(line[1])
	if err != nil {
		t.Fatalf("Getting gatefold dev's metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^gatefold_merger_listeners\{gateway="infra/shared",state="folded"\} [1-9]`)
	if resp.StatusCode != http.StatusOK || !want.Match(body) {
		t.Errorf("%s answered %s without a line matching %s:\n%.2000s", line[1], resp.Status, want, body)
	}
}
