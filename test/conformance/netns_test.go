package conformance

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// netnsEnv is set in the test binary that runInNetNS re-executes, to the
// network namespace it was started from, which setUpNetNS checks it left.
const netnsEnv = "GATEFOLD_CONFORMANCE_NETNS"

const (
	// podNetwork is routed to lo, as local, inside the test's network
	// namespace, so that every address in it is the namespace's own: the
	// Gateway's and the Pods'. It is the benchmarking range (RFC 2544),
	// never an address on the internet, and exists in that namespace only.
	podNetwork = "198.18.0.0/15"
	// gatewayAddress is where Traefik listens, on ports 80 and 443, and the
	// address it writes into the Gateways' status: the suite's requests go
	// there.
	gatewayAddress = "198.18.0.1"
	// apiServerAddress is the address kube-apiserver advertises: the
	// namespace has no default route to take one from.
	apiServerAddress = "198.18.0.2"
)

// inNetNS says whether this is the test binary runInNetNS re-executed.
func inNetNS() bool { return os.Getenv(netnsEnv) != "" }

// runInNetNS runs t's test again, in this test binary, in a network
// namespace and a PID namespace of its own (`unshare -n --pid --fork
// --kill-child --mount-proc`, with -r when not root): the test binary is
// the PID namespace's first process, so when it exits, however, the kernel
// kills every process it started, and the network namespace goes with the
// last of them. It fails t when the test fails there; its output goes to
// this process's. It skips t (skipTraefik) when unshare or ip is missing
// or no namespace can be made.
func runInNetNS(t *testing.T) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		skipTraefik(t, "Skipping the run with Traefik: it needs unshare (util-linux) to make a network namespace of its own")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skipTraefik(t, "Skipping the run with Traefik: it needs ip (iproute2) to set up its network namespace")
	}
	// --mount-proc: /proc as the PID namespace sees it.
	args := []string{"-n", "--pid", "--fork", "--kill-child", "--mount-proc"}
	if os.Getuid() != 0 {
		args = append([]string{"-r"}, args...) // a user namespace, in which this user may make the others
	}
	if out, err := exec.Command(unshare, append(args, "true")...).CombinedOutput(); err != nil {
		skipTraefik(t, "Skipping the run with Traefik: `unshare %v true` cannot make the namespaces here (%v: %s); "+
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
	testArgs := append([]string{"-test.run=^" + t.Name() + "$", "-test.count=1"}, childTimeout(t, 10*time.Second)...)
	if testing.Verbose() {
		testArgs = append(testArgs, "-test.v")
	}
	cmd := exec.Command(unshare, append(append(args, self), testArgs...)...)
	cmd.Env = append(os.Environ(), netnsEnv+"="+ns)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("The run in a network namespace of its own failed (%v): its output is above", err)
	}
}

// setUpNetNS brings lo up in the test's network namespace and routes
// podNetwork to it. It refuses to run in the namespace the test was started
// from, or in any with an interface but lo: a new one has only lo.
func setUpNetNS() error {
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	if ns == os.Getenv(netnsEnv) {
		return errors.New("still in the network namespace the test was started from: not setting it up")
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing the network namespace's interfaces: %w", err)
	}
	for _, i := range ifaces {
		if i.Name != "lo" {
			return fmt.Errorf("the network namespace has interface %s, and a new one (unshare -n) has only lo: not setting it up; "+
				"run the test without $%s", i.Name, netnsEnv)
		}
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"route", "add", "local", podNetwork, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}
