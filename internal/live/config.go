//go:build linux

// Package live runs numatrace against the running kernel: attach and
// record (a target, a front end, an optional recording and latency
// source) and serve (the Prometheus exporter). It wires the tracer, the
// session, the engine and the front ends together; cmd/numatrace only
// parses flags into the configs here.
package live

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/latency/source"
	"github.com/numatrace/numatrace/internal/outfile"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tracer"
)

// BadInput is an error in what the user asked for, not in the machine:
// the command exits 2 with its one line.
type BadInput struct{ Err error }

func (b *BadInput) Error() string { return b.Err.Error() }
func (b *BadInput) Unwrap() error { return b.Err }

func badInput(format string, a ...any) error { return &BadInput{fmt.Errorf(format, a...)} }

// IsBadInput reports whether err is the user's input.
func IsBadInput(err error) bool {
	var b *BadInput
	return errors.As(err, &b)
}

// Every page fault and mmap takes the mmap_lock. An acquisition under a
// microsecond did not wait (the tracing itself costs a few hundred ns), so
// it is not a stall; waits under 10µs are counted but not streamed. A
// run-queue wait under 10µs is the scheduler working as it should; one
// under 100µs is counted but not streamed (the spike analysis works on
// streamed stalls, and waits that short barely move a p99).
const (
	DefaultMinStall = "mmap_lock=1us,runq_wait=10us"
	DefaultMinEvent = "mmap_lock=10us,runq_wait=100us"
)

// Trace is what attach, record and serve share: what the kernel counts
// and streams, and how it is windowed.
type Trace struct {
	Window     time.Duration
	MinEvent   string // stream only stalls this long: DUR or cause=DUR,...
	MinStall   string // ignore shorter stalls entirely
	RingBufMiB int
	BTF        string // kernel BTF file; "" for the running kernel's
	ReadyFile  string // created once tracing (or serving) has started
	// Causes, if set, attaches only these probes (probe or cause names);
	// NoCauses leaves these out.
	Causes, NoCauses string
	MmapLockVia      string // auto, contention or tracepoints
	// Stacks takes the kernel and user stacks of every stall at least
	// StacksMin long (--stacks, --stacks-min).
	Stacks    bool
	StacksMin time.Duration

	minEventNs, minStallNs [stall.NumCauses]uint64
	skip                   map[tracer.ProbeName]bool
	mmapLockVia            string // the tracer's spelling of MmapLockVia
}

// check validates and parses the shared flags; command names them.
func (t *Trace) check(command string) error {
	var err error
	if t.minEventNs, err = stall.ParseDurations(t.MinEvent); err != nil {
		return badInput("%s: --min-event: %v", command, err)
	}
	if t.minStallNs, err = stall.ParseDurations(t.MinStall); err != nil {
		return badInput("%s: --min-stall: %v", command, err)
	}
	if t.Window < 10*time.Millisecond {
		return badInput("%s: --window must be at least 10ms", command)
	}
	if t.Stacks && t.StacksMin <= 0 {
		return badInput("%s: --stacks-min must be above 0 (turn stacks off with --stacks=false)", command)
	}
	if rb := t.RingBufMiB; rb <= 0 || rb&(rb-1) != 0 || rb > 1024 {
		return badInput("%s: --ringbuf-mib must be a power of two up to 1024", command)
	}
	if t.mmapLockVia, err = parseMmapLockVia(command, t.MmapLockVia); err != nil {
		return err
	}
	if t.Causes != "" && t.NoCauses != "" {
		return badInput("%s: give --causes or --no-causes, not both", command)
	}
	if t.skip, err = tracer.SkipProbes(t.Causes, t.NoCauses); err != nil {
		return badInput("%s: %v", command, err)
	}
	// Refused before anything is traced, as -o is; created once it is.
	if t.ReadyFile != "" {
		if err := outfile.Check(t.ReadyFile); err != nil {
			return badInput("%s: --ready-file: %v", command, err)
		}
	}
	return nil
}

// stacksMinNs is the tracer's StacksMinNs: 0 without stacks.
func (t *Trace) stacksMinNs() uint64 {
	if !t.Stacks {
		return 0
	}
	return uint64(t.StacksMin)
}

// parseMmapLockVia turns --mmap-lock-via into the tracer's spelling.
func parseMmapLockVia(command, v string) (string, error) {
	switch v {
	case "auto", "":
		return tracer.MmapLockAuto, nil
	case tracer.MmapLockContention, tracer.MmapLockTracepoints:
		return v, nil
	}
	return "", badInput("%s: --mmap-lock-via must be auto, contention or tracepoints", command)
}

