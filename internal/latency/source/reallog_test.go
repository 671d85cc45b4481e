package source

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/window"
)

// The logs real servers write, read as they are, give the same windows as
// the same logs converted to numatrace's two columns the way a user would
// (awk, with the digits pasted, not multiplied in floating point): a
// real nginx's access log with $msec and $request_time, and a real
// pgbench -l log against a local PostgreSQL.

func TestRealNginxAccessLog(t *testing.T) {
	testutil.RequireRoot(t)
	nginx := testutil.RequireTool(t, "nginx", "nginx")
	env := realEnv()
	dir := testutil.SharedTempDir(t)
	port := testutil.FreeTCPPort(t)
	www := filepath.Join(dir, "www")
	os.Mkdir(www, 0o755)
	// Files of 4 to 40 KiB sent at 400 KiB/s take 10 to 100 ms: latencies
	// with digits in them, not a log of 0.000s.
	for i := 1; i <= 10; i++ {
		os.WriteFile(filepath.Join(www, fmt.Sprintf("f%d", i)), make([]byte, i*4<<10), 0o644)
	}
	logPath := filepath.Join(dir, "access.log")
	conf := fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	client_body_temp_path %[1]s/tmp; proxy_temp_path %[1]s/tmp; fastcgi_temp_path %[1]s/tmp;
	uwsgi_temp_path %[1]s/tmp; scgi_temp_path %[1]s/tmp;
	log_format timed '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
	                 '"$http_referer" "$http_user_agent" $msec $request_time';
	server {
		listen 127.0.0.1:%[2]d;
		root %[3]s;
		access_log %[4]s timed;
		limit_rate 400k;
	}
}
`, dir, port, www, logPath)
	confPath := filepath.Join(dir, "nginx.conf")
	os.WriteFile(confPath, []byte(conf), 0o644)
	cmd := exec.Command(nginx, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", confPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitListening(t, addr)

	sent := driveHTTP(t, "http://"+addr, 4, 3*time.Second)
	cmd.Process.Signal(unix.SIGQUIT) // graceful: the log is whole
	cmd.Wait()
	two := convert(t, logPath, `{ split($(NF-1), m, "."); split($NF, r, "."); printf "%s%s000000 %s%s000000\n", m[1], m[2], r[1], r[2] }`)

	real := windowsOf(t, Config{File: logPath}, env, sent, "an nginx access log")
	conv := windowsOf(t, Config{File: two}, env, sent, "")
	sameWindows(t, real, conv, sent)
}

func TestRealPgbenchLog(t *testing.T) {
	testutil.RequireRoot(t)
	bin := testutil.PostgresBin(t)
	pgbench := testutil.RequireTool(t, "pgbench", "postgresql")
	env := realEnv()
	dir := testutil.SharedTempDir(t)
	port := strconv.Itoa(testutil.FreeTCPPort(t))
	testutil.StartPostgres(t, bin, filepath.Join(dir, "pg"), port)
	db := []string{"-h", "127.0.0.1", "-p", port, "-U", "postgres", "postgres"}
	run(t, dir, pgbench, append([]string{"-i", "-q", "-s", "1"}, db...)...)
	run(t, dir, pgbench, append([]string{"-T", "5", "-R", "200", "-c", "2", "-j", "1", "-l", "--log-prefix", filepath.Join(dir, "pgbench_log")}, db...)...)
	logs, _ := filepath.Glob(filepath.Join(dir, "pgbench_log.*"))
	if len(logs) != 1 {
		t.Fatalf("pgbench logs %v, want one", logs)
	}
	n := countLines(t, logs[0])
	two := convert(t, logs[0], `{ printf "%s%06d000 %s000\n", $5, $6, $3 }`)

	real := windowsOf(t, Config{File: logs[0]}, env, n, "pgbench's -l per-transaction log")
	conv := windowsOf(t, Config{File: two}, env, n, "")
	sameWindows(t, real, conv, n)
}

// realEnv is a run that starts now: the windows' origin.
func realEnv() Env {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return Env{Start: time.Now(), StartNs: uint64(ts.Nano()), Window: time.Second}
}

// windowsOf reads the n samples of the file through the source as a run
// would, and files them under the run's windows; the source says it read
// the file as about ("" for numatrace's own format, said nothing of),
// and nothing else.
func windowsOf(t *testing.T, c Config, env Env, n int, about string) []latency.Stats {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	src, err := c.Open(env)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan latency.Reading, 64)
	done := make(chan error, 1)
	var told []string
	go func() {
		done <- src.Run(ctx, out, func(err error) {
			if tl, ok := err.(*Told); ok {
				told = append(told, tl.About)
			} else {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}()
	w := latency.NewWindows(window.Grid{StartNs: env.StartNs, LenNs: uint64(env.Window)}, 0)
	last := uint64(0)
	for got := 0; got < n; got++ {
		select {
		case r := <-out:
			w.Add(r.Sample)
			last = max(last, r.Sample.TsNs)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: %d of %d samples read", c.File, got, n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{about}; about != "" && !reflect.DeepEqual(told, want) || about == "" && told != nil {
		t.Errorf("%s: told %q, want %q", c.File, told, about)
	}
	if s := src.Skipped(); s != nil {
		t.Errorf("%s: skipped %v", c.File, s)
	}
	var stats []latency.Stats
	for i := uint64(0); i <= (last-env.StartNs)/uint64(env.Window); i++ {
		if s := w.Take(i); s != nil {
			stats = append(stats, *s)
		}
	}
	if a := w.Account(); a.Outside()+a.Late > 0 {
		t.Errorf("%s: %d samples outside the run, %d late", c.File, a.Outside(), a.Late)
	}
	return stats
}

func sameWindows(t *testing.T, real, conv []latency.Stats, n int) {
	t.Helper()
	var count uint64
	for _, s := range real {
		count += s.Count
	}
	if count != uint64(n) || len(real) < 3 {
		t.Fatalf("%d requests in %d windows, want %d in 3 or more", count, len(real), n)
	}
	if !reflect.DeepEqual(real, conv) {
		t.Fatalf("windows of the log as it is:\n%+v\nof the converted file:\n%+v", real, conv)
	}
	t.Logf("%d requests, %d windows alike; first %+v", n, len(real), real[0])
}

// driveHTTP sends GETs from conns clients for d, each for one of the
// files or one that is not there, and returns how many were answered.
func driveHTTP(t *testing.T, base string, conns int, d time.Duration) int {
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Timeout: 5 * time.Second}
			for i := c; time.Now().Before(end); i++ {
				resp, err := cl.Get(fmt.Sprintf("%s/f%d", base, i%11+1)) // f11 is a 404
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

// convert is the two-column file awk makes of path with prog.
func convert(t *testing.T, path, prog string) string {
	t.Helper()
	out, err := exec.Command("awk", prog, path).Output()
	if err != nil {
		t.Fatalf("awk: %v", err)
	}
	conv := path + ".ns"
	os.WriteFile(conv, out, 0o644)
	return conv
}

func countLines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}
