package aggregate

import (
	"math"
	"sort"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tidmap"
)

// Aggregator assigns events to fixed windows and remembers thread names
// and exits. It is not safe for concurrent use: one goroutine feeds it.
type Aggregator struct {
	startNs  uint64
	windowNs uint64
	open     map[uint64]*Window
	next     uint64 // index of the oldest window not yet closed
	// last is the window the previous event went to: events come in
	// time order, so most go to the same one.
	last        *Window
	lastThreads int // how many threads the last window had

	threads tidmap.Map[threadState]
	// LateEvents counts events that arrived after their window closed;
	// they are folded into the oldest open window.
	LateEvents uint64
	Events     uint64
}

// threadState is what the aggregator knows of one thread.
type threadState struct {
	name   string
	exited bool
	// The newest window the thread has a row in, plus one (0: none), and
	// that row: most events go to it, and a newer window has none yet,
	// so neither case looks in the window's map.
	win uint64
	tw  *ThreadWindow
}

// New starts windows of windowNs at startNs (CLOCK_MONOTONIC).
func New(startNs, windowNs uint64) *Aggregator {
	if windowNs == 0 {
		windowNs = 1e9
	}
	return &Aggregator{
		startNs:  startNs,
		windowNs: windowNs,
		open:     map[uint64]*Window{},
	}
}

func (a *Aggregator) index(ts uint64) uint64 {
	if ts < a.startNs {
		return 0
	}
	return (ts - a.startNs) / a.windowNs
}

func (a *Aggregator) window(i uint64) *Window {
	if a.last != nil && a.last.Index == i {
		return a.last
	}
	w := a.open[i]
	if w == nil {
		// Sized for as many threads as the last window that had any:
		// windows next to each other see much the same threads.
		w = &Window{Index: i, StartNs: a.startNs + i*a.windowNs, EndNs: a.startNs + (i+1)*a.windowNs,
			Threads: make(map[uint32]*ThreadWindow, a.lastThreads)}
		a.open[i] = w
	}
	a.last = w
	return w
}

// take closes the oldest open window, or the empty one in its place.
func (a *Aggregator) take() *Window {
	w := a.open[a.next]
	if w == nil { // nothing happened in it: no room for threads
		w = &Window{Index: a.next, StartNs: a.startNs + a.next*a.windowNs, EndNs: a.startNs + (a.next+1)*a.windowNs,
			Threads: map[uint32]*ThreadWindow{}}
	}
	if n := len(w.Threads); n > 0 {
		a.lastThreads = n
	}
	// Its rows are the consumers' now: a thread that stalls no more must
	// not keep the window's slab alive (serve runs for months).
	for tid := range w.Threads {
		if st := a.threads.Get(tid); st != nil && st.win == w.Index+1 {
			st.tw = nil
		}
	}
	w.slab = nil
	delete(a.open, a.next)
	a.last = nil
	a.next++
	return w
}

// Add takes one event.
func (a *Aggregator) Add(ev *stall.Event) {
	a.Events++
	st, _ := a.threads.Put(ev.TID)
	if ev.Comm != "" && st.name != ev.Comm { // a compare is cheaper than a store
		st.name = ev.Comm
	}
	if ev.Kind == stall.KindExit {
		st.exited = true
		return
	}
	var w *Window
	if l := a.last; l != nil && ev.TsNs >= l.StartNs && ev.TsNs < l.EndNs {
		w = l // most events: no division to find the window
	} else {
		i := a.index(ev.TsNs)
		if i < a.next {
			a.LateEvents++
			i = a.next
		}
		w = a.window(i)
	}
	tw := st.tw
	switch i := w.Index; {
	case st.win == i+1: // its row in this window
	case st.win == 0 || i+1 > st.win:
		// Its first event in a window newer than any it had: no row to
		// look for.
		tw = w.newThread(ev)
		st.win, st.tw = i+1, tw
	default: // a late event, in an older window still open
		tw = w.thread(ev)
	}
	w.add(ev, tw)
}

// Close returns, in order, every window that ended at or before nowNs,
// including empty ones, so a consumer sees a gap-free series.
func (a *Aggregator) Close(nowNs uint64) []*Window { return a.CloseBatch(nowNs, math.MaxInt) }

// CloseBatch is Close for at most limit windows: call it again for the
// rest. A replay can meet a quiet stretch of millions of windows.
func (a *Aggregator) CloseBatch(nowNs uint64, limit int) []*Window {
	var out []*Window
	for len(out) < limit && a.startNs+(a.next+1)*a.windowNs <= nowNs {
		out = append(out, a.take())
	}
	return out
}

