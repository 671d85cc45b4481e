package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// socketTiming is what timing requests on the target's own sockets costs
// (the default latency source for --pid): redis's saturated throughput
// with it and without numatrace, the sockreq programs' run time per
// request with the stall breakdown and without it, and a syscall-heavy
// process that is not the target, by round.
//
// Saturated means the CPU is: redis and its client share one CPU, and
// numatrace runs on the other. With a CPU each (as before), redis idled a
// third of the time, waiting on its client, and took the programs' cost
// out of that idle time: the ratio read about 1.0 whatever they cost.
type socketTiming struct {
	none, with, bare []float64 // redis requests a second: no numatrace, kernel source, --request-stalls=false
	hooks            []float64 // redis requests a second with empty programs on the kernel source's hooks
	nsWith, nsBare   []float64 // sockreq programs' ns per request (bpf_stats)
	// allWith and allStalls are every program's ns per request (bpf_stats:
	// the sockreq programs, on_switch, the stall programs), with the
	// budget and with the stall breakdown but not the budget's counters
	// (--request-times=false): what the budget adds is allWith's excess,
	// in the same rounds; it adds to on_switch (a traced thread's
	// switch-in notes its time on a CPU) as well as to the sockreq programs.
	allWith, allStalls []float64
	other, otherNone   []float64 // the non-target's seconds, with numatrace on redis and without
	otherBPF           []float64 // the share of the non-target's run that numatrace's programs ran (bpf_stats)
	why                string    // not measured: why
}

const (
	socketRounds      = 5
	socketRequests    = 200000 // per round and test (GET, SET)
	socketTarget      = 0.97   // redis throughput, of none
	budgetTarget      = 1.20   // ns per request with the budget, of without it
	socketOtherTarget = 0.99   // the non-target's speed, of none
	// redis and its client saturate redisCPU; numatrace runs on
	// otherCPU, and the non-target on redisCPU with redis idle (not on
	// numatrace's CPU, where its poll loop's wakeups would be charged).
	redisCPU, otherCPU = "1", "0"
)

var rpsRe = regexp.MustCompile(`([0-9.]+) requests per second`)

// measureSocketTiming runs redis-server and redis-benchmark on one CPU
// (GET and SET, 12 connections), rounds alternating nothing attached,
// the kernel source, the kernel source without the breakdown, and empty
// programs on the source's hooks (what any program there costs); and dd
// of one byte a write, not the target, beside each. Throughput ratios are
// the median of each round's pair: the host's speed drifts between rounds
// by more than the cost measured.
func measureSocketTiming(ctx context.Context, c *config, ex *extra) error {
	for _, b := range []string{"redis-server", "redis-benchmark", "dd"} {
		if _, err := exec.LookPath(b); err != nil {
			ex.socket.why = b + " not found"
			return nil
		}
	}
	for round := 0; round < socketRounds; round++ {
		for _, mode := range []string{"none", "kernel", "bare", "hooks", "stalls"} {
			// Throughput with bpf_stats off (its clock reads would be
			// charged to numatrace); then the programs' run time in a run
			// of its own with it on.
			if mode == "stalls" { // its run time alone: its throughput is the kernel source's
				stats, err := socketRound(ctx, c, mode, round, true)
				if err != nil {
					return err
				}
				ex.socket.allStalls = append(ex.socket.allStalls, stats.all)
				logf("socket timing round %d (%s): %.0f ns a request in all programs", round+1, mode, stats.all)
				continue
			}
			run, err := socketRound(ctx, c, mode, round, false)
			if err != nil {
				return err
			}
			rps, other := run.rps, run.other
			var ns float64
			if mode != "none" && mode != "hooks" {
				stats, err := socketRound(ctx, c, mode, round, true)
				if err != nil {
					return err
				}
				ns = stats.ns
				if mode == "kernel" {
					ex.socket.otherBPF = append(ex.socket.otherBPF, stats.otherBPF)
					ex.socket.allWith = append(ex.socket.allWith, stats.all)
				}
			}
			switch mode {
			case "none":
				ex.socket.none = append(ex.socket.none, rps)
				ex.socket.otherNone = append(ex.socket.otherNone, other)
			case "kernel":
				ex.socket.with = append(ex.socket.with, rps)
				ex.socket.nsWith = append(ex.socket.nsWith, ns)
				ex.socket.other = append(ex.socket.other, other)
			case "hooks":
				ex.socket.hooks = append(ex.socket.hooks, rps)
			default:
				ex.socket.bare = append(ex.socket.bare, rps)
				ex.socket.nsBare = append(ex.socket.nsBare, ns)
			}
			logf("socket timing round %d (%s): %.0f requests/s, %.0f ns a request in the kernel, non-target %.2fs", round+1, mode, rps, ns, other)
		}
	}
	return nil
}

