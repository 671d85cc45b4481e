package doctor

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	cgroup     string  // the cgroup v2 path, "" if none
	cpuSeconds float64 // user+system at the first reading
	cpuSecond2 float64
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
		p.cpus = append(p.cpus, int(c))
		p.cpuNodes[m.cpuNode[int(c)]] = true
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
				p.cgroup = cg.Path
			}
		}
	}
	if stat, err := pr.Stat(); err == nil {
		p.cpuSeconds = stat.CPUTime()
		p.cpuSecond2 = p.cpuSeconds
	}
	return p, nil
}

func (p *process) second() {
	if stat, err := p.proc.Stat(); err == nil {
		p.cpuSecond2 = stat.CPUTime()
	}
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

// remoteShare is the share of the process's pages on nodes its CPUs are
// not on.
func (p *process) remoteShare() (share float64, remote, total int64) {
	for n, pages := range p.pagesOn() {
		total += pages
		if !p.cpuNodes[n] {
			remote += pages
		}
	}
	if total == 0 {
		return 0, 0, 0
	}
	return float64(remote) / float64(total), remote, total
}
