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
type socketTiming struct {
	none, with, bare []float64 // redis requests a second: no numatrace, kernel source, --request-stalls=false
	nsWith, nsBare   []float64 // sockreq programs' ns per request (bpf_stats)
	other, otherNone []float64 // the non-target's seconds, with numatrace on redis and without
	why              string    // not measured: why
}

const (
	socketRounds       = 4
	socketTarget       = 0.97 // redis throughput, of none
	socketOtherTarget  = 0.99 // the non-target's speed, of none
	redisCPU, benchCPU = "1", "0"
)

var rpsRe = regexp.MustCompile(`([0-9.]+) requests per second`)

// measureSocketTiming runs redis-server on one CPU and redis-benchmark on
// the other (GET and SET, 12 connections), rounds alternating nothing
// attached, the kernel source, and the kernel source without the
// breakdown; and dd of one byte a write, not the target, beside each.
func measureSocketTiming(ctx context.Context, c *config, ex *extra) error {
	for _, b := range []string{"redis-server", "redis-benchmark", "dd"} {
		if _, err := exec.LookPath(b); err != nil {
			ex.socket.why = b + " not found"
			return nil
		}
	}
	for round := 0; round < socketRounds; round++ {
		for _, mode := range []string{"none", "kernel", "bare"} {
			// Throughput with bpf_stats off (its clock reads would be
			// charged to numatrace); then the programs' run time in a run
			// of its own with it on.
			rps, _, other, err := socketRound(ctx, c, mode, round, false)
			if err != nil {
				return err
			}
			var ns float64
			if mode != "none" {
				if _, ns, _, err = socketRound(ctx, c, mode, round, true); err != nil {
					return err
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
			default:
				ex.socket.bare = append(ex.socket.bare, rps)
				ex.socket.nsBare = append(ex.socket.nsBare, ns)
			}
			logf("socket timing round %d (%s): %.0f requests/s, %.0f ns a request in the kernel, non-target %.2fs", round+1, mode, rps, ns, other)
		}
	}
	return nil
}

// socketRound is one redis run: its throughput, the sockreq programs' ns
// per request (with stats), and (none and kernel, without stats) the
// non-target's time.
func socketRound(ctx context.Context, c *config, mode string, round int, stats bool) (rps, ns, other float64, err error) {
	if err := setBPFStats(stats); err != nil {
		return 0, 0, 0, err
	}
	port := strconv.Itoa(16379 + round)
	srv, err := startProc("redis-server", filepath.Join(c.workdir, "redis.log"), io.Discard,
		"taskset", "-c", redisCPU, "redis-server", "--port", port, "--save", "", "--appendonly", "no")
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.stop(syscall.SIGKILL, time.Second)
	time.Sleep(500 * time.Millisecond)
	pid, err := redisPID(srv.pid())
	if err != nil {
		return 0, 0, 0, err
	}
	var s *session
	if mode != "none" {
		ready := filepath.Join(c.workdir, fmt.Sprintf("numatrace-socket-ready-%d-%s", round, mode))
		os.Remove(ready)
		nt, err := startProc("numatrace", filepath.Join(c.workdir, "numatrace-socket.log"), io.Discard,
			c.numatrace, "attach", "--no-tui", "--duration", "10m", "--ready-file", ready, "--pid", strconv.Itoa(pid),
			"--request-stalls="+strconv.FormatBool(mode == "kernel"))
		if err != nil {
			return 0, 0, 0, err
		}
		s = &session{p: nt, stopSig: syscall.SIGINT}
		defer s.stop()
		if _, err := waitFile(ctx, nt, ready, 5*time.Millisecond); err != nil {
			return 0, 0, 0, err
		}
	}
	before, err := progStats(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	const requests = 400000 // per test, GET and SET
	out, err := runFg(ctx, "taskset", "-c", benchCPU, "redis-benchmark", "-p", port, "-c", "12",
		"-n", strconv.Itoa(requests), "-t", "get,set", "-q")
	if err != nil {
		return 0, 0, 0, err
	}
	after, err := progStats(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	rps, err = meanRPS(out)
	if err != nil {
		return 0, 0, 0, err
	}
	if s != nil {
		var u usage
		for id, p := range after {
			if b := before[id]; strings.HasPrefix(p.Name, "sockreq_") && p.RunCnt >= b.RunCnt {
				u.add(usage{ns: p.RunTimeNs - b.RunTimeNs, cnt: p.RunCnt - b.RunCnt})
			}
		}
		ns = float64(u.ns) / (2 * requests)
	}
	if mode != "bare" && !stats {
		if other, err = timeNonTarget(ctx); err != nil {
			return 0, 0, 0, err
		}
	}
	return rps, ns, other, nil
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

// timeNonTarget times dd copying 2 MiB one byte a write on the bench CPU:
// 4M syscalls of a process that is not the target.
func timeNonTarget(ctx context.Context) (float64, error) {
	t0 := time.Now()
	if _, err := runFg(ctx, "taskset", "-c", benchCPU, "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=2M", "status=none"); err != nil {
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
	p("The default latency source of `attach --pid` (`--latency kernel`): redis-server on CPU %s saturated by redis-benchmark on CPU %s (GET and SET, 12 connections, 400,000 each), %d rounds of nothing attached, numatrace with the kernel source, and with it but no per-request stall breakdown (`--request-stalls=false`), with bpf_stats off; the sockreq programs' run time per request from bpf_stats in runs of their own (both sides of loopback run them: the client's segments and calls miss); and `dd bs=1 count=2M` (4M syscalls) of a process that is not the target, beside redis idle, with numatrace on redis and without. Ratios are of medians in one run.", redisCPU, benchCPU, socketRounds)
	p("")
	if ex.socket.why != "" {
		p("Not measured: %s.", ex.socket.why)
		return
	}
	none, with, bare := median(ex.socket.none), median(ex.socket.with), median(ex.socket.bare)
	ratio, bareRatio := with/none, bare/none
	other := median(ex.socket.otherNone) / median(ex.socket.other)
	verdict := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "**miss**"
	}
	p("| measure | value | target | result |")
	p("|---|--:|---|---|")
	p("| redis requests/s, nothing attached | %.0f | | |", none)
	p("| with the kernel source | %.0f (%.3f of none) | ≥ %.2f | %s |", with, ratio, socketTarget, verdict(ratio >= socketTarget))
	p("| without the stall breakdown | %.0f (%.3f of none) | | |", bare, bareRatio)
	p("| sockreq programs, ns per request (bpf_stats) | %.0f with the breakdown, %.0f without | | |", median(ex.socket.nsWith), median(ex.socket.nsBare))
	p("| a syscall-heavy non-target's speed, of none | %.3f | ≥ %.2f | %s |", other, socketOtherTarget, verdict(other >= socketOtherTarget))
}
