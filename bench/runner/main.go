// Command runner is the benchmark behind `make bench` (bench/run.sh builds
// it and the binaries it drives). It measures, in one run:
//
//   - the in-kernel cost per run (run_time_ns / run_cnt from
//     kernel.bpf_stats_enabled=1) of every numatrace BPF program, traced
//     system-wide, under three workloads: CPU-affinity flips (task
//     migrations), memcg limit reclaim, and an mmap/munmap loop (mmap_lock),
//     and numatrace's alone under a fourth, writes inside the memory cgroup
//     (the throttles);
//   - the same for an empty tp_btf program on sched_migrate_task (the floor)
//     and for the equivalent bpftrace script on the same tracepoints;
//   - how long `numatrace attach` takes to have every probe attached;
//   - numatrace's memory through a storm of threads and events (storm.go);
//   - the sched_switch program's cost per switch, by job (switchcost.go).
//
// Each tracer is attached alone, in its own phase; phases are interleaved
// over several rounds (the order rotates) because the machine is noisy, and
// ratios come from figures of this run only. It writes BENCHMARKS.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type config struct {
	numatrace, floor, flip, mmaploop string
	script                           string
	out, workdir                     string
	rounds                           int
	flipDur, mmapDur                 time.Duration
	memcgReads                       int
	fileMiB, limitMiB                int
	writeMiB                         int
	attachRuns                       int
	cgroupName                       string

	threads        string // bench/threads binary
	cserver        string // cmd/numatrace/testdata/cserver.c, built
	lockserver     string // cmd/numatrace/testdata/lockserver.c, built
	requestDur     time.Duration
	overheadRounds int
	stressDur      time.Duration
	rssThreads     int
	onlyExtra      bool

	churn      string // bench/churn binary
	stormRate  int
	stormPairs int
	stormDur   time.Duration
	onlyStorm  bool
	onlySocket bool
	onlyStacks bool
	onlySwitch bool
	onlyWaits  bool
}

func main() {
	var c config
	flag.StringVar(&c.numatrace, "numatrace", "", "numatrace binary")
	flag.StringVar(&c.floor, "floor", "", "bench/floor binary")
	flag.StringVar(&c.flip, "flip", "", "bench/flip binary")
	flag.StringVar(&c.mmaploop, "mmaploop", "", "bench/mmaploop binary")
	flag.StringVar(&c.script, "bpftrace-script", "bench/equivalent.bt", "bpftrace script, the reference")
	flag.StringVar(&c.out, "out", "BENCHMARKS.md", "report to write")
	flag.StringVar(&c.workdir, "workdir", "", "scratch directory on a disk file system (not tmpfs)")
	flag.IntVar(&c.rounds, "rounds", 4, "rounds; each round runs every tracer's phase once")
	flag.DurationVar(&c.flipDur, "flip-duration", 3*time.Second, "migration workload length per phase")
	flag.DurationVar(&c.mmapDur, "mmap-duration", 2*time.Second, "mmap_lock workload length per phase")
	flag.IntVar(&c.memcgReads, "memcg-reads", 6, "memcg workload: reads of the file per phase")
	flag.IntVar(&c.fileMiB, "file-mib", 400, "memcg workload: size of the file read")
	flag.IntVar(&c.limitMiB, "limit-mib", 64, "memcg workload: the cgroup's memory limit")
	flag.IntVar(&c.writeMiB, "write-mib", 1000, "write workload (numatrace only): MiB written from inside the memory cgroup")
	flag.IntVar(&c.attachRuns, "attach-runs", 5, "attach-time runs (the median is reported)")
	flag.StringVar(&c.cgroupName, "cgroup", "nt-bench", "memory cgroup to create for the memcg workload")
	flag.StringVar(&c.threads, "threads", "", "bench/threads binary")
	flag.StringVar(&c.cserver, "cserver", "", "the C server of the --latency-uprobe tests, built (cmd/numatrace/testdata/cserver.c)")
	flag.StringVar(&c.lockserver, "lockserver", "", "the lock server of the budget tests, built (cmd/numatrace/testdata/lockserver.c)")
	flag.DurationVar(&c.requestDur, "request-duration", 3*time.Second, "how long the request timer's cost is measured, per round")
	flag.IntVar(&c.overheadRounds, "overhead-rounds", 5, "rounds of the throughput comparison")
	flag.DurationVar(&c.stressDur, "stress-duration", 3*time.Second, "stress-ng run per stressor and phase")
	flag.IntVar(&c.rssThreads, "rss-threads", 10000, "threads tracked for the memory figure")
	flag.BoolVar(&c.onlyExtra, "only-extra", false, "skip the per-program rounds (to try the other measurements; the report is then incomplete)")
	flag.StringVar(&c.churn, "churn", "", "bench/churn binary")
	flag.IntVar(&c.stormRate, "storm-rate", 2000, "the storm: threads started per second")
	flag.IntVar(&c.stormPairs, "storm-pairs", 22, "the storm: mmap+munmap pairs per thread (two stall events each)")
	flag.DurationVar(&c.stormDur, "storm-duration", 2*time.Minute, "the storm: how long threads are started")
	flag.BoolVar(&c.onlyStorm, "only-storm", false, "measure the storm alone (to try it; the report is then incomplete)")
	flag.BoolVar(&c.onlySocket, "only-socket", false, "measure the socket request timer alone and print its section (BENCHMARKS.md is left as it is)")
	flag.BoolVar(&c.onlyStacks, "only-stacks", false, "measure the cost of stacks alone and print its section (BENCHMARKS.md is left as it is)")
	flag.BoolVar(&c.onlyWaits, "only-waits", false, "measure the waits' stacks alone and print their section (BENCHMARKS.md is left as it is)")
	flag.BoolVar(&c.onlySwitch, "only-switch", false, "measure run-queue tracing and the sched_switch program alone and print their sections (BENCHMARKS.md is left as it is)")
	flag.Parse()

	for _, p := range []struct{ flag, v string }{
		{"numatrace", c.numatrace}, {"floor", c.floor}, {"flip", c.flip},
		{"mmaploop", c.mmaploop}, {"workdir", c.workdir}, {"threads", c.threads}, {"churn", c.churn},
	} {
		if p.v == "" {
			fmt.Fprintf(os.Stderr, "bench: -%s is required\n", p.flag)
			os.Exit(2)
		}
	}
	if c.rounds < 1 || c.attachRuns < 1 || c.memcgReads < 1 || c.writeMiB < 1 || c.overheadRounds < 1 || c.rssThreads < 1 || c.stressDur < time.Second ||
		c.stormRate < 1 || c.stormPairs < 1 || c.stormDur <= stormWarmup {
		fmt.Fprintf(os.Stderr, "bench: -rounds, -attach-runs, -memcg-reads, -write-mib, -overhead-rounds, -rss-threads, -storm-rate and -storm-pairs must be at least 1, -stress-duration 1s, -storm-duration over %s\n", stormWarmup)
		os.Exit(2)
	}

	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		logf("got %v: stopping", s)
		cancel()
	}()
	err := run(ctx, &c)
	signal.Stop(sigs)
	cancel()
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "bench: interrupted; cleaned up")
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// cleanups run in reverse order when run returns, however it returns.
type cleanups []func()