// socketRun is what one redis run measured.
type socketRun struct {
	rps      float64 // redis's requests a second
	ns       float64 // the sockreq programs' ns per request (with stats)
	all      float64 // every program's
	other    float64 // the non-target's seconds (none and kernel, without stats)
	otherBPF float64 // the share of the non-target's run numatrace's programs took (kernel, with stats)
}

// socketRound is one redis run.
func socketRound(ctx context.Context, c *config, mode string, round int, stats bool) (run socketRun, err error) {
	if err := setBPFStats(stats); err != nil {
		return run, err
	}
	port := strconv.Itoa(16379 + round)
	srv, err := startProc("redis-server", filepath.Join(c.workdir, "redis.log"), io.Discard,
		"taskset", "-c", redisCPU, "redis-server", "--port", port, "--save", "", "--appendonly", "no")
	if err != nil {
		return run, err
	}
	defer srv.stop(syscall.SIGKILL, time.Second)
	time.Sleep(500 * time.Millisecond)
	pid, err := redisPID(srv.pid())
	if err != nil {
		return run, err
	}
	var s *session
	switch mode {
	case "none":
	case "hooks":
		// The hooks of the 6.3+ set (SockreqViaSock), each with a program
		// that only returns: the floor under any timer on them.
		if s, err = startFloorOn(ctx, c, round, "-tracepoint", "tcp_probe,sock_send_length,inet_sock_set_state", "-name", "sockfloor"); err != nil {
			return run, err
		}
		defer s.stop()
	default:
		ready := filepath.Join(c.workdir, fmt.Sprintf("numatrace-socket-ready-%d-%s", round, mode))
		os.Remove(ready)
		nt, err := startProc("numatrace", filepath.Join(c.workdir, "numatrace-socket.log"), io.Discard,
			"taskset", "-c", otherCPU, c.numatrace, "attach", "--no-tui", "--duration", "10m", "--ready-file", ready, "--pid", strconv.Itoa(pid),
			"--request-stalls="+strconv.FormatBool(mode != "bare"), "--request-times="+strconv.FormatBool(mode == "kernel"))
		if err != nil {
			return run, err
		}
		s = &session{p: nt, stopSig: syscall.SIGINT}
		defer s.stop()
		if _, err := waitFile(ctx, nt, ready, 5*time.Millisecond); err != nil {
			return run, err
		}
	}
	before, err := progStats(ctx)
	if err != nil {
		return run, err
	}
	const requests = socketRequests
	out, err := runFg(ctx, "taskset", "-c", redisCPU, "redis-benchmark", "-p", port, "-c", "12",
		"-n", strconv.Itoa(requests), "-t", "get,set", "-q")
	if err != nil {
		return run, err
	}
	after, err := progStats(ctx)
	if err != nil {
		return run, err
	}
	if run.rps, err = meanRPS(out); err != nil {
		return run, err
	}
	if s != nil && mode != "hooks" {
		var u, all usage
		for id, p := range after {
			b := before[id]
			if p.RunCnt < b.RunCnt {
				continue
			}
			d := usage{ns: p.RunTimeNs - b.RunTimeNs, cnt: p.RunCnt - b.RunCnt}
			if strings.HasPrefix(p.Name, "sockreq_") {
				u.add(d)
			}
			all.add(d)
		}
		run.ns = float64(u.ns) / (2 * requests)
		run.all = float64(all.ns) / (2 * requests)
	}
	switch {
	case mode != "bare" && mode != "hooks" && mode != "stalls" && !stats:
		run.other, err = timeNonTarget(ctx)
	case mode == "kernel":
		run.otherBPF, err = nonTargetBPFShare(ctx)
	}
	return run, err
}

// nonTargetBPFShare is the share of the non-target's run that programs
// ran (bpf_stats on): what numatrace can cost it in the kernel, exact
// where its timed ratio is within the host's noise.
func nonTargetBPFShare(ctx context.Context) (float64, error) {
	before, err := progStats(ctx)
	if err != nil {
		return 0, err
	}
	secs, err := timeNonTarget(ctx)
	if err != nil {
		return 0, err
	}
	after, err := progStats(ctx)
	if err != nil {
		return 0, err
	}
	var ns uint64
	for id, p := range after {
		if b := before[id]; p.RunTimeNs >= b.RunTimeNs {
			ns += p.RunTimeNs - b.RunTimeNs
		}
	}
	return float64(ns) / (secs * 1e9), nil
}

