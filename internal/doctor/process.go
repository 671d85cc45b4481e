package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/procsnap"
)

// process is what doctor reads about --pid.
type process struct {
	pid        int
	comm       string
	threads    int
	cpus       []int        // Cpus_allowed_list
	mems       []int        // Mems_allowed_list
	cpuNodes   map[int]bool // nodes of the allowed CPUs
	maps       numamaps.Summary
	cgroupPath string // the cgroup v2 path, or the first v1 path naming a container manager
}

// ErrNoProcess is returned for a PID that does not exist.
var ErrNoProcess = errors.New("no such process")

func readProcess(pid int, m *machine) (*process, error) {
	dir := fmt.Sprintf("proc/%d", pid)
	if fi, err := m.fs.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, ErrNoProcess)
	}
	p := &process{pid: pid, cpuNodes: map[int]bool{}}
	var err error
	if p.comm, err = readComm(m.fs, dir+"/comm"); err != nil {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	st, err := readStatus(m.fs, dir+"/status")
	if err != nil {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	for _, c := range st.cpus {
		// Cpus_allowed_list names possible CPUs too; an offline one has
		// no node and says nothing about placement.
		if n, ok := m.cpuNode[c]; ok {
			p.cpus = append(p.cpus, c)
			p.cpuNodes[n] = true
		}
	}
	p.mems, p.threads = st.mems, st.threads
	// A kernel without NUMA has no numa_maps.
	if p.maps, err = procsnap.NumaMaps(m.fs.Sub("proc"), pid); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	cgs, err := readCgroups(m.fs, dir+"/cgroup")
	if err != nil && !hostfs.Absent(err) {
		return nil, fmt.Errorf("doctor: pid %d: %w", pid, err)
	}
	for _, cg := range cgs {
		if cg.hierarchy == 0 {
			p.cgroupPath = cg.path
		} else if p.cgroupPath == "" && cgroupMark(cg.path) != "" {
			p.cgroupPath = cg.path
		}
	}
	return p, nil
}

// pagesOn sums the process's pages per node.
func (p *process) pagesOn() map[int]int64 { return p.maps.PerNode() }

func (p *process) totalPages() int64 { return p.maps.Total() }

// cpuBound tells whether the process's CPUs leave out some node.
func (p *process) cpuBound(m *machine) bool { return len(p.cpuNodes) < len(m.nodes) }

// memBound tells whether its memory may only come from some nodes: a
// cpuset's mems, or a bind policy (numactl --membind sets the task's
// policy, which numa_maps shows on every mapping without its own).
func (p *process) memBound(m *machine) bool {
	return (len(p.mems) > 0 && len(p.mems) < len(m.nodes)) || len(p.maps.Bind) > 0
}

// threadNodes is the share of the process's CPU time per node its threads
// ran on: over the interval when measured, else over their lives. A
// thread's node is the node of the CPU it last ran on. measured is false
// when that is not known: no thread could be read, or none has used CPU
// time, and its allowed CPUs span nodes. (Allowed CPUs on one node decide
// where its threads run without reading them.) An estimate from shares
// not measured is an assumption, and the checks say so, never warn on it.
func threadNodes(m *machine, p *process, s span) (map[int]float64, threadBasis) {
	first, later := s.first.proc, s.latest().proc
	weights := map[int]float64{}
	var total float64
	var basis string
	if later != nil && s.measured() && first != nil {
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
	if total == 0 && later != nil {
		basis = "CPU time since each thread started"
		for _, t := range later.threads {
			if n, ok := m.cpuNode[t.cpu]; ok {
				weights[n] += float64(t.ticks)
				total += float64(t.ticks)
			}
		}
	}
	if total > 0 {
		for n := range weights {
			weights[n] /= total
		}
		return weights, threadBasis{text: basis, measured: true}
	}
	if p == nil || len(p.cpuNodes) == 0 {
		return nil, threadBasis{text: "not measured: the process has no CPU on a known node"}
	}
	why := "not measured: no thread could be read"
	if later != nil && len(later.threads) > 0 {
		why = "not measured: no thread has used CPU time yet"
	}
	if len(p.cpuNodes) == 1 {
		for n := range p.cpuNodes {
			return map[int]float64{n: 1}, threadBasis{text: fmt.Sprintf("its allowed CPUs, all on node %d (%s)", n, why), measured: true, byBinding: true}
		}
	}
	return nil, threadBasis{text: why + fmt.Sprintf(" (/proc/%d/task)", p.pid)}
}

// threadBasis says what threadNodes' shares rest on.
type threadBasis struct {
	text      string // "CPU time over 1s", or why it is not measured
	measured  bool   // false: there are no shares, only text
	byBinding bool   // the allowed CPUs, all on one node, place the threads
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
