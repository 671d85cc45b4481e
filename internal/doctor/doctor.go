// Package doctor names the NUMA and huge-page misconfigurations behind
// memory stalls, with the values it read as evidence, why each hurts, the
// trade-off of fixing it and the commands that fix it. It only reads:
// every check runs against a root directory (/ on a live system, a
// fixture tree in tests) and changes nothing.
package doctor

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/wire"
)

// Severity orders findings.
type Severity int

const (
	Info Severity = iota
	Warn
	Crit
)

func (s Severity) String() string { return [...]string{"info", "warn", "crit"}[s] }

// MarshalText makes Severity a JSON string.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads it back.
func (s *Severity) UnmarshalText(b []byte) error {
	for v := Info; v <= Crit; v++ {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", b)
}

// Finding is one misconfiguration (or, at info, one fact worth knowing).
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Evidence []string `json:"evidence"` // the values read, "path = value"
	Why      string   `json:"why"`
	TradeOff string   `json:"trade_off"`
	Fix      string   `json:"fix,omitempty"`     // the command that fixes it now
	Persist  string   `json:"persist,omitempty"` // and keeps it fixed across reboots
}

// Options say what to examine.
type Options struct {
	// Root is where /proc and /sys are found: "/" live, a fixture tree or
	// a copy of another machine.
	Root string
	// Later, if set, is a second copy of the same machine taken some
	// seconds after Root: the counters whose growth is evidence are read
	// from both, and the time between them is the difference of their
	// /proc/uptime (or Interval when a copy lacks it).
	Later string
	// PID, if set, adds the per-process checks and the numastat table.
	PID int
	// Interval separates the two readings of a live machine. 0 reads once,
	// and rates are then reported as not measured.
	Interval time.Duration
	// Sleep waits for Interval; tests pass a fake.
	Sleep func(time.Duration)
}

// Report is what doctor found.
type Report struct {
	Nodes    int       `json:"nodes"`
	PID      int       `json:"pid,omitempty"`
	Comm     string    `json:"comm,omitempty"`
	Findings []Finding `json:"findings"` // never null: [] when nothing is found
	Numastat *Numastat `json:"numastat,omitempty"`
	Skipped  []string  `json:"skipped,omitempty"` // checks that could not run, and why
	// MemoryCgroup is --pid's memory cgroup as last read: its limit,
	// usage, page cache and hits of the limit; absent without --pid, or
	// when the process has none.
	MemoryCgroup *wire.Memcg `json:"memory_cgroup,omitempty"`
	// Interval is the time between the two readings rates are measured
	// over ("1.002s"), or "not measured" when there was one reading.
	Interval string `json:"interval"`
}

// Worst is the highest severity found, Info when there is nothing.
func (r *Report) Worst() Severity {
	w := Info
	for _, f := range r.Findings {
		w = max(w, f.Severity)
	}
	return w
}

// Run reads the machine (and the process) and runs every check. Every
// file is read through hostfs: inside Root (and Later), regular files
// only, bounded.
func Run(opt Options) (*Report, error) {
	if opt.Root == "" {
		opt.Root = "/"
	}
	// A copy read twice would show no growth as if measured. A test's
	// Sleep stands for time passing on a copy it updates itself.
	if opt.Sleep == nil {
		if !LiveProc(opt.Root) && opt.Later == "" {
			opt.Interval = 0
		}
		opt.Sleep = time.Sleep
	}
	fs, err := hostfs.Open(opt.Root)
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	defer fs.Close()
	m, err := readMachine(fs)
	if err != nil {
		return nil, err
	}
	var p *process
	if opt.PID > 0 {
		if p, err = readProcess(opt.PID, m); err != nil {
			return nil, err
		}
	}
	first, err := firstReading(m, opt.PID)
	if err != nil {
		return nil, err
	}
	if m.span, err = readSpan(opt, fs, first); err != nil {
		return nil, err
	}
	r := &Report{Nodes: len(m.nodes), PID: opt.PID, Findings: []Finding{}, Interval: "not measured"}
	if m.span.measured() {
		r.Interval = m.span.d.Round(time.Millisecond).String()
	}
	if p != nil {
		r.Comm = p.comm
	}
	for _, c := range checks {
		found, skip := c.run(m, p)
		if skip != "" {
			r.Skipped = append(r.Skipped, c.name+": "+skip)
		}
		for _, f := range found {
			f.Check = c.name
			adviseForContainers(m, p, &f)
			r.Findings = append(r.Findings, f)
		}
	}
	sort.SliceStable(r.Findings, func(i, j int) bool { return r.Findings[i].Severity > r.Findings[j].Severity })
	if p != nil {
		r.Numastat = numastat(m, p)
		r.MemoryCgroup = wire.NewMemcg(m.memcgSpan().Last())
	}
	return r, nil
}