// CloseAll closes every window up to and including the one holding nowNs.
func (a *Aggregator) CloseAll(nowNs uint64) []*Window { return a.CloseAllBatch(nowNs, math.MaxInt) }

// CloseAllBatch is CloseAll for at most limit windows: call it again for
// the rest.
func (a *Aggregator) CloseAllBatch(nowNs uint64, limit int) []*Window {
	out := a.CloseBatch(nowNs, limit)
	last := a.index(nowNs)
	for i := range a.open {
		last = max(last, i)
	}
	for len(out) < limit && a.next <= last {
		w := a.take()
		w.Partial = w.EndNs > nowNs
		out = append(out, w)
	}
	return out
}

// Name returns the latest name seen for tid, or "".
func (a *Aggregator) Name(tid uint32) string {
	if st := a.threads.Get(tid); st != nil {
		return st.name
	}
	return ""
}

// Exited reports whether tid was seen exiting.
func (a *Aggregator) Exited(tid uint32) bool {
	st := a.threads.Get(tid)
	return st != nil && st.exited
}

// CauseSummary is one cause's exact totals and histogram percentiles.
type CauseSummary struct {
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
	MaxNs   uint64 `json:"max_ns"`
	// NestedNs is the part of TotalNs inside another cause's stall.
	NestedNs uint64      `json:"nested_ns,omitempty"`
	P50Ns    uint64      `json:"p50_ns"`
	P90Ns    uint64      `json:"p90_ns"`
	P99Ns    uint64      `json:"p99_ns"`
	Hist     *stall.Hist `json:"-"`
}

// StallCount is a number of stalls and their time, without a histogram.
type StallCount struct {
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
}

func summarize(h *stall.Hist) CauseSummary {
	return CauseSummary{Count: h.Count, TotalNs: h.TotalNs, MaxNs: h.MaxNs, NestedNs: h.NestedNs,
		P50Ns: h.Quantile(0.50), P90Ns: h.Quantile(0.90), P99Ns: h.Quantile(0.99), Hist: h}
}

// Migrations are a thread's CPU changes.
type Migrations struct {
	Total     uint64 `json:"total"`
	CrossNode uint64 `json:"cross_node"`
}

// ThreadSummary is everything known about one thread at the end.
type ThreadSummary struct {
	PID        uint32                  `json:"pid"`
	TID        uint32                  `json:"tid"`
	Comm       string                  `json:"comm"`
	Exited     bool                    `json:"exited,omitempty"`
	StallNs    uint64                  `json:"stall_ns"`
	Stalls     map[string]CauseSummary `json:"stalls"`
	Migrations Migrations              `json:"migrations"`
}

// ProcessSummary merges the threads of one process.
type ProcessSummary struct {
	PID        uint32                  `json:"pid"`
	Comm       string                  `json:"comm"`
	Threads    int                     `json:"threads"`
	StallNs    uint64                  `json:"stall_ns"`
	Stalls     map[string]CauseSummary `json:"stalls"`
	Migrations Migrations              `json:"migrations"`
}

// Summary combines the kernel's exact aggregates with the names and exits
// the event stream saw.
type Summary struct {
	Threads    []ThreadSummary
	Processes  []ProcessSummary
	System     stall.SystemStats
	Lost       uint64
	LostPerCPU []uint64
	// HistMapFull means the kernel's histogram map filled up during the
	// run, so the least recently used threads' histograms were evicted.
	HistMapFull bool
	// HistEvicted thread×cause histograms were evicted: Threads and
	// Processes miss their stalls, Causes do not.
	HistEvicted uint64
	// Causes are every stall by cause, exact however many threads' were
	// evicted.
	Causes map[string]CauseSummary
	// Unlisted are, by cause, the stalls in Causes that no thread in
	// Threads holds: the evicted threads'.
	Unlisted map[string]StallCount
	// Children are what a --pid target's untraced descendants stalled;
	// nil when they were not watched (--children, other targets).
	Children *ChildStalls
}

// ChildStalls are the stalls of a process target's descendants, counted
// by the kernel without tracing them.
type ChildStalls struct {
	// Processes is how many descendant processes stalled.
	Processes uint64 `json:"processes_stalled"`
	// StallNs is their threads' freeze time, as a thread's StallNs.
	StallNs uint64                `json:"stall_ns"`
	Stalls  map[string]StallCount `json:"stalls"`
	// NotWatched descendants did not fit in the kernel's set: their
	// stalls are missing here.
	NotWatched uint64 `json:"not_watched"`
}

