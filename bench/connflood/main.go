// Command connflood measures what idle HTTP connections cost `numatrace
// serve`, for `make bench`: it starts serve, holds -conns idle keep-alive
// connections to it (each sent one request), scrapes it meanwhile, closes
// them, and reports serve's resident memory before, while they are held
// and after, its open file descriptors, and the scrape time. It prints a
// Markdown section on stdout.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("numatrace", "", "numatrace binary")
	conns := flag.Int("conns", 10000, "idle connections to hold")
	settle := flag.Duration("settle", 30*time.Second, "how long after closing them memory is read again")
	flag.Parse()
	if *bin == "" {
		fatal(fmt.Errorf("-numatrace is needed"))
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	if rl.Cur < uint64(*conns)+100 {
		fatal(fmt.Errorf("RLIMIT_NOFILE %d is too low for %d connections", rl.Cur, *conns))
	}

	dir, err := os.MkdirTemp("", "connflood")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	addr := freeLoopbackAddr()
	serve, stderr := startServe(*bin, addr, filepath.Join(dir, "ready"))
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()

	f := flood(serve.Process.Pid, addr, *conns, *settle)
	f.acceptErrors = strings.Count(stderr.String(), "Accept error")
	f.conns, f.settle, f.nofile = *conns, *settle, rl.Cur
	f.print()
}

// freeLoopbackAddr is a loopback address with a port nothing listens on.
func freeLoopbackAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startServe starts `numatrace serve` on addr and waits until it writes
// its ready file; what it logs goes to the returned builder.
func startServe(bin, addr, ready string) (*exec.Cmd, *strings.Builder) {
	serve := exec.Command(bin, "serve", "--listen", addr, "--ready-file", ready)
	stderr := &strings.Builder{}
	serve.Stderr = stderr
	if err := serve.Start(); err != nil {
		fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("serve never ready: %s", stderr.String()))
		}
	}
	return serve, stderr
}

// memory is serve's resident memory at one moment, in KiB.
type memory struct{ rss, anon int }

func readMemory(pid int) memory {
	return memory{rssKiB(pid, "VmRSS"), rssKiB(pid, "RssAnon")}
}

func (m memory) String() string { return mib(m.rss, m.anon) }

// floodResult is what holding the connections cost serve.
type floodResult struct {
	conns                int
	settle               time.Duration
	nofile               uint64
	opened               time.Duration
	failed               int
	fdsBefore, fdsDuring int
	heldScrape           time.Duration
	limit, closedForRoom float64
	before, during       memory
	after5, afterSettle  memory
	peakKiB              int
	acceptErrors         int
}

// flood holds conns idle connections to serve (pid, on addr), closes them,
// and reads serve's figures before, while and after.
func flood(pid int, addr string, conns int, settle time.Duration) floodResult {
	var f floodResult
	scrapeTime(addr, 3)
	time.Sleep(2 * time.Second)
	f.before = readMemory(pid)
	f.fdsBefore = fds(pid)

	start := time.Now()
	held, failed := holdIdleConns(addr, conns)
	f.opened, f.failed = time.Since(start), failed
	f.heldScrape = scrapeTime(addr, 5)
	f.during = readMemory(pid)
	f.fdsDuring = fds(pid)
	f.closedForRoom = metric(addr, "numatrace_http_connections_closed_total")
	f.limit = metric(addr, "numatrace_http_connection_limit")
	for _, c := range held {
		c.Close()
	}
	time.Sleep(5 * time.Second)
	f.after5 = readMemory(pid)
	time.Sleep(settle - 5*time.Second)
	f.afterSettle = readMemory(pid)
	f.peakKiB = rssKiB(pid, "VmHWM")
	return f
}

// holdIdleConns opens n connections to addr one after another, sends one
// request on each and leaves it open; it returns them and how many failed.
func holdIdleConns(addr string, n int) ([]net.Conn, int) {
	held := make([]net.Conn, 0, n)
	failed := 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			failed++
			continue
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"); err == nil {
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			} else {
				failed++
			}
		}
	}
	return held, failed
}

// print writes the Markdown section on stdout.
func (f floodResult) print() {
	fmt.Println()
	fmt.Println("## serve under idle connections")
	fmt.Println()
	fmt.Printf("bench/connflood: %d connections to `numatrace serve`, opened one after another in %.1f s, each sent one request (/healthz) and was then left idle (keep-alive), as a client holding connections would; RLIMIT_NOFILE %d. serve keeps at most `numatrace_http_connection_limit` open: each one past that closed the one idle longest.\n\n", f.conns, f.opened.Seconds(), f.nofile)
	fmt.Println("| figure | value |")
	fmt.Println("|---|--:|")
	fmt.Printf("| connection limit | %.0f |\n", f.limit)
	fmt.Printf("| connections closed for room | %.0f |\n", f.closedForRoom)
	fmt.Printf("| requests that failed while opening | %d |\n", f.failed)
	fmt.Printf("| serve's open file descriptors: before / while held | %d / %d |\n", f.fdsBefore, f.fdsDuring)
	fmt.Printf("| scrape of /metrics while held (median of 5) | %.1f ms |\n", float64(f.heldScrape.Microseconds())/1000)
	fmt.Printf("| serve's RSS (anonymous) before | %s |\n", f.before)
	fmt.Printf("| serve's RSS (anonymous) while held | %s |\n", f.during)
	fmt.Printf("| serve's RSS (anonymous) 5 s after they closed | %s |\n", f.after5)
	fmt.Printf("| serve's RSS (anonymous) %s after they closed | %s |\n", f.settle, f.afterSettle)
	fmt.Printf("| serve's peak RSS (VmHWM) | %.1f MiB |\n", float64(f.peakKiB)/1024)
	fmt.Printf("| accept errors serve logged | %d |\n", f.acceptErrors)
}

// scrapeTime is the median time of n scrapes of /metrics, each on a
// new connection.
func scrapeTime(addr string, n int) time.Duration {
	var ts []time.Duration
	for i := 0; i < n; i++ {
		c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		t := time.Now()
		resp, err := c.Get("http://" + addr + "/metrics")
		if err != nil {
			fatal(fmt.Errorf("scrape: %w", err))
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ts = append(ts, time.Since(t))
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[len(ts)/2]
}

// metric is the value of an unlabelled metric in a scrape.
func metric(addr, name string) float64 {
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func rssKiB(pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

func mib(rss, anon int) string {
	return fmt.Sprintf("%.1f MiB (%.1f MiB)", float64(rss)/1024, float64(anon)/1024)
}

func fds(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(e)
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "connflood: %v\n", err)
	os.Exit(1)
}
