package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dialTimeout bounds how long a forwarder waits for its target to answer.
const dialTimeout = 5 * time.Second

// proxyKind is what a proxy does with the connections it carries.
type proxyKind int

const (
	// pass forwards every chunk at once.
	pass proxyKind = iota
	// delay forwards each chunk, both ways, Delay after it was read.
	delay
	// reset closes every connection with a TCP RST and resets new ones as
	// soon as they are accepted.
	reset
	// blackhole holds every connection, new ones too, open and forwards
	// nothing either way. Leaving it closes the connections it held: their
	// clients dial again.
	blackhole
)

// proxyMode is a proxy's mode; Delay is for delay alone.
type proxyMode struct {
	Kind  proxyKind
	Delay time.Duration
}

func (m proxyMode) String() string {
	switch m.Kind {
	case pass:
		return "pass"
	case delay:
		return "delay " + m.Delay.String()
	case reset:
		return "reset"
	case blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("proxyKind(%d)", m.Kind)
}

// proxy forwards TCP connections from a loopback port to target; its mode
// can be changed at any time.
type proxy struct {
	ln       net.Listener
	accepted <-chan struct{}
	fw       *forwarder
}

// startProxy starts a proxy to target (host:port) on 127.0.0.1, in pass.
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting a proxy to %s: %w", target, err)
	}
	fw := newForwarder(target)
	return &proxy{ln: ln, fw: fw, accepted: accept(ln, func() *forwarder { return fw })}, nil
}

// Addr is the host:port to dial.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode of existing and new connections.
func (p *proxy) Set(m proxyMode) { p.fw.set(m) }

// Close stops accepting, closes every connection, and returns once they are
// gone.
func (p *proxy) Close() error {
	err := p.ln.Close()
	<-p.accepted
	p.fw.close()
	return err
}

// balancer is an L4 round-robin, per connection, over backends (host:port),
// like a Service.
type balancer struct {
	ln       net.Listener
	accepted <-chan struct{}
	backends []*forwarder
}

// startBalancer starts a balancer on 127.0.0.1 over backends.
func startBalancer(backends []string) (*balancer, error) {
	if len(backends) == 0 {
		return nil, errors.New("starting a balancer: no backends")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting a balancer: %w", err)
	}
	b := &balancer{ln: ln}
	for _, target := range backends {
		b.backends = append(b.backends, newForwarder(target))
	}
	next := 0 // only accept's goroutine picks
	b.accepted = accept(ln, func() *forwarder {
		f := b.backends[next%len(b.backends)]
		next++
		return f
	})
	return b, nil
}

// Addr is the host:port to dial.
func (b *balancer) Addr() string { return b.ln.Addr().String() }

// Cut, while cut, resets the connections to backend, existing ones at once
// and new ones that the round-robin sends it as they come: backend stays in
// the rotation, as a Service keeps an endpoint it cannot reach. It panics on
// a backend b does not balance.
func (b *balancer) Cut(backend string, cut bool) {
	for _, f := range b.backends {
		if f.target == backend {
			m := proxyMode{Kind: pass}
			if cut {
				m.Kind = reset
			}
			f.set(m)
			return
		}
	}
	panic(fmt.Sprintf("balancer has no backend %s", backend))
}

// Close stops accepting, closes every connection, and returns once they are
// gone.
func (b *balancer) Close() error {
	err := b.ln.Close()
	<-b.accepted
	for _, f := range b.backends {
		f.close()
	}
	return err
}

// accept hands every connection ln accepts to the forwarder pick chooses,
// until ln is closed; then it closes the channel it returns.
func accept(ln net.Listener, pick func() *forwarder) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				time.Sleep(10 * time.Millisecond) // out of descriptors: wait for some
				continue
			}
			f := pick()
			f.wg.Go(func() { f.serve(c) })
		}
	}()
	return done
}

// forwarder carries the connections handed to it to target, in the mode of
// the moment.
type forwarder struct {
	target string
	// wg counts the connections being served.
	wg sync.WaitGroup

	mu     sync.Mutex
	mode   proxyMode
	links  map[*link]bool
	closed bool
}

func newForwarder(target string) *forwarder {
	return &forwarder{target: target, links: map[*link]bool{}}
}

