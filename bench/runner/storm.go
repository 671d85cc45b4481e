package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The storm: numatrace's memory through minutes of events from threads
// that come and go, 2,000 a second, traced by --pid with every mmap_lock
// acquisition a streamed stall event. Its peak memory once warm must not
// grow by the end.

// stormWarmup is when the storm's starting peak is read: past the
// kernel's 16,384 thread histograms, once the first windows have closed.
const stormWarmup = 10 * time.Second

// stormMaxRatio is the target: the peak at the end at most this many
// times the peak after the warm-up.
const stormMaxRatio = 1.10

type stormResult struct {
	rate, pairs        int
	dur                time.Duration // how long threads were started
	threads            int           // started by bench/churn
	seconds            float64       // bench/churn's own time
	events, lost       uint64        // numatrace's summary
	stalls             uint64        // mmap_lock stalls, from the kernel's totals
	evicted            uint64        // thread histograms evicted
	lines              uint64        // NDJSON lines numatrace wrote
	hwmStart, hwmEnd   uint64        // VmHWM (kB) after the warm-up and at the storm's end
	rssStart, rssEnd   uint64        // VmRSS (kB), the same moments
	maxRSS             uint64        // the highest VmRSS sampled (kB), once a second
	startedAt, endedAt time.Duration
}

func (s *stormResult) ratio() float64 {
	if s.hwmStart == 0 {
		return 0
	}
	return float64(s.hwmEnd) / float64(s.hwmStart)
}

// lineCounter counts the lines written to it and keeps the last one.
type lineCounter struct {
	mu    sync.Mutex
	n     uint64
	last  []byte // the last complete line
	tail  []byte // what follows it so far
	limit int
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += uint64(bytes.Count(p, []byte("\n")))
	i := bytes.LastIndexByte(p, '\n')
	if i < 0 {
		if len(l.tail)+len(p) <= l.limit {
			l.tail = append(l.tail, p...)
		}
		return len(p), nil
	}
	if j := bytes.LastIndexByte(p[:i], '\n'); j >= 0 {
		l.last = append(l.last[:0], p[j+1:i]...)
	} else {
		l.last = append(append(l.last[:0], l.tail...), p[:i]...)
	}
	l.tail = append(l.tail[:0], p[i+1:]...)
	return len(p), nil
}

func (l *lineCounter) result() (uint64, []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, append([]byte(nil), l.last...)
}

