package main

// End-to-end tests of what numatrace must survive on a live machine:
// other tracers, being stopped, thread churn, its target's pid taken by
// another process, its cgroup removed, its reader gone, and signals while
// it records.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/numatrace/numatrace/internal/record"
	runpkg "github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/testutil"
)

var (
	stormOnce sync.Once
	stormPath string
	stormErr  error
)

// threadstorm builds testdata/threadstorm once per test run.
func threadstorm(t *testing.T) string {
	t.Helper()
	stormOnce.Do(func() {
		dir, err := os.MkdirTemp("", "numatrace-threadstorm")
		if err != nil {
			stormErr = err
			return
		}
		stormPath = filepath.Join(dir, "threadstorm")
		if out, err := exec.Command("go", "build", "-o", stormPath, "./testdata/threadstorm").CombinedOutput(); err != nil {
			stormErr = fmt.Errorf("go build threadstorm: %v: %s", err, out)
		}
	})
	if stormErr != nil {
		t.Fatal(stormErr)
	}
	return stormPath
}

// storm is a running threadstorm, held at its start line.
type storm struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startStorm(t *testing.T, cmd *exec.Cmd) *storm {
	t.Helper()
	s := &storm{cmd: cmd}
	s.stdin, _ = cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	s.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return s
}

// run lets the threads go and waits until all have run.
func (s *storm) run(t *testing.T, threads int) {
	t.Helper()
	fmt.Fprintln(s.stdin, "go")
	if line, err := s.out.ReadString('\n'); err != nil || line != fmt.Sprintf("done %d\n", threads) {
		t.Fatalf("threadstorm: %q, %v", line, err)
	}
}

// sigstop sends SIGSTOP to pid and waits until it is stopped.
func sigstop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for try := 0; try < 500; try++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d did not stop", pid)
}

// summaryOf unmarshals the last line of NDJSON output, the summary.
func summaryOf(t *testing.T, out []byte, v any) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	last := lines[len(lines)-1]
	var typ struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(last, &typ); err != nil || typ.Type != "summary" {
		t.Fatalf("last line is not the summary (%v): %.300s", err, last)
	}
	if err := json.Unmarshal(last, v); err != nil {
		t.Fatal(err)
	}
}

// causeSummary is the part of a summary line these tests read.
type causeSummary struct {
	LostEvents uint64   `json:"lost_events"`
	LostPerCPU []uint64 `json:"lost_events_per_cpu"`
	Evicted    uint64   `json:"histograms_evicted"`
	Note       string   `json:"note"`
	DurationNs uint64   `json:"duration_ns"`
	Causes     map[string]struct {
		Count   uint64 `json:"count"`
		TotalNs uint64 `json:"total_ns"`
	} `json:"causes"`
	Threads []struct {
		PID        uint32 `json:"pid"`
		TID        uint32 `json:"tid"`
		Comm       string `json:"comm"`
		Migrations struct {
			Total uint64 `json:"total"`
		} `json:"migrations"`
	} `json:"threads"`
}

// migrationsBut adds up the task migrations of the listed threads, but
// for those in skip.
func (s *causeSummary) migrationsBut(skip map[string]bool) uint64 {
	var n uint64
	for _, th := range s.Threads {
		if !skip[strconv.Itoa(int(th.TID))] {
			n += th.Migrations.Total
		}
	}
	return n
}

// mmapLockExact are the flags under which numatrace counts every
// mmap_lock acquisition of the target, as bpftraceMmapLock does, with
// these probes.
func mmapLockExact(pid int, probes string) []string {
	return []string{"--pid", strconv.Itoa(pid), "--causes", probes, "--mmap-lock-via", "tracepoints", "--min-stall", "0"}
}

// bpftraceChurn is bpftraceMmapLock, and sums the task migrations of
// the process's threads as each exits, until the process begins to exit
// (exit_group): the threads that die with it (the runtime's) are listed
// by tid instead. They die together, and one of them is the last: in
// the same microsecond numatrace drops the process, and its count of
// those threads' migrations is the luck of the race. The threads born
// before the test's kill(pid, 0), sent once every numatrace is attached,
// are listed too: numatrace counts only their migrations since it
// attached, the kernel's count (and so bpftrace's) is since they began,
// and a runtime thread that ran a worker exits early with both.
const bpftraceChurn = bpftraceMmapLock + `
tracepoint:syscalls:sys_enter_kill /args->pid == %[1]d && args->sig == 0/ { @attached = nsecs; }
tracepoint:syscalls:sys_enter_exit_group /pid == %[1]d/ { @ending = 1; }
tracepoint:sched:sched_process_exit /pid == %[1]d/ {
	if (@ending || curtask->start_time < @attached) { @tail[tid] = 1; } else { @mig = sum(curtask->se.nr_migrations); }
}
`

