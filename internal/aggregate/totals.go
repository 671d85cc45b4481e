package aggregate

import "github.com/numatrace/numatrace/internal/stall"

// TotalsLimits bound what RunTotals keeps; 0 keeps all.
type TotalsLimits struct {
	Windows  int // closed windows kept, the newest
	Recent   int // stall events kept per thread, the newest
	Timeline int // windows of each thread's own stall time kept
}

// RunTotals sums, for a front end, what the run's streamed stalls, closed
// windows and kernel snapshots say of each thread since the start: the
// view's table, drill-down and timeline. The engine's windows are its
// input, never recomputed. Not safe for concurrent use.
type RunTotals struct {
	limits  TotalsLimits
	threads map[uint32]*ThreadTotals
	// waits are the serving threads' sleeps inside requests, by thread:
	// apart from threads, so that a wait makes no thread a row of the
	// view that the report's tables do not have.
	waits   map[uint32]*StackTable
	windows []*Window
	rebuilt EventHists

	Events  uint64 // stalls streamed
	Lost    uint64 // events the kernel lost, as the windows and snapshots count them
	Evicted uint64 // thread histograms the kernel's full map evicted
	LastNs  uint64 // the newest time seen
	// Children are what a --pid target's untraced descendants stalled
	// (nil: not watched).
	Children *ChildStalls
	// System are the kernel's system-wide counters, from the latest
	// snapshot (the stacks taken and not taken among them).
	System stall.SystemStats
}

// ThreadTotals is one thread over the run.
type ThreadTotals struct {
	PID, TID  uint32
	Comm      string
	CPU       int32 // of its latest stall, -1 if none seen
	StallNs   uint64
	ByCause   [stall.NumCauses]CauseTotal
	Migr      uint64 // task migrations, from the kernel's counts
	CrossNode uint64
	// exact are the kernel's own histograms (every stall, also those
	// under the stream threshold), from the latest snapshot.
	exact    stall.Hists
	recent   []stall.Event // ring of the latest stalls
	next     int
	timeline []StallPoint // oldest first
	stacks   StackTable   // its stalls that carried stacks
	kinds    KindTimes    // its streamed stalls' kinds of wait
}

// StallPoint is a thread's stall time in one window.
type StallPoint struct {
	Index uint64
	Ns    uint64
}

// NewTotals starts empty totals.
func NewTotals(limits TotalsLimits) *RunTotals {
	return &RunTotals{limits: limits, threads: map[uint32]*ThreadTotals{}, waits: map[uint32]*StackTable{}}
}

func (r *RunTotals) thread(pid, tid uint32, comm string) *ThreadTotals {
	t := r.threads[tid]
	if t == nil {
		t = &ThreadTotals{PID: pid, TID: tid, Comm: comm, CPU: -1}
		r.threads[tid] = t
	}
	if comm != "" {
		t.Comm = comm
	}
	return t
}

// Stall takes one streamed stall, or a serving thread's wait, which only
// its thread's waits count.
func (r *RunTotals) Stall(ev *stall.Event) {
	if ev.Kind == stall.KindWait {
		w := r.waits[ev.TID]
		if w == nil {
			w = &StackTable{Waits: true}
			r.waits[ev.TID] = w
		}
		w.Add(ev)
		return
	}
	r.Events++
	r.LastNs = max(r.LastNs, ev.TsNs)
	t := r.thread(ev.PID, ev.TID, ev.Comm)
	t.CPU = int32(ev.CPU)
	r.rebuilt.Add(ev)
	t.stacks.Add(ev)
	t.kinds.Add(ev)
	switch {
	case r.limits.Recent == 0 || len(t.recent) < r.limits.Recent:
		t.recent = append(t.recent, *ev)
	default:
		t.recent[t.next] = *ev
		t.next = (t.next + 1) % r.limits.Recent
	}
}

