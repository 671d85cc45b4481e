package main

// The memoryhigh scenario: a process over its cgroup v2 memory.high,
// throttled by the kernel (mem_cgroup_handle_over_high's penalty
// sleeps), and the group's own memory.pressure read around it, so the
// host can hold numatrace's stall time for the process to the kernel's.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/psi"
	"github.com/numatrace/numatrace/internal/stall"
)

const (
	cgroupRoot = "/sys/fs/cgroup"
	// HighGroup is the memoryhigh workload's group.
	HighGroup = cgroupRoot + "/nt-high"
	// highBytes is the group's memory.high. Without swap nothing the
	// workload touches can be reclaimed, so every batch of 64 pages it
	// charges over high costs it a sleep on its way back to user space:
	// (over/high)² × 64 s per batch, at most 2 s at a time.
	highBytes = 32 << 20
	// overBytes is how far over high each round goes: about 0.7 s of
	// sleeps a round (a sleep under HZ/100 is skipped: none within 0.4
	// MiB of high, 60 ms at 1 MiB over, 250 ms at 2).
	overBytes = 2 << 20
	// highRun is how long the workload keeps going over high.
	highRun = 6 * time.Second
	batch   = 64 * page // what one charge over high adds
)

// setupMemoryHigh mounts cgroup2 if nothing is mounted on /sys/fs/cgroup,
// gives the root's children the memory controller and makes HighGroup
// with its memory.high. The undo removes the group (its process has
// exited by then) and leaves the mount.
func setupMemoryHigh() (func(), error) {
	if !mounted(cgroupRoot, "cgroup2") {
		if err := unix.Mount("none", cgroupRoot, "cgroup2", 0, ""); err != nil {
			return nil, fmt.Errorf("mount cgroup2 on %s: %w", cgroupRoot, err)
		}
	}
	if err := os.WriteFile(cgroupRoot+"/cgroup.subtree_control", []byte("+memory"), 0o644); err != nil {
		return nil, fmt.Errorf("enable the memory controller: %w", err)
	}
	if err := os.Mkdir(HighGroup, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	undo := func() { os.Remove(HighGroup) }
	if err := os.WriteFile(HighGroup+"/memory.high", []byte(strconv.Itoa(highBytes)), 0o644); err != nil {
		undo()
		return nil, fmt.Errorf("set memory.high: %w", err)
	}
	return undo, nil
}

// mounted reports whether a file system of type fstype is mounted on point.
func mounted(point, fstype string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		head, tail, ok := strings.Cut(sc.Text(), " - ")
		fields, types := strings.Fields(head), strings.Fields(tail)
		if ok && len(fields) >= 5 && len(types) >= 1 && fields[4] == point && types[0] == fstype {
			return true
		}
	}
	return false
}

// memoryHigh joins HighGroup and keeps its charge going over memory.high
// for highRun: it touches anonymous memory up to overBytes above high,
// drops what it touched above a floor just under high, and does it again.
// The harness starts it on CPU 1 alone, so the group is busy on one CPU
// and its PSI (CPUs' stall time weighted by their busy time) is the
// process's stall time as a clock on the wall sees it.
func memoryHigh() (*report, error) {
	if err := os.WriteFile(HighGroup+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("join %s: %w", HighGroup, err)
	}
	current, err := os.Open(HighGroup + "/memory.current")
	if err != nil {
		return nil, err
	}
	defer current.Close()
	charged := func() int64 {
		buf := make([]byte, 32)
		n, _ := current.ReadAt(buf, 0)
		v, _ := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
		return v
	}
	b, err := region(4*highBytes, false)
	if err != nil {
		return nil, err
	}
	floor := 0 // b[:floor] stays: the group just under high
	for ; floor+batch <= len(b) && charged() < highBytes-(2<<20); floor += batch {
		touch(b[floor:floor+batch], page)
	}
	rounds, peak := 0, int64(0)
	for start := time.Now(); time.Since(start) < highRun; rounds++ {
		top := floor
		for ; top+batch <= len(b); top += batch {
			c := charged()
			peak = max(peak, c)
			if c >= highBytes+overBytes {
				break
			}
			touch(b[top:top+batch], page)
		}
		if err := unix.Madvise(b[floor:top], unix.MADV_DONTNEED); err != nil {
			return nil, err
		}
	}
	events, _ := os.ReadFile(HighGroup + "/memory.events")
	return &report{TIDs: []int{unix.Gettid()}, CPUNode: 1, Extra: map[string]any{
		"rounds": rounds, "floor_bytes": floor, "peak_bytes": peak, "high_bytes": highBytes,
		"memory_events": strings.Fields(string(events)),
	}}, nil
}

