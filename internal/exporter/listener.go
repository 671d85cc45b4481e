package exporter

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter keeps at most max connections open. Past that, each new
// connection closes the open one that has waited longest without a
// request being answered: idle between requests (keep-alive), connected
// without sending anything, or still sending its request's headers
// (net/http calls a connection active only once it has read them). A
// connection whose request is being answered is never closed for room:
// if every one is, the new connection waits until one ends, which the
// server's timeouts bound. Accept is not called meanwhile, so later
// connections wait in the kernel's queue, costing no file descriptor.
//
// So whoever holds the limit's worth of idle or slow connections cannot
// keep a scraper out: its connection takes the place of the oldest.
type connLimiter struct {
	net.Listener
	max     int
	onEvict func() // called for the first connection closed for room
	onDrain func() // called when the connections fall back to an eighth of max after reaching it

	mu      sync.Mutex
	conns   map[*limitedConn]struct{}
	wake    chan struct{} // a connection closed or its request was answered
	done    chan struct{} // the listener closed
	closing sync.Once
	evicted atomic.Uint64
	warned  sync.Once
	full    bool // max reached since the last drain (under mu)
}

func newConnLimiter(ln net.Listener, max int, onEvict func()) *connLimiter {
	return &connLimiter{Listener: ln, max: max, onEvict: onEvict,
		conns: map[*limitedConn]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// limitedConn is a connection the limiter counts, with its state as the
// HTTP server last set it (http.Server.ConnState) and since when.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	state http.ConnState // under l.mu, as is since
	since time.Time
	once  sync.Once
}

// Accept returns the next connection once there is room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			lc := &limitedConn{Conn: c, l: l, state: http.StateNew, since: time.Now()}
			l.conns[lc] = struct{}{}
			l.full = l.full || len(l.conns) == l.max
			l.mu.Unlock()
			return lc, nil
		}
		victim := l.victimLocked()
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
			l.evicted.Add(1)
			if l.onEvict != nil {
				l.warned.Do(l.onEvict)
			}
			continue
		}
		select { // every connection has a request being answered
		case <-l.wake:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// victimLocked is the connection to close for room, or nil.
func (l *connLimiter) victimLocked() *limitedConn {
	var v *limitedConn
	for c := range l.conns {
		if c.state != http.StateActive && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	return v
}

// Close stops accepting; connections already open stay open.
func (l *connLimiter) Close() error {
	l.closing.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// connState is the http.Server's ConnState hook.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	if s == http.StateClosed || s == http.StateHijacked {
		lc.forget()
		return
	}
	l.mu.Lock()
	lc.state, lc.since = s, time.Now()
	l.mu.Unlock()
	if s != http.StateActive {
		l.wakeUp()
	}
}

// wakeUp tells a newcomer waiting for room to look again.
func (l *connLimiter) wakeUp() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Open is the number of connections open.
func (l *connLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (c *limitedConn) forget() {
	l := c.l
	l.mu.Lock()
	delete(l.conns, c)
	drained := l.full && len(l.conns) <= l.max/8
	if drained {
		l.full = false
	}
	l.mu.Unlock()
	l.wakeUp()
	if drained && l.onDrain != nil {
		go l.onDrain()
	}
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.forget()
		err = c.Conn.Close()
	})
	return err
}
