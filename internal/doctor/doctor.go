// Package doctor names the NUMA and huge-page misconfigurations behind
// memory stalls, with the values it read as evidence, why each hurts, the
// trade-off of fixing it and the commands that fix it. It only reads:
// every check runs against a root directory (/ on a live system, a
// fixture tree in tests) and changes nothing.
package doctor

import (
	"fmt"
	"sort"
	"time"
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
	// Root is where /proc and /sys are found: "/" live, a fixture tree in
	// tests.
	Root string
	// PID, if set, adds the per-process checks and the numastat table.
	PID int
	// Interval separates the two readings of counters whose growth is the
	// evidence (compact_stall, zone_reclaim_failed, CPU time). 0 reads once.
	Interval time.Duration
	// Sleep waits for Interval; tests pass a fake.
	Sleep func(time.Duration)
}

// Report is what doctor found.
type Report struct {
	Nodes    int       `json:"nodes"`
	PID      int       `json:"pid,omitempty"`
	Comm     string    `json:"comm,omitempty"`
	Findings []Finding `json:"findings"`
	Numastat *Numastat `json:"numastat,omitempty"`
	Skipped  []string  `json:"skipped,omitempty"` // checks that could not run, and why
	Interval string    `json:"interval"`
}

// Worst is the highest severity found, Info when there is nothing.
func (r *Report) Worst() Severity {
	w := Info
	for _, f := range r.Findings {
		w = max(w, f.Severity)
	}
	return w
}

// Run reads the machine (and the process) and runs every check.
func Run(opt Options) (*Report, error) {
	if opt.Root == "" {
		opt.Root = "/"
	}
	if opt.Sleep == nil {
		opt.Sleep = time.Sleep
	}
	m, err := readMachine(opt.Root)
	if err != nil {
		return nil, err
	}
	var p *process
	if opt.PID > 0 {
		if p, err = readProcess(opt.PID, m); err != nil {
			return nil, err
		}
	}
	if opt.Interval > 0 {
		opt.Sleep(opt.Interval)
		m.second()
		if p != nil {
			p.second()
		}
	}
	r := &Report{Nodes: len(m.nodes), PID: opt.PID, Interval: opt.Interval.String()}
	if p != nil {
		r.Comm = p.comm
	}
	for _, c := range checks {
		fs, skip := c.run(m, p, opt.Interval)
		if skip != "" {
			r.Skipped = append(r.Skipped, c.name+": "+skip)
		}
		for _, f := range fs {
			f.Check = c.name
			r.Findings = append(r.Findings, f)
		}
	}
	sort.SliceStable(r.Findings, func(i, j int) bool { return r.Findings[i].Severity > r.Findings[j].Severity })
	if p != nil {
		r.Numastat = numastat(m, p)
	}
	return r, nil
}

type check struct {
	name string
	run  func(m *machine, p *process, interval time.Duration) ([]Finding, string)
}

// checks run in this order; findings are then sorted by severity.
var checks = []check{
	{"zone_reclaim_mode", checkZoneReclaim},
	{"thp_defrag", checkTHP},
	{"numa_balancing", checkNumaBalancing},
	{"binding", checkBinding},
	{"interleave", checkInterleave},
	{"node_imbalance", checkNodeImbalance},
	{"hugepage_reservation", checkHugepages},
	{"watermarks", checkWatermarks},
	{"nic_irq_affinity", checkIRQs},
	{"container", checkContainer},
	{"psi_memory", checkPSI},
}

func ev(path string, v any) string { return fmt.Sprintf("%s = %v", path, v) }
