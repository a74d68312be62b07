package testenv

import (
	"testing"
	"time"
)

// pollInterval is how often Eventually calls its check.
const pollInterval = 50 * time.Millisecond

// Poll calls check every interval until it returns nil, and at least once;
// it gives up once timeout has passed. It returns nil when check did, else
// check's last error. It needs no testing.T: the bench polls with it too.
func Poll(timeout, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(interval, time.Until(deadline)))
	}
}

// Steady calls check every interval for window, the first time at once, and
// stops the test at the first error: Holds for what cannot be watched, such
// as an HTTP answer. Call it from the test's goroutine.
func Steady(t testing.TB, window, interval time.Duration, check func() error) {
	t.Helper()
	start := time.Now()
	for {
		if err := check(); err != nil {
			t.Fatalf("%v into a window of %v: %v", time.Since(start).Round(time.Millisecond), window, err)
		}
		if time.Since(start) >= window {
			return
		}
		time.Sleep(min(interval, window-time.Since(start)))
	}
}

// Eventually polls check every 50ms until it returns nil, and fails t after
// timeout with check's last error. Where one check costs (a list of
// thousands, an admission request), call Poll with a longer interval.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	if err := Poll(timeout, pollInterval, check); err != nil {
		t.Fatalf("After %v: %v", timeout, err)
	}
}
