//go:build linux

package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/psi"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/kubecg"
	"github.com/numatrace/numatrace/internal/latency/source"
	"github.com/numatrace/numatrace/internal/monoclock"
	"github.com/numatrace/numatrace/internal/outfile"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/target"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
)

// Run checks the configuration, resolves the target, loads the tracer,
// traces until the duration ends, Ctrl-C, or the target goes, and then
// prints the report (or writes the recording).
func (a *Attach) Run(stdout, stderr io.Writer) error {
	if err := a.Check(); err != nil {
		return err
	}
	tgt, err := a.resolve(kubecg.Host)
	if err != nil {
		return &BadInput{err}
	}
	topo, err := topology.Read("/sys")
	if err != nil {
		return err
	}
	cfg, err := a.tracerConfig(tgt, topo)
	if err != nil {
		return err
	}
	if a.Latency.Set() && a.RunqWait && !cfg.RunqWait {
		fmt.Fprintln(stderr, "numatrace: run-queue wait (runq_wait) is traced only for a target: give --pid, --tid or --cgroup to weigh it against the latency")
	}
	tr, err := tracer.Open(cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	if tgt.Kind == target.Process && (cfg.FollowForks || cfg.WatchChildren) {
		// The kernel follows forks from here on: now the tree alive.
		if err := addTree(tgt, tr); err != nil {
			if !errors.Is(err, errTreeUnsettled) {
				return err
			}
			fmt.Fprintf(stderr, "numatrace: %v\n", err)
		}
	}
	tgt.Attached() // named as it is now: a launcher may have exec'd since the look-up
	return a.trace(tr, tgt, topo, stdout, stderr)
}

// resolve finds the target; a pod or container is traced as its cgroup.
func (a *Attach) resolve(node kubecg.Node) (*target.Target, error) {
	cgroup, name := a.Cgroup, ""
	switch {
	case a.Pod != "":
		p, err := node.FindPod(a.Pod)
		if err != nil {
			return nil, err
		}
		cgroup, name = p.Dir, p.String()+" ("+p.QoS+")"
	case a.Container != "":
		c, err := node.FindContainer(a.Container)
		if err != nil {
			return nil, err
		}
		cgroup, name = c.Dir, "container "+c.ID[:13]+" of "+c.Pod.String()
	}
	tgt, err := target.Resolve("/proc", node.CgroupRoot, a.PID, a.TID, cgroup)
	if err != nil {
		return nil, err
	}
	tgt.Name, tgt.Children = name, a.Children
	return tgt, nil
}

// treePasses bounds the walks of a process tree at attach: each one
// adds what the previous missed, and a tree that still grows past the
// kernel's following after this many is said.
const treePasses = 8

var errTreeUnsettled = fmt.Errorf("the target's descendants kept changing over %d walks of /proc: a process forked during them by one found in the last may not be followed", treePasses)

// tree is a process's descendants in /proc.
type tree interface {
	Descendants() ([]uint32, error)
	Alive(pid uint32) bool
}

// treeSet is the kernel's set the tree goes in, whose forks it follows.
type treeSet interface {
	AddDescendants([]uint32) ([]uint32, error)
	DropDescendants([]uint32) error
}

// addTree adds a process's live descendants to the set the kernel
// follows forks from. The fork probe is attached already, so any child
// forked by a member from now on is the kernel's; what a walk can miss
// is a child forked by a process the walk found but had not added yet.
// The walk is repeated until it finds no live process the kernel did
// not have. One that exited before it was added is taken out again: its
// exit could not do it, and its pid may be reused.
func addTree(t tree, set treeSet) error {
	for range treePasses {
		pids, err := t.Descendants()
		if err != nil {
			return fmt.Errorf("walk the target's descendants: %w", err)
		}
		added, err := set.AddDescendants(pids)
		if err != nil {
			return err
		}
		var dead []uint32
		for _, pid := range added {
			if !t.Alive(pid) {
				dead = append(dead, pid)
			}
		}
		if err := set.DropDescendants(dead); err != nil {
			return err
		}
		if len(added) == len(dead) {
			return nil
		}
	}
	return errTreeUnsettled
}

// runqWait says whether the target's run-queue wait is traced: with a
// latency source and a target. System-wide it would time every thread's
// every context switch (BENCHMARKS.md has the cost), and the waits of
// threads that serve nothing would be weighed against the service's
// latency.
func (a *Attach) runqWait(tgt *target.Target) bool {
	return a.RunqWait && a.Latency.Set() && tgt.Kind != target.System
}

// requestStalls says whether requests are timed in the kernel with their
// serving threads' stalls and counters: their budgets.
func (a *Attach) requestStalls() bool {
	return (a.Latency.Uprobe != "" || a.Latency.Mode == source.ModeKernel) && a.RequestStalls
}

// tracerConfig says what the kernel side traces.
func (a *Attach) tracerConfig(tgt *target.Target, topo *topology.Topology) (tracer.Config, error) {
	cfg := tracer.Config{MinEventNs: a.Trace.minEventNs, MinStallNs: a.Trace.minStallNs, IncludeSelf: a.IncludeSelf,
		RingBufBytes: a.Trace.RingBufMiB << 20, Topology: topo, KernelBTF: a.Trace.BTF,
		RequestStalls: a.requestStalls(), RequestTimes: a.RequestTimes, RunqWait: a.runqWait(tgt),
		MmapLockVia: a.Trace.mmapLockVia, Skip: a.Trace.skip, StacksMinNs: a.Trace.stacksMinNs()}
	switch tgt.Kind {
	case target.Process:
		// Without --children, the descendants are watched: the report
		// says if the work is in them.
		cfg.Filter, cfg.PIDs = tracer.FilterPIDs, []uint32{tgt.ID}
		cfg.FollowForks, cfg.WatchChildren = tgt.Children, !tgt.Children
	case target.Thread:
		cfg.Filter, cfg.TID = tracer.FilterTID, tgt.ID
	case target.Cgroup:
		pids, err := tgt.CgroupPIDs()
		if err != nil {
			return cfg, err
		}
		cfg.Filter, cfg.PIDs, cfg.FollowForks = tracer.FilterPIDs, pids, true
		var st unix.Stat_t
		if err := unix.Stat(tgt.Path, &st); err != nil {
			return cfg, &BadInput{fmt.Errorf("%s: %w", tgt.Path, err)}
		}
		cfg.CgroupID = st.Ino
	}
	return cfg, nil
}

// trace runs the session behind the chosen front end, then ends the
// recording and prints the report.
func (a *Attach) trace(tr *tracer.Tracer, tgt *target.Target, topo *topology.Topology, stdout, stderr io.Writer) error {
	ctx, cancel := runContext(a.Duration)
	defer cancel()
	started, startNs := time.Now(), monoclock.Ns()
	fe := a.frontEnd(endOnBrokenPipe(stdout, cancel), stderr)
	var doc *doctor.Report
	if a.RecordTo != "" || fe.view {
		doc = startDoctor(tgt) // one reading of the machine, for the recording and the view
	}
	if err := a.Latency.FindInbound(int(tgt.ID), func(s string) { fe.warn(errors.New(s)) }); err != nil {
		if errors.Is(err, source.ErrTargetGone) {
			return &BadInput{err} // a PID that no longer exists
		}
		return err
	}
	sampler, closePSI := pressureSampler(tgt, fe.warn)
	defer closePSI()
	cgroup := openMemoryCgroup(tgt, fe.warn)
	defer cgroup.close()
	d := a.describe(tr.Probes(), tgt, started, startNs)
	d.PressureScope = pressureScope(sampler)
	d.MemoryCgroup = cgroup.read()
	h := a.header(d, topo, doc)
	eng := engine.New(d, engine.Options{Sinks: fe.sinks(d, topo, doc)})
	opt, src, err := a.sessionOptions(ctx, tr, tgt, h, fe)
	if err != nil {
		return err
	}
	opt.PSI = sampler
	if src != nil {
		defer src.Close()
	}
	rec, err := a.newRecording(h, &opt, targetPIDs(tr, tgt), stderr)
	if err != nil {
		return err
	}
	// The budgets' disk I/O wait: timed by the tracer where it can
	// (IOWaitTimed), else read from delay accounting, on for the run.
	// Switched once the input is known good: bad input is one line.
	if a.requestStalls() && a.RequestTimes && a.Latency.Mode != source.ModeOff && !tr.IOWaitTimed() {
		defer delayAccounting(fe.warn)()
	}
	// Every probe, the request timer's too, is attached now.
	if err := writeReady(a.Trace.ReadyFile); err != nil {
		rec.abort()
		return err
	}
	stopProgress := func() {}
	if a.Command == "record" {
		stopProgress = rec.showProgress(&opt, stderr)
	}
	res, err := fe.run(ctx, tr, eng, opt)
	stopProgress()
	if err != nil {
		rec.abort()
		return err
	}
	end := res.End
	end.MemoryCgroup = cgroup.read()
	var notes []string
	if res.TargetGone {
		// Named as it ended: the process may have exec'd since attach.
		notes = append(notes, fmt.Sprintf("target %s exited after %s", tgt.Ended(eng.Name(tgt.ID)),
			time.Since(started).Round(time.Millisecond)))
	}
	end.Note = strings.Join(notes, "; ")
	// A recording that failed (a full disk, said at once) still leaves
	// the report whole; the run fails after it.
	recErr := rec.finish(end, stderr)
	rep := output.NewReport(d, end, eng.Summary(res.Final), eng.Analysis(), a.Top)
	if doc != nil {
		rep.Findings = doc.Findings
	}
	if err := fe.report(rep, stderr); err != nil {
		return errors.Join(err, recErr)
	}
	if recErr != nil {
		return recErr
	}
	// A stream line that could not be written: a reader that went away
	// is fine, anything else (a full disk) is not.
	if err := eng.SinkErr(); err != nil && !errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// runContext ends on Ctrl-C, SIGTERM, SIGHUP or after d (if not zero).
// Once it ends, Ctrl-C and SIGTERM are the default again: a second Ctrl-C
// kills at once. A hang-up (the terminal closed, an ssh session dropped)
// is caught, and after cancel ignored: the shell passes its own on, and
// that second SIGHUP must not kill the run while it closes the recording,
// writes the report and closes its BPF objects.
func runContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, hungUp := context.WithCancel(ctx)
	go func() {
		select {
		case <-hup:
			hungUp()
		case <-ctx.Done():
		}
	}()
	// A hang-up after the run stays ignored: closing the BPF objects
	// still follows, and the shell's second SIGHUP killed that (with 17
	// probes' programs to close, it came 20 ms after the first one).
	cancel := func() { hungUp(); stop(); signal.Ignore(syscall.SIGHUP) }
	if d > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, d)
		cancelSignals := cancel
		cancel = func() { cancelTimeout(); cancelSignals() }
	}
	go func() { <-ctx.Done(); stop() }()
	return ctx, cancel
}

