package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/testutil"
)

// A Go net/http service (many threads, epoll, the serving goroutine's
// thread changing between requests), timed on its sockets with no
// latency flag, against an open-loop keep-alive HTTP client's own
// measurement of the same requests.
func TestKernelTimesGoHTTPRequestsWithNoLatencyFlag(t *testing.T) {
	testutil.RequireRoot(t)
	srv, port := startGoHTTPServer(t)
	nt := startAttach(t, "--pid", strconv.Itoa(srv.Process.Pid), "--json", "--window", "1s", "--duration", "60s")
	monoMinusWall := int64(monotonicNs()) - time.Now().UnixNano()
	stop := make(chan struct{})
	done := httpClient(t, port, 4, 1000, stop)
	time.Sleep(8 * time.Second)
	close(stop)
	client := <-done
	time.Sleep(time.Second)
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	for i := range client {
		client[i][0] = uint64(int64(client[i][0]) + monoMinusWall)
	}
	if want := fmt.Sprintf("timing requests on 127.0.0.1:%d, 0 connections; server-side", port); !strings.Contains(nt.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, nt.stderr.String())
	}
	compareWithClient(t, windowLines(t, nt.stdout.String()), client)
}

// startGoHTTPServer builds and starts testdata/httpserver; it returns the
// process and its port.
func startGoHTTPServer(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "httpserver")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/httpserver").CombinedOutput(); err != nil {
		t.Fatalf("build the Go HTTP server: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the Go HTTP server printed no port: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the Go HTTP server printed %q, not a port", line)
	}
	return cmd, port
}

// httpClient GETs /item on 127.0.0.1:port over conns keep-alive
// connections (one each), rate requests a second in all on a fixed
// schedule, until stop (preciseClient).
func httpClient(t *testing.T, port, conns, rate int, stop <-chan struct{}) <-chan [][2]uint64 {
	return preciseClient(t, port, conns, rate, stop, func(k int) []byte {
		return fmt.Appendf(nil, "GET /item?k=%d HTTP/1.1\r\nHost: test\r\n\r\n", k%1000)
	}, httpResponseWhole)
}

// preciseClient sends request(k) on conns connections to 127.0.0.1:port,
// rate requests a second in all on a fixed schedule, until stop, and
// reads each reply until whole says it is; it yields each request's end
// (wall clock) and latency, from its write to the end of its reply. Each connection
// is a blocking socket read and written with plain syscalls on a
// real-time thread of its own, as a precise C client would: a Go client's
// poller and the wait for a CPU add a millisecond or more under load,
// which is the client's time, not the server's.
func preciseClient(t *testing.T, port, conns, rate int, stop <-chan struct{},
	request func(k int) []byte, whole func(reply []byte) (bool, error)) <-chan [][2]uint64 {
	t.Helper()
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	results := make(chan [][2]uint64, conns)
	for c := 0; c < conns; c++ {
		fd := dialBlocking(t, port)
		go func() {
			runtime.LockOSThread()
			// Real-time, so that its wakeup as the reply arrives is not
			// queued behind the server's threads on this 2-CPU machine
			// (seen: 1.6 ms more than the server's own p99).
			if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0); err != nil {
				t.Errorf("client thread to SCHED_FIFO: %v", err)
			}
			defer unix.Close(fd)
			var out [][2]uint64
			defer func() { results <- out }()
			buf := make([]byte, 64<<10)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(start.Add(time.Duration(k*conns+c) * interval))):
				}
				req := request(k)
				sent := time.Now()
				if _, err := unix.Write(fd, req); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				if err := readReply(fd, buf, whole); err != nil {
					t.Errorf("request %q: %v", req, err)
					return
				}
				end := time.Now()
				out = append(out, [2]uint64{uint64(end.UnixNano()), uint64(end.Sub(sent))})
			}
		}()
	}
	return gatherConns(results, conns)
}

// dialBlocking connects a blocking TCP socket to 127.0.0.1:port.
func dialBlocking(t *testing.T, port int) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return fd
}

// httpResponseWhole says whether b holds one whole HTTP/1.1 response
// with a Content-Length (a keep-alive connection, one request outstanding).
func httpResponseWhole(b []byte) (bool, error) {
	head, body, ok := strings.Cut(string(b), "\r\n\r\n")
	if !ok {
		return false, nil
	}
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		return false, fmt.Errorf("response %.40q", head)
	}
	i := strings.Index(strings.ToLower(head), "content-length:")
	if i < 0 {
		return false, fmt.Errorf("no Content-Length in %.200q", head)
	}
	line, _, _ := strings.Cut(head[i+len("content-length:"):], "\r\n")
	want, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return false, fmt.Errorf("Content-Length %q", line)
	}
	return len(body) >= want, nil
}

// readReply reads fd into buf until whole says the reply in it is.
func readReply(fd int, buf []byte, whole func([]byte) (bool, error)) error {
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err != nil || m == 0 {
			return fmt.Errorf("read: %d bytes, %v", m, err)
		}
		n += m
		if done, err := whole(buf[:n]); done || err != nil {
			return err
		}
	}
}
