package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// Another user's server on the target's port number, at another address,
// is no part of the target: only the connections the target's own
// processes serve are its requests. The target answers at once on
// 127.0.0.1:P; a server run as nobody answers in 300 ms on 127.0.0.2:P.
// Timed as the target's (learnt by port as they were born), the
// stranger's exchanges set every window's p99 to 300 ms and counted
// requests the target never served.
func TestKernelTimesOnlyTheTargetsOwnConnections(t *testing.T) {
	testutil.RequireRoot(t)
	srv, port := startGoHTTPServer(t)
	pinTasks(t, srv.Process.Pid, serverCPU)
	strangerAddr := fmt.Sprintf("127.0.0.2:%d", port)
	startGoHTTPServerAs(t, &syscall.Credential{Uid: 65534, Gid: 65534},
		"-addr", strangerAddr, "-delay", strangerDelay.String())
	nt := startAttach(t, "--pid", strconv.Itoa(srv.Process.Pid), "--json", "--window", "1s", "--duration", "60s")
	monoMinusWall := int64(monotonicNs()) - time.Now().UnixNano()
	stop := make(chan struct{})
	strangers := strangerClients(t, strangerAddr, 16, stop)
	done := httpClient(t, port, clientConns, 1000, stop)
	time.Sleep(8 * time.Second)
	close(stop)
	client := <-done
	served := <-strangers
	time.Sleep(time.Second)
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	for i := range client {
		client[i][0] = uint64(int64(client[i][0]) + monoMinusWall)
	}
	if served < 200 {
		t.Fatalf("the stranger served %d requests; want 200 or more for the test to mean anything", served)
	}
	if want := fmt.Sprintf("timing requests on 127.0.0.1:%d, 0 connections; server-side", port); !strings.Contains(nt.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, nt.stderr.String())
	}
	var sum latencyCounts
	summaryOf(t, nt.stdout.Bytes(), &sum)
	t.Logf("numatrace timed %d requests; the target's client sent %d, the stranger served %d", sum.LatencyInput.Samples, len(client), served)
	if got := sum.LatencyInput.Samples; got > uint64(len(client)) {
		t.Errorf("numatrace timed %d requests, more than the %d the target's client sent", got, len(client))
	}
	// Each window's count and p99 are the target's client's, not the
	// stranger's 300 ms (the target's own p99 may reach that on this
	// shared host: its client then says so too).
	compareWithClient(t, windowLines(t, nt.stdout.String()), client)
}

// strangerDelay is how long the stranger takes to answer.
const strangerDelay = 300 * time.Millisecond

// strangerClients GETs /item from addr over conns keep-alive
// connections, each sending its next request as the last reply came,
// until stop; it yields how many replies came.
func strangerClients(t *testing.T, addr string, conns int, stop <-chan struct{}) <-chan int {
	t.Helper()
	results := make(chan int, conns)
	for c := 0; c < conns; c++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial the stranger: %v", err)
		}
		go func() {
			defer conn.Close()
			n := 0
			defer func() { results <- n }()
			buf := make([]byte, 4096)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := fmt.Fprintf(conn, "GET /item?k=%d HTTP/1.1\r\nHost: test\r\n\r\n", k%1000); err != nil {
					t.Errorf("write to the stranger: %v", err)
					return
				}
				for got := 0; ; {
					m, err := conn.Read(buf[got:])
					if err != nil {
						t.Errorf("read from the stranger: %v", err)
						return
					}
					got += m
					whole, err := httpResponseWhole(buf[:got])
					if err != nil {
						t.Errorf("the stranger: %v", err)
						return
					}
					if whole {
						break
					}
				}
				n++
			}
		}()
	}
	total := make(chan int, 1)
	go func() {
		n := 0
		for c := 0; c < conns; c++ {
			n += <-results
		}
		total <- n
	}()
	return total
}
