// Package procsnap reads the kernel's own memory and NUMA counters into a
// record.Procfs: /proc/vmstat, each NUMA node's numastat and meminfo under
// /sys/devices/system/node, and the per-node page counts of target processes
// from /proc/PID/numa_maps.
//
// github.com/prometheus/procfs (v0.23.0) has no parser for any of these: it
// reads /proc/sys/vm (not /proc/vmstat), /proc/meminfo (not the per-node
// meminfo), a fixed set of fields from the per-node vmstat (not numastat),
// and nothing of numa_maps. The formats are small, so they are parsed here.
package procsnap

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// MaxNumaMaps bounds a numa_maps file: 256 MiB is about two million
// mappings, thirty times the kernel's default vm.max_map_count. It is read
// a line at a time, so memory stays small however long it is.
const MaxNumaMaps = 256 << 20

// Counters is one reading of the kernel's memory and NUMA counters, as it
// prints them: unsigned.
type Counters struct {
	Vmstat map[string]uint64            // /proc/vmstat
	Nodes  map[string]map[string]uint64 // "node0" → its numastat and meminfo
}

// ReadCounters reads proc/vmstat and every node under
// sys/devices/system/node. proc and sys are procfs and sysfs, live or a
// copy; nothing outside them is read.
//
// A missing vmstat is an error. A system without devices/system/node (a
// kernel built without NUMA) gives an empty Nodes; a node directory whose
// numastat or meminfo cannot be read is an error.
func ReadCounters(proc, sys *hostfs.Root) (Counters, error) {
	vm, err := Vmstat(proc)
	if err != nil {
		return Counters{}, err
	}
	nodes, err := readNodes(sys)
	if err != nil {
		return Counters{}, err
	}
	return Counters{Vmstat: vm, Nodes: nodes}, nil
}

// Read reads the counters (ReadCounters) and numa_maps of each pid for a
// recording. procRoot and sysRoot are the mount points of procfs and sysfs
// ("/proc" and "/sys" on a live system; fixture trees in tests).
//
// A pid that has exited is skipped silently (it raced): its numa_maps
// is missing, reading it fails with ESRCH, or it is empty (a zombie has no
// address space). Any other failure to read a pid's numa_maps, such as
// EACCES, is an error.
//
// Target[pid] holds "N<node>" → pages on that node summed over all mappings,
// in 4 KiB base pages (a mapping's counts are in units of its
// kernelpagesize_kB, so a 2 MiB huge page counts 512). Every node in Nodes
// has a key, 0 when the process has no pages there.
func Read(procRoot, sysRoot string, pids []uint32, monoNs uint64) (record.Procfs, error) {
	proc, err := hostfs.Open(procRoot)
	if err != nil {
		return record.Procfs{}, fmt.Errorf("procsnap: %w", err)
	}
	defer proc.Close()
	sys, err := hostfs.Open(sysRoot)
	if err != nil {
		return record.Procfs{}, fmt.Errorf("procsnap: %w", err)
	}
	defer sys.Close()
	c, err := ReadCounters(proc, sys)
	if err != nil {
		return record.Procfs{}, err
	}
	p := record.Procfs{MonoNs: monoNs, Nodes: make(map[string]map[string]int64, len(c.Nodes))}
	if p.Vmstat, err = signed(c.Vmstat, proc.Path("vmstat")); err != nil {
		return record.Procfs{}, err
	}
	for name, m := range c.Nodes {
		if p.Nodes[name], err = signed(m, sys.Path("devices/system/node/"+name)); err != nil {
			return record.Procfs{}, err
		}
	}
	if len(pids) > 0 {
		p.Target = make(map[string]map[string]int64, len(pids))
		for _, pid := range pids {
			name := strconv.FormatUint(uint64(pid), 10)
			sum, err := NumaMaps(proc, int(pid))
			if err != nil {
				if hostfs.Absent(err) {
					continue
				}
				return record.Procfs{}, fmt.Errorf("procsnap: pid %d: %w", pid, err)
			}
			if sum.Mappings == 0 {
				continue // empty numa_maps: a zombie
			}
			pages := make(map[string]int64)
			for n, v := range sum.PerNode() {
				pages["N"+strconv.Itoa(n)] = v
			}
			for node := range c.Nodes {
				if id, ok := strings.CutPrefix(node, "node"); ok {
					k := "N" + id
					if _, seen := pages[k]; !seen {
						pages[k] = 0
					}
				}
			}
			p.Target[name] = pages
		}
	}
	return p, nil
}