// redisPID checks that pid is redis-server (taskset execs it) and returns it.
func redisPID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, err
	}
	if strings.TrimSpace(string(b)) != "redis-server" {
		return 0, fmt.Errorf("pid %d is %q, not redis-server", pid, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// meanRPS is the mean of redis-benchmark -q's requests per second.
func meanRPS(out string) (float64, error) {
	var sum float64
	m := rpsRe.FindAllStringSubmatch(strings.ReplaceAll(out, "\r", "\n"), -1)
	for _, g := range m {
		v, _ := strconv.ParseFloat(g[1], 64)
		sum += v
	}
	if len(m) == 0 {
		return 0, fmt.Errorf("redis-benchmark printed no throughput: %.200q", out)
	}
	return sum / float64(len(m)), nil
}

// timeNonTarget times dd copying 8 MiB one byte a write on redis's CPU,
// redis idle: 16M syscalls of a process that is not the target.
func timeNonTarget(ctx context.Context) (float64, error) {
	t0 := time.Now()
	if _, err := runFg(ctx, "taskset", "-c", redisCPU, "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=8M", "status=none"); err != nil {
		return 0, err
	}
	return time.Since(t0).Seconds(), nil
}

// renderSocketTiming writes the socket request timer's section.
func (ex *extra) renderSocketTiming(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## Timing requests on the target's sockets")
	p("")
	p("The default latency source of `attach --pid` (`--latency kernel`): redis-server and redis-benchmark sharing CPU %s, which they saturate (GET and SET, 12 connections, %d each), numatrace on CPU %s; %d rounds of nothing attached, numatrace with the kernel source, with it but no per-request stall breakdown (`--request-stalls=false`), with the breakdown but not the budget's counters (`--request-times=false`, run time only), and programs that only return on the source's hooks (tcp_probe, sock_send_length, inet_sock_set_state: the floor under any program there), with bpf_stats off. Throughput ratios are the median of the rounds' pairs (the host's speed drifts between rounds by more than the cost). The sockreq programs' run time per request is from bpf_stats in runs of their own (both sides of loopback run them: the client's segments and sends miss, an early return). `dd bs=1 count=8M` (16M syscalls) is a process that is not the target, on CPU %s beside redis idle, with numatrace on redis and without; its ratio too is the median of the rounds' pairs, but a round of it swings ±5%% with the host; the target is judged on the bound that is exact: 1 less the share of its run in which any BPF program ran (bpf_stats, in the kernel source's stats runs).",
		redisCPU, socketRequests, otherCPU, socketRounds, redisCPU)
	p("")
	if ex.socket.why != "" {
		p("Not measured: %s.", ex.socket.why)
		return
	}
	none, with, bare := median(ex.socket.none), median(ex.socket.with), median(ex.socket.bare)
	ratio, bareRatio := pairedRatio(ex.socket.with, ex.socket.none), pairedRatio(ex.socket.bare, ex.socket.none)
	other := pairedRatio(ex.socket.otherNone, ex.socket.other) // times: none's over numatrace's is its speed
	verdict := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "**miss**"
	}
	p("| measure | value | target | result |")
	p("|---|--:|---|---|")
	p("| redis requests/s, nothing attached | %.0f | | |", none)
	p("| with the kernel source | %.0f (%.3f of none; rounds %s) | ≥ %.2f | %s |", with, ratio, ratios(ex.socket.with, ex.socket.none), socketTarget, verdict(ratio >= socketTarget))
	p("| without the stall breakdown | %.0f (%.3f of none; rounds %s) | | |", bare, bareRatio, ratios(ex.socket.bare, ex.socket.none))
	p("| empty programs on the same hooks (the floor) | %.0f (%.3f of none; rounds %s) | | |", median(ex.socket.hooks), pairedRatio(ex.socket.hooks, ex.socket.none), ratios(ex.socket.hooks, ex.socket.none))
	p("| sockreq programs, ns per request (bpf_stats) | %.0f with the breakdown, %.0f without | | |", median(ex.socket.nsWith), median(ex.socket.nsBare))
	budget := pairedRatio(ex.socket.allWith, ex.socket.allStalls)
	p("| the budget (the serving thread's counters at each request's ends, its switch-ins noted): every program's ns per request with it, of without it (`--request-times=false`), same rounds | %.0f of %.0f: %.3f (rounds %s) | ≤ %.2f | %s |",
		median(ex.socket.allWith), median(ex.socket.allStalls), budget, ratios(ex.socket.allWith, ex.socket.allStalls), budgetTarget, verdict(budget <= budgetTarget))
	bpfBound := 1 - median(ex.socket.otherBPF)
	p("| a syscall-heavy non-target's speed, of none, timed | %.3f (rounds %s) | | |", other, ratios(ex.socket.otherNone, ex.socket.other))
	p("| the same, bounded by numatrace's programs' share of its run (bpf_stats) | ≥ %.4f (%.3f%% of its time) | ≥ %.2f | %s |", bpfBound, 100*median(ex.socket.otherBPF), socketOtherTarget, verdict(bpfBound >= socketOtherTarget))
}

// pairedRatio is the median of the rounds' ratios a[i]/b[i].
func pairedRatio(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median(r)
}

// ratios lists the rounds' ratios a[i]/b[i], for the table.
func ratios(a, b []float64) string {
	var out []string
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, fmt.Sprintf("%.2f", a[i]/b[i]))
		}
	}
	return strings.Join(out, ", ")
}
