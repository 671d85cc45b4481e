//go:build linux

package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/numatrace/numatrace/internal/exporter"
	"github.com/numatrace/numatrace/internal/live"
)

// traceFlags are the flags attach, record and serve share.
func traceFlags(fs *flag.FlagSet, t *live.Trace, windowHelp, minEventHelp string) {
	fs.DurationVar(&t.Window, "window", time.Second, windowHelp)
	fs.StringVar(&t.MinEvent, "min-event", live.DefaultMinEvent, minEventHelp)
	fs.StringVar(&t.MinStall, "min-stall", live.DefaultMinStall, "ignore shorter stalls entirely: DUR for every cause, or cause=DUR,...")
	fs.IntVar(&t.RingBufMiB, "ringbuf-mib", 8, "ring buffer size in MiB (a power of two)")
	fs.StringVar(&t.BTF, "btf", "", "kernel BTF file (default /sys/kernel/btf/vmlinux)")
	fs.StringVar(&t.Causes, "causes", "", "attach only these probes: probe or cause names, comma-separated (numatrace probes lists them)")
	fs.StringVar(&t.NoCauses, "no-causes", "", "attach every probe but these: probe or cause names, comma-separated")
	fs.BoolVar(&t.Stacks, "stacks", true, "take the kernel and user stacks of each stall at least --stacks-min long")
	fs.DurationVar(&t.StacksMin, "stacks-min", time.Millisecond, "with --stacks: the shortest stall whose stacks are taken")
	fs.StringVar(&t.MmapLockVia, "mmap-lock-via", "auto",
		"how mmap_lock waits are timed: contention (the lock's slow path, 5.19+), tracepoints (every acquisition, 5.12+), or auto (the first this kernel has)")
}

func attachFlagSet(name string, a *live.Attach) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if name == "record" {
		fs.StringVar(&a.RecordTo, "output", "", "write the recording to this file (required)")
		alias(fs, "o", "output")
		fs.BoolVar(&a.DumpOnSpike, "dump-on-spike", false, "with --flight-recorder and a latency source: also write -o at each p99 spike or frozen window")
		fs.StringVar(&a.Flight, "flight-recorder", "",
			"keep only the most recent data in memory (a size like 64MiB, or a duration like 5m) and write it to -o on SIGUSR1")
	} else {
		fs.StringVar(&a.RecordTo, "record", "", "also record to this file (see numatrace replay, report, export)")
		alias(fs, "o", "record")
	}
	fs.BoolVar(&a.Force, "force", false, "replace the recording file if it already exists")
	fs.IntVar(&a.PID, "pid", 0, "trace every thread of this process, including threads it creates later")
	alias(fs, "p", "pid")
	childrenHelp := "with --pid: trace its descendants too, those alive now and those it forks later, with their threads"
	fs.BoolVar(&a.Children, "children", false, childrenHelp)
	alias(fs, "f", "children") // as strace spells it
	fs.IntVar(&a.TID, "tid", 0, "trace one thread")
	alias(fs, "t", "tid")
	fs.StringVar(&a.Cgroup, "cgroup", "", "trace the processes of this cgroup (absolute, or relative to /sys/fs/cgroup)")
	fs.StringVar(&a.Pod, "pod", "", "trace a Kubernetes pod on this node: NAMESPACE/NAME, NAME or UID (its cgroup, found from the kubelet's layout)")
	fs.StringVar(&a.Container, "container", "", "trace a container on this node by ID, or a unique prefix of one (its cgroup)")
	fs.DurationVar(&a.Duration, "duration", 0, "stop after this long (default: until Ctrl-C or the target exits)")
	alias(fs, "d", "duration")
	traceFlags(fs, &a.Trace, "length of the per-window totals",
		"stream only stalls at least this long: DUR for every cause, or cause=DUR,... (histograms keep everything)")
	fs.BoolVar(&a.IncludeSelf, "include-self", false, "trace numatrace's own threads too (they are left out as noise)")
	fs.BoolVar(&a.NoTUI, "no-tui", false, "print text or JSON instead of the interactive view")
	fs.BoolVar(&a.JSON, "json", false, "write NDJSON: stall and window lines, then a summary line")
	fs.StringVar(&a.Trace.ReadyFile, "ready-file", "", "create this file once every probe is attached")
	a.Latency.AddFlags(fs)
	fs.DurationVar(&a.SLO, "slo", 0, "a window whose p99 (--spike-on) is above this is a spike, from the first window on")
	fs.StringVar(&a.SpikeOn, "spike-on", "p99", "the latency spikes are judged on: p99, p999 or max")
	fs.BoolVar(&a.RequestStalls, "request-stalls", true, "with requests timed in the kernel: break each request down by the stalls inside it, in the kernel")
	fs.BoolVar(&a.RequestTimes, "request-times", true, "with requests timed in the kernel: split the rest of each request's time by its serving thread's own counters (on a CPU, waiting for one, for I/O: its budget)")
	fs.BoolVar(&a.RunqWait, "runq-wait", true, "with a latency source and --pid or --cgroup: time the target's waits for a CPU (runq_wait), a program on every context switch")
	fs.Float64Var(&a.SpikeK, "spike-k", 2, "without --slo, a spike is a window whose p99 is above this many times the median of recent normal windows...")
	fs.DurationVar(&a.SpikeFloor, "spike-floor", time.Millisecond, "...and above this floor")
	fs.IntVar(&a.Top, "top", 20, topHelp)
	return fs
}

