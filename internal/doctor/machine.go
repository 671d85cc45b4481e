package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/numatrace/numatrace/internal/procsnap"
	"github.com/numatrace/numatrace/internal/topology"
)

// machine is everything doctor reads about the host.
type machine struct {
	root     string
	proc     procfs.FS
	nodes    []int
	cpuNode  map[int]int
	nodeCPUs map[int][]int
	ncpu     int

	vm            *procfs.VM // /proc/sys/vm
	numaBalancing *int
	thpEnabled    string // the bracketed choice, "" if THP is absent
	thpDefrag     string

	span      span
	vmstat    map[string]int64         // /proc/vmstat as first read, which is also the first reading
	nodeMem   map[int]map[string]int64 // per node: numastat and meminfo
	meminfo   procfs.Meminfo
	zones     map[int][]zone // per node, in zone-index order
	psi       *procfs.PSIStats
	container container
}

// zone is one zone of /proc/zoneinfo. Its index within the node is the
// index into every zone's protection array (lowmem_reserve).
type zone struct {
	name                 string
	free, min, low, high int64
	managed              int64
	protection           []int64
}

func (m *machine) path(p ...string) string { return filepath.Join(append([]string{m.root}, p...)...) }

func readMachine(root string) (*machine, error) {
	m := &machine{root: root}
	var err error
	if m.proc, err = procfs.NewFS(m.path("proc")); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	topo, err := topology.Read(m.path("sys"))
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
	if m.vm, err = m.proc.VM(); err != nil {
		return nil, fmt.Errorf("doctor: read /proc/sys/vm: %w", err)
	}
	if v, err := m.proc.SysctlInts("kernel.numa_balancing"); err == nil && len(v) == 1 {
		m.numaBalancing = &v[0]
	}
	m.thpEnabled = bracketed(m.path("sys/kernel/mm/transparent_hugepage/enabled"))
	m.thpDefrag = bracketed(m.path("sys/kernel/mm/transparent_hugepage/defrag"))
	snap, err := procsnap.Read(m.path("proc"), m.path("sys"), nil, 0)
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	m.vmstat = snap.Vmstat
	m.nodeMem = map[int]map[string]int64{}
	for name, v := range snap.Nodes {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "node")); err == nil {
			m.nodeMem[n] = v
		}
	}
	if m.meminfo, err = m.proc.Meminfo(); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	if zs, err := m.proc.Zoneinfo(); err == nil { // absent without it: the checks say so
		m.zones = zonesByNode(zs)
	}
	if psi, err := m.proc.PSIStatsForResource("memory"); err == nil {
		m.psi = &psi
	}
	m.container = detectContainer(m)
	return m, nil
}

func zonesByNode(zs []procfs.Zoneinfo) map[int][]zone {
	out := map[int][]zone{}
	val := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	for _, z := range zs {
		n, err := strconv.Atoi(z.Node)
		if err != nil {
			continue
		}
		zz := zone{name: z.Zone, free: val(z.NrFreePages), min: val(z.Min), low: val(z.Low), high: val(z.High), managed: val(z.Managed)}
		for _, p := range z.Protection {
			zz.protection = append(zz.protection, val(p))
		}
		out[n] = append(out[n], zz)
	}
	return out
}

// memKB is a node's meminfo value in kB (procsnap keeps the "Node N"
// meminfo keys without their prefix).
func (m *machine) memKB(node int, key string) int64 { return m.nodeMem[node][key] }

// bracketed reads a sysfs choice file, "always [madvise] never", and
// returns the chosen one.
func bracketed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return ""
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

func running(m *machine, comm string) bool {
	procs, err := m.proc.AllProcs()
	if err != nil {
		return false
	}
	for _, p := range procs {
		if c, err := p.Comm(); err == nil && c == comm {
			return true
		}
	}
	return false
}
