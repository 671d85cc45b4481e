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
	churn, err := startChurn(ctx, c)
	if err != nil {
		return err
	}
	defer func() { churn.cmd.Process.Kill(); churn.cmd.Wait() }()

	ready := filepath.Join(c.workdir, "storm-ready")
	nt, out, err := startStormTracer(c, ready, churn.cmd.Process.Pid)
	if err != nil {
		return err
	}
	defer nt.stop(syscall.SIGKILL, 0)
	if _, err := waitFile(ctx, nt, ready, 10*time.Millisecond); err != nil {
		return err
	}
	r := &stormResult{rate: c.stormRate, pairs: c.stormPairs, dur: c.stormDur}
	logf("storm: %d threads a second for %s, traced by --pid", c.stormRate, c.stormDur)
	fmt.Fprintln(churn.stdin, "go")
	line, err := sampleStorm(ctx, nt, churn.stdout, r)
	if err != nil {
		return err
	}
	if err := parseChurnReport(line, r); err != nil {
		return fmt.Errorf("%w: %s", err, churn.stderr.String())
	}
	churn.stdin.Close()
	churn.cmd.Wait() // the target exits: numatrace reports and ends by itself
	if err := waitStormTracer(ctx, nt); err != nil {
		return err
	}
	if err := readStormSummary(out, r); err != nil {
		return err
	}
	ex.storm = r
	logf("storm: %d threads in %.1f s, %d events (%d lost), %d lines; VmHWM %d kB at %s, %d kB at %s (%.3f)",
		r.threads, r.seconds, r.events, r.lost, r.lines, r.hwmStart, r.startedAt.Round(time.Second), r.hwmEnd,
		r.endedAt.Round(time.Second), r.ratio())
	return nil
}

// churnProc is bench/churn, started and waiting for "go" on its stdin.
type churnProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *limitedBuf
}

func startChurn(ctx context.Context, c *config) (*churnProc, error) {
	cmd := exec.CommandContext(ctx, c.churn, "-rate", strconv.Itoa(c.stormRate), "-duration", c.stormDur.String(),
		"-pairs", strconv.Itoa(c.stormPairs))
	cmd.SysProcAttr = childAttr()
	p := &churnProc{cmd: cmd, stderr: &limitedBuf{}}
	cmd.Stderr = p.stderr
	p.stdin, _ = cmd.StdinPipe()
	p.stdout, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start churn: %w", err)
	}
	return p, nil
}

// startStormTracer starts numatrace on pid with every mmap_lock
// acquisition a streamed stall event, its NDJSON lines counted.
func startStormTracer(c *config, ready string, pid int) (*proc, *lineCounter, error) {
	out := &lineCounter{limit: 1 << 24}
	nt, err := startProc("numatrace", filepath.Join(c.workdir, "storm.log"), out, numatraceArgs(c, ready,
		"--pid", strconv.Itoa(pid), "--causes", "mmap_lock", "--mmap-lock-via", "tracepoints",
		"--min-stall", "0", "--min-event", "mmap_lock=0")...)
	return nt, out, err
}

// sampleStorm samples numatrace's memory into r once a second until churn
// prints its line at the storm's end, and returns that line.
func sampleStorm(ctx context.Context, nt *proc, churnOut io.Reader, r *stormResult) (string, error) {
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(churnOut).ReadString('\n')
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
			return "", ctx.Err()
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
	return line, nil
}

// parseChurnReport reads churn's "threads N in S" line into r.
func parseChurnReport(line string, r *stormResult) error {
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "threads" {
		return fmt.Errorf("churn printed %q", line)
	}
	r.threads, _ = strconv.Atoi(f[1])
	r.seconds, _ = strconv.ParseFloat(f[3], 64)
	return nil
}

// waitStormTracer waits for numatrace to end by itself once its target
// has exited.
func waitStormTracer(ctx context.Context, nt *proc) error {
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
	return nil
}

// readStormSummary reads the line count and numatrace's closing summary,
// its last line, into r.
func readStormSummary(out *lineCounter, r *stormResult) error {
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
