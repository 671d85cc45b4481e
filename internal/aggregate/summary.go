package aggregate

import (
	"sort"

	"github.com/numatrace/numatrace/internal/stall"
)

// CauseSummary is one cause's exact totals and histogram percentiles.
type CauseSummary struct {
	Count   uint64
	TotalNs uint64
	MaxNs   uint64
	// NestedNs is the part of TotalNs inside another cause's stall.
	NestedNs uint64
	P50Ns    uint64
	P90Ns    uint64
	P99Ns    uint64
	// Hist is the kernel's histogram; nil when it kept none for the cause.
	Hist *stall.Hist
	// Kind is the kind of wait most of its streamed time was, where the
	// cause has kinds (memstall_wait's thrashing): the tables and the
	// headline name the cause with it (stall.Cause.Label).
	Kind string
}

// Has says whether the kernel kept a histogram of the cause.
func (c *CauseSummary) Has() bool { return c.Hist != nil }

// CauseSummaries are one summary per cause, indexed by stall.Cause.
type CauseSummaries [stall.NumCauses]CauseSummary

// StallCount is a number of stalls and their time, without a histogram.
type StallCount struct {
	Count   uint64
	TotalNs uint64
}

// Any says whether there is anything to count.
func (s StallCount) Any() bool { return s.Count > 0 || s.TotalNs > 0 }

func summarize(h *stall.Hist) CauseSummary {
	return CauseSummary{Count: h.Count, TotalNs: h.TotalNs, MaxNs: h.MaxNs, NestedNs: h.NestedNs,
		P50Ns: h.Quantile(0.50), P90Ns: h.Quantile(0.90), P99Ns: h.Quantile(0.99), Hist: h}
}

// Migrations are a thread's CPU changes.
type Migrations struct {
	Total     uint64
	CrossNode uint64
}

// ThreadSummary is everything known about one thread at the end.
type ThreadSummary struct {
	PID        uint32
	TID        uint32
	Comm       string
	Exited     bool
	StallNs    uint64 // freeze time
	Stalls     CauseSummaries
	Migrations Migrations
}

// ProcessSummary merges the threads of one process.
type ProcessSummary struct {
	PID        uint32
	Comm       string
	Threads    int
	StallNs    uint64
	Stalls     CauseSummaries
	Migrations Migrations
}

// Summary combines the kernel's exact aggregates with the names and exits
// the event stream saw.
type Summary struct {
	Threads    []ThreadSummary
	Processes  []ProcessSummary
	System     stall.SystemStats
	Lost       uint64
	LostPerCPU []uint64
	// Stacks are the streamed stalls that carry a stack (--stacks-min),
	// per cause, thread and stack, the most time first.
	Stacks []StackSample
	// Waits are the serving threads' sleeps inside requests of at least
	// --stacks-min (stall.KindWait), per part (Kind: disk_io, other_wait),
	// thread and stack (nil: taken without one), the most time first.
	Waits []StackSample
	// HistMapFull means the kernel's histogram map filled up during the
	// run, so the least recently used threads' histograms were evicted.
	HistMapFull bool
	// HistEvicted thread×cause histograms were evicted: Threads and
	// Processes miss their stalls, Causes do not.
	HistEvicted uint64
	// Causes are every stall by cause, exact however many threads' were
	// evicted.
	Causes CauseSummaries
	// Unlisted are, by cause, the stalls in Causes that no thread in
	// Threads holds: the evicted threads'.
	Unlisted [stall.NumCauses]StallCount
	// Children are what a --pid target's untraced descendants stalled;
	// nil when they were not watched (--children, other targets).
	Children *ChildStalls
	// MemoryStallNs is how long at least one traced thread was frozen by
	// memory management, from the streamed stalls: what PSI's memory
	// "some" counts for the same threads.
	MemoryStallNs uint64
}

// ChildStalls are the stalls of a process target's descendants, counted
// by the kernel without tracing them.
type ChildStalls struct {
	// Processes is how many descendant processes stalled.
	Processes uint64
	// StallNs is their threads' freeze time, as a thread's StallNs.
	StallNs uint64
	Stalls  [stall.NumCauses]StallCount
	// NotWatched descendants did not fit in the kernel's set: their
	// stalls are missing here.
	NotWatched uint64
}

// SummarizeChildren turns the kernel's count of a target's descendants'
// stalls into the report's; nil stays nil.
func SummarizeChildren(d *stall.Descendants) *ChildStalls {
	if d == nil {
		return nil
	}
	c := &ChildStalls{Processes: d.Stalled, StallNs: d.FreezeNs(), NotWatched: d.NotWatched}
	for cause, t := range d.Causes {
		c.Stalls[cause] = StallCount{Count: t.Count, TotalNs: t.TotalNs}
	}
	return c
}