// sessionOptions wires the target and the latency source (nil when none:
// the caller closes it) into a session.
func (a *Attach) sessionOptions(ctx context.Context, tr *tracer.Tracer, tgt *target.Target, h record.Header,
	fe *frontEnd) (session.Options, source.Source, error) {
	opt := session.Options{Now: monoclock.Ns, Gone: tgt.WaitGone(ctx), Warn: fe.warn}
	if tgt.Children {
		opt.Gone = tgt.WaitTreeGone(ctx, tr.TargetPIDs)
	}
	if tgt.Kind == target.Cgroup {
		opt.Rescan, opt.RescanEvery = tgt.CgroupPIDs, time.Second
	}
	src, err := a.Latency.Open(a.latencyEnv(tr, tgt, h, func(s string) { fe.warn(errors.New(s)) }))
	if err != nil || src == nil {
		return opt, nil, err
	}
	opt.Latency, opt.DumpOnSpike = src, a.DumpOnSpike
	return opt, src, nil
}

// latencyEnv is what opening the latency source takes from the run: its
// clock and windows, and the tracer's request timers (its socket timer
// for a target that is one process).
func (a *Attach) latencyEnv(tr *tracer.Tracer, tgt *target.Target, h record.Header, notice func(string)) source.Env {
	env := source.Env{Start: h.Started, StartNs: h.StartNs, Window: a.Trace.Window, Timers: timers{tr}, Notice: notice}
	if tgt.Kind == target.Process {
		env.PID = int(tgt.ID)
		env.Sockets = sockets{tr}
	}
	return env
}

