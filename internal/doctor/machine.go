package doctor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/procsnap"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/topology"
)

// machine is everything doctor reads about the host.
type machine struct {
	fs       *hostfs.Root // the root: "/" live, or a copy
	nodes    []int
	cpuNode  map[int]int
	nodeCPUs map[int][]int
	ncpu     int

	vm            vmSysctls
	numaBalancing *int64
	thpEnabled    string // the bracketed choice, "" if THP is absent
	thpDefrag     string

	span      span
	vmstat    map[string]uint64         // /proc/vmstat as first read, which is also the first reading
	nodeMem   map[int]map[string]uint64 // per node: numastat and meminfo
	meminfo   meminfo
	pools     []hugePool     // explicit huge pages, one pool per page size
	zones     map[int][]zone // per node, in zone-index order
	psi       *psiStats
	container container
}

// vmSysctls are the /proc/sys/vm values the checks read; nil when absent.
type vmSysctls struct {
	ZoneReclaimMode, WatermarkScaleFactor, MinFreeKbytes *int64
}

// zone is one zone of /proc/zoneinfo. Its index within the node is the
// index into every zone's protection array (lowmem_reserve).
type zone struct {
	name                 string
	free, min, low, high uint64
	managed              uint64
	protection           []uint64
}

func readMachine(fs *hostfs.Root) (*machine, error) {
	m := &machine{fs: fs}
	topo, err := topology.ReadFS(fs.Sub("sys"))
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	m.nodes, m.cpuNode, m.ncpu = topo.Nodes, topo.CPUNode, topo.NumCPUs()
	m.nodeCPUs = map[int][]int{}
	for cpu, n := range m.cpuNode {
		m.nodeCPUs[n] = append(m.nodeCPUs[n], cpu)
	}
	for _, cpus := range m.nodeCPUs {
		sort.Ints(cpus)
	}
	for _, s := range []struct {
		name string
		dst  **int64
	}{{"vm.zone_reclaim_mode", &m.vm.ZoneReclaimMode}, {"vm.watermark_scale_factor", &m.vm.WatermarkScaleFactor},
		{"vm.min_free_kbytes", &m.vm.MinFreeKbytes}, {"kernel.numa_balancing", &m.numaBalancing}} {
		if *s.dst, err = readSysctl(fs, s.name); err != nil {
			return nil, fmt.Errorf("doctor: %w", err)
		}
	}
	if m.thpEnabled, err = bracketed(fs, "sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	if m.thpDefrag, err = bracketed(fs, "sys/kernel/mm/transparent_hugepage/defrag"); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	c, err := procsnap.ReadCounters(fs.Sub("proc"), fs.Sub("sys"))
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	m.vmstat, m.nodeMem = c.Vmstat, byNode(c.Nodes)
	if m.meminfo, err = readMeminfo(fs); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	if m.pools, err = readPools(m); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	// Absent without these: the checks say so.
	if m.zones, err = readZoneinfo(fs); err != nil {
		if !hostfs.Absent(err) {
			return nil, fmt.Errorf("doctor: %w", err)
		}
		m.zones = nil
	}
	if m.psi, err = readPSI(fs, "proc/pressure/memory"); err != nil {
		if !hostfs.Absent(err) {
			return nil, fmt.Errorf("doctor: %w", err)
		}
		m.psi = nil
	}
	if m.container, err = detectContainer(m); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	return m, nil
}

// byNode keys procsnap's "nodeN" maps by N.
func byNode(nodes map[string]map[string]uint64) map[int]map[string]uint64 {
	out := map[int]map[string]uint64{}
	for name, v := range nodes {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "node")); err == nil {
			out[n] = v
		}
	}
	return out
}

// memKB is a node's meminfo value in kB (procsnap keeps the "Node N"
// meminfo keys without their prefix).
func (m *machine) memKB(node int, key string) uint64 { return m.nodeMem[node][key] }

// bracketed reads a sysfs choice file, "always [madvise] never", and
// returns the chosen one; "" when the file is absent.
func bracketed(fs *hostfs.Root, file string) (string, error) {
	s, err := fs.ReadValue(file)
	if hostfs.Absent(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return sanitize.Text(strings.Trim(f, "[]")), nil
		}
	}
	return "", fmt.Errorf("%s: no [choice] in %s", pathOf(fs, file), hostfs.Excerpt(s))
}

// readUint reads a sysfs number; ok is false when the file is absent.
func readUint(fs *hostfs.Root, file string) (v uint64, ok bool, err error) {
	s, err := fs.ReadValue(file)
	if hostfs.Absent(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if v, err = strconv.ParseUint(s, 10, 64); err != nil {
		return 0, false, fmt.Errorf("%s: not an unsigned number: %s", pathOf(fs, file), hostfs.Excerpt(s))
	}
	return v, true, nil
}

// readInt reads a signed sysfs number; ok is false when the file is absent.
func readInt(fs *hostfs.Root, file string) (v int64, ok bool, err error) {
	s, err := fs.ReadValue(file)
	if hostfs.Absent(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if v, err = strconv.ParseInt(s, 10, 64); err != nil {
		return 0, false, fmt.Errorf("%s: not an integer: %s", pathOf(fs, file), hostfs.Excerpt(s))
	}
	return v, true, nil
}

// running tells whether a process named comm runs. Processes that exit
// while the list is read are passed over.
func running(m *machine, comm string) (bool, error) {
	ps, err := pids(m.fs, "proc")
	if err != nil {
		return false, err
	}
	for _, pid := range ps {
		c, err := readComm(m.fs, fmt.Sprintf("proc/%d/comm", pid))
		switch {
		case hostfs.Absent(err):
		case err != nil:
			return false, err
		case c == comm:
			return true, nil
		}
	}
	return false, nil
}