// readSpan takes the later reading when asked: of the later copy, or of
// the live machine again after the interval.
func readSpan(opt Options, fs *hostfs.Root, first *reading) (span, error) {
	s := span{first: first}
	var err error
	switch {
	case opt.Later != "":
		later, err := hostfs.Open(opt.Later)
		if err != nil {
			return s, fmt.Errorf("doctor: the later copy: %w", err)
		}
		defer later.Close()
		if s.later, err = readReading(later, opt.PID); err != nil {
			return s, fmt.Errorf("doctor: the later copy: %w", err)
		}
		s.d = time.Duration((s.later.uptime - s.first.uptime) * float64(time.Second))
		if s.first.uptime == 0 || s.later.uptime == 0 {
			s.d = opt.Interval
		}
		if s.d <= 0 {
			return s, fmt.Errorf("doctor: cannot tell how far apart the copies are (proc/uptime %.2f then %.2f): copy proc/uptime with them, or pass --interval",
				s.first.uptime, s.later.uptime)
		}
	case opt.Interval > 0:
		opt.Sleep(opt.Interval)
		if s.later, err = readReading(fs, opt.PID); err != nil {
			return s, err
		}
		s.d = opt.Interval
		if s.first.uptime > 0 && s.later.uptime > s.first.uptime {
			s.d = time.Duration((s.later.uptime - s.first.uptime) * float64(time.Second))
		}
	}
	s.d = s.d.Round(time.Millisecond) // uptime has 10 ms steps; float sums do not
	return s, nil
}

type check struct {
	name string
	run  func(m *machine, p *process) ([]Finding, string)
}

// checks run in this order; findings are then sorted by severity. The
// seed reports each one answers are in docs/DOCTOR.md.
var checks = []check{
	{"zone_reclaim_mode", checkZoneReclaim},
	{"thp_defrag", checkTHP},
	{"cross_node_alloc", checkCrossNodeAlloc},
	{"remote_memory", checkRemoteMemory},
	{"binding", checkBinding},
	{"node_saturation", checkNodeSaturation},
	{"numa_balancing", checkNumaBalancing},
	{"numa_balancing_thrash", checkBalancingThrash},
	{"interleave", checkInterleave},
	{"node_pressure", checkNodePressure},
	{"hugepage_reservation", checkHugepageUnused},
	{"hugepage_starvation", checkHugepageStarvation},
	{"watermark_scale_factor", checkWatermarkScale},
	{"min_free_kbytes", checkMinFree},
	{"nic_irq_affinity", checkIRQs},
	{"container", checkContainer},
	{"psi_memory", checkPSI},
	{"memory_cgroup", checkMemoryCgroup},
}

// Checks lists the checks' names, in the order they run.
func Checks() []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.name)
	}
	return out
}

func ev(path string, v any) string { return fmt.Sprintf("%s = %v", path, v) }

// Recorded is the report a recording carries: doctor's one reading of
// the traced machine as the run started. Nil when the recording was made
// without doctor, or it cannot be read.
func Recorded(h record.Header) *Report {
	var rep Report
	if len(h.Doctor) == 0 || json.Unmarshal(h.Doctor, &rep) != nil {
		return nil
	}
	return &rep
}
