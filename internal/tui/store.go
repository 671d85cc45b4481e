// Package tui is numatrace's interactive front end: a Bubble Tea program
// over a Store that the live session or a replay feeds. The Store keeps
// the run's totals (aggregate.RunTotals, fed by the engine's stalls,
// windows and the kernel's snapshots) behind a lock, so a slow screen
// never costs an event, and the screen reads a copy of them on its own
// tick.
package tui

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// Info is what the view is told of the run as it starts, as the engine
// and the report are told it: the run's description, the machine it
// runs on, and doctor's reading of that machine. Live, the front end
// passes its own; a replay converts the recording's header once, at its
// edge (LoadRecording).
type Info struct {
	Run     run.Description
	Machine Machine
	// Doctor is doctor's report as tracing started: of this machine
	// live, of the recorded one in a replay; nil when doctor did not run.
	Doctor *doctor.Report
}

// Machine is the traced machine as the view shows it.
type Machine struct {
	CPUNode map[int]int // CPU → NUMA node
	Nodes   int
}

// NewMachine is a machine whose CPUs are on the nodes cpuNode says and
// whose memory is on nodeMem's: it has as many nodes as the larger
// says (a node may have memory and no CPU).
func NewMachine(cpuNode map[int]int, nodeMem map[int]uint64) Machine {
	nodes := map[int]bool{}
	for _, n := range cpuNode {
		nodes[n] = true
	}
	return Machine{CPUNode: cpuNode, Nodes: max(len(nodes), len(nodeMem))}
}

// recentEvents is how many stall events each thread keeps for the
// drill-down.
const recentEvents = 32

// timelineWindows is how many windows of a thread's own stall time are
// kept.
const timelineWindows = 1024

// Store is what the screens show: the run's totals, which the engine's
// output feeds, and the view's own state. Every method is safe to call
// from the feeding goroutine while the screen reads.
type Store struct {
	mu     sync.Mutex
	info   Info
	totals *aggregate.RunTotals
	first  *record.Procfs
	last   *record.Procfs
	// analysis is the engine's spike analysis, as of the newest window.
	analysis *correlate.Result
	// warnings that did not stop tracing, newest last, the latest few.
	warnings []Warning
}

// Warning is a problem that did not stop tracing (a failed scrape, a
// cgroup rescan that failed), shown in the view rather than printed over it.
type Warning struct {
	At  time.Time
	Msg string
}

// warningsKept is how many warnings the store holds.
const warningsKept = 8

// NewStore starts an empty store. maxWindows bounds the windows kept for
// the timeline and a spike window's threads (0 keeps all, as replay does).
func NewStore(info Info, maxWindows int) *Store {
	return &Store{info: info, totals: aggregate.NewTotals(aggregate.TotalsLimits{
		Windows: maxWindows, Recent: recentEvents, Timeline: timelineWindows})}
}

// Stall takes one streamed stall.
func (s *Store) Stall(ev *stall.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Stall(ev)
	return nil
}

// Window takes one closed window.
func (s *Store) Window(w *aggregate.Window) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Window(w)
	return nil
}

// Flush is part of engine.Sink: nothing is buffered here.
func (s *Store) Flush() error { return nil }

// Warn shows a problem that did not stop tracing.
func (s *Store) Warn(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warnings = append(s.warnings, Warning{At: time.Now(), Msg: err.Error()})
	if len(s.warnings) > warningsKept {
		s.warnings = s.warnings[len(s.warnings)-warningsKept:]
	}
}

// Warnings are the ones held, oldest first.
func (s *Store) Warnings() []Warning {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Warning(nil), s.warnings...)
}

// Analysis takes the engine's spike analysis (engine.AnalysisSink). The
// view shows it as it is: it never runs an analysis of its own.
func (s *Store) Analysis(a *correlate.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.analysis = a
}

// Snapshot takes the kernel's exact aggregates: migrations and the
// histograms of every stall, streamed or not.
func (s *Store) Snapshot(snap *stall.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Snapshot(snap)
}

// Procfs takes a reading of the kernel's memory counters.
func (s *Store) Procfs(p record.Procfs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		s.first = &p
	}
	s.last = &p
}

// Row is one line of the thread or process table.
type Row = aggregate.Row

// WindowSummary is one window of the timeline.
type WindowSummary struct {
	Index   uint64
	StartNs uint64
	CauseNs [stall.NumCauses]uint64
	P99Ns   uint64 // 0 without latency data
	Count   uint64
}

