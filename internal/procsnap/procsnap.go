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
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/record"
)

// Read reads /proc/vmstat, every node under sysRoot/devices/system/node, and
// numa_maps of each pid under procRoot.
//
// procRoot and sysRoot are the mount points of procfs and sysfs ("/proc" and
// "/sys" on a live system; fixture trees in tests).
//
// A missing procRoot/vmstat is an error. A system without
// sysRoot/devices/system/node (a kernel built without NUMA) gives an empty
// Nodes; a node directory whose numastat or meminfo cannot be read is an
// error. A pid that has exited is skipped silently (it raced): its numa_maps
// is missing, reading it fails with ESRCH, or it is empty (a zombie has no
// address space). Any other failure to read a pid's numa_maps, such as
// EACCES, is an error.
//
// Target[pid] holds "N<node>" → pages on that node summed over all mappings,
// in 4 KiB base pages (a mapping's counts are in units of its
// kernelpagesize_kB, so a 2 MiB huge page counts 512). Every node in Nodes
// has a key, 0 when the process has no pages there.
func Read(procRoot, sysRoot string, pids []uint32, monoNs uint64) (record.Procfs, error) {
	p := record.Procfs{MonoNs: monoNs}

	vm, err := Vmstat(filepath.Join(procRoot, "vmstat"))
	if err != nil {
		return record.Procfs{}, err
	}
	p.Vmstat = vm

	nodes, err := readNodes(filepath.Join(sysRoot, "devices", "system", "node"))
	if err != nil {
		return record.Procfs{}, err
	}
	p.Nodes = nodes

	if len(pids) > 0 {
		p.Target = make(map[string]map[string]int64, len(pids))
		for _, pid := range pids {
			name := strconv.FormatUint(uint64(pid), 10)
			pages, err := readNumaMaps(filepath.Join(procRoot, name, "numa_maps"))
			if err != nil {
				if exited(err) {
					continue
				}
				return record.Procfs{}, fmt.Errorf("procsnap: pid %d: %w", pid, err)
			}
			if pages == nil {
				continue // empty numa_maps: a zombie
			}
			for node := range nodes {
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

// exited tells whether err from reading /proc/PID/... means the process is gone.
func exited(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// Vmstat parses a /proc/vmstat file: one "name value" pair a line.
func Vmstat(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("procsnap: %w", err)
	}
	defer f.Close()
	m, err := parsePairs(f)
	if err != nil {
		return nil, fmt.Errorf("procsnap: %s: %w", path, err)
	}
	return m, nil
}

// parsePairs parses lines of "name value" (vmstat, numastat) into m.
func parsePairs(r io.Reader) (map[string]int64, error) {
	m := make(map[string]int64)
	if err := addPairs(m, r); err != nil {
		return nil, err
	}
	return m, nil
}

func addPairs(m map[string]int64, r io.Reader) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return fmt.Errorf("line %d: want \"name value\", got %q", n, sc.Text())
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		m[f[0]] = v
	}
	return sc.Err()
}

// addNodeMeminfo parses a node's meminfo, lines like
// "Node 0 MemTotal:        7301324 kB" or "Node 0 HugePages_Total:     0",
// into m with the values as written (kB where the file says kB).
func addNodeMeminfo(m map[string]int64, r io.Reader) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if (len(f) != 4 && len(f) != 5) || f[0] != "Node" || !strings.HasSuffix(f[2], ":") || (len(f) == 5 && f[4] != "kB") {
			return fmt.Errorf("line %d: want \"Node N Key: value [kB]\", got %q", n, sc.Text())
		}
		v, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		m[strings.TrimSuffix(f[2], ":")] = v
	}
	return sc.Err()
}

// isNodeDir tells whether name is "node" followed by a decimal number.
func isNodeDir(name string) bool {
	id, ok := strings.CutPrefix(name, "node")
	if !ok || id == "" {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readNodes reads numastat and meminfo of every nodeN directory under dir.
func readNodes(dir string) (map[string]map[string]int64, error) {
	nodes := make(map[string]map[string]int64)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nodes, nil // no NUMA in this kernel
		}
		return nil, fmt.Errorf("procsnap: %w", err)
	}
	for _, e := range ents {
		if !isNodeDir(e.Name()) {
			continue
		}
		m := make(map[string]int64)
		for _, file := range []struct {
			name  string
			parse func(map[string]int64, io.Reader) error
		}{{"numastat", addPairs}, {"meminfo", addNodeMeminfo}} {
			path := filepath.Join(dir, e.Name(), file.name)
			if err := parseFile(path, m, file.parse); err != nil {
				return nil, err
			}
		}
		nodes[e.Name()] = m
	}
	return nodes, nil
}

func parseFile(path string, m map[string]int64, parse func(map[string]int64, io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("procsnap: %w", err)
	}
	defer f.Close()
	if err := parse(m, f); err != nil {
		return fmt.Errorf("procsnap: %s: %w", path, err)
	}
	return nil
}

// readNumaMaps reads a /proc/PID/numa_maps file. It returns nil, nil for an
// empty file. Errors from opening or reading are returned unwrapped so that
// the caller can tell an exited process.
func readNumaMaps(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseNumaMaps(f)
}

// parseNumaMaps sums the node counts of every mapping in a numa_maps file,
// in 4 KiB base pages, into "N<node>" → pages. It returns nil, nil when r
// holds no mapping at all.
func parseNumaMaps(r io.Reader) (map[string]int64, error) {
	ms, err := numamaps.Parse(r)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	pages := make(map[string]int64)
	for n, p := range numamaps.PerNode(ms) {
		pages["N"+strconv.Itoa(n)] = p
	}
	return pages, nil
}
