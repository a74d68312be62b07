// Package integration tests gatefold against the real control plane: a
// kube-apiserver, etcd and kube-controller-manager built from Go modules, with
// the real Gateway API CRDs.
package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/gatefold/gatefold/internal/devenv"
)

var env *devenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = devenv.Start(devenv.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the control plane: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "Stopping the control plane: %v\n", err)
	}
	os.Exit(code)
}
