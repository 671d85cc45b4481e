package aggregate

import (
	"math"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tidmap"
	"github.com/numatrace/numatrace/internal/window"
)

// Aggregator assigns events to fixed windows and remembers thread names
// and exits. It is not safe for concurrent use: one goroutine feeds it.
type Aggregator struct {
	grid window.Grid
	open map[uint64]*Window
	next uint64 // index of the oldest window not yet closed
	// last is the window the previous event went to: events come in
	// time order, so most go to the same one.
	last        *Window
	lastThreads int // how many threads the last window had

	threads tidmap.Map[threadState]
	// LateEvents counts events that arrived after their window closed;
	// they are folded into the oldest open window.
	LateEvents uint64
	Events     uint64
	// stacks counts the stalls that carry a stack per cause, thread and
	// stack: the report's and the exports' account of them.
	stacks StackTable
	// waits counts the serving threads' long sleeps inside requests
	// (stall.KindWait) per part, thread and stack, those without one too.
	waits StackTable
	// memory is the union of the traced threads' memory stalls, set
	// beside PSI's count in the report.
	memory memoryUnion
}

// threadState is what the aggregator knows of one thread.
type threadState struct {
	name   string
	exited bool
	kinds  KindTimes // its streamed stalls' kinds of wait
	// The newest window the thread has a row in, plus one (0: none), and
	// that row: most events go to it, and a newer window has none yet,
	// so neither case looks in the window's map.
	win uint64
	tw  *ThreadWindow
}

// New starts the windows of grid (of a second when it gives no length).
func New(grid window.Grid) *Aggregator {
	if grid.LenNs == 0 {
		grid.LenNs = 1e9
	}
	return &Aggregator{
		grid:   grid,
		open:   map[uint64]*Window{},
		waits:  StackTable{Waits: true},
		memory: memoryUnion{fromNs: grid.StartNs},
	}
}

func (a *Aggregator) index(ts uint64) uint64 {
	return a.grid.Index(ts)
}

func (a *Aggregator) window(i uint64) *Window {
	if a.last != nil && a.last.Index == i {
		return a.last
	}
	w := a.open[i]
	if w == nil {
		// Sized for as many threads as the last window that had any:
		// windows next to each other see much the same threads.
		w = &Window{Index: i, StartNs: a.grid.Start(i), EndNs: a.grid.End(i),
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
		w = &Window{Index: a.next, StartNs: a.grid.Start(a.next), EndNs: a.grid.End(a.next),
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
	switch ev.Kind {
	case stall.KindExit:
		st.exited = true
		return
	case stall.KindWait:
		a.waits.Add(ev)
		return
	}
	a.stacks.Add(ev)
	a.memory.add(ev)
	st.kinds.Add(ev)
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
	for len(out) < limit && a.grid.End(a.next) <= nowNs {
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