// Attach is one attach or record run.
type Attach struct {
	Command string // "attach" or "record": messages name it
	Version string // numatrace's, for the recording
	Trace   Trace

	PID, TID int
	// Children traces the --pid process's descendants too: those alive
	// at attach and those forked later (--children, -f).
	Children    bool
	Cgroup      string
	Pod         string // NAMESPACE/NAME, NAME or UID: its cgroup (kubecg)
	Container   string // a container ID or a unique prefix: its cgroup
	Duration    time.Duration
	IncludeSelf bool

	NoTUI, JSON bool
	Top         int  // threads in the text report
	Quiet       bool // record: no report, one line at the end

	Latency    source.Config
	SpikeK     float64
	SpikeFloor time.Duration
	SLO        time.Duration  // a window over it is a spike; 0: judged against the recent normal windows
	SpikeOn    string         // p99, p999 or max
	spikeOn    run.Percentile // SpikeOn, as Check reads it
	// RequestStalls breaks each request timed in the kernel down by the
	// stalls inside it (--latency-uprobe).
	RequestStalls bool
	// RequestTimes splits the rest of its time by the serving thread's
	// own counters (--request-times): its budget.
	RequestTimes bool
	// RunqWait times the target's run-queue waits while a latency source
	// is set (runq_wait); it needs a target.
	RunqWait bool

	RecordTo    string // attach --record, record -o
	Force       bool   // --force: RecordTo may replace an existing recording
	Flight      string // record --flight-recorder: a size or a duration
	DumpOnSpike bool

	flightBytes int
	flightAge   time.Duration
}

// Check validates everything that can be checked before the kernel is
// touched; its errors are BadInput.
func (a *Attach) Check() error {
	if a.Command == "record" && a.RecordTo == "" {
		return badInput("record: -o FILE is required")
	}
	if err := a.checkOverwrite(); err != nil {
		return err
	}
	if err := a.Trace.check(a.Command); err != nil {
		return err
	}
	if a.Duration < 0 {
		return badInput("%s: --duration must not be negative", a.Command)
	}
	given := 0
	for _, set := range []bool{a.PID != 0, a.TID != 0, a.Cgroup != "", a.Pod != "", a.Container != ""} {
		if set {
			given++
		}
	}
	if given > 1 {
		return badInput("%s: give at most one of --pid, --tid, --cgroup, --pod and --container", a.Command)
	}
	if a.Children && a.PID == 0 {
		return badInput("%s: --children (-f) follows the descendants of a --pid process: give --pid", a.Command)
	}
	if !(a.SpikeK > 1) || math.IsInf(a.SpikeK, 1) { // NaN too
		return badInput("%s: --spike-k must be above 1", a.Command)
	}
	if a.SLO < 0 {
		return badInput("%s: --slo must not be negative", a.Command)
	}
	if a.SpikeOn == "" {
		a.SpikeOn = run.P99.String()
	}
	on, ok := run.ParsePercentile(a.SpikeOn)
	if !ok {
		return badInput("%s: --spike-on takes p99, p999 or max, not %q", a.Command, a.SpikeOn)
	}
	a.spikeOn = on
	if a.PID != 0 {
		// One process (and with --children its descendants, which serve
		// what it accepts or listens on: PostgreSQL's backends, nginx's
		// workers): its own sockets time its requests.
		a.Latency.DefaultKernel()
	}
	if a.Latency.Mode == source.ModeKernel && a.PID == 0 {
		return badInput("%s: --latency kernel times the sockets of one process (and its children, with --children): give --pid", a.Command)
	}
	if (a.SLO > 0 || a.spikeOn != run.P99) && !a.Latency.Set() {
		return badInput("%s: --slo and --spike-on need a latency source (--latency-file, --latency-prom or --latency-uprobe)", a.Command)
	}
	if err := a.Latency.Check(); err != nil {
		return badInput("%s: %v", a.Command, err)
	}
	if a.DumpOnSpike && (a.Flight == "" || !a.Latency.Set()) {
		return badInput("%s: --dump-on-spike needs --flight-recorder and a latency source", a.Command)
	}
	if a.Flight != "" {
		var err error
		if a.flightBytes, a.flightAge, err = parseFlightSpec(a.Flight); err != nil {
			return badInput("%s: --flight-recorder: %v", a.Command, err)
		}
	}
	return nil
}

// checkOverwrite refuses to replace a file at RecordTo that holds data,
// unless --force: an earlier incident's recording is often the only copy.
// An empty file (made by mktemp) is fine.
func (a *Attach) checkOverwrite() error {
	if a.RecordTo == "" || a.Force {
		return nil
	}
	st, err := os.Lstat(a.RecordTo) // a link, a FIFO or a device at the path is outfile's to refuse
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return nil
	}
	return badInput("%s: %s already exists (%d bytes): not overwritten; give --force to replace it, or choose another path",
		a.Command, a.RecordTo, st.Size())
}

// Serve is one serve run.
type Serve struct {
	Trace       Trace
	Listen      string
	CgroupLimit int
	Comms       string // comma-separated process names that get a comm label
	DoctorEvery time.Duration
	Version     string
}

// Check validates the flags before anything is loaded.
func (s *Serve) Check() error {
	if err := s.Trace.check("serve"); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return badInput("serve: --listen %q: %v", s.Listen, err)
	}
	if s.CgroupLimit < 1 {
		return badInput("serve: --cgroup-limit must be at least 1")
	}
	if s.DoctorEvery < 0 {
		return badInput("serve: --doctor-every must not be negative")
	}
	return nil
}

func (s *Serve) comms() map[string]bool {
	out := map[string]bool{}
	for _, c := range strings.Split(s.Comms, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out[c] = true
		}
	}
	return out
}
