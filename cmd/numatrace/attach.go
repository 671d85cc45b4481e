package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/procsnap"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/target"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
	"github.com/numatrace/numatrace/internal/tui"
)

type attachFlags struct {
	pid, tid   int
	cgroup     string
	duration   time.Duration
	window     time.Duration
	noTUI      bool
	self       bool
	asJSON     bool
	readyFile  string
	minEvent   string
	minStall   string
	ringBufMiB int
	top        int
	btf        string
	minEventNs [stall.NumCauses]uint64 // parsed --min-event
	minStallNs [stall.NumCauses]uint64 // parsed --min-stall

	latencyFile   string
	latencyUprobe string
	latencyProm   string
	promMetric    string
	spikeK        float64
	spikeFloor    time.Duration

	recordTo    string // attach --record, record -o
	flight      string // record --flight-recorder
	dumpOnSpike bool
	quiet       bool // record: no report, one line at the end
}

// Every page fault and mmap takes the mmap_lock. An acquisition under a
// microsecond did not wait (the tracing itself costs a few hundred ns), so
// it is not a stall; waits under 10µs are counted but not streamed.
const (
	defaultMinStall = "mmap_lock=1us"
	defaultMinEvent = "mmap_lock=10us"
)

func attachFlagSet(name string, f *attachFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if name == "record" {
		fs.StringVar(&f.recordTo, "o", "", "write the recording to this file (required)")
		fs.BoolVar(&f.dumpOnSpike, "dump-on-spike", false, "with --flight-recorder and a latency source: also write -o at each p99 spike")
		fs.StringVar(&f.flight, "flight-recorder", "",
			"keep only the most recent data in memory (a size like 64MiB, or a duration like 5m) and write it to -o on SIGUSR1")
	} else {
		fs.StringVar(&f.recordTo, "record", "", "also record to this file (see numatrace replay, report, export)")
	}
	fs.IntVar(&f.pid, "pid", 0, "trace every thread of this process, including threads it creates later")
	fs.IntVar(&f.tid, "tid", 0, "trace one thread")
	fs.StringVar(&f.cgroup, "cgroup", "", "trace the processes of this cgroup (absolute, or relative to /sys/fs/cgroup)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C or the target exits)")
	fs.DurationVar(&f.window, "window", time.Second, "length of the per-window totals")
	fs.BoolVar(&f.self, "include-self", false, "trace numatrace's own threads too (they are left out as noise)")
	fs.BoolVar(&f.noTUI, "no-tui", false, "print text or JSON instead of the interactive view")
	fs.BoolVar(&f.asJSON, "json", false, "write NDJSON: stall and window lines, then a summary line")
	fs.StringVar(&f.readyFile, "ready-file", "", "create this file once every probe is attached")
	fs.StringVar(&f.minEvent, "min-event", defaultMinEvent,
		"stream only stalls at least this long: DUR for every cause, or cause=DUR,... (histograms keep everything)")
	fs.StringVar(&f.minStall, "min-stall", defaultMinStall,
		"ignore shorter stalls entirely: DUR for every cause, or cause=DUR,...")
	fs.StringVar(&f.latencyFile, "latency-file", "",
		"read request latencies from this file (followed as it grows) or - for stdin: NDJSON {\"ts_ns\":..,\"latency_ns\":..} or two columns")
	fs.StringVar(&f.latencyUprobe, "latency-uprobe", "",
		"time every call of the service's request handler, BINARY:SYMBOL (C, C++, Rust; not Go)")
	fs.StringVar(&f.latencyProm, "latency-prom", "", "scrape the service's Prometheus endpoint once per window...")
	fs.StringVar(&f.promMetric, "latency-metric", "", "...for this latency histogram (seconds unless named _milliseconds or _microseconds)")
	fs.Float64Var(&f.spikeK, "spike-k", 2, "a spike is a window whose p99 is above this many times the rolling median...")
	fs.DurationVar(&f.spikeFloor, "spike-floor", time.Millisecond, "...and above this floor")
	fs.IntVar(&f.ringBufMiB, "ringbuf-mib", 8, "ring buffer size in MiB (a power of two)")
	fs.IntVar(&f.top, "top", 20, "threads shown in the text report")
	fs.StringVar(&f.btf, "btf", "", "kernel BTF file (default /sys/kernel/btf/vmlinux)")
	return fs
}

