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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ready := filepath.Join(dir, "ready")
	serve := exec.Command(*bin, "serve", "--listen", addr, "--ready-file", ready)
	var stderr strings.Builder
	serve.Stderr = &stderr
	if err := serve.Start(); err != nil {
		fatal(err)
	}
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("serve never ready: %s", stderr.String()))
		}
	}
	pid := serve.Process.Pid
	scrapeTime(addr, 3)
	time.Sleep(2 * time.Second)
	before, beforeAnon := rssKiB(pid, "VmRSS"), rssKiB(pid, "RssAnon")
	fdsBefore := fds(pid)

	start := time.Now()
	held := make([]net.Conn, 0, *conns)
	failed := 0
	for i := 0; i < *conns; i++ {
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
	opened := time.Since(start)
	heldScrape := scrapeTime(addr, 5)
	during, duringAnon := rssKiB(pid, "VmRSS"), rssKiB(pid, "RssAnon")
	fdsDuring := fds(pid)
	closedForRoom := metric(addr, "numatrace_http_connections_closed_total")
	limit := metric(addr, "numatrace_http_connection_limit")
	for _, c := range held {
		c.Close()
	}
	time.Sleep(5 * time.Second)
	after5, after5Anon := rssKiB(pid, "VmRSS"), rssKiB(pid, "RssAnon")
	time.Sleep(*settle - 5*time.Second)
	afterSettle, afterSettleAnon := rssKiB(pid, "VmRSS"), rssKiB(pid, "RssAnon")
	peak := rssKiB(pid, "VmHWM")
	acceptErrors := strings.Count(stderr.String(), "Accept error")

	fmt.Println()
	fmt.Println("## serve under idle connections")
	fmt.Println()
	fmt.Printf("bench/connflood: %d connections to `numatrace serve`, opened one after another in %.1f s, each sent one request (/healthz) and was then left idle (keep-alive), as a client holding connections would; RLIMIT_NOFILE %d. serve keeps at most `numatrace_http_connection_limit` open: each one past that closed the one idle longest.\n\n", *conns, opened.Seconds(), rl.Cur)
	fmt.Println("| figure | value |")
	fmt.Println("|---|--:|")
	fmt.Printf("| connection limit | %.0f |\n", limit)
	fmt.Printf("| connections closed for room | %.0f |\n", closedForRoom)
	fmt.Printf("| requests that failed while opening | %d |\n", failed)
	fmt.Printf("| serve's open file descriptors: before / while held | %d / %d |\n", fdsBefore, fdsDuring)
	fmt.Printf("| scrape of /metrics while held (median of 5) | %.1f ms |\n", float64(heldScrape.Microseconds())/1000)
	fmt.Printf("| serve's RSS (anonymous) before | %s |\n", mib(before, beforeAnon))
	fmt.Printf("| serve's RSS (anonymous) while held | %s |\n", mib(during, duringAnon))
	fmt.Printf("| serve's RSS (anonymous) 5 s after they closed | %s |\n", mib(after5, after5Anon))
	fmt.Printf("| serve's RSS (anonymous) %s after they closed | %s |\n", *settle, mib(afterSettle, afterSettleAnon))
	fmt.Printf("| serve's peak RSS (VmHWM) | %.1f MiB |\n", float64(peak)/1024)
	fmt.Printf("| accept errors serve logged | %d |\n", acceptErrors)
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
