package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Stacks: a stall at least --stacks-min long carries its thread's kernel
// and user stacks, taken in the stall's end program. What that costs is
// measured on the memcg reclaim workload, whose stalls end in
// memcg_reclaim_end, in phases that rotate over the rounds:
//   - off: numatrace system-wide with --stacks=false;
//   - default: --stacks-min 1ms, which this workload's stalls (mostly
//     8-32 µs) rarely reach: what a stall under the threshold pays;
//   - every stall: --stacks-min 1ns, every stall's stacks taken and
//     symbolized: what a stack costs.
//
// Throughput is measured with BPF stats off; a second pass with them on
// reads memcg_reclaim_end's ns per run in each phase: every stall's less
// off's is the cost of one stack capture.
const (
	stacksOff     = "--stacks=false"
	stacksDefault = "default (--stacks-min 1ms)"
	stacksEvery   = "--stacks-min 1ns (every stall)"
)

var stacksPhases = []string{stacksOff, stacksDefault, stacksEvery}

var stacksArgs = map[string][]string{
	stacksOff:     {"--stacks=false"},
	stacksDefault: nil,
	stacksEvery:   {"--stacks-min", "1ns"},
}

// stacksTarget is the least share of the workload's throughput with
// stacks off that the default keeps.
const stacksTarget = 0.99

// stacksEndProgram is the program the memcg workload's stalls end in, as
// bpftool names it.
const stacksEndProgram = "memcg_reclaim_end"

type stacksCost struct {
	mibps  map[string][]float64 // MiB/s by phase, by round
	perRun map[string][]float64 // memcg_reclaim_end's ns per run by phase, by round (stats pass)
	runs   map[string]uint64    // its runs in the stats pass, all rounds
	taken  map[string]uint64    // stalls whose stacks were taken, by phase, all rounds (stats pass)
	phase  time.Duration        // the workload's length in a phase, at least
	why    string
}

func measureStacks(ctx context.Context, c *config, w *workloads, ex *extra) error {
	ex.stacks = stacksCost{mibps: map[string][]float64{}, perRun: map[string][]float64{}, runs: map[string]uint64{},
		taken: map[string]uint64{}, phase: c.stressDur}
	if err := setBPFStats(false); err != nil {
		return err
	}
	for round := 0; round < c.overheadRounds; round++ {
		for i := range stacksPhases {
			phase := stacksPhases[(i+round)%len(stacksPhases)]
			m, err := stacksPhase(ctx, c, w, phase, 4000+round*10+i, false)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, phase, err)
			}
			ex.stacks.mibps[phase] = append(ex.stacks.mibps[phase], m.mibps)
			logf("stacks round %d, %s: memcg %.0f MiB/s", round+1, phase, m.mibps)
		}
	}
	if err := setBPFStats(true); err != nil {
		return err
	}
	// The programs' own cost rotates over the rounds too: one pass a
	// phase read 304 ns between two phases whose code paths are the same
	// but for one compare, on a busy host.
	for round := 0; round < c.overheadRounds; round++ {
		for i := range stacksPhases {
			phase := stacksPhases[(i+round)%len(stacksPhases)]
			m, err := stacksPhase(ctx, c, w, phase, 4500+round*10+i, true)
			if err != nil {
				return fmt.Errorf("stats round %d, %s: %w", round+1, phase, err)
			}
			st := &ex.stacks
			st.perRun[phase] = append(st.perRun[phase], m.use.perRun())
			st.runs[phase] += m.use.cnt
			st.taken[phase] += m.taken
			logf("stacks stats round %d, %s: %s %.0f ns a run over %d runs, %d stacks taken", round+1, phase, stacksEndProgram,
				m.use.perRun(), m.use.cnt, m.taken)
		}
	}
	return nil
}

type stacksMeasure struct {
	mibps float64
	use   usage  // memcg_reclaim_end's, with stats on
	taken uint64 // stacks taken, from the summary
}

// stacksPhase runs the memcg workload once under numatrace with phase's
// flags.
func stacksPhase(ctx context.Context, c *config, w *workloads, phase string, n int, stats bool) (stacksMeasure, error) {
	var m stacksMeasure
	ready := filepath.Join(c.workdir, fmt.Sprintf("numatrace-ready-%d", n))
	os.Remove(ready) // another section's, left with the same number: not this run's
	out := &strings.Builder{}
	p, err := startProc("numatrace", filepath.Join(c.workdir, fmt.Sprintf("numatrace-%d.log", n)), out, numatraceArgs(c, ready, stacksArgs[phase]...)...)
	if err != nil {
		return m, err
	}
	s := &session{p: p, stopSig: syscall.SIGINT}
	defer s.stop()
	if _, err := waitFile(ctx, p, ready, 5*time.Millisecond); err != nil {
		return m, err
	}
	if err := s.findPrograms(ctx); err != nil {
		return m, err
	}
	end := -1
	for id, name := range s.names {
		if name == stacksEndProgram {
			end = id
		}
	}
	if end < 0 {
		return m, fmt.Errorf("numatrace holds no %s program", stacksEndProgram)
	}
	before, err := progStats(ctx)
	if err != nil {
		return m, err
	}
	// The workload again and again for the phase's length: six reads
	// take under a second here, too short to rise above the noise.
	var reads uint64
	var secs float64
	for secs < c.stressDur.Seconds() {
		note, err := w.memcg(ctx)
		if err != nil {
			return m, err
		}
		reads, secs = reads+note.count, secs+note.seconds
	}
	after, err := progStats(ctx)
	if err != nil {
		return m, err
	}
	m.mibps = float64(reads) * float64(c.fileMiB) / secs
	if stats {
		m.use = delta(before, after, map[int]string{end: ""})[end]
	}
	if err := s.stop(); err != nil {
		return m, err
	}
	m.taken, err = stacksTaken(out.String())
	return m, err
}

