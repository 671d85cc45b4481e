package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/numatrace/numatrace/internal/procsnap"
)

// reading is one look at the counters whose growth is the evidence: the
// machine's vmstat and per-node numastat, and --pid's CPU time and where
// its threads last ran. Rates need two readings; a copy of a machine
// (--root) holds one unless a later copy (--root-later) is given.
type reading struct {
	uptime   float64                  // /proc/uptime in seconds, 0 if unreadable
	vmstat   map[string]int64         // /proc/vmstat
	nodeStat map[int]map[string]int64 // /sys/devices/system/node/nodeN/numastat (meminfo too, in the first)
	proc     *procReading             // of --pid; nil without one
}

// procReading is what one reading knows of the process.
type procReading struct {
	cpuSeconds float64             // user+system of the whole process
	threads    map[int]threadState // by TID
}

// threadState is where a thread last ran and how much CPU it has used.
type threadState struct {
	cpu   int
	ticks uint64 // utime+stime in clock ticks
}

// firstReading is the machine's own reading of the counters (readMachine
// has read vmstat and the nodes' numastat already), with the process's.
func firstReading(m *machine, pid int) *reading {
	r := &reading{vmstat: m.vmstat, nodeStat: m.nodeMem, uptime: readUptime(m.root)}
	if pid > 0 {
		r.proc = readProcReading(m.root, pid)
	}
	return r
}

func readUptime(root string) float64 {
	b, err := os.ReadFile(filepath.Join(root, "proc", "uptime"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// readReading reads the counters again (root may be a later copy).
func readReading(root string, pid int) (*reading, error) {
	r := &reading{nodeStat: map[int]map[string]int64{}, uptime: readUptime(root)}
	vm, err := procsnap.Vmstat(filepath.Join(root, "proc", "vmstat"))
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	r.vmstat = vm
	nodes, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*/numastat"))
	for _, path := range nodes {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(path)), "node"))
		if err != nil {
			continue
		}
		if m, err := pairs(path); err == nil {
			r.nodeStat[n] = m
		}
	}
	if pid > 0 {
		r.proc = readProcReading(root, pid)
	}
	return r, nil
}

// readProcReading reads the process's stat and each thread's. Threads
// come and go between the reads; the ones that cannot be read are left out.
func readProcReading(root string, pid int) *procReading {
	pr := &procReading{threads: map[int]threadState{}}
	fs, err := procfs.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		return pr
	}
	if p, err := fs.Proc(pid); err == nil {
		if st, err := p.Stat(); err == nil {
			pr.cpuSeconds = st.CPUTime()
		}
	}
	threads, err := fs.AllThreads(pid)
	if err != nil {
		return pr
	}
	for _, t := range threads {
		st, err := t.Stat()
		if err != nil {
			continue
		}
		pr.threads[t.PID] = threadState{cpu: int(st.Processor), ticks: uint64(st.UTime + st.STime)}
	}
	return pr
}

// pairs reads a "key value" file such as numastat.
func pairs(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, nil
}

// span is the time between the two readings, and whether there were two.
type span struct {
	first, later *reading
	d            time.Duration // 0 when not measured
}

func (s span) measured() bool { return s.later != nil && s.d > 0 }

// grew is how much a vmstat counter grew between the readings.
func (s span) grew(key string) (int64, bool) {
	if !s.measured() {
		return 0, false
	}
	return s.later.vmstat[key] - s.first.vmstat[key], true
}

// grewPrefix sums the growth of every vmstat counter starting with prefix
// (allocstall_dma32, allocstall_normal, ...).
func (s span) grewPrefix(prefix string) (int64, bool) {
	if !s.measured() {
		return 0, false
	}
	var sum int64
	for k, v := range s.later.vmstat {
		if strings.HasPrefix(k, prefix) {
			sum += v - s.first.vmstat[k]
		}
	}
	return sum, true
}

// perSecond is growth over the span as a rate.
func (s span) perSecond(n int64) float64 { return float64(n) / s.d.Seconds() }

// nodeGrew is how much node n's numastat counter grew.
func (s span) nodeGrew(n int, key string) (int64, bool) {
	if !s.measured() {
		return 0, false
	}
	return s.later.nodeStat[n][key] - s.first.nodeStat[n][key], true
}

// latest is the newest reading.
func (s span) latest() *reading {
	if s.later != nil {
		return s.later
	}
	return s.first
}

// growthEvidence is "compact_stall growth over 1s = 12", or says the
// growth was not measured: a single reading must never read as "0".
func (s span) growthEvidence(key string) string {
	g, ok := s.grew(key)
	if !ok {
		return ev(key+" growth", notMeasured)
	}
	return ev(fmt.Sprintf("%s growth over %s", key, s.d.Round(time.Millisecond)), g)
}

const notMeasured = "not measured (one reading: run live with --interval, or give --root-later)"
