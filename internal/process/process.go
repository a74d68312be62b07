package process

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// stopWait is how long a server has to exit after SIGTERM.
const stopWait = 10 * time.Second

// FreeLoopbackPort returns a port on 127.0.0.1 that nothing listens on now.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop sends SIGTERM to cmd, the server name, and waits until exited is
// closed; past stopWait it kills it and says so.
func Stop(name string, cmd *exec.Cmd, exited <-chan struct{}) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(stopWait):
		_ = cmd.Process.Kill()
		<-exited
		return errors.New(name + " did not stop within 10s of SIGTERM and was killed")
	}
}
