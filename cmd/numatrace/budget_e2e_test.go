package main

// Where the slow requests' time went (the budget, issue 45), on real
// servers whose incident is made by construction, so that nothing depends
// on this host's CPU or disk speed: five runs of each, the same verdict in
// every one. numatrace runs unpinned and times the requests on the
// server's sockets (no latency flag).
//
//   - CPU: redis shares its CPU with a busy loop. redis sleeps in
//     epoll_wait between requests; a request wakes it, and it waits behind
//     the hog for the scheduler to give it the CPU back, which takes as
//     long as the scheduler's slices (milliseconds), not the host's speed,
//     where it answers in tens of microseconds. The slow requests' time is
//     waiting for a CPU. A real-time process also takes that CPU 30 ms at
//     a time, longer than a connection's 16 ms between requests: the
//     next request on it waits in the client and is counted from when it
//     was due (pacing.go), as happens on a busy host now and then; that
//     wait is split as the exchange it waited behind was, a wait for a
//     CPU (10-12% of the slow requests' time was 'not split' before).
//   - Lock: a C server whose thread per connection takes one mutex to
//     answer, which a slow thread holds for 30 ms of every 50 (sleeping).
//     A request that comes while it is held waits off a CPU in the
//     mutex's futex, in the thread that serves it: other_wait.
//
// In every run, every window's slow-request budget adds up to those
// requests' summed latency.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

// budgetRuns is how many times each incident is traced.
const budgetRuns = 5

func TestBudgetRunqWaitUnderACPUHog(t *testing.T) {
	testutil.RequireRoot(t)
	r := testutil.StartRedis(t)
	pid := r.Cmd.Process.Pid
	pinTasks(t, pid, serverCPU)
	cpuHog(t, serverCPU)
	cpuBursts(t, serverCPU, 30, 200)
	for i := range budgetRuns {
		run := traceBudget(t, pid, "1ms", func(stop <-chan struct{}) { <-respClient(t, r, clientConns, 1000, stop) })
		checkBudget(t, i, run, "runq_wait", "waiting for a CPU (runq_wait)")
		if advice := stall.RunqWait.Desc().Advice; !strings.HasPrefix(run.Headline.Next, advice) {
			t.Errorf("run %d: the next step is %q; want %q", i, run.Headline.Next, advice)
		}
		for _, name := range append(append(run.Correlation.ExplainedBy, run.Correlation.PartlyBy...), causesNamed(run.Correlation.Conclusion)...) {
			if c, err := stall.ParseCause(name); err != nil || !c.Desc().NotMemory {
				t.Errorf("run %d: a CPU hog, no memory pressure, and the verdict names %s: %s", i, name, run.Correlation.Conclusion)
			}
		}
	}
}

func TestBudgetOtherWaitBehindALock(t *testing.T) {
	testutil.RequireRoot(t)
	// Unpinned: the lock's wait is off any CPU, wherever the server runs.
	// What the host's other work adds is waiting for a CPU (runq_wait):
	// 2-19% of the slow requests' time in runs on a busy host (load 6 on
	// its 2 CPUs), pinned or not.
	srv, port := startLockServer(t, 30, 20)
	// 200 requests a second on 16 connections: 80 ms apart on each, more
	// than a request waits for the lock, so that each reaches the socket
	// when it is due, none queued in the client behind the one before
	// (which would be estimated, pacing.go, not measured).
	for i := range budgetRuns {
		rec := filepath.Join(t.TempDir(), "lock.ntr")
		run := traceBudget(t, srv.Process.Pid, "5ms", func(stop <-chan struct{}) { <-httpClient(t, port, clientConns, 200, stop) },
			"--record", rec)
		checkBudget(t, i, run, "other_wait", stall.PartOtherWait.Words())
		// The lock's waits have their code path: the server's handler
		// asleep in the mutex's futex.
		checkWaitStacks(t, i, run.Waits, "other_wait", "futex_wait")
		checkWaitsReplay(t, i, run.Waits, rec)
		if advice := stall.PartOtherWait.Advice(); run.Headline.Next != advice {
			t.Errorf("run %d: the next step is %q; want %q", i, run.Headline.Next, advice)
		}
	}
}

