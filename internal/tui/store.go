// Package tui is numatrace's interactive front end: a Bubble Tea program
// over a Store that the live session or a replay feeds. The Store does the
// aggregation, so a slow screen never costs an event, and the screen
// reads a copy of it on its own tick.
package tui

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/stall"
)

// Info describes the trace for the header.
type Info struct {
	Target         string
	Kernel         string
	Nodes          int
	CPUNode        map[int]int // CPU → NUMA node
	ProbesAttached int
	ProbesTotal    int
	StartNs        uint64    // CLOCK_MONOTONIC at the start
	WindowNs       uint64    // window length
	Started        time.Time // wall clock at StartNs
	// Findings are doctor's, when it ran.
	Findings []string
}

// recentEvents is how many stall events each thread keeps for the
// drill-down.
const recentEvents = 32

// timelineWindows is how many windows of a thread's own stall time are
// kept.
const timelineWindows = 1024

// Thread is everything the screens show of one thread.
type Thread struct {
	PID, TID  uint32
	Comm      string
	CPU       int32 // of its latest stall, -1 if none seen
	StallNs   uint64
	ByCause   [stall.NumCauses]aggregate.CauseTotal
	Migr      uint64 // task migrations, from the kernel's counts
	CrossNode uint64
	// hists are built from the streamed events; exact are the kernel's
	// own (every stall, also those under the stream threshold).
	hists    [stall.NumCauses]stall.Hist
	exact    map[stall.Cause]*stall.Hist
	recent   []stall.Event // ring of the latest stalls
	next     int
	timeline []point // (window, stall ns), oldest first
}

type point struct {
	Index uint64
	Ns    uint64
}

// Store accumulates what the screens show. Every method is safe to call
// from the feeding goroutine while the screen reads.
type Store struct {
	mu      sync.Mutex
	info    Info
	threads map[uint32]*Thread
	windows []*aggregate.Window
	maxWin  int // windows kept (0: all); the oldest go first
	events  uint64
	lost    uint64
	evicted uint64 // thread histograms the kernel's full map evicted
	lastNs  uint64
	first   *record.Procfs
	last    *record.Procfs
	// analysis is the engine's spike analysis, as of the newest window.
	analysis *correlate.Result
	// warnings that did not stop tracing, newest last, the latest few.
	warnings []Warning
	// children are what a --pid target's untraced descendants stalled.
	children *aggregate.ChildStalls
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
	return &Store{info: info, threads: map[uint32]*Thread{}, maxWin: maxWindows}
}

func (s *Store) thread(pid, tid uint32, comm string) *Thread {
	t := s.threads[tid]
	if t == nil {
		t = &Thread{PID: pid, TID: tid, Comm: comm, CPU: -1}
		s.threads[tid] = t
	}
	if comm != "" {
		t.Comm = comm
	}
	return t
}

// Stall takes one streamed stall.
func (s *Store) Stall(ev *stall.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events++
	if ev.TsNs > s.lastNs {
		s.lastNs = ev.TsNs
	}
	t := s.thread(ev.PID, ev.TID, ev.Comm)
	t.CPU = int32(ev.CPU)
	if ev.Counts() {
		t.hists[ev.Cause].Add(ev.LongestNs())
	}
	if len(t.recent) < recentEvents {
		t.recent = append(t.recent, *ev)
	} else {
		t.recent[t.next] = *ev
		t.next = (t.next + 1) % recentEvents
	}
	return nil
}

// Window takes one closed window.
func (s *Store) Window(w *aggregate.Window) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, w)
	if s.maxWin > 0 && len(s.windows) > s.maxWin {
		s.windows = s.windows[len(s.windows)-s.maxWin:]
	}
	s.lost += w.LostEvents
	if w.EndNs > s.lastNs {
		s.lastNs = w.EndNs
	}
	for _, tw := range w.Threads {
		t := s.thread(tw.PID, tw.TID, tw.Comm)
		t.StallNs += tw.TotalNs
		for c := range tw.ByCause {
			t.ByCause[c].Merge(tw.ByCause[c])
		}
		if tw.TotalNs > 0 {
			t.timeline = append(t.timeline, point{w.Index, tw.TotalNs})
			if len(t.timeline) > timelineWindows {
				t.timeline = t.timeline[len(t.timeline)-timelineWindows:]
			}
		}
	}
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
	if snap == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for tid, th := range snap.Threads {
		// The kernel keeps the name a thread had at its first stall; the
		// events carry the newest (after an exec).
		t := s.thread(th.PID, tid, "")
		if t.Comm == "" {
			t.Comm = th.Comm
		}
		t.Migr, t.CrossNode = th.Migrations, th.CrossNodeMigrations
		t.exact = th.Hists
	}
	if snap.LostEvents > s.lost {
		s.lost = snap.LostEvents
	}
	s.evicted = snap.HistEvicted // of the whole run so far
	s.children = aggregate.SummarizeChildren(snap.Descendants)
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