// link is one forwarded connection: client was accepted, server dialled to
// the target; server is nil for a connection held from its accept on.
type link struct {
	client, server net.Conn
	// held is set while a blackhole holds the link; guarded by the
	// forwarder's mu.
	held bool
	done chan struct{}
	once sync.Once
}

// shut closes both sides of l, with a TCP RST when rst is set.
func (l *link) shut(rst bool) {
	l.once.Do(func() {
		close(l.done)
		for _, c := range []net.Conn{l.client, l.server} {
			if c == nil {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok && rst {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

// chunk is bytes read from one side, to be written to the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// set changes the mode of f's links, and of those to come.
func (f *forwarder) set(m proxyMode) {
	f.mu.Lock()
	f.mode = m
	var shut []*link
	for l := range f.links {
		switch {
		case m.Kind == reset:
			shut = append(shut, l)
		case m.Kind == blackhole:
			l.held = true
		case l.held:
			shut = append(shut, l)
		}
	}
	f.mu.Unlock()
	for _, l := range shut {
		l.shut(m.Kind == reset)
	}
}

// close closes every link and returns once none is served.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for l := range f.links {
		l.shut(false)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// serve forwards client to f's target until either side ends or the mode
// ends the link.
func (f *forwarder) serve(client net.Conn) {
	l := &link{client: client, done: make(chan struct{})}
	f.mu.Lock()
	m := f.mode
	f.mu.Unlock()
	if m.Kind == reset {
		l.shut(true)
		return
	}
	if m.Kind != blackhole {
		server, err := net.DialTimeout("tcp", f.target, dialTimeout)
		if err != nil {
			l.shut(true)
			return
		}
		l.server = server
	}
	if !f.add(l) {
		return
	}
	defer f.remove(l)
	if l.server == nil {
		_, _ = io.Copy(io.Discard, client)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { f.pipe(l, l.client, l.server) })
	f.pipe(l, l.server, l.client)
	wg.Wait()
}

// add registers l under the mode of the moment, which may have changed
// while l's server was dialled; false when that mode ended l.
func (f *forwarder) add(l *link) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed, f.mode.Kind == reset:
		l.shut(true)
		return false
	case l.server == nil && f.mode.Kind != blackhole:
		l.shut(false)
		return false
	}
	l.held = f.mode.Kind == blackhole
	f.links[l] = true
	return true
}

// remove closes l and forgets it.
func (f *forwarder) remove(l *link) {
	l.shut(false)
	f.mu.Lock()
	delete(f.links, l)
	f.mu.Unlock()
}

// pipe reads src and has dst written, chunk by chunk, as f's mode says. At
// src's end it half-closes dst once every chunk is written; at an error it
// resets the link.
func (f *forwarder) pipe(l *link, src, dst net.Conn) {
	chunks := make(chan chunk, 16)
	var wg sync.WaitGroup
	wg.Go(func() { f.write(l, dst, chunks) })
	defer wg.Wait()
	defer close(chunks)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if c, ok := f.chunk(l, buf[:n]); ok {
			select {
			case chunks <- c:
			case <-l.done:
				return
			}
		}
		if errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			l.shut(true)
			return
		}
	}
}

// chunk is a copy of b, due when f's mode says; false when there is
// nothing to forward (b empty, or l held).
func (f *forwarder) chunk(l *link, b []byte) (chunk, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(b) == 0 || l.held {
		return chunk{}, false
	}
	c := chunk{data: append([]byte(nil), b...), due: time.Now()}
	if f.mode.Kind == delay {
		c.due = c.due.Add(f.mode.Delay)
	}
	return c, true
}

// write writes each chunk to dst at its due time, unless l is held by
// then; after the last it half-closes dst.
func (f *forwarder) write(l *link, dst net.Conn, chunks <-chan chunk) {
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		if f.held(l) {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			l.shut(true)
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok && !f.held(l) {
		_ = tc.CloseWrite()
	}
}

// held says whether a blackhole holds l.
func (f *forwarder) held(l *link) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return l.held
}

func TestProxyModes(t *testing.T) {
	p, err := startProxy(startEcho(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const d = 200 * time.Millisecond

	a := dial(t, p.Addr())
	if err := roundTrip(a, "pass", time.Second); err != nil {
		t.Fatalf("In pass: %v", err)
	}
	p.Set(proxyMode{Kind: delay, Delay: d})
	start := time.Now()
	if err := roundTrip(a, "delay", 10*d); err != nil {
		t.Fatalf("In %v: %v", proxyMode{Kind: delay, Delay: d}, err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("In %v an open connection echoed after %v, want at least %v", proxyMode{Kind: delay, Delay: d}, took, d)
	}

	p.Set(proxyMode{Kind: reset})
	if err := resetAtOnce(a); err != nil {
		t.Errorf("In reset, the connection open before: %v", err)
	}
	if err := dialReset(t, p.Addr()); err != nil {
		t.Errorf("In reset, a new connection: %v", err)
	}

	p.Set(proxyMode{Kind: pass})
	held := dial(t, p.Addr())
	if err := roundTrip(held, "pass again", time.Second); err != nil {
		t.Fatalf("Back in pass: %v", err)
	}
	p.Set(proxyMode{Kind: blackhole})
	for name, c := range map[string]net.Conn{"the connection open before": held, "a new connection": dial(t, p.Addr())} {
		if err := roundTrip(c, "blackhole", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("In blackhole, %s: got %v, want a read timeout", name, err)
		}
	}

	p.Set(proxyMode{Kind: pass})
	if err := roundTrip(dial(t, p.Addr()), "healed", time.Second); err != nil {
		t.Errorf("Back in pass after blackhole, a new connection: %v", err)
	}
}

func TestBalancerSpreadsAndCuts(t *testing.T) {
	var backends []string
	for i := range 3 {
		backends = append(backends, startEcho(t, fmt.Sprintf("b%d\n", i)))
	}
	b, err := startBalancer(backends)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	got, conns := spread(t, b.Addr(), 6)
	if want := map[string]int{"b0": 2, "b1": 2, "b2": 2}; !equalCounts(got, want) {
		t.Fatalf("6 connections went to %v, want %v", got, want)
	}

	b.Cut(backends[1], true)
	if err := resetAtOnce(conns["b1"]); err != nil {
		t.Errorf("Once b1 is cut, its open connection: %v", err)
	}
	got, _ = spread(t, b.Addr(), 6)
	if want := map[string]int{"b0": 2, "reset": 2, "b2": 2}; !equalCounts(got, want) {
		t.Errorf("With b1 cut, 6 connections went to %v, want %v", got, want)
	}

	b.Cut(backends[1], false)
	got, _ = spread(t, b.Addr(), 3)
	if want := map[string]int{"b0": 1, "b1": 1, "b2": 1}; !equalCounts(got, want) {
		t.Errorf("With b1 back, 3 connections went to %v, want %v", got, want)
	}
}

// spread dials addr n times and counts where each connection went: the
// backend's greeting line, or "reset". It returns one connection of each
// backend too.
func spread(t *testing.T, addr string, n int) (map[string]int, map[string]net.Conn) {
	t.Helper()
	counts, conns := map[string]int{}, map[string]net.Conn{}
	for range n {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if errors.Is(err, syscall.ECONNRESET) {
			counts["reset"]++
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		switch {
		case err == nil:
			name := line[:len(line)-1]
			counts[name]++
			conns[name] = c
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatalf("A connection through the balancer had no greeting within 2s")
		default:
			counts["reset"]++
		}
	}
	return counts, conns
}

func equalCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// startEcho starts a loopback server that writes hello to each connection,
// then echoes it; it returns its host:port.
func startEcho(t *testing.T, hello string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.WriteString(c, hello); err == nil {
					_, _ = io.Copy(c, c)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr, closed at the end of the test.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg on c and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("read %q back, want %q", buf, msg)
	}
	return nil
}

// dialReset says why a new connection to addr is not reset at once, as it
// is dialled or at its first read; nil when it is.
func dialReset(t *testing.T, addr string) error {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil
	} else if err != nil {
		return fmt.Errorf("dial got %v, want connection reset", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return resetAtOnce(c)
}

// resetAtOnce says why c does not fail a read within half a second with
// the peer's reset; nil when it does.
func resetAtOnce(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err := c.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("read got %v, want connection reset", err)
	}
	return nil
}