func runAttach(args []string, stdout, stderr io.Writer) error {
	return runTrace("attach", args, stdout, stderr)
}

func runRecord(args []string, stdout, stderr io.Writer) error {
	return runTrace("record", args, stdout, stderr)
}

func runTrace(name string, args []string, stdout, stderr io.Writer) error {
	a := live.Attach{Command: name, Quiet: name == "record", Version: version}
	if err := parseFlags(attachFlagSet(name, &a), args, stdout); err != nil {
		return err
	}
	return exitCode(a.Run(stdout, stderr))
}

// commandAbout is what a command's flags do not say, shown in its help
// after the synopsis.
func commandAbout(name string) string {
	if name == "serve" {
		return "serve answers /metrics and /healthz. " + exporter.ProfileHelp + "."
	}
	return ""
}

func runServe(args []string, stdout, stderr io.Writer) error {
	s := live.Serve{Version: version}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:9464", "address for /metrics and /healthz (loopback by default: put a proxy or the pod network in front on purpose)")
	fs.IntVar(&s.CgroupLimit, "cgroup-limit", 200, fmt.Sprintf("distinct cgroup label values; later cgroups fold into %q (counted)", exporter.Overflow))
	fs.StringVar(&s.Comms, "comm", "", "comma-separated process names that also get a comm label (bounded by you)")
	traceFlags(fs, &s.Trace, "how often lost events are read",
		"stalls shorter than this are counted by the kernel but not exported: DUR or cause=DUR,...")
	fs.DurationVar(&s.DoctorEvery, "doctor-every", 5*time.Minute, "how often doctor's findings are refreshed (0: never run doctor)")
	fs.StringVar(&s.Trace.ReadyFile, "ready-file", "", "create this file once serving")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	return exitCode(s.Run(stderr))
}

func runProbes(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("probes", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	btfPath := fs.String("btf", "", "kernel BTF file (default /sys/kernel/btf/vmlinux)")
	via := fs.String("mmap-lock-via", "auto", "load the mmap_lock probe this way: contention, tracepoints or auto (as attach does)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	return exitCode(live.Probes(*btfPath, *via, *asJSON, stdout))
}

// exitCode makes the user's own mistakes exit 2.
func exitCode(err error) error {
	if live.IsBadInput(err) {
		return &exitError{code: 2, err: err}
	}
	return err
}
