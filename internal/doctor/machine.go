package doctor

import (
	"errors"
	"fmt"
	"io/fs"
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

	vmstat, vmstat2 map[string]int64         // /proc/vmstat at the two readings
	nodeMem         map[int]map[string]int64 // per node: numastat and meminfo
	meminfo         procfs.Meminfo
	zones           []procfs.Zoneinfo
	psi             *procfs.PSIStats
	container       []string // why this looks like a container
}

type nic struct {
	name     string
	node     int // -1 unknown
	irqs     []int
	irqNodes map[int]bool // nodes of the CPUs its IRQs may run on
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
	m.vmstat, m.vmstat2 = snap.Vmstat, snap.Vmstat
	m.nodeMem = map[int]map[string]int64{}
	for name, v := range snap.Nodes {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "node")); err == nil {
			m.nodeMem[n] = v
		}
	}
	if m.meminfo, err = m.proc.Meminfo(); err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	m.zones, _ = m.proc.Zoneinfo() // absent without CONFIG_NUMA's zoneinfo: the check says so
	if psi, err := m.proc.PSIStatsForResource("memory"); err == nil {
		m.psi = &psi
	}
	m.container = containerSigns(m)
	return m, nil
}

// second takes the later reading of the counters that must grow.
func (m *machine) second() {
	if vm, err := procsnap.Vmstat(m.path("proc", "vmstat")); err == nil {
		m.vmstat2 = vm
	}
}

// grew is how much a vmstat counter grew between the readings.
func (m *machine) grew(key string) int64 { return m.vmstat2[key] - m.vmstat[key] }

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

// containerSigns lists why this looks like a container: the runtimes'
// marker files, or init's cgroup naming a container manager.
func containerSigns(m *machine) []string {
	var why []string
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(m.path(f)); err == nil {
			why = append(why, f+" exists")
		}
	}
	if b, err := os.ReadFile(m.path("proc/1/cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			for _, mark := range []string{"kubepods", "docker", "containerd", "libpod", "lxc"} {
				if strings.Contains(line, mark) {
					why = append(why, "/proc/1/cgroup: "+strings.TrimSpace(line))
					return why
				}
			}
		}
	}
	return why
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

// readNICs finds physical network interfaces (those with a device), their
// node, and the CPUs their MSI interrupts may run on.
func readNICs(m *machine) []nic {
	ents, err := os.ReadDir(m.path("sys/class/net"))
	if err != nil {
		return nil
	}
	var out []nic
	for _, e := range ents {
		dev := m.path("sys/class/net", e.Name(), "device")
		if _, err := os.Stat(dev); err != nil {
			continue // virtual: lo, bridges, veth
		}
		n := nic{name: e.Name(), node: -1, irqNodes: map[int]bool{}}
		if v, ok := readInt(filepath.Join(dev, "numa_node")); ok {
			n.node = int(v)
		}
		irqs, err := os.ReadDir(filepath.Join(dev, "msi_irqs"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		for _, irq := range irqs {
			num, err := strconv.Atoi(irq.Name())
			if err != nil {
				continue
			}
			n.irqs = append(n.irqs, num)
			b, err := os.ReadFile(m.path("proc/irq", irq.Name(), "smp_affinity_list"))
			if err != nil {
				continue
			}
			cpus, err := topology.ParseList(strings.TrimSpace(string(b)))
			if err != nil {
				continue
			}
			for _, c := range cpus {
				n.irqNodes[m.cpuNode[c]] = true
			}
		}
		sort.Ints(n.irqs)
		out = append(out, n)
	}
	return out
}