// cpuHog runs a busy loop on cpu until the test ends.
func cpuHog(t *testing.T, cpu int) {
	t.Helper()
	hog := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
	if err := hog.Start(); err != nil {
		t.Fatalf("CPU hog: %v", err)
	}
	t.Cleanup(func() { hog.Process.Kill(); hog.Wait() })
}

// cpuBursts takes cpu from everything else on it for burstMs of every
// periodMs, from a real-time process (testdata/cpuburst.c), until the
// test ends. (A Go thread cannot: the runtime preempts a goroutine that
// runs 10 ms, and its thread leaves the CPU while the goroutine is
// handed back to it.)
func cpuBursts(t *testing.T, cpu, burstMs, periodMs int) {
	t.Helper()
	bin := buildTestC(t, "cpuburst")
	burst := exec.Command("chrt", "-f", strconv.Itoa(clientPriority/2), "taskset", "-c", strconv.Itoa(cpu), bin,
		strconv.Itoa(burstMs), strconv.Itoa(periodMs))
	if err := burst.Start(); err != nil {
		t.Fatalf("CPU bursts: %v", err)
	}
	t.Cleanup(func() { burst.Process.Kill(); burst.Wait() })
}

// buildTestC compiles testdata/NAME.c, threads and all; it returns the binary.
func buildTestC(t *testing.T, name string) string {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testutil.RequireFeature(t, err == nil, "gcc not installed (make deps installs it)")
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", bin, "testdata/"+name+".c").CombinedOutput(); err != nil {
		t.Fatalf("gcc %s.c: %v: %s", name, err, out)
	}
	return bin
}

// startLockServer builds testdata/lockserver.c and starts it, the lock
// held holdMs of every holdMs+freeMs; it returns the server and its port.
func startLockServer(t *testing.T, holdMs, freeMs int) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(buildTestC(t, "lockserver"), strconv.Itoa(holdMs), strconv.Itoa(freeMs))
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
		t.Fatalf("the lock server printed no port: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the lock server printed %q, not a port", line)
	}
	return cmd, port
}

// budgetPart is one part of a budget in the JSON summary.
type budgetPart struct {
	Part  string  `json:"part"`
	Ns    uint64  `json:"ns"`
	Share float64 `json:"share"`
}

// budgetRun is what a budget test reads of a run: the summary's spikes
// and verdict, and the window lines' slow requests.
type budgetRun struct {
	Headline struct {
		Next string `json:"next"`
	} `json:"headline"`
	Spikes []struct {
		Index   uint64       `json:"index"`
		Verdict string       `json:"verdict"`
		Budget  []budgetPart `json:"budget"`
	} `json:"spikes"`
	Correlation struct {
		Windows     int          `json:"windows"`
		ExplainedBy []string     `json:"explained_by"`
		PartlyBy    []string     `json:"partly_explained_by"`
		Conclusion  string       `json:"conclusion"`
		Budget      []budgetPart `json:"budget"`
	} `json:"correlation"`
	LatencyInput struct {
		Skipped map[string]uint64 `json:"skipped"`
	} `json:"latency_input"`
	Waits   []waitRow `json:"waits"`
	windows []budgetWindow
}

// waitRow is one stack's waits in one thread (the JSON summary's waits).
type waitRow struct {
	Part    string `json:"part"`
	TID     uint32 `json:"tid"`
	TotalNs uint64 `json:"total_ns"`
	Stacked bool   `json:"stacked"`
	Kernel  []struct {
		Func string `json:"func"`
	} `json:"kernel"`
	User []struct {
		Func string `json:"func"`
	} `json:"user"`
}