// pressureSampler reads memory PSI for the report: the system's, and the
// target's cgroup v2 group where it has one (a process's, a --cgroup
// directory's). A group PSI cannot be read for is said once, and the
// system's figure is still given.
func pressureSampler(tgt *target.Target, warn func(error)) (*psi.Sampler, func()) {
	root, err := hostfs.Open("/")
	if err != nil {
		warn(fmt.Errorf("PSI not read: %w", err))
		return nil, func() {}
	}
	scopes := []psi.Scope{psi.System()}
	var group psi.Scope
	switch tgt.Kind {
	case target.Process, target.Thread:
		group, err = psi.CgroupOf(root, int(tgt.ID))
	case target.Cgroup:
		group, err = psi.CgroupDir(root, tgt.Path)
	default:
		return psi.NewSampler(root, scopes...), func() { root.Close() }
	}
	switch {
	case err != nil:
		warn(fmt.Errorf("the target's cgroup has no PSI figure, only the system's: %w", err))
	case group.Name != "/": // the root group's figure is the system's
		scopes = append(scopes, group)
	}
	return psi.NewSampler(root, scopes...), func() { root.Close() }
}

// pressureScope names whose PSI the run's windows carry (run.Description's
// PressureScope): the target's group where it is read, else the system;
// "" without PSI.
func pressureScope(s *psi.Sampler) string {
	if s == nil {
		return ""
	}
	sc, ok := s.Take().Scope()
	if !ok {
		return ""
	}
	if sc.IsSystem() {
		return "system"
	}
	return sc.Name
}

