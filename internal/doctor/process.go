package doctor

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/topology"
)

// process is what doctor reads about --pid.
type process struct {
	proc       procfs.Proc
	pid        int
	comm       string
	threads    int
	cpus       []int        // Cpus_allowed_list
	mems       []int        // Mems_allowed_list
	cpuNodes   map[int]bool // nodes of the allowed CPUs
	maps       []numamaps.Mapping
	cgroupPath string // the cgroup v2 path, or the first v1 path naming a container manager
}

// ErrNoProcess is returned for a PID that does not exist.
var ErrNoProcess = errors.New("no such process")

func readProcess(pid int, m *machine) (*process, error) {
	pr, err := m.proc.Proc(pid)
	if err != nil {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, ErrNoProcess)
	}
	p := &process{proc: pr, pid: pid, cpuNodes: map[int]bool{}}
	if p.comm, err = pr.Comm(); err != nil {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	st, err := pr.NewStatus()
	if err != nil {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	for _, c := range st.CpusAllowedList {
		// Cpus_allowed_list names possible CPUs too; an offline one has
		// no node and says nothing about placement.
		if n, ok := m.cpuNode[int(c)]; ok {
			p.cpus = append(p.cpus, int(c))
			p.cpuNodes[n] = true
		}
	}
	// procfs's ProcStatus has no Mems_allowed_list.
	if p.mems, p.threads, err = memsAndThreads(m.path("proc", fmt.Sprint(pid), "status")); err != nil {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	f, err := os.Open(m.path("proc", fmt.Sprint(pid), "numa_maps"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A kernel without NUMA has no numa_maps.
	case err != nil:
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	default:
		p.maps, err = numamaps.Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
		}
	}
	if cgs, err := pr.Cgroups(); err == nil {
		for _, cg := range cgs {
			if cg.HierarchyID == 0 {
				p.cgroupPath = cg.Path
			} else if p.cgroupPath == "" && cgroupMark(cg.Path) != "" {
				p.cgroupPath = cg.Path
			}
		}
	}
	return p, nil
}

func memsAndThreads(path string) (mems []int, threads int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Mems_allowed_list":
			if mems, err = topology.ParseList(v); err != nil {
				return nil, 0, fmt.Errorf("Mems_allowed_list %q: %w", v, err)
			}
		case "Threads":
			fmt.Sscan(v, &threads)
		}
	}
	return mems, threads, sc.Err()
}

// pagesOn sums the process's pages per node.
func (p *process) pagesOn() map[int]int64 { return numamaps.PerNode(p.maps) }

func (p *process) totalPages() int64 {
	var t int64
	for _, n := range p.pagesOn() {
		t += n
	}
	return t
}

// cpuBound tells whether the process's CPUs leave out some node.
func (p *process) cpuBound(m *machine) bool { return len(p.cpuNodes) < len(m.nodes) }

// memBound tells whether its memory may only come from some nodes: a
// cpuset's mems, or a bind policy (numactl --membind sets the task's
// policy, which numa_maps shows on every mapping without its own).
func (p *process) memBound(m *machine) bool {
	return (len(p.mems) > 0 && len(p.mems) < len(m.nodes)) || len(bindNodes(p.maps)) > 0
}

// threadNodes is the share of the process's CPU time per node its threads
// ran on: over the interval when measured, else over their lives. A
// thread's node is the node of the CPU it last ran on. When no thread can
// be read, the nodes its CPUs are on count alike.
func threadNodes(m *machine, p *process, s span) (map[int]float64, string) {
	first, later := s.first.proc, s.latest().proc
	if later == nil || len(later.threads) == 0 {
		if p == nil || len(p.cpuNodes) == 0 {
			return nil, ""
		}
		out := map[int]float64{}
		for n := range p.cpuNodes {
			out[n] = 1 / float64(len(p.cpuNodes))
		}
		return out, "the nodes of its allowed CPUs (no thread could be read)"
	}
	weights := map[int]float64{}
	var total float64
	basis := "CPU time since each thread started"
	if s.measured() && first != nil {
		basis = "CPU time over " + s.d.String()
		for tid, t := range later.threads {
			n, known := m.cpuNode[t.cpu]
			if was, ok := first.threads[tid]; ok && known && t.ticks > was.ticks {
				w := float64(t.ticks - was.ticks)
				weights[n] += w
				total += w
			}
		}
	}
	if total == 0 {
		for _, t := range later.threads {
			if n, ok := m.cpuNode[t.cpu]; ok {
				weights[n] += float64(t.ticks)
				total += float64(t.ticks)
			}
		}
	}
	if total == 0 { // threads that never ran a tick: count them alike
		basis = "thread count (no CPU time yet)"
		for _, t := range later.threads {
			if n, ok := m.cpuNode[t.cpu]; ok {
				weights[n]++
				total++
			}
		}
	}
	for n := range weights {
		weights[n] /= total
	}
	return weights, basis
}

// remoteEstimate is the share of the process's memory accesses that cross
// nodes, if every thread used all of the memory alike: 1 − Σ over nodes of
// (share of CPU time on the node × share of pages on it). For a process
// bound to one node's CPUs it is exactly the share of its pages elsewhere.
// Threads that keep private data first-touched on their own node do
// better than this; a shared heap (a buffer pool, a JVM heap) is close to it.
func remoteEstimate(p *process, threads map[int]float64) (remote float64, total int64) {
	pages := p.pagesOn()
	for _, n := range pages {
		total += n
	}
	if total == 0 || len(threads) == 0 {
		return 0, total
	}
	var nodes []int // in order: float sums must not depend on map order
	for n := range threads {
		nodes = append(nodes, n)
	}
	sort.Ints(nodes)
	local := 0.0
	for _, n := range nodes {
		local += threads[n] * float64(pages[n]) / float64(total)
	}
	return max(0, 1-local), total
}
