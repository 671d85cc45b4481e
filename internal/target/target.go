// Package target resolves what numatrace was asked to trace (a process, a
// thread, a cgroup or the whole system) and notices when it goes away.
package target

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Kind of target.
type Kind int

const (
	System Kind = iota
	Process
	Thread
	Cgroup
)

// Target is one resolved target.
type Target struct {
	Kind Kind
	ID   uint32 // Process: pid; Thread: tid
	Path string // Cgroup: absolute directory
	Name string // Cgroup: what it is, when more than a directory (a pod)
	Comm string
	// Children (Process): the process is traced with all its
	// descendants, those alive now and those it forks later.
	Children bool
	proc     string // procfs root, "/proc" outside tests
}

// ErrNotFound means the named process, thread or cgroup does not exist.
var ErrNotFound = errors.New("not found")

// Resolve checks that the target exists. At most one of pid, tid and
// cgroup may be set; none means system-wide. cgroupRoot is where relative
// cgroup paths are looked up (normally /sys/fs/cgroup).
func Resolve(procRoot, cgroupRoot string, pid, tid int, cgroup string) (*Target, error) {
	set := 0
	for _, b := range []bool{pid != 0, tid != 0, cgroup != ""} {
		if b {
			set++
		}
	}
	if set > 1 {
		return nil, errors.New("give at most one of --pid, --tid and --cgroup")
	}
	t := &Target{proc: procRoot}
	switch {
	case pid != 0:
		if pid < 0 {
			return nil, fmt.Errorf("invalid pid %d", pid)
		}
		t.Kind, t.ID = Process, uint32(pid)
		tgid, err := readTgid(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
		if err != nil {
			return nil, fmt.Errorf("no process with pid %d: %w", pid, ErrNotFound)
		}
		if tgid != pid {
			return nil, fmt.Errorf("%d is a thread of process %d; use --tid %d or --pid %d", pid, tgid, pid, tgid)
		}
		t.Comm = readComm(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
		if err := notKernelThread(procRoot, "pid", pid, t.Comm); err != nil {
			return nil, err
		}
	case tid != 0:
		if tid < 0 {
			return nil, fmt.Errorf("invalid tid %d", tid)
		}
		t.Kind, t.ID = Thread, uint32(tid)
		if _, err := readTgid(filepath.Join(procRoot, strconv.Itoa(tid), "status")); err != nil {
			return nil, fmt.Errorf("no thread with tid %d: %w", tid, ErrNotFound)
		}
		t.Comm = readComm(filepath.Join(procRoot, strconv.Itoa(tid), "comm"))
		if err := notKernelThread(procRoot, "tid", tid, t.Comm); err != nil {
			return nil, err
		}
	case cgroup != "":
		p := cgroup
		if !filepath.IsAbs(p) {
			p = filepath.Join(cgroupRoot, p)
		}
		st, err := os.Stat(filepath.Join(p, "cgroup.procs"))
		if err != nil || st.IsDir() {
			return nil, fmt.Errorf("no cgroup at %s: %w", p, ErrNotFound)
		}
		t.Kind, t.Path = Cgroup, filepath.Clean(p)
	}
	return t, nil
}

// Attached reads the name of a process or thread target again, once
// tracing has started: the name it has at attach. Looked up a moment
// before, a target started through a launcher that execs (setpriv, sudo,
// env, nice) could still bear the launcher's name. A target gone since
// keeps the name it had.
func (t *Target) Attached() {
	if t.Kind != Process && t.Kind != Thread {
		return
	}
	if comm := readComm(filepath.Join(t.proc, strconv.Itoa(int(t.ID)), "comm")); comm != "?" {
		t.Comm = comm
	}
}

// String describes the target for reports.
func (t *Target) String() string { return t.named(t.Comm) }

// Ended describes the target as it ended: running comm, its name at
// the end (from its last event; "" if unknown). A process that exec'd
// (or renamed itself) says what it ran last, and what it was at attach.
func (t *Target) Ended(comm string) string {
	if comm == "" || comm == t.Comm || (t.Kind != Process && t.Kind != Thread) {
		return t.String()
	}
	return t.named(comm + ", was " + t.Comm + " at attach")
}

func (t *Target) named(comm string) string {
	switch t.Kind {
	case Process:
		if t.Children {
			return fmt.Sprintf("pid %d (%s) and its descendants", t.ID, comm)
		}
		return fmt.Sprintf("pid %d (%s)", t.ID, comm)
	case Thread:
		return fmt.Sprintf("tid %d (%s)", t.ID, comm)
	case Cgroup:
		if t.Name != "" {
			return t.Name + ", cgroup " + t.Path
		}
		return "cgroup " + t.Path
	}
	return "system-wide"
}

// pfKthread is PF_KTHREAD in a task's flags (/proc/PID/stat, field 9).
const pfKthread = 0x00200000

// notKernelThread refuses a kernel thread as a target: it has no memory
// of its own to stall on, and what kswapd and kcompactd do is counted in
// every trace. A stat it cannot read says nothing either way.
func notKernelThread(procRoot, flag string, id int, comm string) error {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(id), "stat"))
	if err != nil {
		return nil
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags ...: comm
	// may hold spaces and parentheses, so count from its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return nil
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil || flags&pfKthread == 0 {
		return nil
	}
	return fmt.Errorf("%s %d (%s) is a kernel thread: numatrace traces user processes (kswapd's and kcompactd's work is counted in every trace)", flag, id, comm)
}

func readTgid(status string) (int, error) {
	f, err := os.Open(status)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("%s: no Tgid line", status)
}

func readComm(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// CgroupPIDs lists the processes in the cgroup and all its descendants.
func (t *Target) CgroupPIDs() ([]uint32, error) {
	var out []uint32
	err := filepath.WalkDir(t.Path, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == t.Path {
				return err
			}
			return nil // a child cgroup vanished while walking
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.ParseUint(f, 10, 32); err == nil {
				out = append(out, uint32(n))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read cgroup %s: %w", t.Path, err)
	}
	return out, nil
}

// WaitGone returns a channel closed when the target no longer exists: a
// process when all its threads have exited, a thread when it has exited, a
// cgroup when its directory is removed. A system-wide target never goes,
// and after ctx ends the channel is never closed.
func (t *Target) WaitGone(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if t.Kind == System {
		return done
	}
	go func() {
		if t.waitGone(ctx) {
			close(done)
		}
	}()
	return done
}

// waitGone blocks until the target is gone (true) or ctx ends (false).
func (t *Target) waitGone(ctx context.Context) bool {
	if t.Kind == Process {
		if gone, ok := waitPidfd(ctx, int(t.ID)); ok {
			return gone
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return false
		}
		if !t.exists() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func (t *Target) exists() bool {
	switch t.Kind {
	case Thread, Process:
		b, err := os.ReadFile(filepath.Join(t.proc, strconv.Itoa(int(t.ID)), "stat"))
		if err != nil {
			return false
		}
		// state is the field after the ")" closing comm.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			st := s[i+2]
			return st != 'Z' && st != 'X'
		}
		return true
	case Cgroup:
		_, err := os.Stat(t.Path)
		return err == nil
	}
	return true
}
