package doctor

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/procsnap"
)

// reading is one look at the counters whose growth is the evidence: the
// machine's vmstat and per-node numastat, and --pid's CPU time and where
// its threads last ran. Rates need two readings; a copy of a machine
// (--root) holds one unless a later copy (--root-later) is given. The
// kernel prints its counters unsigned, and so they are read.
type reading struct {
	uptime   float64                   // /proc/uptime in seconds, 0 if absent
	vmstat   map[string]uint64         // /proc/vmstat
	nodeStat map[int]map[string]uint64 // /sys/devices/system/node/nodeN/numastat (and meminfo)
	proc     *procReading              // of --pid; nil without one
}

// procReading is what one reading knows of the process.
type procReading struct {
	ticks   uint64              // utime+stime of the whole process, in clock ticks
	threads map[int]threadState // by TID
	// memcg is its memory cgroup (nil when it has none, or it could not
	// be read: memcgWhy says why).
	memcg    *memcg.Reading
	memcgWhy string
}

func (p *procReading) cpuSeconds() float64 { return float64(p.ticks) / userHZ }

// threadState is where a thread last ran and how much CPU it has used.
type threadState struct {
	cpu   int
	ticks uint64 // utime+stime in clock ticks
}

// firstReading is the machine's own reading of the counters (readMachine
// has read vmstat and the nodes' numastat already), with the process's.
func firstReading(m *machine, pid int) (*reading, error) {
	up, err := readUptime(m.fs)
	if err != nil {
		return nil, err
	}
	r := &reading{vmstat: m.vmstat, nodeStat: m.nodeMem, uptime: up}
	if pid > 0 {
		if r.proc, err = readProcReading(m.fs, pid); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// readUptime is /proc/uptime's first number, 0 when the file is absent.
func readUptime(fs *hostfs.Root) (float64, error) {
	s, err := fs.ReadValue("proc/uptime")
	if hostfs.Absent(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("doctor: %w", err)
	}
	f := strings.Fields(s)
	var v float64
	if len(f) > 0 {
		v, err = strconv.ParseFloat(f[0], 64)
	}
	if len(f) == 0 || err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("doctor: %s: want seconds since boot, got %s", pathOf(fs, "proc/uptime"), hostfs.Excerpt(s))
	}
	return v, nil
}

// readReading reads the counters again (fs may be a later copy).
func readReading(fs *hostfs.Root, pid int) (*reading, error) {
	up, err := readUptime(fs)
	if err != nil {
		return nil, err
	}
	c, err := procsnap.ReadCounters(fs.Sub("proc"), fs.Sub("sys"))
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	r := &reading{uptime: up, vmstat: c.Vmstat, nodeStat: byNode(c.Nodes)}
	if pid > 0 {
		if r.proc, err = readProcReading(fs, pid); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// readProcReading reads the process's stat and each thread's. Threads
// come and go between the reads; the ones that have gone are left out.
func readProcReading(fs *hostfs.Root, pid int) (*procReading, error) {
	pr := &procReading{threads: map[int]threadState{}}
	// A group doctor cannot read is a check it cannot make, not a
	// machine it cannot read.
	if r, err := memcg.Of(fs, pid); err != nil {
		pr.memcgWhy = err.Error()
	} else {
		pr.memcg = r
	}
	dir := fmt.Sprintf("proc/%d", pid)
	switch st, err := readStat(fs, dir+"/stat"); {
	case err == nil:
		pr.ticks = st.ticks
	case !hostfs.Absent(err):
		return nil, fmt.Errorf("doctor: %w", err)
	}
	tids, err := pids(fs, dir+"/task")
	if hostfs.Absent(err) {
		return pr, nil
	}
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	for _, tid := range tids {
		st, err := readStat(fs, fmt.Sprintf("%s/task/%d/stat", dir, tid))
		if hostfs.Absent(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("doctor: %w", err)
		}
		pr.threads[tid] = threadState{cpu: st.cpu, ticks: st.ticks}
	}
	return pr, nil
}

// span is the time between the two readings, and whether there were two.
type span struct {
	first, later *reading
	d            time.Duration // 0 when not measured
}

func (s span) measured() bool { return s.later != nil && s.d > 0 }

// counterGrowth is how much a counter grew from a to b, or why that is
// not known: a counter missing from a reading, or one that went
// backwards. A kernel counter only goes backwards when it wraps or the
// copies are not of one machine in order: that is read as a reset, its
// growth unknown, never as a negative rate.
func counterGrowth(a, b map[string]uint64, key string) (uint64, string) {
	x, okA := a[key]
	y, okB := b[key]
	switch {
	case !okA || !okB:
		return 0, "not measured: not in both readings"
	case y < x:
		return 0, fmt.Sprintf("not measured: %d then %d, backwards between the readings (a reset or a wrap)", x, y)
	}
	return y - x, ""
}

// growth is how much a vmstat counter grew between the readings, and ""
// or why it is not measured.
func (s span) growth(key string) (uint64, string) {
	if !s.measured() {
		return 0, notMeasured
	}
	return counterGrowth(s.first.vmstat, s.later.vmstat, key)
}

// grew is growth as (value, measured).
func (s span) grew(key string) (uint64, bool) {
	g, why := s.growth(key)
	return g, why == ""
}

// grewPrefix sums the growth of every vmstat counter starting with prefix
// (allocstall_dma32, allocstall_normal, ...); the reason is that of the
// first that is not measured.
func (s span) grewPrefix(prefix string) (uint64, string) {
	if !s.measured() {
		return 0, notMeasured
	}
	var keys []string
	for k := range s.later.vmstat {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var sum uint64
	for _, k := range keys {
		g, why := counterGrowth(s.first.vmstat, s.later.vmstat, k)
		if why != "" {
			return 0, k + " " + why
		}
		sum = satAdd(sum, g)
	}
	return sum, ""
}

// perSecond is growth over the span as a rate.
func (s span) perSecond(n uint64) float64 { return float64(n) / s.d.Seconds() }

// nodeGrowth is how much node n's numastat counter grew.
func (s span) nodeGrowth(n int, key string) (uint64, string) {
	if !s.measured() {
		return 0, notMeasured
	}
	return counterGrowth(s.first.nodeStat[n], s.later.nodeStat[n], key)
}

// latest is the newest reading.
func (s span) latest() *reading {
	if s.later != nil {
		return s.later
	}
	return s.first
}

// growthEvidence is "compact_stall growth over 1s = 12", or says why the
// growth was not measured: a single reading must never read as "0", nor
// a counter that went backwards as a negative rate.
func (s span) growthEvidence(key string) string {
	g, why := s.growth(key)
	if why != "" {
		return ev(key+" growth", why)
	}
	return ev(fmt.Sprintf("%s growth over %s", key, s.d.Round(time.Millisecond)), g)
}

const notMeasured = "not measured (one reading: run live with --interval, or give --root-later)"
