package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	done := httpClient(t, fmt.Sprintf("http://127.0.0.1:%d/item", port), 4, 1000, stop)
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

// httpClient GETs url on conns keep-alive connections (one each), rate
// requests a second in all on a fixed schedule, until stop; it yields
// each request's end (wall clock) and latency, from sending it to the
// end of the response's body.
func httpClient(t *testing.T, url string, conns, rate int, stop <-chan struct{}) <-chan [][2]uint64 {
	t.Helper()
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	results := make(chan [][2]uint64, conns)
	for c := 0; c < conns; c++ {
		hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
		go func() {
			var out [][2]uint64
			defer func() { results <- out }()
			defer hc.CloseIdleConnections()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(start.Add(time.Duration(k*conns+c) * interval))):
				}
				sent := time.Now()
				resp, err := hc.Get(fmt.Sprintf("%s?k=%d", url, k%1000))
				if err != nil {
					t.Errorf("GET: %v", err)
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("GET: %s %v", resp.Status, err)
					return
				}
				end := time.Now()
				out = append(out, [2]uint64{uint64(end.UnixNano()), uint64(end.Sub(sent))})
			}
		}()
	}
	all := make(chan [][2]uint64, 1)
	go func() {
		var out [][2]uint64
		for range conns {
			out = append(out, <-results...)
		}
		all <- out
	}()
	return all
}