// pressure is the memory PSI of a scenario's group, read around its
// workload while numatrace is attached.
type pressure struct {
	sampler *psi.Sampler
	root    *hostfs.Root
	start   psi.Snapshot
}

// pressureGroups: the scenarios whose group's memory.pressure is read.
var pressureGroups = map[string]string{"memoryhigh": HighGroup}

// startPressure reads the system's and the scenario's group's memory PSI
// now, or returns nil for a scenario without a group.
func startPressure(name string) (*pressure, error) {
	dir, ok := pressureGroups[name]
	if !ok {
		return nil, nil
	}
	root, err := hostfs.Open("/")
	if err != nil {
		return nil, err
	}
	group, err := psi.CgroupDir(root, dir)
	if err != nil {
		root.Close()
		return nil, err
	}
	p := &pressure{sampler: psi.NewSampler(root, psi.System(), group), root: root}
	p.start = p.sampler.Take()
	return p, nil
}

// pressureResult is what the host compares: the group's PSI growth over
// the span, and numatrace's stall time for the workload's process in it.
type pressureResult struct {
	Group        string `json:"group"`
	FromNs       uint64 `json:"from_ns"`
	ToNs         uint64 `json:"to_ns"`
	SomeNs       int64  `json:"some_ns"`
	FullNs       int64  `json:"full_ns"`
	SystemSomeNs int64  `json:"system_some_ns"`
	// UnionNs is the union of the process's stalls that freeze it (not
	// nested in another), clipped to the span; SumNs their plain sum.
	UnionNs  int64  `json:"union_ns"`
	SumNs    int64  `json:"sum_ns"`
	Stalls   int    `json:"stalls"`
	Sentence string `json:"sentence"`
}

// finish reads PSI again and closes p; the span is between the two reads.
func (p *pressure) finish() []psi.Span {
	defer p.root.Close()
	return psi.Between(p.start, p.sampler.Take())
}

// comparePressure sets the group's span beside the union of pid's
// freezing stalls in numatrace's NDJSON at path.
func comparePressure(spans []psi.Span, path string, pid int) (*pressureResult, error) {
	var system, group psi.Span
	for _, s := range spans {
		if s.Scope.IsSystem() {
			system = s
		} else {
			group = s
		}
	}
	if group.Err != nil {
		return nil, group.Err
	}
	ivs, err := freezeIntervals(path, pid)
	if err != nil {
		return nil, err
	}
	r := &pressureResult{Group: group.Scope.Name, FromNs: group.From, ToNs: group.To,
		SomeNs: int64(group.Growth.Some), FullNs: int64(group.Growth.Full), SystemSomeNs: int64(system.Growth.Some),
		Stalls: len(ivs)}
	for _, iv := range ivs {
		r.SumNs += int64(iv.End - iv.Start)
	}
	union := psi.Union(psi.Clip(ivs, group.From, group.To))
	r.UnionNs = int64(union)
	r.Sentence = group.Sentence(union)
	return r, nil
}

// freezeIntervals are the stalls of process pid in numatrace's NDJSON at
// path that add to its freeze time (stall.Event.FreezeNs): timed memory
// stalls, not nested in another.
func freezeIntervals(path string, pid int) ([]psi.Interval, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []psi.Interval
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l streamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("numatrace output: %v", err)
		}
		if l.Type != "stall" || int(l.PID) != pid || l.Nested {
			continue
		}
		c, err := stall.ParseCause(l.Cause)
		if err != nil || !c.Freezes() {
			continue
		}
		out = append(out, psi.Interval{Start: l.TsNs - uint64(l.DurNs), End: l.TsNs})
	}
	return out, sc.Err()
}