const statsPath = "/proc/sys/kernel/bpf_stats_enabled"

func (c *cleanups) add(f func()) { *c = append(*c, f) }
func (c *cleanups) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(ctx context.Context, c *config) (err error) {
	var cl cleanups
	defer cl.run()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	cl.add(killAll)

	if err := checkPrerequisites(); err != nil {
		return err
	}
	if err := enableBPFStats(&cl); err != nil {
		return err
	}

	r := newResults(c)
	r.env = collectEnv(ctx)

	if c.onlySocket {
		ex := &extra{}
		if err := measureSocketTiming(ctx, c, ex); err != nil {
			return fmt.Errorf("socket timing: %w", err)
		}
		ex.renderSocketTiming(os.Stdout)
		return nil
	}
	if c.onlyWaits {
		ex := &extra{}
		if err := measureWaits(ctx, c, ex); err != nil {
			return fmt.Errorf("waits: %w", err)
		}
		ex.renderWaits(os.Stdout)
		return nil
	}
	if c.onlySwitch {
		ex := &extra{}
		if err := measureRunq(ctx, c, ex); err != nil {
			return fmt.Errorf("run-queue tracing: %w", err)
		}
		if err := measureSwitchCost(ctx, c, ex); err != nil {
			return fmt.Errorf("switch cost: %w", err)
		}
		ex.renderRunq(os.Stdout)
		ex.renderSwitchCost(os.Stdout)
		return nil
	}
	w, err := prepareWorkloads(c, &cl)
	if err != nil {
		return err
	}
	if c.onlyStacks {
		ex := &extra{}
		if err := measureStacks(ctx, c, w, ex); err != nil {
			return fmt.Errorf("stacks: %w", err)
		}
		ex.renderStacks(os.Stdout)
		return nil
	}

	start := time.Now()
	ex := &extra{}
	if !c.onlyStorm {
		if err := measureAll(ctx, c, w, r, benchTracers(), ex); err != nil {
			return err
		}
	}
	if err := r.section("storm", func() error { return measureStorm(ctx, c, ex) }); err != nil {
		return fmt.Errorf("storm: %w", err)
	}
	r.elapsed = time.Since(start)

	problems := r.write(c.out, ex)
	logf("wrote %s (measuring took %s)", c.out, r.elapsed.Round(time.Second))
	if len(problems) > 0 {
		return fmt.Errorf("measured no runs for: %s", strings.Join(problems, "; "))
	}
	return nil
}

// checkPrerequisites says why the benchmarks cannot run here, if they cannot.
func checkPrerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("must run as root")
	}
	if _, err := os.Stat("/sys/kernel/tracing/events/sched/sched_migrate_task"); err != nil {
		return errors.New("tracefs is not mounted at /sys/kernel/tracing (bpftrace needs it; bench/run.sh mounts it)")
	}
	return nil
}

