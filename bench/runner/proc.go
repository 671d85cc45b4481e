package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is a background child: a tracer held attached during a phase.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

var (
	liveMu sync.Mutex
	live   = map[*proc]bool{}
)

// childAttr puts a child in its own process group, so that Ctrl-C reaches
// only the runner, which then stops children in order, and kills the child
// if the runner itself dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startProc starts a background child. Its stderr goes to logPath, and so
// does its stdout when stdout is nil.
func startProc(name, logPath string, stdout io.Writer, argv ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = stdout
	if stdout == nil {
		cmd.Stdout = logf
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	liveMu.Lock()
	live[p] = true
	liveMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		liveMu.Lock()
		delete(live, p)
		liveMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig, waits up to grace for the child to exit, then kills it.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s (pid %d) ignored %v for %s and was killed", p.name, p.pid(), sig, grace)
}

// killAll kills every background child still running.
func killAll() {
	liveMu.Lock()
	ps := make([]*proc, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	liveMu.Unlock()
	for _, p := range ps {
		_ = p.stop(syscall.SIGTERM, 3*time.Second)
	}
}

// logTail is the end of a child's log, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// runFg runs a short foreground child to completion and returns its stdout.
// The context kills it.
func runFg(ctx context.Context, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = childAttr()
	var stderr limitedBuf
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || stderr.Len() > 0 {
			return string(out), fmt.Errorf("%s: %w: %s", argv[0], err, stderr.String())
		}
		return string(out), fmt.Errorf("%s: %w", argv[0], err)
	}
	return string(out), nil
}

// limitedBuf keeps the first 4 KiB written to it.
type limitedBuf struct{ b []byte }

func (l *limitedBuf) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.b = append(l.b, p[:room]...)
	}
	return len(p), nil
}
func (l *limitedBuf) Len() int       { return len(l.b) }
func (l *limitedBuf) String() string { return string(l.b) }
