package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/psi"
)

const numatrace = "/bin/numatrace"

// setups prepare the guest for a scenario; each returns its undo.
var setups = map[string]func() (func(), error){
	"zonereclaim1": func() (func(), error) { return sysctls("/proc/sys/vm/zone_reclaim_mode", "1") },
	"zonereclaim0": func() (func(), error) { return sysctls("/proc/sys/vm/zone_reclaim_mode", "0") },
	// Nothing may move the memory to the thread that uses it.
	"crossnode": func() (func(), error) { return sysctls("/proc/sys/kernel/numa_balancing", "0") },
	// Leave kswapd 1% of each CPU instead of RT throttling's default 5%,
	// and wake it as late as the kernel allows.
	"directreclaim": func() (func(), error) {
		return sysctls("/proc/sys/kernel/sched_rt_runtime_us", "990000", "/proc/sys/vm/watermark_scale_factor", "1")
	},
	"thp": func() (func(), error) {
		return sysctls("/sys/kernel/mm/transparent_hugepage/enabled", "always",
			"/sys/kernel/mm/transparent_hugepage/defrag", "always")
	},
	"memoryhigh": setupMemoryHigh,
}

// sysctls writes path, value pairs in order; the undo restores them in
// reverse, and a failed write undoes those before it.
func sysctls(pairs ...string) (func(), error) {
	var undos []func()
	undo := func() {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		u, err := sysctl(pairs[i], pairs[i+1])
		if err != nil {
			undo()
			return nil, err
		}
		undos = append(undos, u)
	}
	return undo, nil
}

func sysctl(path, v string) (func(), error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	prev := strings.TrimSpace(string(old))
	if i := strings.IndexByte(prev, '['); i >= 0 { // THP files: "always [madvise] never"
		prev = prev[i+1 : strings.IndexByte(prev, ']')]
	}
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return func() { os.WriteFile(path, []byte(prev), 0o644) }, nil
}