// calls reports whether frames name a function whose name starts with fn.
func (w waitRow) calls(fn string, kernel bool) bool {
	frames := w.User
	if kernel {
		frames = w.Kernel
	}
	for _, f := range frames {
		if strings.HasPrefix(f.Func, fn) {
			return true
		}
	}
	return false
}

// checkWaitStacks checks that run i's waits of part took their stacks for
// at least 80% of their time, and that at least 80% of that time is in
// stacks that sleep in a kernel function named kfn... and have a user part. (Which
// user function called is [5/7]'s: a distribution's libc and servers keep
// no frame pointers, and the walk ends in libc.)
func checkWaitStacks(t *testing.T, i int, runWaits []waitRow, part, kfn string) {
	t.Helper()
	var all, stacked, there uint64
	for _, w := range runWaits {
		if w.Part != part {
			continue
		}
		all += w.TotalNs
		if !w.Stacked {
			continue
		}
		stacked += w.TotalNs
		if w.calls(kfn, true) && len(w.User) > 0 {
			there += w.TotalNs
		}
	}
	t.Logf("run %d: %s waits %v, %v with stacks, %v of it in %s", i, part, time.Duration(all), time.Duration(stacked),
		time.Duration(there), kfn)
	if all == 0 || float64(stacked) < 0.8*float64(all) {
		t.Errorf("run %d: %v of %s waits, %v of it with stacks; want at least 80%%", i, time.Duration(all), part, time.Duration(stacked))
	}
	if float64(there) < 0.8*float64(stacked) {
		t.Errorf("run %d: of %v of %s waits with stacks, %v sleep in %s with a user stack; want at least 80%%", i, time.Duration(stacked), part,
			time.Duration(there), kfn)
	}
}

// checkWaitsReplay checks that the report of run i's recording counts
// the waits the live run did: the same rows, each the same waits and time.
func checkWaitsReplay(t *testing.T, i int, live []waitRow, rec string) {
	t.Helper()
	out, err := exec.Command(binary(t), "report", "--json", rec).Output()
	if err != nil {
		t.Fatalf("run %d: report of the recording: %v", i, err)
	}
	var replayed budgetRun
	summaryOf(t, out, &replayed)
	type key struct {
		part    string
		tid     uint32
		stacked bool
		kernel  string
	}
	sum := func(rows []waitRow) map[key]uint64 {
		m := map[key]uint64{}
		for _, w := range rows {
			var names []string
			for _, f := range w.Kernel {
				names = append(names, f.Func)
			}
			m[key{w.Part, w.TID, w.Stacked, strings.Join(names, ";")}] += w.TotalNs
		}
		return m
	}
	if l, r := sum(live), sum(replayed.Waits); len(l) == 0 || !reflect.DeepEqual(l, r) {
		t.Errorf("run %d: the live run's waits %v, its recording's %v; want the same", i, l, r)
	}
}

// budgetWindow is a window line's slow requests.
type budgetWindow struct {
	Type    string `json:"type"`
	Index   uint64 `json:"index"`
	Latency *struct {
		Count    uint64 `json:"count"`
		Requests *struct {
			Slow         uint64            `json:"slow"`
			SlowNs       uint64            `json:"slow_ns"`
			SlowBudgetNs map[string]uint64 `json:"slow_budget_ns"`
		} `json:"requests"`
	} `json:"latency"`
}

// traceBudget attaches to pid with the SLO and no latency flag, runs load
// for 6 s (it returns once stop is closed and its client is done), and
// reads the summary and the window lines.
func traceBudget(t *testing.T, pid int, slo string, load func(stop <-chan struct{}), more ...string) *budgetRun {
	t.Helper()
	nt := startAttach(t, append([]string{"--pid", strconv.Itoa(pid), "--json", "--window", "1s", "--slo", slo, "--duration", "60s"}, more...)...)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); load(stop) }()
	time.Sleep(6 * time.Second)
	close(stop)
	<-done
	time.Sleep(time.Second) // the last exchanges go out, the last window closes
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	return readBudgetRun(t, nt.stdout.Bytes())
}

