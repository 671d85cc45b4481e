package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Waits: a thread that serves requests and sleeps inside one for
// --stacks-min or more carries the code path it slept in (a wait). The
// sched_switch program looks the sleeping thread up as it leaves its CPU
// and as it gets it back, and takes the stacks as a sleep begins in a
// thread whose last sleep of that kind ran long (its next four). Measured
// where that path runs most: the tests' lock server (16 threads, one per
// connection, each request taking a mutex a slow thread holds 30 ms of
// every 50), numatrace on it with --slo (the kernel source), wrk on 16
// connections, phases rotating over the rounds, BPF stats on in both:
//   - off: --stacks=false, which leaves the wait code out of the program;
//   - default: --stacks-min 1ms.
//
// The program's added ns per run, times its runs, over the phase's time
// is the CPU the waits cost; over the waits that carried a stack it is
// what each one cost, the captures of sleeps that turned out short
// included.
const (
	waitsOff     = "--stacks=false"
	waitsDefault = "default (--stacks-min 1ms)"
)

var waitsPhases = []string{waitsOff, waitsDefault}

var waitsArgs = map[string][]string{waitsOff: {"--stacks=false"}, waitsDefault: nil}

// waitsTarget bounds the CPU the waits add: a share of one CPU.
const waitsTarget = 0.01

type waitsCost struct {
	rps     map[string][]float64 // wrk's requests/s by phase, by round
	perRun  map[string][]float64 // on_switch's ns per run by phase, by round
	cpu     []float64            // by round: the CPU the default added over off, a share of one CPU
	runs    map[string]uint64    // on_switch's runs, all rounds
	waits   map[string]uint64    // waits, all rounds
	stacked map[string]uint64    // ...that carried a stack
	phase   time.Duration
}

func measureWaits(ctx context.Context, c *config, ex *extra) error {
	ex.waits = waitsCost{rps: map[string][]float64{}, perRun: map[string][]float64{}, runs: map[string]uint64{},
		waits: map[string]uint64{}, stacked: map[string]uint64{}, phase: 3 * c.stressDur}
	if c.lockserver == "" {
		return fmt.Errorf("-lockserver is required")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk is not installed: %w", err)
	}
	port, stop, err := startLockServer(c)
	if err != nil {
		return err
	}
	defer stop()
	if err := setBPFStats(true); err != nil {
		return err
	}
	w := &ex.waits
	for round := 0; round < c.overheadRounds; round++ {
		var perRun [2]float64
		var runs [2]uint64
		var secs [2]float64
		for i := range waitsPhases {
			k := (i + round) % len(waitsPhases)
			phase := waitsPhases[k]
			m, err := waitsPhase(ctx, c, port, phase, 5000+round*10+i)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, phase, err)
			}
			w.rps[phase] = append(w.rps[phase], m.rps)
			w.perRun[phase] = append(w.perRun[phase], m.use.perRun())
			w.runs[phase] += m.use.cnt
			w.waits[phase] += m.waits
			w.stacked[phase] += m.stacked
			perRun[k], runs[k], secs[k] = m.use.perRun(), m.use.cnt, m.secs
			logf("waits round %d, %s: %.0f requests/s, on_switch %.0f ns a run over %d runs, %d waits, %d with stacks",
				round+1, phase, m.rps, m.use.perRun(), m.use.cnt, m.waits, m.stacked)
		}
		// The default's runs at the default's added cost, over its time.
		w.cpu = append(w.cpu, (perRun[1]-perRun[0])*float64(runs[1])/(secs[1]*1e9))
	}
	return nil
}

// startLockServer starts the tests' lock server; it returns its port and
// how to stop it.
func startLockServer(c *config) (int, func(), error) {
	out := &syncBuffer{}
	p, err := startProc("lockserver", filepath.Join(c.workdir, "lockserver.log"), out, c.lockserver, "30", "20")
	if err != nil {
		return 0, nil, err
	}
	stop := func() { p.cmd.Process.Kill(); <-p.done }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if line, ok := strings.CutSuffix(out.String(), "\n"); ok {
			port, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				stop()
				return 0, nil, fmt.Errorf("the lock server printed %q, not a port", line)
			}
			return port, stop, nil
		}
	}
	stop()
	return 0, nil, fmt.Errorf("the lock server printed no port")
}