// SetFindings shows doctor's findings on the System screen.
func (s *Store) SetFindings(f []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info.Findings = f
}

// Row is one line of the thread or process table.
type Row struct {
	PID, TID  uint32 // TID 0 for a process row
	Comm      string
	Node      int // -1 unknown
	Threads   int
	StallNs   uint64
	ByCause   [stall.NumCauses]aggregate.CauseTotal
	Migr      uint64
	CrossNode uint64
}

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
	First    *record.Procfs
	Last     *record.Procfs
}

// Frame copies what the screens need.
func (s *Store) Frame() *Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &Frame{Info: s.info, Events: s.events, Lost: s.lost, Evicted: s.evicted, NowNs: s.lastNs, First: s.first, Last: s.last, Analysis: s.analysis,
		Children: s.children,
		Warnings: append([]Warning(nil), s.warnings...),
		Rows:     make([]Row, 0, len(s.threads)), win: append([]*aggregate.Window(nil), s.windows...)}
	for _, t := range s.threads {
		f.Rows = append(f.Rows, s.row(t))
	}
	f.Windows = make([]WindowSummary, len(s.windows))
	for i, w := range s.windows {
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

func (s *Store) row(t *Thread) Row {
	r := Row{PID: t.PID, TID: t.TID, Comm: t.Comm, Node: -1, Threads: 1, StallNs: t.StallNs,
		ByCause: t.ByCause, Migr: t.Migr, CrossNode: t.CrossNode}
	if n, ok := s.info.CPUNode[int(t.CPU)]; ok && t.CPU >= 0 {
		r.Node = n
	}
	r.ByCause[stall.TaskMigration].Count = max(r.ByCause[stall.TaskMigration].Count, t.Migr)
	return r
}

// Detail is one thread's drill-down.
type Detail struct {
	Row
	Hists    [stall.NumCauses]stall.Hist
	Exact    bool          // Hists are the kernel's, not rebuilt from streamed events
	Recent   []stall.Event // newest first
	Timeline []point
}

// Detail returns tid's drill-down, or false if the thread is unknown.
func (s *Store) Detail(tid uint32) (*Detail, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[tid]
	if t == nil {
		return nil, false
	}
	d := &Detail{Row: s.row(t), Hists: t.hists, Timeline: append([]point(nil), t.timeline...)}
	if len(t.exact) > 0 {
		d.Exact = true
		d.Hists = [stall.NumCauses]stall.Hist{}
		for c, h := range t.exact {
			d.Hists[c] = *h
		}
	}
	for i := 0; i < len(t.recent); i++ {
		// t.next is the oldest once the ring is full.
		j := (t.next + len(t.recent) - 1 - i) % len(t.recent)
		d.Recent = append(d.Recent, t.recent[j])
	}
	return d, true
}

// Processes merges thread rows by process, named as
// aggregate.ProcessName names it.
func Processes(rows []Row) []Row {
	by := map[uint32]*Row{}
	names := map[uint32]*aggregate.ProcessName{}
	for _, r := range rows {
		p := by[r.PID]
		if p == nil {
			p = &Row{PID: r.PID, Node: r.Node}
			by[r.PID] = p
			names[r.PID] = &aggregate.ProcessName{}
		}
		names[r.PID].Offer(r.PID, r.TID, r.Comm)
		p.Comm = names[r.PID].String()
		if p.Node != r.Node {
			p.Node = -2 // spread over nodes
		}
		p.Threads++
		p.StallNs += r.StallNs
		p.Migr += r.Migr
		p.CrossNode += r.CrossNode
		for c := range r.ByCause {
			p.ByCause[c].Merge(r.ByCause[c])
		}
	}
	out := make([]Row, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	return out
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