// signed converts counters for the recording, whose format holds int64.
func signed(m map[string]uint64, where string) (map[string]int64, error) {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		if v > math.MaxInt64 {
			return nil, fmt.Errorf("procsnap: %s: %s = %d is above what a recording holds (int64)", sanitize.Text(where), sanitize.Text(k), v)
		}
		out[k] = int64(v)
	}
	return out, nil
}

// Vmstat reads vmstat under proc: one "name value" pair a line.
func Vmstat(proc *hostfs.Root) (map[string]uint64, error) {
	m := make(map[string]uint64)
	if err := proc.Scan("vmstat", hostfs.MaxTable, pairsInto(m)); err != nil {
		return nil, fmt.Errorf("procsnap: %w", err)
	}
	return m, nil
}

// pairsInto parses lines of "name value" (vmstat, numastat) into m.
func pairsInto(m map[string]uint64) func(int, string) error {
	return func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		if len(f) != 2 {
			return fmt.Errorf("want \"name value\", got %s", hostfs.Excerpt(line))
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: not an unsigned number: %s", hostfs.Excerpt(f[0]), hostfs.Excerpt(f[1]))
		}
		m[f[0]] = v
		return nil
	}
}

// nodeMeminfoInto parses a node's meminfo, lines like
// "Node 0 MemTotal:        7301324 kB" or "Node 0 HugePages_Total:     0",
// into m with the values as written (kB where the file says kB).
func nodeMeminfoInto(m map[string]uint64) func(int, string) error {
	return func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		if (len(f) != 4 && len(f) != 5) || f[0] != "Node" || !strings.HasSuffix(f[2], ":") || (len(f) == 5 && f[4] != "kB") {
			return fmt.Errorf("want \"Node N Key: value [kB]\", got %s", hostfs.Excerpt(line))
		}
		v, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			return fmt.Errorf("%s not an unsigned number: %s", hostfs.Excerpt(f[2]), hostfs.Excerpt(f[3]))
		}
		m[strings.TrimSuffix(f[2], ":")] = v
		return nil
	}
}

// IsNodeDir tells whether name is "node" followed by a decimal number.
func IsNodeDir(name string) bool {
	id, ok := strings.CutPrefix(name, "node")
	if !ok || id == "" || len(id) > 4 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readNodes reads numastat and meminfo of every nodeN directory under
// sys/devices/system/node.
func readNodes(sys *hostfs.Root) (map[string]map[string]uint64, error) {
	const dir = "devices/system/node"
	nodes := make(map[string]map[string]uint64)
	ents, err := sys.ReadDir(dir)
	if err != nil {
		if hostfs.Absent(err) {
			return nodes, nil // no NUMA in this kernel
		}
		return nil, fmt.Errorf("procsnap: %w", err)
	}
	for _, e := range ents {
		if !IsNodeDir(e.Name()) {
			continue
		}
		m := make(map[string]uint64)
		for _, file := range []struct {
			name  string
			parse func(map[string]uint64) func(int, string) error
		}{{"numastat", pairsInto}, {"meminfo", nodeMeminfoInto}} {
			if err := sys.Scan(dir+"/"+e.Name()+"/"+file.name, hostfs.MaxTable, file.parse(m)); err != nil {
				return nil, fmt.Errorf("procsnap: %w", err)
			}
		}
		nodes[e.Name()] = m
	}
	return nodes, nil
}

// NumaMaps sums proc/PID/numa_maps, reading a line at a time and at most
// MaxNumaMaps bytes. An empty one (a zombie's) has no mappings. Errors
// name the file; an exited process's satisfy hostfs.Absent.
func NumaMaps(proc *hostfs.Root, pid int) (numamaps.Summary, error) {
	var s numamaps.Summary
	err := proc.Scan(strconv.Itoa(pid)+"/numa_maps", MaxNumaMaps, func(_ int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		m, err := numamaps.ParseLine(line)
		if err != nil {
			return err
		}
		return s.Add(m)
	})
	return s, err
}