// syncBuffer is a child's stdout, read while it writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type waitsMeasure struct {
	rps            float64
	secs           float64 // the load's length
	use            usage   // on_switch's
	waits, stacked uint64
}

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// waitsPhase runs wrk against the lock server under numatrace with
// phase's flags.
func waitsPhase(ctx context.Context, c *config, port int, phase string, n int) (waitsMeasure, error) {
	var m waitsMeasure
	pid, err := pidOfPort(port)
	if err != nil {
		return m, err
	}
	out := &strings.Builder{}
	s, err := startNumatraceTo(ctx, c, n, out, append([]string{"-p", strconv.Itoa(pid), "--slo", "5ms"}, waitsArgs[phase]...)...)
	if err != nil {
		return m, err
	}
	defer s.stop()
	if err := s.findPrograms(ctx); err != nil {
		return m, err
	}
	sw := -1
	for id, name := range s.names {
		if strings.HasPrefix(name, "on_switch") {
			sw = id
		}
	}
	if sw < 0 {
		return m, fmt.Errorf("numatrace holds no on_switch program")
	}
	before, err := progStats(ctx)
	if err != nil {
		return m, err
	}
	start := time.Now()
	wrk, err := exec.CommandContext(ctx, "wrk", "-c16", "-t2", fmt.Sprintf("-d%ds", int(3*c.stressDur.Seconds())),
		fmt.Sprintf("http://127.0.0.1:%d/", port)).CombinedOutput()
	m.secs = time.Since(start).Seconds()
	if err != nil {
		return m, fmt.Errorf("wrk: %v: %s", err, wrk)
	}
	after, err := progStats(ctx)
	if err != nil {
		return m, err
	}
	mm := wrkRPS.FindSubmatch(wrk)
	if mm == nil {
		return m, fmt.Errorf("wrk printed no Requests/sec: %s", wrk)
	}
	m.rps, _ = strconv.ParseFloat(string(mm[1]), 64)
	m.use = delta(before, after, map[int]string{sw: ""})[sw]
	if err := s.stop(); err != nil {
		return m, err
	}
	m.waits, m.stacked, err = waitsCounted(out.String())
	return m, err
}

// pidOfPort is the process listening on 127.0.0.1:port: the lock server.
func pidOfPort(port int) (int, error) {
	out, err := exec.Command("ss", "-Htlnp", fmt.Sprintf("sport = :%d", port)).Output()
	if err != nil {
		return 0, fmt.Errorf("ss: %w", err)
	}
	m := regexp.MustCompile(`pid=(\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no process listens on port %d: %s", port, out)
	}
	return strconv.Atoi(string(m[1]))
}

// waitsCounted reads the summary's waits: all of them, and those that
// carried a stack.
func waitsCounted(ndjson string) (all, stacked uint64, err error) {
	var sum struct {
		Waits []struct {
			Count   uint64 `json:"count"`
			Stacked bool   `json:"stacked"`
		} `json:"waits"`
	}
	if err := summaryLine(ndjson, &sum); err != nil {
		return 0, 0, err
	}
	for _, w := range sum.Waits {
		all += w.Count
		if w.Stacked {
			stacked += w.Count
		}
	}
	return all, stacked, nil
}

// renderWaits writes the waits section.
func (ex *extra) renderWaits(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	st := ex.waits
	p("")
	p("## Waits")
	p("")
	p("A thread that serves requests and sleeps inside one for `--stacks-min` or more carries the code path it slept in (the report's WAITS): the sched_switch program looks the thread up as it leaves its CPU asleep and as it gets it back, and takes its stacks as a sleep begins, in a thread whose last sleep of that kind ran long. Measured where that runs most: the tests' lock server (16 threads, one per connection, each request taking a mutex that a slow thread holds 30 ms of every 50), numatrace on it (`-p PID --slo 5ms`: the kernel source), `wrk -c16` for %s a phase, phases rotating over %d rounds, BPF stats on in both. on_switch runs on every switch of the machine.", st.phase, len(st.cpu))
	p("")
	if len(st.cpu) == 0 {
		p("Not measured in this run.")
		return
	}
	p("| phase | requests/s | ratio to off (median) | per round | on_switch ns/run (median) | per round | runs | waits | with stacks |")
	p("|---|--:|--:|---|--:|---|--:|--:|--:|")
	off := st.rps[waitsOff]
	for _, phase := range waitsPhases {
		v := st.rps[phase]
		var ratios []float64
		var rounds, ns []string
		for i := range v {
			if i < len(off) && off[i] > 0 {
				ratios = append(ratios, v[i]/off[i])
				rounds = append(rounds, fmt.Sprintf("%.3f", v[i]/off[i]))
			}
		}
		for _, x := range st.perRun[phase] {
			ns = append(ns, fmt.Sprintf("%.0f", x))
		}
		ratio := "-"
		if phase != waitsOff && len(ratios) > 0 {
			ratio = fmt.Sprintf("%.3f", median(ratios))
		}
		p("| %s | %.0f | %s | %s | %.0f | %s | %d | %d | %d |", phase, mean(v), ratio, orDash(strings.Join(rounds, ", ")),
			median(st.perRun[phase]), orDash(strings.Join(ns, ", ")), st.runs[phase], st.waits[phase], st.stacked[phase])
	}
	p("")
	var cpus []string
	for _, x := range st.cpu {
		cpus = append(cpus, fmt.Sprintf("%.2f%%", 100*x))
	}
	added := median(st.perRun[waitsDefault]) - median(st.perRun[waitsOff])
	perWait := "-"
	if n := st.stacked[waitsDefault]; n > 0 {
		perWait = fmt.Sprintf("%.1f µs", added*float64(st.runs[waitsDefault])/float64(n)/1e3)
	}
	result := "met"
	if median(st.cpu) > waitsTarget {
		result = "**MISSED**"
	}
	p("The waits add %.0f ns to the program's median run, over every switch of the machine: %.2f%% of one CPU (rounds %s; target ≤ %.0f%%: %s), %s per wait that carried a stack, the captures of sleeps that turned out short and the look-ups of every sleep included. A thread that serves no request pays its task-storage look-up as it sleeps, nothing more.",
		added, 100*median(st.cpu), strings.Join(cpus, ", "), 100*waitsTarget, result, perWait)
}
