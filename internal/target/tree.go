package target

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Descendants lists the live descendants of process t: its children,
// theirs, and so on, from each process's parent in /proc. A process
// whose parent exited has been reparented (to init or a subreaper) and is
// no longer found here; the kernel follows those it saw forked.
func (t *Target) Descendants() ([]uint32, error) {
	ents, err := os.ReadDir(t.proc)
	if err != nil {
		return nil, err
	}
	children := map[uint32][]uint32{}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		ppid, live, ok := parentOf(filepath.Join(t.proc, e.Name(), "stat"))
		if ok && live {
			children[ppid] = append(children[ppid], uint32(pid))
		}
	}
	var out []uint32
	seen := map[uint32]bool{t.ID: true}
	for queue := children[t.ID]; len(queue) > 0; {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] { // pids reused while /proc was read can close a loop
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out, nil
}

// parentOf reads a process's parent from its stat file, and whether it
// is still running (not a zombie).
func parentOf(stat string) (ppid uint32, live, ok bool) {
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0, false, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false, false
	}
	n, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return 0, false, false
	}
	return uint32(n), f[0] != "Z" && f[0] != "X", true
}

// Alive says whether process pid still runs (exists, and is no zombie).
func (t *Target) Alive(pid uint32) bool {
	_, live, ok := parentOf(filepath.Join(t.proc, strconv.Itoa(int(pid)), "stat"))
	return ok && live
}

// WaitTreeGone is WaitGone for a process traced with its descendants:
// the channel closes once the process has exited and so has every
// process members lists (the kernel's set of the tree, which holds the
// children forked after attach, also those reparented since).
func (t *Target) WaitTreeGone(ctx context.Context, members func() ([]uint32, error)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		if !t.waitGone(ctx) {
			return
		}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if t.noneAlive(members) {
				close(done)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// noneAlive says whether no process members lists is still running. A
// set that cannot be read is taken as still running.
func (t *Target) noneAlive(members func() ([]uint32, error)) bool {
	pids, err := members()
	if err != nil {
		return false
	}
	for _, pid := range pids {
		if t.Alive(pid) {
			return false
		}
	}
	return true
}