func measureStorm(ctx context.Context, c *config, ex *extra) error {
	churn := exec.CommandContext(ctx, c.churn, "-rate", strconv.Itoa(c.stormRate), "-duration", c.stormDur.String(),
		"-pairs", strconv.Itoa(c.stormPairs))
	churn.SysProcAttr = childAttr()
	var churnErr limitedBuf
	churn.Stderr = &churnErr
	stdin, _ := churn.StdinPipe()
	stdout, _ := churn.StdoutPipe()
	if err := churn.Start(); err != nil {
		return fmt.Errorf("start churn: %w", err)
	}
	defer func() { churn.Process.Kill(); churn.Wait() }()

	ready := filepath.Join(c.workdir, "storm-ready")
	out := &lineCounter{limit: 1 << 24}
	nt, err := startProc("numatrace", filepath.Join(c.workdir, "storm.log"), out, numatraceArgs(c, ready,
		"--pid", strconv.Itoa(churn.Process.Pid), "--causes", "mmap_lock", "--mmap-lock-via", "tracepoints",
		"--min-stall", "0", "--min-event", "mmap_lock=0")...)
	if err != nil {
		return err
	}
	defer nt.stop(syscall.SIGKILL, 0)
	if _, err := waitFile(ctx, nt, ready, 10*time.Millisecond); err != nil {
		return err
	}
	r := &stormResult{rate: c.stormRate, pairs: c.stormPairs, dur: c.stormDur}
	logf("storm: %d threads a second for %s, traced by --pid", c.stormRate, c.stormDur)
	fmt.Fprintln(stdin, "go")
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			line = fmt.Sprintf("(%v)", err)
		}
		done <- line
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var line string
	for line == "" {
		select {
		case line = <-done:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		rss, hwm := statusKB(nt.pid(), "VmRSS"), statusKB(nt.pid(), "VmHWM")
		r.maxRSS = max(r.maxRSS, rss)
		if r.hwmStart == 0 && time.Since(start) >= stormWarmup {
			r.hwmStart, r.rssStart, r.startedAt = hwm, rss, time.Since(start)
		}
		if line != "" { // the storm is over: numatrace has yet to build its report
			r.hwmEnd, r.rssEnd, r.endedAt = hwm, rss, time.Since(start)
		}
	}
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "threads" {
		return fmt.Errorf("churn printed %q: %s", line, churnErr.String())
	}
	r.threads, _ = strconv.Atoi(f[1])
	r.seconds, _ = strconv.ParseFloat(f[3], 64)
	stdin.Close()
	churn.Wait() // the target exits: numatrace reports and ends by itself
	select {
	case <-nt.done:
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("numatrace did not end after the storm's target exited\n%s", logTail(nt.log))
	case <-ctx.Done():
		return ctx.Err()
	}
	if nt.err != nil {
		return fmt.Errorf("numatrace: %v\n%s", nt.err, logTail(nt.log))
	}
	var last []byte
	r.lines, last = out.result()
	var sum struct {
		Type    string `json:"type"`
		Events  uint64 `json:"events"`
		Lost    uint64 `json:"lost_events"`
		Evicted uint64 `json:"histograms_evicted"`
		Causes  map[string]struct {
			Count uint64 `json:"count"`
		} `json:"causes"`
	}
	if err := json.Unmarshal(last, &sum); err != nil || sum.Type != "summary" {
		return fmt.Errorf("numatrace's last line is not its summary (%v): %.300s", err, last)
	}
	r.events, r.lost, r.evicted, r.stalls = sum.Events, sum.Lost, sum.Evicted, sum.Causes["mmap_lock"].Count
	ex.storm = r
	logf("storm: %d threads in %.1f s, %d events (%d lost), %d lines; VmHWM %d kB at %s, %d kB at %s (%.3f)",
		r.threads, r.seconds, r.events, r.lost, r.lines, r.hwmStart, r.startedAt.Round(time.Second), r.hwmEnd,
		r.endedAt.Round(time.Second), r.ratio())
	return nil
}

func (ex *extra) renderStorm(w io.Writer) {
	r := ex.storm
	if r == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## Memory through a storm of events and threads")
	p("")
	p("`numatrace attach --pid` of `bench/churn`, which starts %s threads a second for %.0f s; each maps and unmaps a page %d times and exits. With `--mmap-lock-via tracepoints --min-stall 0 --min-event mmap_lock=0` every acquisition is a stall event, streamed as NDJSON (the runner counts the lines). Peak memory (VmHWM) is read %.0f s into the storm and again as its last thread exits, before numatrace builds its report; VmRSS at the same moments, and its highest, sampled once a second. The ratio is of the two peaks, from this one run.",
		thousands(uint64(r.rate)), r.dur.Seconds(), r.pairs, stormWarmup.Seconds())
	p("")
	p("| threads | threads/s | events | lost | NDJSON lines | stalls (kernel totals) | histograms evicted | VmHWM at %.0f s | VmHWM at the end | ratio | VmRSS then, at the end, highest | target | result |", stormWarmup.Seconds())
	p("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|---|")
	res := "pass"
	if r.ratio() > stormMaxRatio || r.hwmStart == 0 {
		res = "**miss**"
	}
	p("| %s | %.0f | %s | %s | %s | %s | %s | %.1f MiB | %.1f MiB | %.3f | %.1f, %.1f, %.1f MiB | ratio ≤ %.2f | %s |",
		thousands(uint64(r.threads)), float64(r.threads)/r.seconds, thousands(r.events), thousands(r.lost), thousands(r.lines),
		thousands(r.stalls), thousands(r.evicted), float64(r.hwmStart)/1024, float64(r.hwmEnd)/1024, r.ratio(),
		float64(r.rssStart)/1024, float64(r.rssEnd)/1024, float64(r.maxRSS)/1024, stormMaxRatio, res)
}
