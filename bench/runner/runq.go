package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Run-queue tracing (runq_wait) puts a program on every context switch,
// for every thread, while a latency source and a target are set. What that costs is measured on a context-switch storm
// (stress-ng --switch), in phases that rotate over the rounds:
//   - baseline: nothing attached;
//   - target, no latency source: numatrace --cgroup T, the storm in T;
//   - target, latency source: the same with --latency-file, so run-queue
//     tracing times the storm's own switches;
//   - others: numatrace --pid P --latency-file, P a process that
//     sleeps, the storm elsewhere: what everyone else pays while an SRE
//     attaches to one service, which is only the filter;
//   - floor: an empty tp_btf program on sched_switch, the least any
//     program there costs.
const (
	runqBaseline = "nothing attached"
	runqPlain    = "--cgroup T, the storm in T, no latency source"
	runqTarget   = "--cgroup T --latency-file, the storm in T"
	runqOthers   = "--pid P --latency-file, the storm elsewhere"
	runqFloor    = "an empty program on sched_switch (floor)"
	// runqOnly is measured for its cost per switch only (switchcost.go):
	// the program with run-queue wait and without memstall_wait.
	runqOnly = "--cgroup T --latency-file --no-causes memstall_wait, the storm in T"
)

var runqPhases = []string{runqBaseline, runqPlain, runqTarget, runqOthers, runqFloor}

// runqOthersTarget is the least share of the floor's throughput a
// workload that is not the target keeps: beyond what any program on those
// tracepoints costs, numatrace's filter may take 1%.
const runqOthersTarget = 0.99

// runqTargetMin is the least share of the untraced throughput the storm
// keeps inside the target with a latency source, the worst case.
const runqTargetMin = 0.95

type runqCost struct {
	opsPerSec map[string][]float64 // by phase, by round
	phase     time.Duration
	why       string // not measured: why
}

func measureRunq(ctx context.Context, c *config, ex *extra) error {
	ex.runq.opsPerSec, ex.runq.phase = map[string][]float64{}, c.stressDur
	cg := runqCgroupDir(c.cgroupName + "-runq")
	if cg == "" {
		ex.runq.why = "no cgroup hierarchy to make T in (cgroup v2 at /sys/fs/cgroup, or v1's pids or unified)"
		return nil
	}
	if err := setBPFStats(false); err != nil {
		return err
	}
	defer setBPFStats(true)
	syscall.Rmdir(cg) // left by a killed run
	if err := os.Mkdir(cg, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	defer syscall.Rmdir(cg)
	latFile := filepath.Join(c.workdir, "runq-latency.log")
	if err := os.WriteFile(latFile, nil, 0o644); err != nil {
		return err
	}
	for round := 0; round < c.overheadRounds; round++ {
		for i := range runqPhases {
			phase := runqPhases[(i+round)%len(runqPhases)]
			ops, err := runqPhase(ctx, c, cg, latFile, phase, 3000+round*10+i, nil)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, phase, err)
			}
			ex.runq.opsPerSec[phase] = append(ex.runq.opsPerSec[phase], ops)
			logf("runq round %d, %s: %.0f switch ops/s", round+1, phase, ops)
		}
	}
	return nil
}

// runqCgroupDir is where T goes: any hierarchy will do, as numatrace
// follows T's processes by their cgroup.procs and their forks.
func runqCgroupDir(name string) string {
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err == nil {
			return filepath.Join(root, name)
		}
	}
	return ""
}