// keys are the keys of one of bpftrace's maps, once it has stopped.
func (b *bpftraceRun) keys(name string) map[string]bool {
	keys := map[string]bool{}
	for _, line := range strings.Split(b.out.String(), "\n") {
		var m struct {
			Type string                                `json:"type"`
			Data map[string]map[string]json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Type != "map" {
			continue
		}
		for k := range m.Data[name] {
			keys[k] = true
		}
	}
	return keys
}

// Three tracers on one workload at once: bpftrace, a numatrace streaming
// JSON, and a second numatrace that is stopped (SIGSTOP) for 3 s while
// 6,000 threads are created, move to another CPU, take the mmap_lock and
// exit, so that its 1 MiB ring buffer overflows. Both numatraces count
// exactly what bpftrace counts, acquisitions and migrations, from the
// kernel's maps; the stopped one counts the events it lost, says so in
// its text report and carries the count in the JSON of its recording;
// neither crashes, and both end when the workload exits.
func TestTracersAgreeExactlyUnderChurnAndSIGSTOP(t *testing.T) {
	testutil.RequireRoot(t)
	const threads = 6000
	wl := startStorm(t, exec.Command(threadstorm(t), "-threads", strconv.Itoa(threads), "-pairs", "6", "-move"))
	pid := wl.cmd.Process.Pid
	bt := startBpftrace(t, fmt.Sprintf(bpftraceChurn, pid))
	flags := append(mmapLockExact(pid, "mmap_lock,task_migration"), "--duration", "2m")
	streaming := startAttach(t, append(flags, "--json")...)
	rec := filepath.Join(t.TempDir(), "stopped.ntr")
	stopped := startAttach(t, append(flags, "--min-event", "mmap_lock=0", "--ringbuf-mib", "1", "--record", rec)...)
	sigstop(t, stopped.cmd.Process.Pid)
	// Both are attached: the threads alive now are older than both.
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatal(err)
	}
	resume := time.Now().Add(3 * time.Second)
	start := time.Now()
	wl.run(t, threads)
	churn := float64(threads) / time.Since(start).Seconds()
	time.Sleep(time.Until(resume))
	syscall.Kill(stopped.cmd.Process.Pid, syscall.SIGCONT)
	wl.stdin.Close() // the workload exits; both numatraces end on their own
	streaming.wait(t, 60*time.Second)
	stopped.wait(t, 60*time.Second)
	maps := bt.stop(t)

	want, moves, tail := maps["@n"], maps["@mig"], bt.keys("@tail")
	t.Logf("%d threads at %.0f threads/s; bpftrace counted %.0f acquisitions, %.0f migrations (and %d threads older than the attach or that exited with the process)",
		threads, churn, want, moves, len(tail))
	if want < 12*threads || moves < threads {
		t.Fatalf("bpftrace saw %.0f acquisitions and %.0f migrations from %d threads of 6 mmap+munmap pairs and a move each",
			want, moves, threads)
	}
	var live causeSummary
	summaryOf(t, streaming.stdout.Bytes(), &live)
	if got, mig := live.Causes["mmap_lock"].Count, live.migrationsBut(tail); float64(got) != want || float64(mig) != moves || live.LostEvents != 0 {
		t.Errorf("streaming numatrace: %d acquisitions, %d migrations, %d lost; bpftrace %.0f and %.0f, and nothing lost",
			got, mig, live.LostEvents, want, moves)
	}

	// The stopped one: its text report says what it lost, twice...
	text := strings.Join(proseLines(stopped.stdout.String()), "\n")
	m := regexp.MustCompile(`(?m)^probes .* \| lost events (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no lost-events count in the report's second line:\n%.500s", text)
	}
	lost, _ := strconv.ParseUint(m[1], 10, 64)
	if lost == 0 || !strings.Contains(text, fmt.Sprintf("\nWARNING: %d events were dropped by a full ring buffer; totals and histograms below are still exact\n", lost)) {
		t.Errorf("stopped numatrace lost %d events, and its report must warn of them:\n%.500s", lost, text)
	}
	// ...and the JSON of its recording carries the same count, with
	// exact totals.
	out, err := exec.Command(binary(t), "report", "--json", rec).Output()
	if err != nil {
		t.Fatalf("report --json of the stopped run's recording: %v", err)
	}
	var fromRec causeSummary
	summaryOf(t, out, &fromRec)
	var perCPU uint64
	for _, n := range fromRec.LostPerCPU {
		perCPU += n
	}
	if fromRec.LostEvents != lost || perCPU != lost {
		t.Errorf("the recording's JSON: %d lost (%d over its CPUs); the text report said %d", fromRec.LostEvents, perCPU, lost)
	}
	if got, mig := fromRec.Causes["mmap_lock"].Count, fromRec.migrationsBut(tail); float64(got) != want || float64(mig) != moves {
		t.Errorf("stopped numatrace: %d acquisitions, %d migrations; bpftrace %.0f and %.0f", got, mig, want, moves)
	}
	t.Logf("stopped numatrace lost %d events and still counted %d", lost, fromRec.Causes["mmap_lock"].Count)
	// The recording shows what the live run showed.
	if got, err := exec.Command(binary(t), "report", rec).Output(); err != nil || string(got) != stopped.stdout.String() {
		t.Errorf("report of the recording (%v) differs from the live text:\nlive:\n%.800s\nreport:\n%.800s", err, text, got)
	}
}

// bpftraceReuse is bpftraceMmapLock, and counts the acquisitions made
// with the same pid by the newcomer (comm "newcomer") that took it.
const bpftraceReuse = bpftraceMmapLock + `
tracepoint:mmap_lock:mmap_lock_acquire_returned /pid == %[1]d && comm == "newcomer"/ { @newcomer = count(); }
`

// startAtPID starts name as a new process with pid pid, which must be
// free: the kernel gives the next process ns_last_pid+1. Another process
// may fork in between and take it: then it tries again, once that one has
// exited.
func startAtPID(t *testing.T, pid int, name string, args ...string) *storm {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			time.Sleep(10 * time.Millisecond) // taken meanwhile
			continue
		}
		err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0)
		testutil.RequireFeature(t, err == nil, fmt.Sprintf("choosing the next pid (ns_last_pid): %v", err))
		cmd := exec.Command(name, args...)
		s := &storm{cmd: cmd}
		s.stdin, _ = cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		s.out = bufio.NewReader(stdout)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			return s
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatalf("could not start a process with pid %d in 20 s", pid)
	return nil
}

// The target exits and a newcomer takes its pid at once, before
// numatrace can react (it is stopped meanwhile, as a tracer of a machine
// in trouble may be): numatrace ends on the target's exit, and counts
// exactly the target's acquisitions, none of the newcomer's.
func TestAttachStopsOnPIDReuseAndSkipsTheNewcomer(t *testing.T) {
	testutil.RequireRoot(t)
	bin := threadstorm(t)
	newcomer := filepath.Join(t.TempDir(), "newcomer")
	if b, err := os.ReadFile(bin); err != nil || os.WriteFile(newcomer, b, 0o755) != nil {
		t.Fatalf("copy threadstorm: %v", err)
	}
	target := startStorm(t, exec.Command(bin, "-threads", "20", "-pairs", "50"))
	pid := target.cmd.Process.Pid
	bt := startBpftrace(t, fmt.Sprintf(bpftraceReuse, pid))
	nt := startAttach(t, append(mmapLockExact(pid, "mmap_lock"), "--json", "--duration", "60s")...)
	target.run(t, 20)

	sigstop(t, nt.cmd.Process.Pid)
	target.cmd.Process.Kill()
	target.cmd.Wait()
	next := startAtPID(t, pid, newcomer, "-threads", "20", "-pairs", "50")
	next.run(t, 20)
	syscall.Kill(nt.cmd.Process.Pid, syscall.SIGCONT)
	nt.wait(t, 15*time.Second) // long before --duration: the target is gone
	next.stdin.Close()
	next.cmd.Wait()
	maps := bt.stop(t)

	var sum causeSummary
	summaryOf(t, nt.stdout.Bytes(), &sum)
	t.Logf("bpftrace: target %.0f acquisitions, newcomer %.0f at the same pid; numatrace %d; note %q",
		maps["@n"], maps["@newcomer"], sum.Causes["mmap_lock"].Count, sum.Note)
	if maps["@newcomer"] < 20*100 {
		t.Fatalf("the newcomer made %.0f acquisitions with pid %d; want its 20 threads' 100 each", maps["@newcomer"], pid)
	}
	if want := fmt.Sprintf("target pid %d (threadstorm) exited", pid); !strings.Contains(sum.Note, want) {
		t.Errorf("note %q does not say %q", sum.Note, want)
	}
	if got := sum.Causes["mmap_lock"].Count; float64(got) != maps["@n"] {
		t.Errorf("numatrace counted %d acquisitions; the target made %.0f (and the newcomer %.0f)", got, maps["@n"], maps["@newcomer"])
	}
	for _, th := range sum.Threads {
		if th.Comm == "newcomer" {
			t.Errorf("the newcomer's thread %d is in the report", th.TID)
		}
	}
}

// Its cgroup removed under it (the processes gone, then the directory),
// numatrace --cgroup ends by itself: the report is printed, the note
// says the target went, and the exit status is 0.
func TestAttachEndsWhenItsCgroupIsRemoved(t *testing.T) {
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-removed", 0)
	sleeper := exec.Command("sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec sleep 600", cg))
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs")); strings.TrimSpace(string(b)) == strconv.Itoa(sleeper.Process.Pid) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	nt := startAttach(t, "--cgroup", "memory/numatrace-e2e-removed", "--json", "--duration", "60s")
	sleeper.Process.Kill()
	sleeper.Wait()
	var err error
	for i := 0; i < 100; i++ { // the cgroup is busy until the kernel is done with the process
		if err = os.Remove(cg); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("remove the cgroup: %v", err)
	}
	nt.wait(t, 15*time.Second) // long before --duration
	_, _, sum := parseNDJSON(t, nt.stdout.Bytes())
	if want := "target cgroup " + cg + " exited"; !strings.Contains(sum.Note, want) {
		t.Errorf("note %q does not say %q", sum.Note, want)
	}
	for _, line := range strings.Split(strings.TrimSpace(nt.stderr.String()), "\n") {
		if !strings.HasPrefix(line, "numatrace: ") {
			t.Errorf("stderr line %q", line)
		}
	}
}

// wholeRecording checks that path ends with its end record, every block
// intact, and that it replays to that end.
func wholeRecording(t *testing.T, path string) {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var end *runpkg.End
	var final bool
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch it.Kind {
		case record.ItemEnd:
			end = it.End
		case record.ItemSnapshot:
			final = final || it.Snapshot.Final
		}
	}
	r.Close()
	if r.Truncated() || len(r.Warnings()) > 0 || end == nil || !final {
		t.Fatalf("%s: cut short %v, warnings %q, end record %v, final snapshot %v", path, r.Truncated(), r.Warnings(), end != nil, final)
	}
	out, err := exec.Command(binary(t), "replay", "--fast", "--json", path).Output()
	if err != nil {
		t.Fatalf("replay %s: %v", path, err)
	}
	var sum causeSummary
	summaryOf(t, out, &sum)
	if sum.DurationNs != end.DurationNs || strings.Contains(sum.Note, "cut short") {
		t.Errorf("replay: duration %d ns, note %q; the end record says %d ns", sum.DurationNs, sum.Note, end.DurationNs)
	}
}

// SIGTERM (a service manager, the kubelet) or SIGINT while recording:
// numatrace exits 0 and the recording is whole, with its end record.
func TestRecordingWholeOnSIGTERMAndSIGINT(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		sig  syscall.Signal
		args []string
	}{
		{syscall.SIGTERM, []string{"record", "--window", "200ms"}},
		{syscall.SIGTERM, []string{"attach", "--no-tui", "--json", "--window", "200ms"}},
		{syscall.SIGINT, []string{"record", "--window", "200ms"}},
	} {
		rec := filepath.Join(t.TempDir(), "rec.ntr")
		out := "-o"
		if c.args[0] == "attach" {
			out = "--record"
		}
		run := startTracing(t, c.args[0], append(c.args[1:], out, rec, "--duration", "60s")...)
		exec.Command("sh", "-c", "for i in 1 2 3 4; do taskset -c $((i%2)) true; done").Run()
		time.Sleep(time.Second) // windows close, blocks are written
		run.cmd.Process.Signal(c.sig)
		run.wait(t, 15*time.Second)
		wholeRecording(t, rec)
	}
}

// A reader of stdout that goes away (`numatrace ... | head -1`, or a
// reader that closes before the report) ends the run as Ctrl-C does:
// exit status 0, not death by SIGPIPE, and the recording whole.
func TestBrokenStdoutEndsTheRunCleanly(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		name     string
		args     []string
		readLine bool // read the first line, as head -1 does, then close
	}{
		{"json | head -1", []string{"--json", "--window", "100ms", "--duration", "60s"}, true},
		{"text | true", []string{"--duration", "1s"}, false},
	} {
		rec := filepath.Join(t.TempDir(), "rec.ntr")
		ready := filepath.Join(t.TempDir(), "ready")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary(t), append([]string{"attach", "--no-tui", "--ready-file", ready, "--record", rec}, c.args...)...)
		var stderr syncBuffer
		cmd.Stdout, cmd.Stderr = pw, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited })
		if c.readLine {
			if line, err := bufio.NewReader(pr).ReadString('\n'); err != nil || !strings.HasPrefix(line, "{") {
				t.Fatalf("%s: first line %q, %v; stderr %q", c.name, line, err, stderr.String())
			}
		} else {
			for i := 0; ; i++ {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if i == 1500 {
					t.Fatalf("%s: numatrace never became ready; stderr %q", c.name, stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		pr.Close()
		select {
		case <-exited:
			if waitErr != nil {
				t.Fatalf("%s: numatrace: %v; stderr %q", c.name, waitErr, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: numatrace still runs 15 s after its reader went away", c.name)
		}
		wholeRecording(t, rec)
	}
}
