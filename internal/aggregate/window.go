// Package aggregate turns a stream of stall events into per-window totals
// and combines the kernel's exact per-thread histograms into summaries.
// It is fed by any event source: the live tracer or a replay.
package aggregate

import (
	"sort"

	"github.com/numatrace/numatrace/internal/latency"

	"github.com/numatrace/numatrace/internal/stall"
)

// CauseTotal is the stall count and time of one cause.
type CauseTotal struct {
	Count   uint64
	TotalNs uint64
	MaxNs   uint64
	// Stack is where the longest of its stalls that carried a stack
	// stalled (StackNs long); nil if none did.
	Stack   *stall.Stack
	StackNs uint64
	// Reason is the longest stall's (MaxNs long): a memstall_wait's kind
	// of wait, which its verdicts name.
	Reason string
}

func (c *CauseTotal) add(ev *stall.Event) {
	if ev.Counts() {
		c.Count++
	}
	c.TotalNs += ev.DurNs
	if ev.LongestNs() >= c.MaxNs && ev.Reason != c.Reason { // a compare is cheaper than a store
		c.Reason = ev.Reason
	}
	c.MaxNs = max(c.MaxNs, ev.LongestNs())
	if ev.Stack != nil && (c.Stack == nil || ev.LongestNs() > c.StackNs) {
		c.Stack, c.StackNs = ev.Stack, ev.LongestNs()
	}
}

// takeHist takes the kernel's count, time and longest stall of the cause
// (every stall, not only the streamed ones); the stack and the reason
// stay the streamed stalls'.
func (c *CauseTotal) takeHist(h *stall.Hist) {
	c.Count, c.TotalNs, c.MaxNs = h.Count, h.TotalNs, h.MaxNs
}

// Merge adds o's stalls to c.
func (c *CauseTotal) Merge(o CauseTotal) {
	c.Count += o.Count
	c.TotalNs += o.TotalNs
	if o.MaxNs > c.MaxNs {
		c.Reason = o.Reason
	}
	c.MaxNs = max(c.MaxNs, o.MaxNs)
	if o.Stack != nil && (c.Stack == nil || o.StackNs > c.StackNs) {
		c.Stack, c.StackNs = o.Stack, o.StackNs
	}
}

// ThreadWindow is one thread's stall time within a window.
type ThreadWindow struct {
	PID     uint32
	TID     uint32
	Comm    string
	TotalNs uint64 // freeze time: nested stalls are not counted twice
	ByCause [stall.NumCauses]CauseTotal
}

// Window holds the stalls that ended in [StartNs, EndNs) of CLOCK_MONOTONIC.
type Window struct {
	Index   uint64
	StartNs uint64
	EndNs   uint64
	Causes  [stall.NumCauses]CauseTotal
	Threads map[uint32]*ThreadWindow
	// Partial is set on the last window when tracing stopped before its end.
	Partial bool
	// Latency is the service's request latency in this window, when a
	// latency source is set and requests finished in it.
	Latency *latency.Stats
	// LostEvents is how many records the kernel dropped while this window
	// was the newest one; set by the engine.
	LostEvents uint64
	// PressureNs is the growth of memory PSI's "some" total while this
	// window was the newest one, when PSI was read (HasPressure); set by
	// the engine.
	PressureNs  uint64
	HasPressure bool

	slab []ThreadWindow // rows not yet handed out
}

// TopThreads returns up to n threads by stall time, worst first.
func (w *Window) TopThreads(n int) []*ThreadWindow {
	out := make([]*ThreadWindow, 0, len(w.Threads))
	for _, t := range w.Threads {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TotalNs != out[j].TotalNs {
			return out[i].TotalNs > out[j].TotalNs
		}
		return out[i].TID < out[j].TID
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// thread returns ev's thread's row, adding it.
func (w *Window) thread(ev *stall.Event) *ThreadWindow {
	if t := w.Threads[ev.TID]; t != nil {
		return t
	}
	return w.newThread(ev)
}

// newThread adds a row for ev's thread, which has none.
func (w *Window) newThread(ev *stall.Event) *ThreadWindow {
	// Rows come from a slab: one allocation for many threads.
	if len(w.slab) == 0 {
		w.slab = make([]ThreadWindow, min(max(len(w.Threads), 8), 256))
	}
	t := &w.slab[0]
	w.slab = w.slab[1:]
	t.PID, t.TID = ev.PID, ev.TID
	w.Threads[ev.TID] = t
	return t
}

// add counts ev in the window and in t, its thread's row.
func (w *Window) add(ev *stall.Event, t *ThreadWindow) {
	w.Causes[ev.Cause].add(ev)
	if t.Comm != ev.Comm {
		t.Comm = ev.Comm
	}
	t.TotalNs += ev.FreezeNs()
	t.ByCause[ev.Cause].add(ev)
}