// enableBPFStats sets kernel.bpf_stats_enabled=1 and adds restoring the
// previous value to cl.
func enableBPFStats(cl *cleanups) error {
	orig, err := os.ReadFile(statsPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", statsPath, err)
	}
	if err := os.WriteFile(statsPath, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable BPF stats: %w", err)
	}
	cl.add(func() {
		if err := os.WriteFile(statsPath, orig, 0o644); err != nil {
			logf("restore %s: %v", statsPath, err)
		}
	})
	return nil
}

// prepareWorkloads sets up the memcg workload's cgroup and file, and adds
// removing them to cl.
func prepareWorkloads(c *config, cl *cleanups) (*workloads, error) {
	cg, err := setupCgroup(c.cgroupName, c.limitMiB)
	if err != nil {
		return nil, err
	}
	cl.add(cg.remove)
	file := filepath.Join(c.workdir, "nt-bench-read.dat")
	logf("writing a %d MiB file for the memcg workload", c.fileMiB)
	if err := writeFile(file, c.fileMiB); err != nil {
		return nil, err
	}
	cl.add(func() { os.Remove(file) })
	return &workloads{c: c, cg: cg, file: file}, nil
}

// benchTracers are the tracers compared, each with the workloads it runs.
func benchTracers() []*tracerKind {
	return []*tracerKind{
		{key: "numatrace", workloads: []string{wlMigrate, wlMemcg, wlMmap, wlWrite}, start: startNumatraceFallback},
		{key: "floor", workloads: []string{wlMigrate}, start: startFloor},
		{key: "bpftrace", workloads: []string{wlMigrate, wlMemcg, wlMmap}, start: startBpftrace},
	}
}

// measureAll measures everything but the storm, in order.
func measureAll(ctx context.Context, c *config, w *workloads, r *results, tracers []*tracerKind, ex *extra) error {
	// Attach time first, while nothing else of ours is attached.
	err := r.section("attach time", func() error {
		for i := 0; i < c.attachRuns; i++ {
			d, err := attachTime(ctx, c, i)
			if err != nil {
				return fmt.Errorf("attach time: %w", err)
			}
			logf("attach time run %d: %.1f ms", i+1, float64(d)/1e6)
			r.attach = append(r.attach, d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = r.section("per-program rounds", func() error {
		for round := 0; round < c.rounds && !c.onlyExtra; round++ {
			for i := range tracers {
				t := tracers[(i+round)%len(tracers)]
				if err := runPhase(ctx, c, w, r, t, round); err != nil {
					return fmt.Errorf("round %d, %s phase: %w", round+1, t.key, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		fn   func() error
	}{
		{"request timer", func() error { return measureRequestTimer(ctx, c, ex) }},
		{"socket timing", func() error { return measureSocketTiming(ctx, c, ex) }},
		{"throughput", func() error { return measureThroughput(ctx, c, w, ex) }},
		{"run-queue tracing", func() error { return measureRunq(ctx, c, ex) }},
		{"switch cost", func() error { return measureSwitchCost(ctx, c, ex) }},
		{"stacks", func() error { return measureStacks(ctx, c, w, ex) }},
		{"waits", func() error { return measureWaits(ctx, c, ex) }},
		{"recording size", func() error { return measureRecordingSize(ctx, c, w, ex) }},
		{"memory", func() error { return measureRSS(ctx, c, ex) }},
	} {
		if err := r.section(s.name, s.fn); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// section runs one section of the benchmark and notes how long it took,
// for the report (what to trim when the whole runs long).
func (r *results) section(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	d := time.Since(start)
	r.sections = append(r.sections, sectionTime{name, d})
	logf("%s took %s", name, d.Round(time.Second))
	return err
}

// runPhase attaches one tracer alone, runs its workloads one after the
// other, and records what each of the tracer's programs used during each.
func runPhase(ctx context.Context, c *config, w *workloads, r *results, t *tracerKind, round int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := t.start(ctx, c, round)
	if err != nil {
		return err
	}
	defer s.stop()
	logf("round %d: %s attached (%d programs)", round+1, t.key, len(s.progs))
	for _, wl := range t.workloads {
		before, err := progStats(ctx)
		if err != nil {
			return err
		}
		note, err := w.run(ctx, wl)
		if err != nil {
			return fmt.Errorf("%s workload: %w", wl, err)
		}
		after, err := progStats(ctx)
		if err != nil {
			return err
		}
		if s.p.exited() {
			return fmt.Errorf("%s exited during the %s workload: %s", t.key, wl, logTail(s.p.log))
		}
		for id, u := range delta(before, after, s.progs) {
			name := after[id].Name
			r.record(t.key, wl, s.progs[id], name, round, u)
		}
		r.note(t.key, wl, round, note)
		logf("round %d: %s under %s: %s", round+1, t.key, wl, note)
	}
	// Programs loaded but idle still belong in the list of programs.
	for id, tp := range s.progs {
		r.loaded(t.key, tp, s.names[id])
	}
	return s.stop()
}
