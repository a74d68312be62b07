package merger

import (
	"context"
	"sync"
	"time"
)

// Gateway writes go before status writes: both share the API server, and a
// Gateway write of many listeners costs it far more than a status does.
// While a fold's Gateway writes are in flight the status writers wait for
// them, each at most statusWaitLimit, so that statuses still flow while a
// pool's Gateways are written back to back.

// statusWaitLimit is the longest a status write waits for Gateway writes:
// with 16 status workers, at least 16 statuses a second while they never
// stop.
const statusWaitLimit = time.Second

// gate holds the status writers while Gateways are written. The zero value
// holds nothing.
type gate struct {
	// limit is the longest a status write waits.
	limit time.Duration

	mu    sync.Mutex
	folds int
	// open is closed once the last fold under way is done; nil while none is.
	open chan struct{}
}

// hold closes the gate for one fold's writes, until the returned release
// is called.
func (g *gate) hold() (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.folds++; g.open == nil {
		g.open = make(chan struct{})
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.folds--; g.folds == 0 {
			close(g.open)
			g.open = nil
		}
	}
}

// wait returns once no fold is under way or limit has passed, or with ctx's
// error when ctx ends first.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if open == nil {
		return nil
	}
	timer := time.NewTimer(g.limit)
	defer timer.Stop()
	select {
	case <-open:
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