// SummarizeChildren turns the kernel's count of a target's descendants'
// stalls into the report's; nil stays nil.
func SummarizeChildren(d *stall.Descendants) *ChildStalls {
	if d == nil {
		return nil
	}
	c := &ChildStalls{Processes: d.Stalled, StallNs: d.FreezeNs(), NotWatched: d.NotWatched, Stalls: map[string]StallCount{}}
	for cause, t := range d.Causes {
		c.Stalls[cause.String()] = StallCount{Count: t.Count, TotalNs: t.TotalNs}
	}
	return c
}

// Summarize builds the final summary from a kernel snapshot. Threads are
// sorted by total stall time, then migrations, worst first.
func (a *Aggregator) Summarize(snap *stall.Snapshot) Summary {
	s := Summary{System: snap.System, Lost: snap.LostEvents, LostPerCPU: snap.LostPerCPU,
		HistMapFull: snap.HistEvicted > 0 || snap.HistCapacity > 0 && snap.HistEntries >= snap.HistCapacity,
		HistEvicted: snap.HistEvicted, Causes: map[string]CauseSummary{}, Unlisted: map[string]StallCount{},
		Children: SummarizeChildren(snap.Descendants)}
	procs := map[uint32]*ProcessSummary{}
	procHists := map[uint32]map[stall.Cause]*stall.Hist{}
	names := map[uint32]*ProcessName{}
	for tid, th := range snap.Threads {
		ts := ThreadSummary{PID: th.PID, TID: tid, Comm: th.Comm, Exited: a.Exited(tid),
			Stalls:     map[string]CauseSummary{},
			Migrations: Migrations{Total: th.Migrations, CrossNode: th.CrossNodeMigrations}}
		if n := a.Name(tid); n != "" {
			ts.Comm = n
		}
		ph := procHists[th.PID]
		if ph == nil {
			ph = map[stall.Cause]*stall.Hist{}
			procHists[th.PID] = ph
		}
		for c, h := range th.Hists {
			ts.Stalls[c.String()] = summarize(h)
			if d := c.Desc(); d.Timed && !d.NotMemory { // a thread's stall time is memory management's
				ts.StallNs += h.FreezeNs()
			}
			if ph[c] == nil {
				ph[c] = &stall.Hist{}
			}
			ph[c].Merge(h)
		}
		s.Threads = append(s.Threads, ts)

		p := procs[th.PID]
		if p == nil {
			p = &ProcessSummary{PID: th.PID}
			procs[th.PID] = p
		}
		p.Threads++
		p.StallNs += ts.StallNs
		p.Migrations.Total += th.Migrations
		p.Migrations.CrossNode += th.CrossNodeMigrations
		if names[th.PID] == nil {
			names[th.PID] = &ProcessName{}
		}
		names[th.PID].Offer(th.PID, tid, ts.Comm)
		p.Comm = names[th.PID].String()
	}
	// What the tables hold, by cause: the processes' histograms merged.
	listed := map[stall.Cause]*stall.Hist{}
	for pid, p := range procs {
		p.Stalls = map[string]CauseSummary{}
		for c, h := range procHists[pid] {
			p.Stalls[c.String()] = summarize(h)
			if listed[c] == nil {
				listed[c] = &stall.Hist{}
			}
			listed[c].Merge(h)
		}
		s.Processes = append(s.Processes, *p)
	}
	totals := snap.CauseTotals
	if totals == nil { // a recording from before the kernel kept them
		totals = listed
	}
	for c, h := range totals {
		s.Causes[c.String()] = summarize(h)
		var l stall.Hist
		if listed[c] != nil {
			l = *listed[c]
		}
		if h.Count > l.Count || h.TotalNs > l.TotalNs {
			s.Unlisted[c.String()] = StallCount{Count: h.Count - min(h.Count, l.Count), TotalNs: h.TotalNs - min(h.TotalNs, l.TotalNs)}
		}
	}
	sort.Slice(s.Threads, func(i, j int) bool {
		x, y := s.Threads[i], s.Threads[j]
		if x.StallNs != y.StallNs {
			return x.StallNs > y.StallNs
		}
		if x.Migrations.Total != y.Migrations.Total {
			return x.Migrations.Total > y.Migrations.Total
		}
		return x.TID < y.TID
	})
	sort.Slice(s.Processes, func(i, j int) bool {
		x, y := s.Processes[i], s.Processes[j]
		if x.StallNs != y.StallNs {
			return x.StallNs > y.StallNs
		}
		return x.PID < y.PID
	})
	return s
}