// runqPhase runs the storm once. A shell joins T and waits; numatrace
// attaches to T; then the shell becomes the storm (in T: numatrace follows
// its forks) and the storm's throughput is returned. With onSwitch set,
// what the phase's sched_switch program used during the storm is added to
// it (BPF stats must be on).
func runqPhase(ctx context.Context, c *config, cg, latFile, phase string, n int, onSwitch *usage) (float64, error) {
	switch phase {
	case runqBaseline:
		return stressNG(ctx, "switch", c.stressDur)
	case runqFloor:
		s, err := startFloorOn(ctx, c, n, "-tracepoint", "sched_switch", "-name", "floor_switch")
		if err != nil {
			return 0, err
		}
		done, err := meterSwitch(ctx, s, onSwitch)
		var ops float64
		if err == nil {
			if ops, err = stressNG(ctx, "switch", c.stressDur); err == nil {
				err = done()
			}
		}
		if serr := s.stop(); err == nil {
			err = serr
		}
		return ops, err
	}
	storm := fmt.Sprintf("stress-ng --switch 2 -t %ds --metrics-brief", int(c.stressDur.Seconds()))
	inT := phase == runqPlain || phase == runqTarget || phase == runqOnly
	script := `echo $$ > "$1" && read go && exec ` + storm
	if !inT {
		script = `read go` // P: sleeps until the phase ends
	}
	holder := exec.CommandContext(ctx, "/bin/sh", "-c", script, "sh", filepath.Join(cg, "cgroup.procs"))
	holder.SysProcAttr = childAttr()
	goLine, err := holder.StdinPipe()
	if err != nil {
		return 0, err
	}
	var out strings.Builder
	holder.Stdout, holder.Stderr = &out, &out
	if err := holder.Start(); err != nil {
		return 0, err
	}
	// The whole group: the storm's workers too, or T could not be removed.
	defer func() { goLine.Close(); syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); holder.Wait() }()
	for i := 0; inT; i++ {
		if b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs")); strings.TrimSpace(string(b)) != "" {
			break
		}
		if i == 200 {
			return 0, errors.New("the holder never joined T")
		}
		time.Sleep(5 * time.Millisecond)
	}
	args := []string{"--cgroup", cg}
	if !inT {
		args = []string{"--pid", strconv.Itoa(holder.Process.Pid)}
	}
	if phase != runqPlain {
		args = append(args, "--latency-file", latFile, "--slo", "5ms")
	}
	if phase == runqOnly {
		args = append(args, "--no-causes", "memstall_wait")
	}
	s, err := startNumatraceOn(ctx, c, n, args...)
	if err != nil {
		return 0, err
	}
	defer s.stop()
	done, err := meterSwitch(ctx, s, onSwitch)
	if err != nil {
		return 0, err
	}
	var ops float64
	if inT {
		fmt.Fprintln(goLine, "go")
		if err = holder.Wait(); err == nil {
			ops, err = parseStressNG("switch", out.String())
		} else {
			err = fmt.Errorf("stress-ng in T: %v: %s", err, out.String())
		}
	} else {
		ops, err = stressNG(ctx, "switch", c.stressDur)
	}
	if err == nil {
		err = done()
	}
	if serr := s.stop(); err == nil {
		err = serr
	}
	return ops, err
}

// meterSwitch starts metering s's program on sched_switch: the returned
// function, called once the storm is over, adds what it used since to u.
// With u nil it meters nothing.
func meterSwitch(ctx context.Context, s *session, u *usage) (func() error, error) {
	if u == nil {
		return func() error { return nil }, nil
	}
	if s.progs == nil {
		if err := s.findPrograms(ctx); err != nil {
			return nil, err
		}
	}
	id := -1
	for pid, tp := range s.progs {
		if tp == "sched_switch" {
			id = pid
		}
	}
	if id < 0 {
		return nil, fmt.Errorf("%s holds no program on sched_switch", s.p.name)
	}
	before, err := progStats(ctx)
	if err != nil {
		return nil, err
	}
	return func() error {
		after, err := progStats(ctx)
		if err != nil {
			return err
		}
		u.add(delta(before, after, map[int]string{id: ""})[id])
		return nil
	}, nil
}