// Frame is a consistent copy of the store for one screen refresh.
type Frame struct {
	Info    Info
	Rows    []Row // threads, unsorted
	Windows []WindowSummary
	win     []*aggregate.Window // for a spike window's threads (read-only)
	// Analysis is the engine's spike analysis; nil without a latency source.
	Analysis *correlate.Result
	Warnings []Warning
	Events   uint64
	Lost     uint64
	Evicted  uint64 // thread histograms evicted: exited threads' exact stalls are gone
	// Children are what a --pid target's untraced descendants stalled
	// (nil: not watched).
	Children *aggregate.ChildStalls
	NowNs    uint64 // newest data seen
	// System are the kernel's system-wide counters, as of the latest
	// snapshot.
	System stall.SystemStats
	First  *record.Procfs
	Last   *record.Procfs
}

// Frame copies what the screens need.
func (s *Store) Frame() *Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.totals
	f := &Frame{Info: s.info, Events: t.Events, Lost: t.Lost, Evicted: t.Evicted, NowNs: t.LastNs, First: s.first, Last: s.last,
		Analysis: s.analysis, Children: t.Children, System: t.System,
		Warnings: append([]Warning(nil), s.warnings...),
		Rows:     make([]Row, 0, t.Len()), win: append([]*aggregate.Window(nil), t.Windows()...)}
	t.Threads(func(th *aggregate.ThreadTotals) { f.Rows = append(f.Rows, th.Row(s.info.Machine.CPUNode)) })
	f.Windows = make([]WindowSummary, len(f.win))
	for i, w := range f.win {
		ws := WindowSummary{Index: w.Index, StartNs: w.StartNs}
		for c := range w.Causes {
			ws.CauseNs[c] = w.Causes[c].TotalNs
		}
		if w.Latency != nil {
			ws.P99Ns, ws.Count = w.Latency.P99Ns, w.Latency.Count
		}
		f.Windows[i] = ws
	}
	return f
}

// Detail is one thread's drill-down.
type Detail struct {
	Row
	Hists    [stall.NumCauses]stall.Hist
	Exact    bool          // Hists are the kernel's, not rebuilt from streamed events
	Recent   []stall.Event // newest first
	Timeline []aggregate.StallPoint
	Stacks   []aggregate.StackSample // the most time first
	Waits    []aggregate.StackSample // its sleeps inside requests, the most time first
	// Kinds are, per cause with kinds of wait, the kind most of its
	// streamed stalls were (memstall_wait's thrashing).
	Kinds [stall.NumCauses]string
}

// Detail returns tid's drill-down, or false if the thread is unknown.
func (s *Store) Detail(tid uint32) (*Detail, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.totals.Thread(tid)
	if t == nil {
		return nil, false
	}
	d := &Detail{Row: t.Row(s.info.Machine.CPUNode), Recent: t.Recent(), Timeline: t.Timeline(), Stacks: t.Stacks(), Waits: s.totals.Waits(tid)}
	d.Hists, d.Exact = s.totals.Hists(tid)
	for c := range d.Kinds {
		d.Kinds[c] = t.Kind(stall.Cause(c))
	}
	return d, true
}

// SortKey orders the table: by total stall, by one cause, or by
// migrations.
type SortKey int

const (
	SortTotal      SortKey = iota
	SortCause0             // SortCause0 + c sorts by cause c
	SortMigrations = SortCause0 + SortKey(stall.NumCauses)
	numSortKeys    = SortMigrations + 1
)

func (k SortKey) String() string {
	switch {
	case k == SortTotal:
		return "total stall"
	case k == SortMigrations:
		return "migrations"
	}
	return stall.Cause(k - SortCause0).String()
}

func (k SortKey) value(r *Row) uint64 {
	switch {
	case k == SortTotal:
		return r.StallNs
	case k == SortMigrations:
		return r.Migr
	}
	c := stall.Cause(k - SortCause0)
	if c.Timed() {
		return r.ByCause[c].TotalNs
	}
	return r.ByCause[c].Count
}

// SortRows sorts worst first, ties by tid (or pid) so the order is stable
// from one refresh to the next.
func SortRows(rows []Row, k SortKey) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := k.value(&rows[i]), k.value(&rows[j])
		if a != b {
			return a > b
		}
		if rows[i].PID != rows[j].PID {
			return rows[i].PID < rows[j].PID
		}
		return rows[i].TID < rows[j].TID
	})
}

// FilterRows keeps rows whose comm, pid or tid contains q.
func FilterRows(rows []Row, q string) []Row {
	if q == "" {
		return rows
	}
	q = strings.ToLower(q)
	out := rows[:0:0]
	for _, r := range rows {
		if strings.Contains(strings.ToLower(r.Comm), q) || strings.Contains(itoa(r.TID), q) || strings.Contains(itoa(r.PID), q) {
			out = append(out, r)
		}
	}
	return out
}
