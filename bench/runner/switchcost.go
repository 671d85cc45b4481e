package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The sched_switch program's own cost per switch, from BPF stats, in the
// run-queue section's storm (runq.go): on_switch serves memstall_wait in
// every trace and run-queue wait with a latency source and a target, so
// it is measured with each job alone, with both, and against the empty
// program there. A switch of a thread that is not in a memory stall costs
// memstall_wait its in_memstall check (the psi_flags of prev and of
// next): what memstall-only adds to the floor.
var switchCostPhases = []string{runqFloor, runqPlain, runqOnly, runqTarget, runqOthers}

// switchCostJob says which of on_switch's jobs each phase turns on.
var switchCostJob = map[string]string{
	runqFloor:  "none: an empty program",
	runqPlain:  "memstall_wait only",
	runqOnly:   "run-queue wait only",
	runqTarget: "both",
	runqOthers: "both, every switch a non-target's",
}

// inMemstallMaxNs is the target for the in_memstall check: what
// memstall_wait alone adds to the empty program, per switch.
const inMemstallMaxNs = 10

type switchCost struct {
	perRound map[string][]usage // by phase, by round
	phase    time.Duration
	why      string // not measured: why
}

// sum is phase's usage over every round.
func (s *switchCost) sum(phase string) usage {
	var u usage
	for _, r := range s.perRound[phase] {
		u.add(r)
	}
	return u
}

// aboveFloor is phase's ns per switch over the floor's, summed over the
// rounds and round by round.
func (s *switchCost) aboveFloor(phase string) (float64, []float64) {
	all := s.sum(phase).perRun() - s.sum(runqFloor).perRun()
	var rounds []float64
	floor := s.perRound[runqFloor]
	for i, u := range s.perRound[phase] {
		if i < len(floor) && u.cnt > 0 && floor[i].cnt > 0 {
			rounds = append(rounds, u.perRun()-floor[i].perRun())
		}
	}
	return all, rounds
}

func measureSwitchCost(ctx context.Context, c *config, ex *extra) error {
	sc := &ex.switchCost
	sc.perRound, sc.phase = map[string][]usage{}, c.stressDur
	cg := runqCgroupDir(c.cgroupName + "-swc")
	if cg == "" {
		sc.why = "no cgroup hierarchy to make T in (cgroup v2 at /sys/fs/cgroup, or v1's pids or unified)"
		return nil
	}
	if err := setBPFStats(true); err != nil {
		return err
	}
	syscall.Rmdir(cg) // left by a killed run
	if err := os.Mkdir(cg, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	defer syscall.Rmdir(cg)
	latFile := filepath.Join(c.workdir, "switch-latency.log")
	if err := os.WriteFile(latFile, nil, 0o644); err != nil {
		return err
	}
	for round := 0; round < c.rounds; round++ {
		for i := range switchCostPhases {
			phase := switchCostPhases[(i+round)%len(switchCostPhases)]
			var u usage
			if _, err := runqPhase(ctx, c, cg, latFile, phase, 5000+round*10+i, &u); err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, phase, err)
			}
			sc.perRound[phase] = append(sc.perRound[phase], u)
			logf("switch cost round %d, %s: %d switches, %.1f ns each", round+1, phase, u.cnt, u.perRun())
		}
	}
	return nil
}

func (ex *extra) renderSwitchCost(w io.Writer) {
	sc := &ex.switchCost
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## The sched_switch program's cost per switch")
	p("")
	p("`on_switch`, numatrace's one program on sched_switch, serves memstall_wait (attached in every trace: where a thread enters or leaves the CPU inside a PSI memory stall) and run-queue wait (with a latency source and a target); it is built once per set of jobs (`on_switch_ms`, `on_switch_rq`), so no switch loads a global to learn which are on: on this hook each cache line the scheduler has not just touched costs 25-40 ns here. Its `run_time_ns / run_cnt` with `kernel.bpf_stats_enabled=1`, during the run-queue section's storm (`stress-ng --switch 2`, %s per phase, the storm in T but for the last row), phases rotating over %d rounds; every switch on the machine meanwhile is in the count. The floor is an empty tp_btf program on sched_switch; the clock reads BPF stats add are in every row alike. No thread of the storm is in a memory stall, so memstall_wait's whole cost on them is its `in_memstall` check on prev and on next: memstall only, above the floor.", sc.phase, len(sc.perRound[runqFloor]))
	p("")
	if sc.why != "" {
		p("Not measured: %s.", sc.why)
		return
	}
	p("| phase | on_switch's jobs | switches | ns per switch | above the floor | per round, above the floor | target | result |")
	p("|---|---|--:|--:|--:|---|---|---|")
	for _, phase := range switchCostPhases {
		u := sc.sum(phase)
		above, rounds := "—", "—"
		target, result := "", ""
		if phase != runqFloor {
			all, per := sc.aboveFloor(phase)
			above = fmt.Sprintf("%+.1f", all)
			var rs []string
			for _, r := range per {
				rs = append(rs, fmt.Sprintf("%+.1f", r))
			}
			rounds = strings.Join(rs, ", ")
			if phase == runqPlain {
				target, result = fmt.Sprintf("≤ %d ns (the in_memstall check)", inMemstallMaxNs), "pass"
				if u.cnt == 0 || all > inMemstallMaxNs {
					result = "**miss**"
				}
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |", phase, switchCostJob[phase], thousands(u.cnt), nsPerRunDec(u), above, rounds, target, result)
	}
	p("")
	p("Run-queue wait, for every switch, is the target filter (for `--cgroup`, a hash lookup of the thread's process); for a switched-in thread of the target it also reads the scheduler's run-queue times and the thread's last run_delay from its task storage, and for a wait past `--min-stall` (runq_wait=10us by default) adds to a histogram and the thread's running totals. The ratios of the section above are the same storm's throughput, with BPF stats off.")
}

// nsPerRunDec is u's ns per run to a tenth, or — with no runs.
func nsPerRunDec(u usage) string {
	if u.cnt == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", u.perRun())
}
