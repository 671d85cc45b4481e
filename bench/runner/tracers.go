package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tracerKind is one of the things measured: numatrace, the floor program,
// or the bpftrace reference.
type tracerKind struct {
	key       string
	workloads []string
	start     func(ctx context.Context, c *config, round int) (*session, error)
}

// session is a tracer held attached in the background.
type session struct {
	p       *proc
	stopSig syscall.Signal
	progs   map[int]string // program id -> tracepoint it is attached to
	names   map[int]string // program id -> name, as bpftool shows it
	stopped bool
	stopErr error
}

func (s *session) stop() error {
	if !s.stopped {
		s.stopped = true
		s.stopErr = s.p.stop(s.stopSig, 15*time.Second)
	}
	return s.stopErr
}

const readyTimeout = 60 * time.Second

// findPrograms records the programs p holds and their names.
func (s *session) findPrograms(ctx context.Context) error {
	progs, err := ownedPrograms(ctx, s.p.pid())
	if err != nil {
		return err
	}
	stats, err := progStats(ctx)
	if err != nil {
		return err
	}
	s.progs = progs
	s.names = map[int]string{}
	for id := range progs {
		s.names[id] = stats[id].Name
	}
	if len(progs) == 0 {
		return fmt.Errorf("%s (pid %d) is ready but holds no BPF programs", s.p.name, s.p.pid())
	}
	return nil
}

// waitFile polls for path until it exists, p exits, or the context or the
// timeout ends. It returns when the file was first seen.
func waitFile(ctx context.Context, p *proc, path string, poll time.Duration) (time.Time, error) {
	deadline := time.Now().Add(readyTimeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return time.Now(), nil
		}
		if p.exited() {
			return time.Time{}, fmt.Errorf("%s exited before it was ready: %v\n%s", p.name, p.err, logTail(p.log))
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s not ready after %s\n%s", p.name, readyTimeout, logTail(p.log))
		}
		if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		time.Sleep(poll)
	}
}

// numatraceArgs runs numatrace as a user would: system-wide, JSON out.
// The duration only bounds a run whose runner died; phases stop it with
// SIGINT.
func numatraceArgs(c *config, readyFile string, extra ...string) []string {
	return append([]string{c.numatrace, "attach", "--no-tui", "--json", "--duration", "10m", "--ready-file", readyFile}, extra...)
}

// startNumatraceFallback is numatrace with its mmap_lock waits timed on
// the mmap_lock tracepoints, as on 5.12–5.18: the per-run table measures
// those programs, which by default do not run on this kernel at all.
func startNumatraceFallback(ctx context.Context, c *config, round int) (*session, error) {
	return startNumatrace(ctx, c, round, "--mmap-lock-via", "tracepoints")
}

// startNumatrace is numatrace system-wide, with its programs found for
// the per-run table.
func startNumatrace(ctx context.Context, c *config, round int, extra ...string) (*session, error) {
	s, err := startNumatraceOn(ctx, c, round, extra...)
	if err != nil {
		return nil, err
	}
	if err := s.findPrograms(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// attachTime is the time from starting `numatrace attach --ready-file` to
// the ready file appearing.
func attachTime(ctx context.Context, c *config, i int) (time.Duration, error) {
	ready := filepath.Join(c.workdir, fmt.Sprintf("attach-ready-%d", i))
	os.Remove(ready)
	t0 := time.Now()
	p, err := startProc("numatrace", filepath.Join(c.workdir, fmt.Sprintf("attach-%d.log", i)),
		io.Discard, numatraceArgs(c, ready)...)
	if err != nil {
		return 0, err
	}
	t1, err := waitFile(ctx, p, ready, time.Millisecond)
	stopErr := p.stop(syscall.SIGINT, 15*time.Second)
	if err != nil {
		return 0, err
	}
	if stopErr != nil {
		return 0, stopErr
	}
	return t1.Sub(t0), nil
}

func startFloor(ctx context.Context, c *config, round int) (*session, error) {
	return startFloorOn(ctx, c, round)
}

// startFloorOn starts bench/floor with these flags.
func startFloorOn(ctx context.Context, c *config, round int, args ...string) (*session, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := startProc("floor", filepath.Join(c.workdir, fmt.Sprintf("floor-%d.log", round)), pw, append([]string{c.floor}, args...)...)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	s := &session{p: p, stopSig: syscall.SIGTERM}
	line := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case line <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-line:
		if strings.TrimSpace(l) != "ready" {
			s.stop()
			return nil, fmt.Errorf("floor said %q, not ready\n%s", l, logTail(p.log))
		}
	case <-p.done:
		return nil, fmt.Errorf("floor exited before it was ready: %v\n%s", p.err, logTail(p.log))
	case <-time.After(readyTimeout):
		s.stop()
		return nil, errors.New("floor not ready in time")
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	if err := s.findPrograms(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// scriptProbes counts the tracepoint probes of a bpftrace script.
func scriptProbes(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "tracepoint:") {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s has no tracepoint probes", path)
	}
	return n, nil
}

// startBpftrace starts the reference script. bpftrace is ready once all of
// its tracepoint probes show in `bpftool perf show` under its pid.
func startBpftrace(ctx context.Context, c *config, round int) (*session, error) {
	want, err := scriptProbes(c.script)
	if err != nil {
		return nil, err
	}
	p, err := startProc("bpftrace", filepath.Join(c.workdir, fmt.Sprintf("bpftrace-%d.log", round)),
		nil, "bpftrace", c.script)
	if err != nil {
		return nil, err
	}
	s := &session{p: p, stopSig: syscall.SIGINT}
	deadline := time.Now().Add(readyTimeout)
	for {
		progs, err := ownedPrograms(ctx, p.pid())
		if err != nil && !p.exited() {
			s.stop()
			return nil, err
		}
		attached := 0
		for _, tp := range progs {
			if tp != "" {
				attached++
			}
		}
		if attached >= want {
			break
		}
		if p.exited() {
			return nil, fmt.Errorf("bpftrace exited before it was ready: %v\n%s", p.err, logTail(p.log))
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("bpftrace attached %d of %d probes in %s\n%s", attached, want, readyTimeout, logTail(p.log))
		}
		if err := ctx.Err(); err != nil {
			s.stop()
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.findPrograms(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}