// stacksTaken reads stacks_taken from the summary that ends attach's
// NDJSON.
func stacksTaken(ndjson string) (uint64, error) {
	var sum struct {
		System struct {
			StacksTaken uint64 `json:"stacks_taken"`
		} `json:"system"`
	}
	err := summaryLine(ndjson, &sum)
	return sum.System.StacksTaken, err
}

// summaryLine reads the summary line that ends attach's NDJSON into v.
func summaryLine(ndjson string, v any) error {
	lines := strings.Split(strings.TrimSpace(ndjson), "\n")
	last := []byte(lines[len(lines)-1])
	var typ struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(last, &typ); err != nil || typ.Type != "summary" {
		return fmt.Errorf("no summary line from numatrace (%v)", err)
	}
	return json.Unmarshal(last, v)
}

// renderStacks writes the stacks section.
func (ex *extra) renderStacks(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	st := ex.stacks
	p("")
	p("## Stacks")
	p("")
	p("A stall at least `--stacks-min` long (1 ms by default) carries its thread's kernel and user stacks, taken with bpf_get_stack in the stall's end program and symbolized by numatrace as it reads the stall. Measured on the memcg reclaim workload above (its stalls end in memcg_reclaim_end), repeated for %s a phase, numatrace system-wide, phases rotating over %d rounds with BPF stats off: the ratio is the median over rounds of the phase's throughput against `--stacks=false` in the same round. As many rounds again with BPF stats on read memcg_reclaim_end's cost per run in each phase.", st.phase, len(st.mibps[stacksOff]))
	p("")
	if st.why != "" {
		p("Not measured: %s.", st.why)
		return
	}
	if len(st.perRun[stacksOff]) == 0 { // -only-storm
		p("Not measured in this run.")
		return
	}
	p("| phase | memcg MiB/s | ratio to off | per round | %s ns/run (median) | per round | runs | stacks taken | target | result |", stacksEndProgram)
	p("|---|--:|--:|---|--:|---|--:|--:|---|---|")
	off := st.mibps[stacksOff]
	offNs := st.perRun[stacksOff]
	for _, phase := range stacksPhases {
		v := st.mibps[phase]
		var ratios []float64
		var rounds []string
		for i := range v {
			if i < len(off) && off[i] > 0 {
				ratios = append(ratios, v[i]/off[i])
				rounds = append(rounds, fmt.Sprintf("%.3f", v[i]/off[i]))
			}
		}
		var ns []string
		for _, x := range st.perRun[phase] {
			ns = append(ns, fmt.Sprintf("%.0f", x))
		}
		ratio, target, result := "-", "", ""
		switch {
		case phase == stacksDefault && len(ratios) > 0:
			r := median(ratios)
			ratio = fmt.Sprintf("%.3f", r)
			// Two targets: the workload keeps 0.99 of its throughput, and
			// the program costs no more than off's own rounds spread to.
			nsOK := len(offNs) > 0 && median(st.perRun[phase]) <= slices.Max(offNs)
			target = fmt.Sprintf("≥ %.2f; ns/run within off's rounds", stacksTarget)
			result = "met"
			switch {
			case r < stacksTarget && !nsOK:
				result = "MISSED both"
			case r < stacksTarget:
				result = "MISSED (throughput)"
			case !nsOK:
				result = "MISSED (ns/run)"
			}
		case phase != stacksOff && len(ratios) > 0:
			ratio = fmt.Sprintf("%.3f", median(ratios))
		}
		p("| %s | %.0f | %s | %s | %.0f | %s | %d | %d | %s | %s |", phase, mean(v), ratio, orDash(strings.Join(rounds, ", ")),
			median(st.perRun[phase]), orDash(strings.Join(ns, ", ")), st.runs[phase], st.taken[phase], target, result)
	}
	p("")
	capture := median(st.perRun[stacksEvery]) - median(offNs)
	under := median(st.perRun[stacksDefault]) - median(offNs)
	p("One stack capture (kernel and user stacks, the user registers and the words at the stack pointer, into the stall's ring record) costs %.0f ns in %s: every stall's median %.0f ns a run less off's %.0f. A stall under the threshold pays one compare more than off, whose program has no stack code at all (the verifier drops it): the default's median is %+.0f ns from off's, whose own rounds spread from %.0f to %.0f. Symbolizing is numatrace's own work, in user space, once per distinct stack and process; it shows in the throughput of the every-stall phase, not in the programs.",
		capture, stacksEndProgram, median(st.perRun[stacksEvery]), median(offNs), under, slices.Min(offNs), slices.Max(offNs))
}
