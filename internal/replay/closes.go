package replay

import (
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/record"
)

// WindowCloses says, from a recording's items in order, where the live
// run closed its windows: at each lost record (since format 1.3), applied
// before the next event or lost record; in older recordings by event
// time, engine.Grace behind the newest event. The replay's engine and
// the Perfetto export's counters both close windows where it says, so
// both file a late event where the live run did.
type WindowCloses struct {
	atLost  bool
	at      uint64 // a lost record's close, due before the next event
	pending bool
}

// NewWindowCloses follows the recording h heads.
func NewWindowCloses(h record.Header) WindowCloses { return WindowCloses{atLost: h.ClosesAtLost()} }

// Before is the close due before item it, if any.
func (c *WindowCloses) Before(it *record.Item) (uint64, bool) {
	if c.pending && (it.Kind == record.ItemEvent || it.Kind == record.ItemLost) {
		c.pending = false
		return c.at, true
	}
	return 0, false
}

// After is the close due after item it, if any.
func (c *WindowCloses) After(it *record.Item) (uint64, bool) {
	switch {
	case it.Kind == record.ItemEvent && !c.atLost && it.Event.TsNs > uint64(engine.Grace):
		return it.Event.TsNs - uint64(engine.Grace), true
	case it.Kind == record.ItemLost && c.atLost:
		c.at, c.pending = it.Lost.MonoNs, true
	}
	return 0, false
}

// End drops a close still due: the end closes every window.
func (c *WindowCloses) End() { c.pending = false }
