package conformance

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gatefold/gatefold/internal/process"
	"github.com/gatefold/gatefold/test/netns"
)

const (
	// echoImage ends the name of upstream's echo server image in the suite's
	// base manifests, whatever its registry and tag.
	echoImage = "/echo-basic"
	// echoHTTPPort and echoH2CPort are the container ports echo-basic
	// serves HTTP and h2c on, which the base Services' targetPorts name.
	echoHTTPPort, echoH2CPort = 3000, 3001
	// echoFirstPort is the first port on which the Pods' servers listen,
	// two for each Pod: they share one network namespace.
	echoFirstPort = 20000
)

// echoModes are the variables that turn echo-basic into a gRPC, TCP or UDP
// server; a Pod that sets one gets no server (no ListenerSet test uses one).
var echoModes = []string{"GRPC_ECHO_SERVER", "TCP_ECHO_SERVER", "UDP_ECHO_SERVER"}

// echoBackends runs upstream's echo server (echo-basic of the
// gateway-api-conformance-images module, built at the version go.mod gives) for Pods, one process each, as their
// container would: it answers with the Pod's name and namespace, which the
// suite checks. The Pods share the test's network namespace, so each
// process listens on ports of its own, and each Pod gets an address of its
// own in netns.PodNetwork, all of which are local there.
type echoBackends struct {
	binary, logDir string

	mu   sync.Mutex
	pods map[types.NamespacedName]*echoPod
}

// echoPod is one Pod's server.
type echoPod struct {
	ip                 netip.Addr
	httpPort, h2cPort  int32
	cmd                *exec.Cmd
	exited             chan struct{}
	namespace, podName string
}

// newEchoBackends builds echo-basic into dir and returns backends that log
// into dir; it stops their servers when the test ends.
func newEchoBackends(t *testing.T, dir string) *echoBackends {
	t.Helper()
	binary := filepath.Join(dir, "echo-basic")
	build := exec.Command("go", "build", "-o", binary, "sigs.k8s.io/gateway-api-conformance-images/echo-basic")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("Building upstream's echo server: %v\n%s", err, out)
	}
	e := &echoBackends{binary: binary, logDir: dir, pods: map[types.NamespacedName]*echoPod{}}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// serves says whether pod's container is echo-basic serving HTTP.
func serves(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) != 1 || !strings.HasSuffix(imageName(pod.Spec.Containers[0].Image), echoImage) {
		return false
	}
	return !slices.ContainsFunc(pod.Spec.Containers[0].Env, func(v corev1.EnvVar) bool { return slices.Contains(echoModes, v.Name) })
}

// start runs pod's server unless it runs, and returns it once it answers.
func (e *echoBackends) start(pod *corev1.Pod) (*echoPod, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if p, ok := e.pods[key]; ok {
		return p, nil
	}
	n := len(e.pods) + 1
	ip, err := netns.PodAddress(n)
	if err != nil {
		return nil, err
	}
	p := &echoPod{
		ip:       ip,
		httpPort: int32(echoFirstPort + 2*n), h2cPort: int32(echoFirstPort + 2*n + 1),
		exited:    make(chan struct{}),
		namespace: pod.Namespace, podName: pod.Name,
	}
	log, err := os.Create(filepath.Join(e.logDir, fmt.Sprintf("echo-%s-%s.log", pod.Namespace, pod.Name)))
	if err != nil {
		return nil, fmt.Errorf("creating the echo server's log: %w", err)
	}
	p.cmd = exec.Command(e.binary)
	p.cmd.Env = []string{
		"POD_NAME=" + pod.Name, "NAMESPACE=" + pod.Namespace,
		"HTTP_PORT=" + strconv.Itoa(int(p.httpPort)), "H2C_PORT=" + strconv.Itoa(int(p.h2cPort)),
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting the echo server of Pod %s: %w", key, err)
	}
	go func() { _ = p.cmd.Wait(); log.Close(); close(p.exited) }()
	e.pods[key] = p
	return p, p.waitListening()
}

// waitListening waits until the server answers on its address.
func (p *echoPod) waitListening() error {
	addr := net.JoinHostPort(p.ip.String(), strconv.Itoa(int(p.httpPort)))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			return conn.Close()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("the echo server of Pod %s/%s exited: see its log", p.namespace, p.podName)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the echo server of Pod %s/%s does not answer on %s after 10s", p.namespace, p.podName, addr)
		}
	}
}

// lookup returns the server of Pod key, if one runs.
func (e *echoBackends) lookup(key types.NamespacedName) (*echoPod, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.pods[key]
	return p, ok
}

// port is the port p serves a Service's targetPort on, false when it
// serves none there.
func (p *echoPod) port(target intstr.IntOrString) (int32, bool) {
	switch {
	case target.Type != intstr.Int:
		return 0, false
	case target.IntVal == echoHTTPPort:
		return p.httpPort, true
	case target.IntVal == echoH2CPort:
		return p.h2cPort, true
	}
	return 0, false
}

// stop stops every server.
func (e *echoBackends) stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for key, p := range e.pods {
		errs = append(errs, process.Stop("echo server of Pod "+key.String(), p.cmd, p.exited))
	}
	e.pods = nil
	return errors.Join(errs...)
}

// imageName is an image reference without its tag or digest.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
