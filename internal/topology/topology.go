// Package topology reads the machine's CPU-to-NUMA-node map and node sizes
// from sysfs. Every function takes the sysfs root so tests can use fixtures.
package topology

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	t := &Topology{CPUNode: map[int]int{}, NodeMem: map[int]uint64{}}
	nodeDir := filepath.Join(sysRoot, "devices/system/node")
	entries, err := os.ReadDir(nodeDir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read %s: %w", nodeDir, err)
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		t.Nodes = append(t.Nodes, n)
		list, err := os.ReadFile(filepath.Join(nodeDir, e.Name(), "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("read node%d cpulist: %w", n, err)
		}
		cpus, err := ParseList(strings.TrimSpace(string(list)))
		if err != nil {
			return nil, fmt.Errorf("node%d cpulist: %w", n, err)
		}
		for _, c := range cpus {
			t.CPUNode[c] = n
		}
		t.NodeMem[n] = nodeMemTotal(filepath.Join(nodeDir, e.Name(), "meminfo"))
	}
	if len(t.Nodes) == 0 {
		t.Nodes = []int{0}
		online, err := os.ReadFile(filepath.Join(sysRoot, "devices/system/cpu/online"))
		if err != nil {
			return nil, fmt.Errorf("read online cpus: %w", err)
		}
		cpus, err := ParseList(strings.TrimSpace(string(online)))
		if err != nil {
			return nil, fmt.Errorf("online cpus: %w", err)
		}
		for _, c := range cpus {
			t.CPUNode[c] = 0
		}
	}
	sort.Ints(t.Nodes)
	return t, nil
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

// nodeMemTotal reads "Node N MemTotal: X kB" from a node meminfo file.
func nodeMemTotal(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[3], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// ParseList parses a kernel CPU or node list such as "0-3,8,10-11".
func ParseList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad list element %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad range %q", part)
			}
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
