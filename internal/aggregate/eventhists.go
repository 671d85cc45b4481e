package aggregate

import "github.com/numatrace/numatrace/internal/stall"

// EventHists rebuilds each thread's histograms from the streamed stall
// events, as the kernel would have counted them: what is known of a
// thread's stalls without the kernel's exact maps (a recording cut short
// before its first snapshot, the view between snapshots). Stalls under
// the stream threshold were never streamed, so they are missing here.
type EventHists struct{ snap stall.Snapshot }

// Add counts one event: a stall the kernel's histograms count (not a
// compaction's later passes), at its whole length.
func (h *EventHists) Add(ev *stall.Event) {
	if ev.Kind != stall.KindStall || !ev.Counts() {
		return
	}
	th := h.snap.Thread(ev.PID, ev.TID, ev.Comm)
	hist := th.Hists[ev.Cause]
	if hist == nil {
		hist = &stall.Hist{}
		th.Hists[ev.Cause] = hist
	}
	hist.Add(ev.LongestNs())
}

// Snapshot is the histograms as a kernel snapshot of them (threads'
// histograms only); it shares their memory.
func (h *EventHists) Snapshot() *stall.Snapshot { return &stall.Snapshot{Threads: h.snap.Threads} }

// Thread is tid's histograms by cause, nil if none was rebuilt.
func (h *EventHists) Thread(tid uint32) map[stall.Cause]*stall.Hist {
	if th := h.snap.Threads[tid]; th != nil {
		return th.Hists
	}
	return nil
}