// runScenario runs one scenario under numatrace and gathers what the host
// checks: numatrace's summary and per-thread stall aggregates, the
// workload's own report, and /proc/vmstat before and after.
func runScenario(name string) (map[string]any, error) {
	var err error
	res := map[string]any{"scenario": name, "kernel": release()}
	if name == "probes" {
		return runProbes(res)
	}
	if setup, ok := setups[name]; ok {
		undo, err := setup()
		if err != nil {
			return nil, err
		}
		defer undo()
	}
	prepare(name)
	dropCaches()
	// What doctor says of the machine as the scenario set it up.
	if res["doctor"], err = runDoctor(); err != nil {
		return nil, err
	}

	recording := "/tmp/" + name + ".ntr"
	nt, err := startTracer(name, recording, res)
	if err != nil {
		return nil, err
	}
	defer nt.out.Close()
	// The group's PSI from here, with numatrace attached, to the end of
	// the workload: its process is in the group only in between.
	pr, err := startPressure(name)
	if err != nil {
		nt.cmd.Process.Kill()
		nt.cmd.Wait()
		return nil, err
	}
	before := vmstat()
	work, err := startScenarioWorkload(name)
	if err != nil {
		return nil, err
	}
	if err := doctorDuringWorkload(name, work, res); err != nil {
		work.cmd.Process.Kill()
		nt.cmd.Process.Kill()
		work.cmd.Wait()
		nt.cmd.Wait()
		return nil, fmt.Errorf("doctor on the bind workload: %v: %s", err, work.stderr.String())
	}
	if err := runWait(work.cmd, 150*time.Second); err != nil {
		nt.cmd.Process.Kill()
		nt.cmd.Wait()
		return nil, fmt.Errorf("workload: %v: %s", err, work.stderr.String())
	}
	res["workload_ms"] = time.Since(work.start).Milliseconds()
	time.Sleep(300 * time.Millisecond) // let the last events reach the ring buffer
	after := vmstat()
	var spans []psi.Span
	if pr != nil {
		spans = pr.finish()
	}
	nt.cmd.Process.Signal(syscall.SIGINT)
	if err := runWait(nt.cmd, 60*time.Second); err != nil {
		return nil, fmt.Errorf("numatrace: %v: %s", err, nt.stderr.String())
	}
	if err := gatherResults(res, work, before, after); err != nil {
		return nil, err
	}
	if pr != nil {
		if res["pressure"], err = comparePressure(spans, "/tmp/nt.json", work.cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	if wantRecordings() {
		if err := sendRecording(name, recording); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// sendRecording hands the scenario's recording to the host on the console.
func sendRecording(name, recording string) error {
	b, err := os.ReadFile(recording)
	if err != nil {
		return err
	}
	emit("NTFILE", map[string]string{"scenario": name, "kernel": release(), "b64": base64.StdEncoding.EncodeToString(b)})
	return nil
}

// runProbes adds what numatrace probes finds on this kernel to res.
func runProbes(res map[string]any) (map[string]any, error) {
	var stderr bytes.Buffer
	c := exec.Command(numatrace, "probes", "--json")
	c.Stderr = &stderr
	out, err := output(c, 90*time.Second)
	if err != nil {
		return nil, fmt.Errorf("numatrace probes: %v: %s", err, stderr.String())
	}
	var probes any
	if err := json.Unmarshal(out, &probes); err != nil {
		return nil, fmt.Errorf("probes output: %v", err)
	}
	res["probes"] = probes
	return res, nil
}

// tracer is numatrace attached for a scenario, its NDJSON in /tmp/nt.json.
type tracer struct {
	cmd    *exec.Cmd
	out    *os.File
	stderr *bytes.Buffer
}

// startTracer attaches numatrace, recording to recording, off the CPUs
// the scenario's workload needs, notes its CPUs in res and waits until it
// is ready. The caller closes out.
func startTracer(name, recording string, res map[string]any) (*tracer, error) {
	ready := "/tmp/ready"
	os.Remove(ready)
	ntOut, err := os.Create("/tmp/nt.json")
	if err != nil {
		return nil, err
	}
	nt := &tracer{out: ntOut, stderr: &bytes.Buffer{}}
	nt.cmd = exec.Command(numatrace, "attach", "--no-tui", "--json", "--ready-file", ready,
		"--duration", "120s", "--min-event", "mmap_lock=1ms", "--include-self", "--record", recording,
		// Migrations of 100 µs and more carry their stacks: a few hundred
		// in the misplaced scenario, checked on every kernel.
		"--stacks-min", "100us")
	nt.cmd.Stdout, nt.cmd.Stderr = ntOut, nt.stderr
	if err := startUnbalanced(nt.cmd, ntCPUs[name]...); err != nil {
		ntOut.Close()
		return nil, err
	}
	res["numatrace_cpus"] = cpusAllowed(nt.cmd.Process.Pid)
	if err := waitFile(ready, 60*time.Second); err != nil {
		why := stuck(nt.cmd.Process.Pid)
		nt.cmd.Process.Kill()
		ntOut.Close()
		return nil, fmt.Errorf("numatrace not ready: %v: %s\nwhere it was:\n%s", err, nt.stderr.String(), why)
	}
	return nt, nil
}

// scenarioWorkload is the scenario's workload, /init scenario NAME, running.
type scenarioWorkload struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	start          time.Time
}

func startScenarioWorkload(name string) (*scenarioWorkload, error) {
	work := exec.Command("/init", "scenario", name)
	if name == "crossnode" {
		// Its worker is a loop the Go runtime must not preempt: each
		// preemption of a locked thread wakes another of the process's
		// threads to hand it back, on node 0, and doctor weighs that.
		work.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	}
	w := &scenarioWorkload{cmd: work, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	work.Stdout, work.Stderr = w.stdout, w.stderr
	w.start = time.Now()
	os.Remove(BindReady)
	start := work.Start
	if cpus, ok := workCPUs[name]; ok {
		start = func() error { return startUnbalanced(work, cpus...) }
	}
	if err := start(); err != nil {
		return nil, err
	}
	os.Remove(CrossReady)
	return w, nil
}

// doctorDuringWorkload runs doctor on the bind and crossnode workloads'
// process while it is in the state doctor must name.
func doctorDuringWorkload(name string, work *scenarioWorkload, res map[string]any) error {
	var err error
	switch name {
	case "bind":
		// The process-wide binding doctor must name, while it holds memory.
		if err = waitFile(BindReady, 60*time.Second); err == nil {
			res["doctor_pid"], err = runDoctor("--pid", fmt.Sprint(work.cmd.Process.Pid))
		}
	case "crossnode":
		// While the worker on node 1 reads the memory on node 0; the
		// CPU time per node is measured over a second.
		if err = waitFile(CrossReady, 60*time.Second); err == nil {
			res["doctor_pid"], err = runDoctor("--pid", fmt.Sprint(work.cmd.Process.Pid), "--interval", "1s")
			work.cmd.Process.Signal(CrossDone)
		}
	}
	return err
}

// gatherResults adds the workload's report, the vmstat delta and
// numatrace's digested output to res.
func gatherResults(res map[string]any, work *scenarioWorkload, before, after map[string]int64) error {
	var workload any
	if err := json.Unmarshal(bytes.TrimSpace(work.stdout.Bytes()), &workload); err != nil {
		return fmt.Errorf("workload report %q: %v", work.stdout.String(), err)
	}
	res["workload"] = workload
	res["vmstat_delta"] = delta(before, after)
	stalls, summary, err := digest("/tmp/nt.json")
	if err != nil {
		return err
	}
	res["stalls"], res["summary"] = stalls, summary
	return nil
}

// wantRecordings reports whether the host asked for the recordings back
// (nt.record=1): they refresh the sample recordings in testdata.
func wantRecordings() bool {
	b, _ := os.ReadFile("/proc/cmdline")
	return strings.Contains(string(b), "nt.record=1")
}

// prepare tunes the guest so a short workload shows the effect.
func prepare(name string) {
	if name == "misplaced" {
		// Scan at once and often: the default waits a second and then
		// scans slowly, too slow for a short test under emulation.
		for path, v := range map[string]string{
			"/sys/kernel/debug/sched/numa_balancing/scan_delay_ms":      "0",
			"/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms": "100",
			"/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms": "400",
			"/proc/sys/kernel/numa_balancing_scan_delay_ms":             "0",
			"/proc/sys/kernel/numa_balancing_scan_period_min_ms":        "100",
			"/proc/sys/kernel/numa_balancing_scan_period_max_ms":        "400",
			"/proc/sys/kernel/numa_balancing":                           "1",
		} {
			os.WriteFile(path, []byte(v), 0o644)
		}
	}
}

func dropCaches() {
	syscall.Sync()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644)
}

func waitFile(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not appear within %s", path, limit)
}

func vmstat() map[string]int64 {
	out := map[string]int64{}
	b, _ := os.ReadFile("/proc/vmstat")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			out[k] = n
		}
	}
	return out
}

func delta(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// stallAgg sums numatrace's stall lines per thread and cause.
type stallAgg struct {
	TID         uint32           `json:"tid"`
	PID         uint32           `json:"pid"`
	Comm        string           `json:"comm"`
	Cause       string           `json:"cause"`
	Count       int64            `json:"count"`
	TotalNs     int64            `json:"total_ns"`
	Pages       int64            `json:"pages"`
	Reasons     map[string]int64 `json:"reasons,omitempty"`      // numa_migration, memstall_wait...: events per reason
	ReasonPages map[string]int64 `json:"reason_pages,omitempty"` // numa_migration: pages per reason
	ReasonNs    map[string]int64 `json:"reason_ns,omitempty"`    // time per reason
	Moves       map[string]int64 `json:"moves,omitempty"`        // numa_task_move: "move 0->1"
}

// digest reads numatrace's NDJSON: stall lines summed per thread and cause
// (the whole stream would swamp the console), and the summary line.
func digest(path string) ([]*stallAgg, any, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var aggs stallAggs
	var summary any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l streamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, nil, fmt.Errorf("numatrace output: %v", err)
		}
		switch l.Type {
		case "summary":
			json.Unmarshal(sc.Bytes(), &summary)
		case "stall":
			aggs.of(l).add(l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return aggs.inOrder(), summary, nil
}

// streamLine is what digest reads of one line of numatrace's NDJSON.
type streamLine struct {
	Type    string `json:"type"`
	TsNs    uint64 `json:"ts_ns"` // the stall's end
	TID     uint32 `json:"tid"`
	PID     uint32 `json:"pid"`
	Comm    string `json:"comm"`
	Cause   string `json:"cause"`
	DurNs   int64  `json:"dur_ns"`
	Pages   int64  `json:"pages"`
	Reason  string `json:"reason"`
	Move    string `json:"move"`
	SrcNode int    `json:"src_node"`
	DstNode int    `json:"dst_node"`
	Pass    int    `json:"pass"`
	Nested  bool   `json:"nested"`
}

// stallAggs are the stall aggregates by thread and cause, in the order
// their first line came.
type stallAggs struct {
	byKey map[string]*stallAgg
	order []string
}

// of is the aggregate of l's thread and cause, new if l is its first line.
func (s *stallAggs) of(l streamLine) *stallAgg {
	key := fmt.Sprintf("%d/%s", l.TID, l.Cause)
	a := s.byKey[key]
	if a == nil {
		if s.byKey == nil {
			s.byKey = map[string]*stallAgg{}
		}
		a = &stallAgg{TID: l.TID, PID: l.PID, Comm: l.Comm, Cause: l.Cause}
		s.byKey[key] = a
		s.order = append(s.order, key)
	}
	return a
}

func (s *stallAggs) inOrder() []*stallAgg {
	out := make([]*stallAgg, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, s.byKey[k])
	}
	return out
}

// add counts stall line l.
func (a *stallAgg) add(l streamLine) {
	// A compaction attempt streams one line per zone pass; it is
	// one stall, as compact_stall counts it.
	if l.Cause != "compaction" || l.Pass <= 1 {
		a.Count++
	}
	a.TotalNs += l.DurNs
	a.Pages += l.Pages
	if l.Reason != "" {
		if a.Reasons == nil {
			a.Reasons = map[string]int64{}
		}
		a.Reasons[l.Reason]++
		if a.ReasonPages == nil {
			a.ReasonPages = map[string]int64{}
		}
		a.ReasonPages[l.Reason] += l.Pages
		if a.ReasonNs == nil {
			a.ReasonNs = map[string]int64{}
		}
		a.ReasonNs[l.Reason] += l.DurNs
	}
	if l.Move != "" {
		if a.Moves == nil {
			a.Moves = map[string]int64{}
		}
		a.Moves[fmt.Sprintf("%s %d->%d", l.Move, l.SrcNode, l.DstNode)]++
	}
}

// ntCPUs keeps numatrace off the CPUs a scenario's workload needs to
// itself. In the zone_reclaim scenarios the workload, on CPU 0, must be
// node 0's only allocator: node reclaim runs only for tasks on a CPU of
// the node, one task at a time (PGDAT_RECLAIM_LOCKED), and an allocation
// that finds another task in node 0's reclaim goes to node 1 without
// reclaiming (NODE_RECLAIM_NOSCAN). Left to run anywhere, numatrace,
// streaming the workload's events to tmpfs, reclaimed node 0 itself in 5
// of 20 runs (32 or 64 pages): a workload that meets it there leaves
// node 0 (one make vmtest run ended with 43508 pages on N0, 5644 on N1). On
// CPU 1 it cannot reclaim node 0 at all and allocates from node 1, where
// memory is free.
//
// memoryhigh's workload has CPU 1 to itself (workCPUs), numatrace CPU 0.
var ntCPUs = map[string][]int{
	"zonereclaim1": {1},
	"zonereclaim0": {1},
	"memoryhigh":   {0},
}

// workCPUs starts a scenario's workload on these CPUs, unbalanced as
// numatrace is. memoryhigh's group must be busy on one CPU only: PSI
// weighs each CPU's stall time by the group's busy time there, so a
// process that moved between the CPUs would stall for longer than its
// group's "some" says. Nor may NUMA balancing migrate its pages: those
// are stalls numatrace times and PSI does not count.
var workCPUs = map[string][]int{"memoryhigh": {1}}

// startUnbalanced starts c with a memory policy that NUMA balancing leaves
// alone (a bind to every node, without migrate-on-fault), and on cpus if
// any are given. numatrace leaves itself out of its trace, but the
// kernel's counters do not: its own page migrations would make the two
// disagree.
func startUnbalanced(c *exec.Cmd, cpus ...int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the child inherits this thread's policy and CPUs; the thread then exits
		var all unix.CPUSet
		all.Set(0)
		all.Set(1)
		if err := unix.SetMemPolicy(unix.MPOL_BIND, &all); err != nil {
			errc <- fmt.Errorf("set_mempolicy: %w", err)
			return
		}
		if len(cpus) > 0 {
			var set unix.CPUSet
			for _, cpu := range cpus {
				set.Set(cpu)
			}
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- fmt.Errorf("sched_setaffinity %v: %w", cpus, err)
				return
			}
		}
		errc <- c.Start()
	}()
	return <-errc
}

// cpusAllowed is pid's Cpus_allowed_list.
func cpusAllowed(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// runDoctor runs numatrace doctor --json with args and returns its report.
func runDoctor(args ...string) (any, error) {
	var stderr bytes.Buffer
	c := exec.Command(numatrace, append([]string{"doctor", "--json", "--interval", "0"}, args...)...)
	c.Stderr = &stderr
	out, err := output(c, 90*time.Second)
	if err != nil {
		return nil, fmt.Errorf("numatrace doctor: %v: %s", err, stderr.String())
	}
	var rep any
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("doctor output: %v", err)
	}
	return rep, nil
}