// targetPIDs lists the target's processes, for each procfs reading of a
// recording: a tree's are the kernel's set.
func targetPIDs(tr *tracer.Tracer, tgt *target.Target) func() []uint32 {
	switch {
	case tgt.Kind == target.Process && tgt.Children:
		return func() []uint32 { p, _ := tr.TargetPIDs(); return p }
	case tgt.Kind == target.Process:
		return func() []uint32 { return []uint32{tgt.ID} }
	case tgt.Kind == target.Cgroup:
		return func() []uint32 { p, _ := tgt.CgroupPIDs(); return p }
	}
	return func() []uint32 { return nil }
}

// describe is the run's description, for the engine and the recording.
func (a *Attach) describe(probes []stall.ProbeStatus, tgt *target.Target, started time.Time, startNs uint64) run.Description {
	d := run.Description{Target: tgt.String(), Kernel: KernelRelease(), Started: started, StartNs: startNs,
		WindowNs: uint64(a.Trace.Window), Probes: probes, MinEventNs: a.Trace.minEventNs, MinStallNs: a.Trace.minStallNs,
		StacksMinNs: a.Trace.stacksMinNs()}
	if a.Latency.Set() {
		d.Spikes = run.Spikes{K: a.SpikeK, FloorNs: uint64(a.SpikeFloor), SLONs: uint64(a.SLO)}
		d.Spikes.On = a.spikeOn
		if _, sym, err := source.ParseUprobeTarget(a.Latency.Uprobe); err == nil {
			d.LatencyFunction = sym
		}
		d.Latency = a.Latency.Describe()
	}
	return d
}

// header is the recording's header for the run d: with the machine and
// doctor's reading, for the recording.
func (a *Attach) header(d run.Description, topo *topology.Topology, doc *doctor.Report) record.Header {
	hostname, _ := os.Hostname()
	host := record.Host{Hostname: hostname, CPUs: topo.NumCPUs(), CPUNode: topo.CPUNode, NodeMem: map[int]uint64{}}
	for n, b := range topo.NodeMem {
		host.NodeMem[n] = b
	}
	var js []byte
	if doc != nil {
		js, _ = json.Marshal(doc)
	}
	return record.NewHeader(d, host, a.Version, js)
}

// timers lets the latency package's uprobe source attach through the
// tracer, which knows nothing of latency sources.
type timers struct{ tr *tracer.Tracer }

func (t timers) TimeRequests(binary, symbol string, pid int) (source.RequestTimer, error) {
	ut, err := t.tr.AttachLatency(binary, symbol, pid)
	if err != nil { // not ut: a nil *UprobeTimer is a non-nil RequestTimer
		var bad *tracer.UprobeTargetError
		if errors.As(err, &bad) {
			return nil, &BadInput{err}
		}
		return nil, err
	}
	return ut, nil
}

// sockets lets the latency package's kernel source time the target's
// sockets through the tracer.
type sockets struct{ tr *tracer.Tracer }

func (s sockets) TimeSockets(ports []uint16) (source.RequestTimer, error) {
	st, err := s.tr.AttachSockets(ports)
	if err != nil { // not st: a nil *SocketTimer is a non-nil RequestTimer
		return nil, err
	}
	return st, nil
}

// startDoctor is doctor's one-reading view of the machine (and the target
// process) as tracing starts; nil if it cannot read /proc.
func startDoctor(tgt *target.Target) *doctor.Report {
	opt := doctor.Options{}
	if tgt.Kind == target.Process {
		opt.PID = int(tgt.ID)
	}
	rep, err := doctor.Run(opt)
	if err != nil {
		return nil
	}
	return rep
}

// writeReady creates the ready file a test or a script waits for, with
// numatrace's pid in it; never through a link planted at the path (Check
// refused one before tracing; Create refuses one planted since). A pid is
// no secret: the file stays readable by all, as it always was.
func writeReady(path string) error {
	if path == "" {
		return nil
	}
	f, err := outfile.Create(path)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		err = errors.Join(err, f.Chmod(0o644), f.Close())
	}
	if err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	return nil
}

// warnTo prints problems that do not stop tracing, one line each: they
// may name a process, a cgroup or a file, so they are escaped.
func warnTo(w io.Writer) func(error) {
	return func(err error) { fmt.Fprintf(w, "numatrace: %s\n", sanitize.Text(err.Error())) }
}

// KernelRelease is the running kernel's release, as uname -r says it.
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