// Summarize builds the final summary from a kernel snapshot. Threads are
// sorted by total stall time, then migrations, worst first.
func (a *Aggregator) Summarize(snap *stall.Snapshot) Summary {
	s := Summary{System: snap.System, Lost: snap.LostEvents, LostPerCPU: snap.LostPerCPU,
		HistMapFull: snap.HistEvicted > 0 || snap.HistCapacity > 0 && snap.HistEntries >= snap.HistCapacity,
		HistEvicted: snap.HistEvicted, Children: SummarizeChildren(snap.Descendants), MemoryStallNs: a.memory.total()}
	procs := processes{}
	var kinds KindTimes // the run's
	for tid, th := range snap.Threads {
		ts := a.threadSummary(tid, th)
		s.Threads = append(s.Threads, ts)
		k := a.kinds(tid)
		procs.add(&ts, th, k)
		kinds.Merge(k)
	}
	s.Processes = procs.summaries()
	totals := snap.CauseTotals
	if totals == nil { // a recording from before the kernel kept them
		totals = procs.listed
	}
	for c, h := range totals {
		s.Causes[c] = summarize(h)
		var l stall.Hist
		if procs.listed[c] != nil {
			l = *procs.listed[c]
		}
		s.Unlisted[c] = StallCount{Count: h.Count - min(h.Count, l.Count), TotalNs: h.TotalNs - min(h.TotalNs, l.TotalNs)}
	}
	kinds.name(&s.Causes)
	sortSummaries(s.Threads, s.Processes)
	names := make(map[uint32]string, len(s.Processes))
	for _, p := range s.Processes {
		names[p.PID] = p.Comm
	}
	s.Stacks = a.stacks.Samples(func(pid uint32) string { return names[pid] })
	s.Waits = a.waits.Samples(func(pid uint32) string { return names[pid] })
	return s
}

// threadSummary is one thread's, named as the events last named it.
func (a *Aggregator) threadSummary(tid uint32, th *stall.ThreadStats) ThreadSummary {
	ts := ThreadSummary{PID: th.PID, TID: tid, Comm: th.Comm, Exited: a.Exited(tid),
		Migrations: Migrations{Total: th.Migrations, CrossNode: th.CrossNodeMigrations}}
	if n := a.Name(tid); n != "" {
		ts.Comm = n
	}
	for c, h := range th.Hists {
		ts.Stalls[c] = summarize(h)
	}
	ts.StallNs = th.Hists.FreezeNs()
	a.kinds(tid).name(&ts.Stalls)
	return ts
}

// kinds are the kinds of wait of tid's streamed stalls.
func (a *Aggregator) kinds(tid uint32) *KindTimes {
	if st := a.threads.Get(tid); st != nil {
		return &st.kinds
	}
	return &KindTimes{}
}

// processes merges thread summaries by process.
type processes struct {
	by    map[uint32]*ProcessSummary
	hists map[uint32]map[stall.Cause]*stall.Hist
	names map[uint32]*ProcessName
	kinds map[uint32]*KindTimes
	// listed is what the tables hold, by cause: every process's merged.
	listed map[stall.Cause]*stall.Hist
}

func (ps *processes) add(ts *ThreadSummary, th *stall.ThreadStats, kinds *KindTimes) {
	if ps.by == nil {
		*ps = processes{by: map[uint32]*ProcessSummary{}, hists: map[uint32]map[stall.Cause]*stall.Hist{},
			names: map[uint32]*ProcessName{}, kinds: map[uint32]*KindTimes{}, listed: map[stall.Cause]*stall.Hist{}}
	}
	p := ps.by[th.PID]
	if p == nil {
		p = &ProcessSummary{PID: th.PID}
		ps.by[th.PID], ps.hists[th.PID], ps.names[th.PID], ps.kinds[th.PID] = p, map[stall.Cause]*stall.Hist{}, &ProcessName{}, &KindTimes{}
	}
	ps.kinds[th.PID].Merge(kinds)
	p.Threads++
	p.StallNs += ts.StallNs
	p.Migrations.Total += th.Migrations
	p.Migrations.CrossNode += th.CrossNodeMigrations
	ps.names[th.PID].Offer(th.PID, ts.TID, ts.Comm)
	for c, h := range th.Hists {
		mergeInto(ps.hists[th.PID], c, h)
	}
}

func mergeInto(m map[stall.Cause]*stall.Hist, c stall.Cause, h *stall.Hist) {
	if m[c] == nil {
		m[c] = &stall.Hist{}
	}
	m[c].Merge(h)
}

// summaries are the processes' summaries, in no order.
func (ps *processes) summaries() []ProcessSummary {
	var out []ProcessSummary
	for pid, p := range ps.by {
		p.Comm = ps.names[pid].String()
		for c, h := range ps.hists[pid] {
			p.Stalls[c] = summarize(h)
			mergeInto(ps.listed, c, h)
		}
		ps.kinds[pid].name(&p.Stalls)
		out = append(out, *p)
	}
	return out
}

// sortSummaries puts the worst first: by stall time, then (threads) by
// migrations, then by id, so the order never depends on map order.
func sortSummaries(threads []ThreadSummary, procs []ProcessSummary) {
	sort.Slice(threads, func(i, j int) bool {
		x, y := threads[i], threads[j]
		if x.StallNs != y.StallNs {
			return x.StallNs > y.StallNs
		}
		if x.Migrations.Total != y.Migrations.Total {
			return x.Migrations.Total > y.Migrations.Total
		}
		return x.TID < y.TID
	})
	sort.Slice(procs, func(i, j int) bool {
		x, y := procs[i], procs[j]
		if x.StallNs != y.StallNs {
			return x.StallNs > y.StallNs
		}
		return x.PID < y.PID
	})
}
