// Package netns runs a test in a network namespace and a PID namespace of
// its own, made with unshare, where Traefik can listen on ports 80 and 443
// and a Service's EndpointSlices can name addresses that are not loopback,
// with nothing listening outside it: the conformance run with Traefik
// (test/conformance) and the e2e tests of routes with real Service
// backends (test/e2e) use it.
//
// A test calls Enter: outside, it executes the test binary again, for that
// test alone, in new namespaces (Run); there it sets them up (SetUp) and
// the test goes on. Every address of PodNetwork is local in the namespace: Traefik
// listens on GatewayAddress, kube-apiserver advertises APIServerAddress,
// and backends listen on PodAddress(n).
package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Env is set in the test binary Run executes again, to the network
// namespace it was started from, which SetUp checks it left.
const Env = "GATEFOLD_NETNS"

// RequireEnv, set to 1 (as CI does), makes every reason to skip a test that
// runs in a namespace of its own with Traefik fail it instead.
const RequireEnv = "GATEFOLD_REQUIRE_TRAEFIK"

const (
	// PodNetwork is routed to lo, as local, inside the test's network
	// namespace, so that every address in it is the namespace's own: the
	// Gateway's and the backends'. It is the benchmarking range (RFC
	// 2544), never an address on the internet, and exists in that
	// namespace only.
	PodNetwork = "198.18.0.0/15"
	// GatewayAddress is where Traefik listens, on ports 80 and 443, and the
	// address it writes into the Gateways' status.
	GatewayAddress = "198.18.0.1"
	// APIServerAddress is the address kube-apiserver advertises: the
	// namespace has no default route to take one from.
	APIServerAddress = "198.18.0.2"
)

// Inside says whether this is the test binary Run executed again.
func Inside() bool { return os.Getenv(Env) != "" }

// Enter puts t's test in namespaces of its own: outside them, it runs the
// test there (Run) and returns false, and the caller returns; inside, it
// sets the network namespace up (SetUp), failing t if it cannot, and
// returns true.
func Enter(t *testing.T) bool {
	t.Helper()
	if !Inside() {
		Run(t)
		return false
	}
	if err := SetUp(); err != nil {
		t.Fatal(err)
	}
	return true
}

// Run runs t's test again, in this test binary, in a network namespace and
// a PID namespace of its own (`unshare -n --pid --fork --kill-child
// --mount-proc`, with -r when not root): the test binary is the PID
// namespace's first process, so when it exits, however, the kernel kills
// every process it started, and the network namespace goes with the last of
// them. It fails t when the test fails there; its output goes to this
// process's. It skips t (Skip) when unshare or ip is missing or no
// namespace can be made.
func Run(t *testing.T) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		Skip(t, "Skipping: a network namespace of the test's own needs unshare (util-linux)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		Skip(t, "Skipping: setting up a network namespace of the test's own needs ip (iproute2)")
	}
	// --mount-proc: /proc as the PID namespace sees it.
	args := []string{"-n", "--pid", "--fork", "--kill-child", "--mount-proc"}
	if os.Getuid() != 0 {
		args = append([]string{"-r"}, args...) // a user namespace, in which this user may make the others
	}
	if out, err := exec.Command(unshare, append(args, "true")...).CombinedOutput(); err != nil {
		Skip(t, "Skipping: `unshare %v true` cannot make the namespaces the test runs in here (%v: %s); "+
			"it needs root or unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)", args, err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// Time for this process to report what the other one left.
	testArgs := append([]string{"-test.run=^" + t.Name() + "$", "-test.count=1"}, ChildTimeout(t, 10*time.Second)...)
	if testing.Verbose() {
		testArgs = append(testArgs, "-test.v")
	}
	cmd := exec.Command(unshare, append(append(args, self), testArgs...)...)
	cmd.Env = append(os.Environ(), Env+"="+ns)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("The run in a network namespace of its own failed (%v): its output is above", err)
	}
}

// ChildTimeout is the -test.timeout flag of a child process of t's test
// that leaves margin to t, and at least a second to the child; none when t
// has no deadline.
func ChildTimeout(t *testing.T, margin time.Duration) []string {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return []string{"-test.timeout=" + max(time.Until(d)-margin, time.Second).String()}
}

// Skip skips t, saying why (format, args), or fails it so when $RequireEnv
// is 1.
func Skip(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf(format+" ($"+RequireEnv+"=1 requires the test to run)", args...)
	}
	t.Skipf(format, args...)
}

// SetUp brings lo up in the test's network namespace and routes PodNetwork
// to it. It refuses to run in the namespace the test was started from, or
// in any with an interface but lo: a new one has only lo.
func SetUp() error {
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	if ns == os.Getenv(Env) {
		return errors.New("still in the network namespace the test was started from: not setting it up")
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing the network namespace's interfaces: %w", err)
	}
	for _, i := range ifaces {
		if i.Name != "lo" {
			return fmt.Errorf("the network namespace has interface %s, and a new one (unshare -n) has only lo: not setting it up; "+
				"run the test without $%s", i.Name, Env)
		}
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"route", "add", "local", PodNetwork, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}

// PodAddress is the n-th backend's address in PodNetwork: 198.18.1.n, for
// n from 1 to 254.
func PodAddress(n int) (netip.Addr, error) {
	if n < 1 || n > 254 {
		return netip.Addr{}, fmt.Errorf("no address for a %d-th backend: there are 254, 198.18.1.1 to 198.18.1.254", n)
	}
	return netip.AddrFrom4([4]byte{198, 18, 1, byte(n)}), nil
}
