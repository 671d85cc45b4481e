// Package topology reads the machine's CPU-to-NUMA-node map and node sizes
// from sysfs. Every function takes the sysfs root so tests can use fixtures.
package topology

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// Topology is the CPU→node map of one machine.
type Topology struct {
	Nodes   []int          // node ids, sorted
	CPUNode map[int]int    // cpu → node
	NodeMem map[int]uint64 // node → MemTotal in bytes (0 if unknown)
}

// Read reads topology from sysRoot (normally "/sys"). A kernel without NUMA
// has no node directories; then every CPU is on node 0.
func Read(sysRoot string) (*Topology, error) {
	sys, err := hostfs.Open(sysRoot)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	return ReadFS(sys)
}

// ReadFS is Read from a sysfs (or a copy of one) opened with hostfs:
// nothing is read outside it.
func ReadFS(sys *hostfs.Root) (*Topology, error) {
	t := &Topology{CPUNode: map[int]int{}, NodeMem: map[int]uint64{}}
	const nodeDir = "devices/system/node"
	entries, err := sys.ReadDir(nodeDir)
	if err != nil && !hostfs.Absent(err) {
		return nil, err
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			continue
		}
		t.Nodes = append(t.Nodes, n)
		file := path.Join(nodeDir, e.Name(), "cpulist")
		cpus, err := readList(sys, file)
		if err != nil {
			return nil, err
		}
		for _, c := range cpus {
			t.CPUNode[c] = n
		}
		if t.NodeMem[n], err = nodeMemTotal(sys, path.Join(nodeDir, e.Name(), "meminfo")); err != nil {
			return nil, err
		}
	}
	if len(t.Nodes) == 0 {
		t.Nodes = []int{0}
		cpus, err := readList(sys, "devices/system/cpu/online")
		if err != nil {
			return nil, err
		}
		for _, c := range cpus {
			t.CPUNode[c] = 0
		}
	}
	sort.Ints(t.Nodes)
	return t, nil
}

// readList reads a CPU list file; errors name the file.
func readList(sys *hostfs.Root, file string) ([]int, error) {
	s, err := sys.ReadValue(file)
	if err != nil {
		return nil, err
	}
	cpus, err := ParseList(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sanitize.Text(sys.Path(file)), err)
	}
	return cpus, nil
}

// NodeOf returns the node of cpu, or -1.
func (t *Topology) NodeOf(cpu int) int {
	if n, ok := t.CPUNode[cpu]; ok {
		return n
	}
	return -1
}

// NumCPUs is the number of CPUs with a known node.
func (t *Topology) NumCPUs() int { return len(t.CPUNode) }

// nodeMemTotal reads "Node N MemTotal: X kB" from a node meminfo file, 0
// when the file is absent or has no such line.
func nodeMemTotal(sys *hostfs.Root, file string) (uint64, error) {
	var total uint64
	err := sys.Scan(file, hostfs.MaxTable, func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || kb > math.MaxUint64/1024 {
				return fmt.Errorf("bad MemTotal %s", hostfs.Excerpt(f[3]))
			}
			total = kb * 1024
		}
		return nil
	})
	if hostfs.Absent(err) {
		return 0, nil
	}
	return total, err
}

// MaxCPU bounds the numbers in a CPU or node list: above any kernel's
// NR_CPUS (8192 at most) and MAX_NUMNODES (1024).
const MaxCPU = 1<<16 - 1

// ParseList parses a kernel CPU or node list such as "0-3,8,10-11". It
// refuses a number above MaxCPU, and a list of more than MaxCPU+1
// numbers, so that a list from a copy of a machine cannot make it
// allocate without bound. Errors quote at most a short excerpt.
func ParseList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > MaxCPU {
			return nil, fmt.Errorf("bad list element %s", hostfs.Excerpt(part))
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > MaxCPU {
				return nil, fmt.Errorf("bad range %s", hostfs.Excerpt(part))
			}
		}
		if len(out)+b-a+1 > MaxCPU+1 {
			return nil, fmt.Errorf("a list of more than %d numbers", MaxCPU+1)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// FormatList writes a CPU or node list as the kernel does: "0-15,32-47".
// The input need not be sorted; duplicates are dropped.
func FormatList(v []int) string {
	s := append([]int(nil), v...)
	sort.Ints(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] <= s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if s[j] == s[i] {
			fmt.Fprintf(&b, "%d", s[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", s[i], s[j])
		}
		i = j + 1
	}
	return b.String()
}