// parseMinEvent parses "10us" or "mmap_lock=10us,compaction=0".
func parseMinEvent(s string) ([stall.NumCauses]uint64, error) {
	var out [stall.NumCauses]uint64
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, hasName := strings.Cut(part, "=")
		if !hasName {
			val = name
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil || d < 0 {
			return out, fmt.Errorf("bad duration %q", val)
		}
		if !hasName {
			for i := range out {
				out[i] = uint64(d)
			}
			continue
		}
		c, err := stall.ParseCause(strings.TrimSpace(name))
		if err != nil {
			return out, err
		}
		out[c] = uint64(d)
	}
	return out, nil
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

func runAttach(args []string, stdout, stderr io.Writer) error {
	return runTrace("attach", args, stdout, stderr)
}

func runRecord(args []string, stdout, stderr io.Writer) error {
	return runTrace("record", args, stdout, stderr)
}

func runTrace(name string, args []string, stdout, stderr io.Writer) error {
	var f attachFlags
	fs := attachFlagSet(name, &f)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if name == "record" {
		if f.recordTo == "" {
			return usageErr("record: -o FILE is required")
		}
		f.quiet = true
	}
	minEvent, err := parseMinEvent(f.minEvent)
	if err != nil {
		return usageErr("%s: --min-event: %v", name, err)
	}
	f.minEventNs = minEvent
	minStall, err := parseMinEvent(f.minStall)
	if err != nil {
		return usageErr("%s: --min-stall: %v", name, err)
	}
	f.minStallNs = minStall
	if f.window < 10*time.Millisecond {
		return usageErr("%s: --window must be at least 10ms", name)
	}
	if f.duration < 0 {
		return usageErr("%s: --duration must not be negative", name)
	}
	if f.spikeK <= 1 {
		return usageErr("%s: --spike-k must be above 1", name)
	}
	sources := 0
	for _, src := range []string{f.latencyFile, f.latencyProm, f.latencyUprobe} {
		if src != "" {
			sources++
		}
	}
	if sources > 1 {
		return usageErr("%s: pick one latency source", name)
	}
	if f.dumpOnSpike && (f.flight == "" || sources == 0) {
		return usageErr("%s: --dump-on-spike needs --flight-recorder and a latency source", name)
	}
	if f.latencyUprobe != "" {
		bin, _, err := tracer.ParseUprobeTarget(f.latencyUprobe)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		if err := tracer.CheckNotGo(bin); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	if (f.latencyProm != "") != (f.promMetric != "") {
		return usageErr("%s: --latency-prom and --latency-metric go together", name)
	}
	if f.latencyFile != "" && f.latencyFile != "-" {
		if _, err := os.Stat(f.latencyFile); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: --latency-file: %w", name, err)}
		}
	}
	rb := f.ringBufMiB
	if rb <= 0 || rb&(rb-1) != 0 || rb > 1024 {
		return usageErr("%s: --ringbuf-mib must be a power of two up to 1024", name)
	}
	tgt, err := target.Resolve("/proc", "/sys/fs/cgroup", f.pid, f.tid, f.cgroup)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	topo, err := topology.Read("/sys")
	if err != nil {
		return err
	}
	cfg := tracer.Config{MinEventNs: minEvent, MinStallNs: minStall, IncludeSelf: f.self, RingBufBytes: rb << 20, Topology: topo, KernelBTF: f.btf}
	switch tgt.Kind {
	case target.Process:
		cfg.Filter, cfg.PIDs = tracer.FilterPIDs, []uint32{tgt.ID}
	case target.Thread:
		cfg.Filter, cfg.TID = tracer.FilterTID, tgt.ID
	case target.Cgroup:
		pids, err := tgt.CgroupPIDs()
		if err != nil {
			return err
		}
		cfg.Filter, cfg.PIDs, cfg.FollowForks = tracer.FilterPIDs, pids, true
		var st unix.Stat_t
		if err := unix.Stat(tgt.Path, &st); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: %w", tgt.Path, err)}
		}
		cfg.CgroupID = st.Ino
	}
	tr, err := tracer.Open(cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	return trace(tr, tgt, topo, &f, stdout, stderr)
}

// trace runs a session until the duration ends, Ctrl-C, or the target
// goes, then prints the summary.
func trace(tr *tracer.Tracer, tgt *target.Target, topo *topology.Topology, f *attachFlags, stdout, stderr io.Writer) error {
	rd, err := tr.Reader()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	// Once stopping, a second Ctrl-C kills at once.
	go func() { <-ctx.Done(); stop() }()

	if f.readyFile != "" {
		if err := os.WriteFile(f.readyFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	opt := session.Options{
		Window: f.window,
		Grace:  250 * time.Millisecond,
		Now:    monotonicNs,
		Gone:   tgt.WaitGone(ctx),
	}
	var nd *output.NDJSON
	if f.asJSON {
		nd = output.NewNDJSON(stdout)
		opt.Sink = nd
	}
	if tgt.Kind == target.Cgroup {
		opt.Rescan, opt.RescanEvery = tgt.CgroupPIDs, time.Second
	}
	started := time.Now()
	opt.StartNs = monotonicNs()
	if f.latencyFile != "" {
		samples := make(chan latency.Sample, 1<<14)
		clk := latency.Clock{WallNs: started.UnixNano(), MonoNs: int64(opt.StartNs)}
		go func() {
			err := latency.Follow(ctx, f.latencyFile, clk, func(s latency.Sample) {
				select {
				case samples <- s:
				case <-ctx.Done():
				}
			}, nil)
			if err != nil {
				fmt.Fprintf(stderr, "numatrace: %v\n", err)
			}
		}()
		opt.Latency = samples
	}
	if f.latencyProm != "" {
		stats := make(chan latency.Stats, 64)
		go latency.ScrapeWindows(ctx, f.latencyProm, f.promMetric, started, f.window, stats, func(err error) {
			fmt.Fprintf(stderr, "numatrace: %v\n", err)
		})
		opt.LatencyWindows = stats
	}
	if f.latencyUprobe != "" {
		bin, sym, _ := tracer.ParseUprobeTarget(f.latencyUprobe)
		pid := 0
		if tgt.Kind == target.Process {
			pid = int(tgt.ID)
		}
		lp, err := tr.AttachLatency(bin, sym, pid)
		if err != nil {
			return err
		}
		samples := make(chan latency.Sample, 1<<16)
		go lp.Run(func(s latency.Sample) {
			select {
			case samples <- s:
			default: // the loop is behind: this sample is lost, the others are not
			}
		})
		opt.Latency = samples
	}
	opt.DumpOnSpike = f.dumpOnSpike
	if opt.Latency != nil || opt.LatencyWindows != nil {
		opt.Correlate = correlate.Config{K: f.spikeK, FloorNs: uint64(f.spikeFloor),
			WallAt: func(mono uint64) time.Time { return started.Add(time.Duration(mono - opt.StartNs)) }}
	}
	useTUI := !f.noTUI && !f.asJSON && !f.quiet && onTerminal(stdout)
	// Doctor reads the machine once, for the recording and the view.
	var doc *doctor.Report
	if f.recordTo != "" || useTUI {
		doc = startDoctor(tgt)
	}
	rec, err := newRecording(tr, tgt, topo, f, started, opt.StartNs, &opt, doc, stderr)
	if err != nil {
		return err
	}
	var res *session.Result
	if useTUI {
		res, err = traceTUI(ctx, rd, tr, tgt, topo, f, opt, started, doc, stdout)
	} else {
		res, err = session.Run(ctx, rd, tr.Decoder(), tr, opt)
	}
	if err != nil {
		rec.abort()
		return err
	}
	report := &output.Report{
		Target:      tgt.String(),
		Kernel:      kernelRelease(),
		DurationNs:  res.DurationNs,
		Summary:     res.Summary,
		Events:      res.Events,
		LateEvents:  res.LateEvents,
		Windows:     res.Windows,
		TopThreads:  f.top,
		MinEventNs:  f.minEventNs,
		Correlation: res.Correlation,
	}
	if res.TargetGone {
		report.Note = fmt.Sprintf("target %s exited after %s", tgt, time.Since(started).Round(time.Millisecond))
	}
	if err := rec.finish(res, report, stderr); err != nil {
		return err
	}
	if f.quiet {
		if report.Note != "" {
			fmt.Fprintf(stderr, "numatrace: %s\n", report.Note)
		}
		return nil
	}
	for _, p := range tr.Probes() {
		report.Probes = append(report.Probes, output.ProbeResult{Name: p.Name, Attached: p.Attached, Error: p.Error})
	}
	if res.BadRecords > 0 {
		fmt.Fprintf(stderr, "numatrace: %d ring-buffer records could not be read or decoded\n", res.BadRecords)
	}
	if nd != nil {
		err = nd.Summary(report)
	} else {
		err = report.Text(stdout)
	}
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("write output: %w", err)
	}
	if report.Note != "" && nd != nil {
		fmt.Fprintf(stderr, "numatrace: %s\n", report.Note)
	}
	return nil
}

// traceTUI runs the session behind the interactive view. The view stays
// up after tracing stops (--duration, the target exited) until the user
// quits; quitting stops tracing. A signal quits both.
func traceTUI(ctx context.Context, rd *ringbuf.Reader, tr *tracer.Tracer, tgt *target.Target, topo *topology.Topology,
	f *attachFlags, opt session.Options, started time.Time, doc *doctor.Report, stdout io.Writer) (*session.Result, error) {
	info := tui.InfoFromHeader(recordingHeader(tr, tgt, topo, f, started, opt.StartNs, doc))
	store := tui.NewStore(info, liveWindowsKept)
	opt.Sink, opt.OnSnapshot, opt.SnapshotEvery = store, store.Snapshot, time.Second
	model := tui.NewLive(store, tui.Options{Now: monotonicNs, ReadProcfs: func() (record.Procfs, error) {
		return procsnap.Read("/proc", "/sys", nil, monotonicNs())
	}})
	prog := tui.Program(model, os.Stdin, stdout)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var res *session.Result
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, runErr = session.Run(runCtx, rd, tr.Decoder(), tr, opt)
		why := "tracing stopped"
		switch {
		case runErr != nil:
			why = runErr.Error()
		case res.TargetGone:
			why = "the target exited"
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			why = "--duration reached"
		}
		prog.Send(tui.EndedMsg{Why: why})
	}()
	// The terminal is raw, so Ctrl-C arrives as a key; a signal from
	// elsewhere (SIGTERM, SIGHUP) quits the view.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			prog.Quit()
		case <-done:
		}
	}()
	_, uiErr := prog.Run()
	cancel()
	<-done
	if runErr != nil {
		return nil, runErr
	}
	return res, uiErr
}

// liveWindowsKept bounds the live view's timeline and spike analysis: an
// hour of one-second windows.
const liveWindowsKept = 3600