// startNumatraceOn starts numatrace attach with a target and options,
// and waits until it is tracing.
func startNumatraceOn(ctx context.Context, c *config, n int, args ...string) (*session, error) {
	return startNumatraceTo(ctx, c, n, io.Discard, args...)
}

// startNumatraceTo is startNumatraceOn with numatrace's output to stdout.
func startNumatraceTo(ctx context.Context, c *config, n int, stdout io.Writer, args ...string) (*session, error) {
	ready := filepath.Join(c.workdir, fmt.Sprintf("numatrace-ready-%d", n))
	os.Remove(ready) // another section's, left with the same number: not this run's
	p, err := startProc("numatrace", filepath.Join(c.workdir, fmt.Sprintf("numatrace-%d.log", n)), stdout, numatraceArgs(c, ready, args...)...)
	if err != nil {
		return nil, err
	}
	s := &session{p: p, stopSig: syscall.SIGINT}
	if _, err := waitFile(ctx, p, ready, 5*time.Millisecond); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (ex *extra) renderRunq(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## Run-queue tracing")
	p("")
	p("With a latency source and a target, numatrace times the target's run-queue waits (`runq_wait`): one program on sched_switch, which runs for every switch on the machine and filters, and for the target reads the scheduler's own run-queue times. Measured on a context-switch storm (`stress-ng --switch 2`, %s per phase), phases rotating over %d rounds, BPF stats off. The ratio is the median over rounds of the phase's throughput against the baseline of the same round. T is a cgroup numatrace targets with `--cgroup`, P a process that sleeps, targeted with `--pid`.", ex.runq.phase, len(ex.runq.opsPerSec[runqBaseline]))
	p("")
	if ex.runq.why != "" {
		p("Not measured: %s.", ex.runq.why)
		return
	}
	p("| phase | switch bogo ops/s | ratio | per round | target | result |")
	p("|---|--:|--:|---|---|---|")
	base := ex.runq.opsPerSec[runqBaseline]
	for _, phase := range runqPhases {
		v := ex.runq.opsPerSec[phase]
		var ratios []float64
		for i := range v {
			if i < len(base) && base[i] > 0 {
				ratios = append(ratios, v[i]/base[i])
			}
		}
		target, result := "", ""
		if phase == runqTarget {
			target, result = fmt.Sprintf("≥ %.2f", runqTargetMin), "pass"
			if median(ratios) < runqTargetMin {
				result = "**miss**"
			}
		}
		if phase == runqOthers {
			// Against the floor of the same rounds: what numatrace's
			// filter adds to what any program there costs.
			target, result = fmt.Sprintf("≥ %.2f of the floor", runqOthersTarget), "pass"
			if median(ratios) < runqOthersTarget*median(floorRatios(ex)) {
				result = "**miss**"
			}
		}
		ratio := "—"
		if phase != runqBaseline {
			ratio = fmt.Sprintf("%.3f", median(ratios))
		}
		p("| %s | %.0f | %s | %s | %s | %s |", phase, mean(v), ratio, strings.Join(formatRatios(ratios), ", "), target, result)
	}
	p("")
	p("The storm in T with a latency source is the worst case: each of its switches also looks up the thread's last run_delay and updates a histogram and the thread's running stall totals. That is why run-queue tracing needs a target and is never system-wide, and why `--runq-wait=false` turns it off for a service that switches this often. Everyone else pays the filter: for a `--pid` target a compare of the thread's process id, with no map lookup and no clock read, on top of the floor, the kernel's cost of running any program on every switch.")
}

// floorRatios are the floor phase's throughputs over the baseline's.
func floorRatios(ex *extra) []float64 {
	base, v := ex.runq.opsPerSec[runqBaseline], ex.runq.opsPerSec[runqFloor]
	var out []float64
	for i := range v {
		if i < len(base) && base[i] > 0 {
			out = append(out, v[i]/base[i])
		}
	}
	return out
}

func formatRatios(rs []float64) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%.3f", r))
	}
	return out
}