// Window takes one closed window: its threads' totals join theirs.
func (r *RunTotals) Window(w *Window) {
	r.windows = keepNewest(append(r.windows, w), r.limits.Windows)
	r.Lost += w.LostEvents
	r.LastNs = max(r.LastNs, w.EndNs)
	for _, tw := range w.Threads {
		t := r.thread(tw.PID, tw.TID, tw.Comm)
		t.StallNs += tw.TotalNs
		for c := range tw.ByCause {
			t.ByCause[c].Merge(tw.ByCause[c])
		}
		if tw.TotalNs > 0 {
			t.timeline = keepNewest(append(t.timeline, StallPoint{w.Index, tw.TotalNs}), r.limits.Timeline)
		}
	}
}

// keepNewest drops the oldest of s beyond n (0: keeps all).
func keepNewest[T any](s []T, n int) []T {
	if n > 0 && len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Snapshot takes the kernel's exact aggregates: migrations and the
// histograms of every stall, streamed or not.
func (r *RunTotals) Snapshot(snap *stall.Snapshot) {
	if snap == nil {
		return
	}
	for tid, th := range snap.Threads {
		// The kernel keeps the name a thread had at its first stall; the
		// events carry the newest (after an exec).
		t := r.thread(th.PID, tid, "")
		if t.Comm == "" {
			t.Comm = th.Comm
		}
		t.Migr, t.CrossNode = th.Migrations, th.CrossNodeMigrations
		t.exact = th.Hists
	}
	r.Lost = max(r.Lost, snap.LostEvents)
	r.Evicted = snap.HistEvicted // of the whole run so far
	r.Children = SummarizeChildren(snap.Descendants)
	r.System = snap.System
}

// Windows are the closed windows kept, oldest first; the slice is the
// totals' own.
func (r *RunTotals) Windows() []*Window { return r.windows }

// Threads calls f for every thread, in no order.
func (r *RunTotals) Threads(f func(*ThreadTotals)) {
	for _, t := range r.threads {
		f(t)
	}
}

// Len is the number of threads.
func (r *RunTotals) Len() int { return len(r.threads) }

// Thread is tid's totals, nil if the thread is unknown.
func (r *RunTotals) Thread(tid uint32) *ThreadTotals { return r.threads[tid] }

// Hists are tid's histograms: the kernel's exact ones when a snapshot
// had them, else those rebuilt from its streamed stalls.
func (r *RunTotals) Hists(tid uint32) (h [stall.NumCauses]stall.Hist, exact bool) {
	src := r.rebuilt.Thread(tid)
	if t := r.threads[tid]; t != nil && len(t.exact) > 0 {
		src, exact = t.exact, true
	}
	for c, hist := range src {
		h[c] = *hist
	}
	return h, exact
}

// Recent are the thread's latest stalls, newest first.
func (t *ThreadTotals) Recent() []stall.Event {
	out := make([]stall.Event, 0, len(t.recent))
	for i := range t.recent {
		// t.next is the oldest once the ring is full.
		out = append(out, t.recent[(t.next+len(t.recent)-1-i)%len(t.recent)])
	}
	return out
}

// Stacks are where the thread's stalls that carried stacks stalled, per
// cause and stack, the most time first.
func (t *ThreadTotals) Stacks() []StackSample { return t.stacks.Samples(nil) }

// Waits are where thread tid slept inside its requests (stall.KindWait),
// per part and stack (nil: its waits without one), the most time first.
func (r *RunTotals) Waits(tid uint32) []StackSample {
	if w := r.waits[tid]; w != nil {
		return w.Samples(nil)
	}
	return nil
}

// Kind is the kind of wait most of the thread's streamed stalls of c
// were, where c has kinds (memstall_wait's thrashing); "" otherwise.
func (t *ThreadTotals) Kind(c stall.Cause) string { return t.kinds.Main(c) }

// Timeline is the thread's own stall time in the windows it stalled in,
// oldest first.
func (t *ThreadTotals) Timeline() []StallPoint { return append([]StallPoint(nil), t.timeline...) }
