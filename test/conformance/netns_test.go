package conformance

import (
	"errors"
	"fmt"
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
// namespace of its own (`unshare -n` as root, else `unshare -rn`), which
// the kernel removes when its last process exits, and fails t when the
// test fails there; its output goes to this process's. It skips t when
// unshare or ip is missing or no namespace can be made.
func runInNetNS(t *testing.T) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("Skipping the run with Traefik: it needs unshare (util-linux) to make a network namespace of its own")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("Skipping the run with Traefik: it needs ip (iproute2) to set up its network namespace")
	}
	args := []string{"-n"}
	if os.Getuid() != 0 {
		args = []string{"-r", "-n"} // a user namespace, in which this user may make the network one
	}
	if out, err := exec.Command(unshare, append(args, "true")...).CombinedOutput(); err != nil {
		t.Skipf("Skipping the run with Traefik: `unshare %v true` cannot make a network namespace here (%v: %s); "+
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
	testArgs := []string{"-test.run=^" + t.Name() + "$", "-test.count=1"}
	if testing.Verbose() {
		testArgs = append(testArgs, "-test.v")
	}
	if d, ok := t.Deadline(); ok {
		// Time for this process to report what the other one left.
		testArgs = append(testArgs, "-test.timeout="+(time.Until(d)-10*time.Second).String())
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
// from.
func setUpNetNS() error {
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	if ns == os.Getenv(netnsEnv) {
		return errors.New("still in the network namespace the test was started from: not setting it up")
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
