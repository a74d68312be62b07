package process

import (
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// StopWait is how long Stop gives a server to exit after SIGTERM.
const StopWait = 10 * time.Second

// FreeLoopbackPort returns a port on 127.0.0.1 that nothing listens on now.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop is StopWithin StopWait.
func Stop(name string, cmd *exec.Cmd, exited <-chan struct{}) error {
	return StopWithin(name, cmd, exited, StopWait)
}

// StopWithin sends SIGTERM to cmd, the server name, and waits until exited
// is closed; past grace it kills it and says so.
func StopWithin(name string, cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not stop within %v of SIGTERM and was killed", name, grace)
	}
}
