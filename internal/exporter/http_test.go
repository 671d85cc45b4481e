package exporter

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server has closed c (a read ends
// in EOF or a reset) rather than still holding it open.
func closedByServer(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// At the connection limit, a scrape takes the place of the connection
// that has waited longest without a request being answered: whoever
// holds the limit's worth of silent connections cannot keep a scraper
// out.
func TestConnLimitClosesTheLongestIdle(t *testing.T) {
	e := New(Config{ProcRoot: fakeProc(t), Version: "test"})
	var warned []string
	srv, ln := e.Server(listen(t), 4, func() bool { return true }, func(s string) { warned = append(warned, s) })
	go srv.Serve(ln)
	defer srv.Close()
	addr := ln.Addr().String()
	var held []net.Conn
	for i := 0; i < 4; i++ {
		held = append(held, dial(t, addr))
		if i == 1 { // one sends part of its headers: as good as silent
			io.WriteString(held[i], "GET /metrics HTTP/1.1\r\nHo")
		}
		time.Sleep(20 * time.Millisecond) // in this order
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("a scrape at the limit: %d %q", code, body)
	}
	for i, c := range held {
		if closed := closedByServer(c, 100*time.Millisecond); closed != (i == 0) {
			t.Errorf("held connection %d closed: %v (want the oldest closed, no other)", i, closed)
		}
	}
	dial(t, addr) // the limit again
	time.Sleep(20 * time.Millisecond)
	code, body := get(t, "http://"+addr+"/metrics")
	if code != 200 || !strings.Contains(body, "numatrace_http_connections_closed_total 2\n") ||
		!strings.Contains(body, "numatrace_http_connection_limit 4\n") || !strings.Contains(body, "numatrace_http_connections 4\n") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if !closedByServer(held[1], 100*time.Millisecond) {
		t.Error("the second scrape did not close the connection sending its headers, the oldest then")
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "4 HTTP connections open, the limit") {
		t.Errorf("warnings: %q (want one)", warned)
	}
}

// A connection whose request is being answered is never closed for
// room: a newcomer finding only such connections waits for one to end.
func TestConnLimitKeepsRequestsBeingAnswered(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) { <-release; io.WriteString(w, "slow") })
	mux.HandleFunc("/fast", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "fast") })
	lim := newConnLimiter(listen(t), 1, nil)
	srv := &http.Server{Handler: mux, ConnState: lim.connState}
	go srv.Serve(lim)
	defer srv.Close()
	addr := lim.Addr().String()

	answered := dial(t, addr)
	io.WriteString(answered, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		lim.mu.Lock()
		active := len(lim.conns) == 1 && func() bool {
			for c := range lim.conns {
				return c.state == http.StateActive
			}
			return false
		}()
		lim.mu.Unlock()
		if active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/slow never became active")
		}
	}
	fast := make(chan string, 1)
	go func() { _, body := get(t, "http://"+addr+"/fast"); fast <- body }()
	select {
	case body := <-fast:
		t.Fatalf("the newcomer was answered (%q) while the only connection's request was", body)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	answered.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(answered), nil)
	if err != nil {
		t.Fatalf("the request being answered: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "slow" {
		t.Errorf("the request being answered got %q", b)
	}
	if body := <-fast; body != "fast" {
		t.Errorf("the newcomer got %q", body)
	}
	if n := lim.evicted.Load(); n != 1 {
		t.Errorf("%d closed for room, want 1 (the idle keep-alive connection of /slow)", n)
	}
}

func TestConnLimit(t *testing.T) {
	for _, c := range []struct {
		nofile, open uint64
		want         int
	}{
		{1 << 20, 80, 256},
		{1024, 80, 256},
		{200, 80, 60},
		{100, 99, 1},
		{50, 80, 1},
	} {
		if got := ConnLimit(c.nofile, c.open); got != c.want {
			t.Errorf("ConnLimit(%d, %d) = %d, want %d", c.nofile, c.open, got, c.want)
		}
	}
}

// Once the connections fall back to an eighth of the limit after
// reaching it, the memory they held is given back, once per flood (make
// bench measures how much: "serve under idle connections").
func TestConnLimitGivesMemoryBackAfterAFlood(t *testing.T) {
	lim := newConnLimiter(listen(t), 8, nil)
	drained := make(chan struct{}, 10)
	lim.onDrain = func() { drained <- struct{}{} }
	srv := &http.Server{Handler: http.NotFoundHandler(), ConnState: lim.connState}
	go srv.Serve(lim)
	defer srv.Close()
	flood := func(n int) {
		var cs []net.Conn
		for i := 0; i < n; i++ {
			cs = append(cs, dial(t, lim.Addr().String()))
		}
		for deadline := time.Now().Add(5 * time.Second); lim.Open() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d connections accepted", lim.Open(), n)
			}
		}
		for _, c := range cs {
			c.Close()
		}
		for deadline := time.Now().Add(5 * time.Second); lim.Open() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections still open", lim.Open())
			}
		}
	}
	flood(7) // below the limit: nothing to give back
	flood(8)
	flood(8)
	time.Sleep(50 * time.Millisecond)
	if n := len(drained); n != 2 {
		t.Errorf("memory given back %d times, want 2 (once per flood that reached the limit)", n)
	}
}
