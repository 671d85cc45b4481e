package main

// End-to-end tests of what numatrace does with latency input it cannot
// use: samples outside the trace, a FIFO no one writes to, a rotated
// file, a Prometheus histogram whose counters reset.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// startStallingProcess starts a process that reads a 400 MiB file over
// and over inside a 64 MiB memory cgroup, so it is in memcg reclaim
// before and while numatrace attaches; Cleanup kills it.
func startStallingProcess(t *testing.T, name string) int {
	t.Helper()
	cg := testutil.MemcgCgroup(t, name, 64<<20)
	file := testutil.BigFile(t)
	testutil.DropCaches(t)
	// 2,000 reads of 400 MiB: minutes at the fastest disk seen (CI read
	// 100 in about 10 s, and cat exited during the test's second trace).
	// One process: the stalls must be the target's own.
	reads := strings.TrimSpace(strings.Repeat(file+" ", 2000))
	cmd := exec.Command("sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec cat %s > /dev/null", cg, reads))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(filepath.Join(cg, "memory.failcnt")); strings.TrimSpace(string(b)) != "0" && len(b) > 0 {
			return cmd.Process.Pid // over its limit: reclaiming
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pid %d never reached its cgroup's limit", cmd.Process.Pid)
	return 0
}

// awkLatencyFile is what a user's awk converter wrote: %d capped every
// timestamp at 2147483647 ns, 2.1 s after boot.
func awkLatencyFile(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "2147483647 %d\n", 1_000_000+i)
	}
	path := filepath.Join(t.TempDir(), "latency.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// warnings are the lines numatrace wrote on stderr.
func warnings(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// outsideWarning is how the awk file's samples are said: the trace's span
// (in seconds after boot) is the run's own.
var outsideWarning = regexp.MustCompile(`^2,000 latency samples lie outside the trace: their times are 2\.1 s after boot, the trace covered [0-9,]+(\.[0-9])?–[0-9,]+(\.[0-9])? s; check their clock and unit: every sample says 2147483647, the largest 32-bit integer: the writer's integer overflowed \(awk's printf %d stops there\)$`)

// Attached to a process that is stalling, with a latency file whose
// samples all lie outside the trace: numatrace says so once on stderr
// while running, the report's first lines say the latency source gave
// nothing usable and why, and the JSON summary carries the counts.
func TestLatencyFileOutsideTheTrace(t *testing.T) {
	pid := startStallingProcess(t, "numatrace-e2e-lat-outside")
	lat := awkLatencyFile(t, 2000)

	// The text report.
	nt := startAttach(t, "--pid", strconv.Itoa(pid), "--latency-file", lat, "--duration", "3s")
	nt.wait(t, 30*time.Second)
	ws := warnings(nt.stderr.String())
	if len(ws) != 1 || !outsideWarning.MatchString(strings.TrimSuffix(strings.TrimPrefix(ws[0], "numatrace: "), " (more are counted in the report)")) {
		t.Fatalf("stderr %q: want the one warning that the 2,000 samples lie outside the trace", ws)
	}
	lines := proseLines(nt.stdout.String())
	if len(lines) < 4 || !strings.HasPrefix(lines[0], fmt.Sprintf("numatrace: pid %d ", pid)) ||
		lines[2] != "WARNING: the latency source gave nothing usable (see below): there is no spike analysis" ||
		!outsideWarning.MatchString(strings.TrimPrefix(lines[3], "WARNING: ")) {
		t.Fatalf("the report's first lines:\n%s", strings.Join(lines[:min(len(lines), 4)], "\n"))
	}
	if n := strings.Count(nt.stdout.String(), "latency samples lie outside the trace"); n != 1 {
		t.Errorf("the report says %d times that the samples lie outside the trace, want once", n)
	}
	if !strings.Contains(nt.stdout.String(), "memcg_reclaim") {
		t.Errorf("the report shows no memcg reclaim of the stalling process:\n%s", nt.stdout.String())
	}

	// The JSON summary.
	nt = startAttach(t, "--pid", strconv.Itoa(pid), "--latency-file", lat, "--duration", "3s", "--json")
	nt.wait(t, 30*time.Second)
	if ws := warnings(nt.stderr.String()); len(ws) != 1 || !strings.Contains(ws[0], "2,000 latency samples lie outside the trace") {
		t.Fatalf("stderr %q: want one warning", ws)
	}
	out := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	var sum struct {
		Threads []struct {
			Stalls map[string]struct {
				Count uint64 `json:"count"`
			} `json:"stalls"`
		} `json:"threads"`
		LatencyInput struct {
			Usable       bool     `json:"usable"`
			Samples      uint64   `json:"samples"`
			OutsideTrace uint64   `json:"outside_trace"`
			BeforeTrace  uint64   `json:"before_trace"`
			OutsideMinNs uint64   `json:"outside_min_ns"`
			OutsideMaxNs uint64   `json:"outside_max_ns"`
			Likely       string   `json:"likely"`
			Warnings     []string `json:"warnings"`
		} `json:"latency_input"`
	}
	if err := json.Unmarshal([]byte(out[len(out)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	li := sum.LatencyInput
	if li.Usable || li.Samples != 0 || li.OutsideTrace != 2000 || li.BeforeTrace != 2000 ||
		li.OutsideMinNs != 2147483647 || li.OutsideMaxNs != 2147483647 || !strings.HasPrefix(li.Likely, "every sample says 2147483647") ||
		len(li.Warnings) != 2 {
		t.Fatalf("latency_input %+v", li)
	}
	if len(sum.Threads) == 0 || sum.Threads[0].Stalls["memcg_reclaim"].Count == 0 {
		t.Errorf("the summary shows no memcg reclaim of the stalling process: %+v", sum.Threads)
	}
}

// A FIFO that no writer ever opens: --duration, SIGINT and SIGTERM each
// end the run normally, with its report.
func TestLatencyFIFOWithoutAWriter(t *testing.T) {
	testutil.RequireRoot(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	for _, end := range []string{"duration", "SIGINT", "SIGTERM"} {
		t.Run(end, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "latency.fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--pid", strconv.Itoa(sleeper.Process.Pid), "--latency-file", fifo}
			if end == "duration" {
				args = append(args, "--duration", "2s")
			}
			nt := startAttach(t, args...)
			switch end {
			case "SIGINT":
				time.Sleep(500 * time.Millisecond)
				nt.cmd.Process.Signal(os.Interrupt)
			case "SIGTERM":
				time.Sleep(500 * time.Millisecond)
				nt.cmd.Process.Signal(syscall.SIGTERM)
			}
			nt.wait(t, 10*time.Second)
			lines := proseLines(nt.stdout.String())
			if len(lines) < 3 || !strings.HasPrefix(lines[0], "numatrace: pid ") ||
				lines[2] != "WARNING: the latency source gave nothing usable (no latency arrived): there is no spike analysis" {
				t.Fatalf("report:\n%s\nstderr: %s", nt.stdout.String(), nt.stderr.String())
			}
		})
	}
}

// latencyWriter is a load generator appending one sample every 5 ms to
// its log, which can be rotated under it as logrotate does.
type latencyWriter struct {
	path    string
	mu      sync.Mutex
	f       *os.File
	written int
	stop    chan struct{}
	done    chan struct{}
}

func startLatencyWriter(t *testing.T, path string) *latencyWriter {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w := &latencyWriter{path: path, f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			w.mu.Lock()
			fmt.Fprintf(w.f, "{\"ts_ns\":%d,\"latency_ns\":1000000}\n", time.Now().UnixNano())
			w.written++
			w.mu.Unlock()
		}
	}()
	return w
}

// rotate is logrotate's create: the log is renamed, the writer writes on
// to the old file for a moment (until it is told to reopen), then opens a
// new one by the old name.
func (w *latencyWriter) rotate(t *testing.T, suffix string) {
	t.Helper()
	if err := os.Rename(w.path, w.path+suffix); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.f.Close()
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w.f = f
}

// copytruncate is logrotate's copytruncate: a copy is made and the log
// cut to nothing; the writer goes on appending to it.
func (w *latencyWriter) copytruncate(t *testing.T, suffix string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := os.ReadFile(w.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.path+suffix, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(w.path, 0); err != nil {
		t.Fatal(err)
	}
}

func (w *latencyWriter) finish() int {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.f.Close()
	return w.written
}

// A latency file rotated twice (create, then copytruncate) while traced:
// every sample written during the trace is counted, and each kind of
// rotation is said once.
func TestLatencyFileFollowedAcrossRotation(t *testing.T) {
	testutil.RequireRoot(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	path := filepath.Join(t.TempDir(), "requests.log")
	os.WriteFile(path, nil, 0o644)
	nt := startAttach(t, "--pid", strconv.Itoa(sleeper.Process.Pid), "--latency-file", path, "--json", "--window", "200ms")
	w := startLatencyWriter(t, path)
	time.Sleep(time.Second)
	w.rotate(t, ".1")
	time.Sleep(time.Second)
	w.copytruncate(t, ".2")
	time.Sleep(time.Second)
	written := w.finish()
	time.Sleep(500 * time.Millisecond) // the last samples' window closes
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 20*time.Second)

	out := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	var sum latencyCounts
	if err := json.Unmarshal([]byte(out[len(out)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples written, %+v", written, sum.LatencyInput)
	if li := sum.LatencyInput; li.Samples != uint64(written) || li.OutsideTrace != 0 || li.LateSamples != 0 {
		t.Errorf("%d samples written; the run counted %+v", written, li)
	}
	ws := warnings(nt.stderr.String())
	if len(ws) != 2 || !strings.HasPrefix(ws[0], "numatrace: latency file "+path+" was rotated") ||
		!strings.HasPrefix(ws[1], "numatrace: latency file "+path+" was truncated") {
		t.Errorf("stderr %q: want the rotation and the truncation said once each", ws)
	}
}

// promHistogram renders a request histogram in seconds: fast requests
// under 1 ms, and with extra a 5 ms bucket that a new build added.
func promHistogram(fast int, extra bool) string {
	var b strings.Builder
	b.WriteString("# TYPE http_request_duration_seconds histogram\n")
	les := []string{"0.001", "0.01", "0.1", "+Inf"}
	if extra {
		les = []string{"0.001", "0.005", "0.01", "0.1", "+Inf"}
	}
	for _, le := range les {
		fmt.Fprintf(&b, "http_request_duration_seconds_bucket{le=%q} %d\n", le, fast)
	}
	fmt.Fprintf(&b, "http_request_duration_seconds_count %d\nhttp_request_duration_seconds_sum 1\n", fast)
	return b.String()
}

// A service scraped through --latency-prom serves 100 requests a window
// without a pause; its counters reset when it restarts (scrape 5), and a
// new build adds a bucket (scrape 9). Neither window is taken for one in
// which nothing completed, nor read with nonsense quantiles: each is
// skipped, said once, and counted in the summary.
func TestLatencyPromResetAndLayoutChangeAreSkipped(t *testing.T) {
	testutil.RequireRoot(t)
	var mu sync.Mutex
	scrapes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := scrapes
		scrapes++
		mu.Unlock()
		switch {
		case n < 5:
			fmt.Fprint(w, promHistogram(100*n+7, false))
		case n < 9:
			fmt.Fprint(w, promHistogram(100*(n-5), false)) // restarted at scrape 5
		default:
			fmt.Fprint(w, promHistogram(100*(n-5), true))
		}
	}))
	defer srv.Close()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	nt := startAttach(t, "--pid", strconv.Itoa(sleeper.Process.Pid), "--json", "--window", "500ms", "--duration", "7s",
		"--latency-prom", srv.URL, "--latency-metric", "http_request_duration_seconds")
	nt.wait(t, 30*time.Second)

	out := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	var sum struct {
		Spikes []struct {
			Verdict string `json:"verdict"`
		} `json:"spikes"`
		LatencyInput struct {
			Windows        uint64            `json:"windows"`
			SkippedWindows uint64            `json:"skipped_windows"`
			Skipped        map[string]uint64 `json:"skipped"`
		} `json:"latency_input"`
	}
	if err := json.Unmarshal([]byte(out[len(out)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	li := sum.LatencyInput
	t.Logf("%+v, spikes %+v", li, sum.Spikes)
	if len(sum.Spikes) != 0 {
		t.Errorf("spikes %+v: want none", sum.Spikes)
	}
	if li.SkippedWindows != 2 || li.Skipped["counter_resets"] != 1 || li.Skipped["bucket_layout_changes"] != 1 || li.Windows < 8 {
		t.Errorf("latency_input %+v: want two windows skipped, one for each reason", li)
	}
	ws := warnings(nt.stderr.String())
	if len(ws) != 2 || !strings.Contains(ws[0], "window 4: the histogram's counters went back") ||
		!strings.Contains(ws[1], "window 8: the histogram's buckets changed") {
		t.Errorf("stderr %q: want the reset and the layout change said once each", ws)
	}
}

// latencyCounts is what a run's summary says of the latency samples it
// was given: how many it took, and how many it could not place.
type latencyCounts struct {
	LatencyInput struct {
		Samples      uint64 `json:"samples"`
		OutsideTrace uint64 `json:"outside_trace"`
		LateSamples  uint64 `json:"late_samples"`
	} `json:"latency_input"`
}