// readBudgetRun reads a run's summary and window lines.
func readBudgetRun(t *testing.T, out []byte) *budgetRun {
	t.Helper()
	run := &budgetRun{}
	summaryOf(t, out, run)
	for _, l := range strings.Split(string(out), "\n") {
		var w budgetWindow
		if json.Unmarshal([]byte(l), &w) == nil && w.Type == "window" && w.Latency != nil {
			run.windows = append(run.windows, w)
		}
	}
	return run
}

// checkBudget checks run i of an incident whose slow requests' time went
// mostly to part (words, as the verdict says it): it is the largest part
// of the spikes' slow requests' time, in the JSON summary and in the
// verdict's opening; less than 5% of that time is not split (a
// connection's first request is not: no thread had served it yet); at
// least 3 windows spiked; and every window's slow-request budget adds up
// to its slow requests' latency, within 2%.
func checkBudget(t *testing.T, i int, run *budgetRun, part, words string) {
	t.Helper()
	b := run.Correlation.Budget
	t.Logf("run %d: %d spikes in %d windows, budget %s (%d requests counted from when due): %s", i, len(run.Spikes), run.Correlation.Windows,
		budgetFigures(b), run.LatencyInput.Skipped["counted_from_due"], run.Correlation.Conclusion)
	if len(run.Spikes) < 3 {
		t.Errorf("run %d: %d spikes in %d windows; want at least 3", i, len(run.Spikes), run.Correlation.Windows)
	}
	if len(b) == 0 || b[0].Part != part {
		t.Errorf("run %d: the slow requests' budget is %s; want %s the largest part", i, budgetFigures(b), part)
	} else if want := fmt.Sprintf("(the slow requests' time: %.0f%% %s", b[0].Share*100, words); !strings.Contains(run.Correlation.Conclusion, want) {
		t.Errorf("run %d: the verdict does not open with %q: %s", i, want, run.Correlation.Conclusion)
	}
	for _, p := range b {
		if p.Part == stall.PartUnsplit.String() && p.Share >= 0.05 {
			t.Errorf("run %d: %.1f%% of the slow requests' time was not split; want under 5%%", i, p.Share*100)
		}
	}
	checkWindowBudgets(t, i, run)
}

// checkWindowBudgets checks that every window's slow-request budget of
// run i adds up to its slow requests' latency, within 2%, and that some
// window has slow requests.
func checkWindowBudgets(t *testing.T, i int, run *budgetRun) {
	t.Helper()
	slowWindows := 0
	for _, w := range run.windows {
		r := w.Latency.Requests
		if r == nil || r.Slow == 0 {
			continue
		}
		slowWindows++
		var sum uint64
		for _, ns := range r.SlowBudgetNs {
			sum += ns
		}
		if math.Abs(float64(sum)-float64(r.SlowNs)) > 0.02*float64(r.SlowNs) {
			t.Errorf("run %d: window %d's slow requests took %d ns, their budget sums to %d ns: %v", i, w.Index, r.SlowNs, sum, r.SlowBudgetNs)
		}
	}
	if slowWindows == 0 {
		t.Errorf("run %d: no window line has slow requests", i)
	}
}

// budgetFigures is b as "runq_wait 97%, on_cpu 2%".
func budgetFigures(b []budgetPart) string {
	var s []string
	for _, p := range b {
		s = append(s, fmt.Sprintf("%s %.1f%%", p.Part, p.Share*100))
	}
	if len(s) == 0 {
		return "empty"
	}
	return strings.Join(s, ", ")
}

// causesNamed are the stall causes whose names text holds.
func causesNamed(text string) []string {
	var out []string
	for c := range stall.NumCauses {
		if strings.Contains(text, c.String()) {
			out = append(out, c.String())
		}
	}
	return out
}
