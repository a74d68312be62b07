package testenv

import (
	"os"
	"testing"

	"github.com/gatefold/gatefold/internal/dataplane"
)

// StopDataPlaneAtCleanup stops dp when t ends and fails t if Traefik did not
// run to the end; when t failed, it logs Traefik's log and access log.
func StopDataPlaneAtCleanup(t testing.TB, dp *dataplane.DataPlane) {
	t.Cleanup(func() {
		if err := dp.Running(); err != nil {
			t.Errorf("Traefik did not run to the end of the test: %v", err)
		}
		if err := dp.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			access, _ := os.ReadFile(dp.AccessLogPath)
			t.Logf("Traefik's log:\n%s\nIts access log:\n%s", dp.Log(), access)
		}
	})
}
