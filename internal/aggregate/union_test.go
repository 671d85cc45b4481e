package aggregate

import (
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

func memStall(c stall.Cause, endNs, durNs uint64, nested bool) stall.Event {
	return stall.Event{Kind: stall.KindStall, Cause: c, TsNs: endNs, DurNs: durNs, TID: 7, PID: 7, Nested: nested}
}

// The union counts overlapping memory stalls of different threads once,
// leaves out nested ones, waits that are not memory management's and a
// stall's part before the run began.
func TestMemoryStallUnion(t *testing.T) {
	a := New(window.Grid{StartNs: 1000, LenNs: 1e9})
	for _, ev := range []stall.Event{
		memStall(stall.MemcgReclaim, 1500, 1000, false),    // [500,1500): counts from 1000
		memStall(stall.MemstallWait, 2000, 800, false),     // [1200,2000): overlaps the first
		memStall(stall.ReclaimThrottle, 1900, 300, true),   // nested: inside the first two
		memStall(stall.RunqWait, 5000, 1000, false),        // not memory
		memStall(stall.DirtyThrottle, 3500, 500, false),    // [3000,3500)
		memStall(stall.TaskMigration, 4000, 0, false),      // counted, no time
		{Kind: stall.KindExit, TID: 7, PID: 7, TsNs: 6000}, // not a stall
	} {
		a.Add(&ev)
	}
	if got, want := a.Summarize(&stall.Snapshot{}).MemoryStallNs, uint64(1000+500); got != want {
		t.Errorf("union %d ns, want %d", got, want)
	}
}

// Past its hold, the union folds what the horizon has passed into one
// figure and keeps the rest: the total stays exact when no stall spans
// the horizon.
func TestMemoryStallUnionFolds(t *testing.T) {
	a := New(window.Grid{StartNs: 0, LenNs: 1e9})
	var want uint64
	for i := uint64(0); i < 3*unionHold; i++ {
		end := (i + 1) * 1e6 // one a ms, each 600 µs, two threads taking turns
		ev := memStall(stall.MemcgReclaim, end, 600e3, false)
		ev.TID = uint32(i % 2)
		a.Add(&ev)
		want += 600e3
	}
	if len(a.memory.spans) >= unionHold {
		t.Fatalf("%d spans held, want fewer than %d", len(a.memory.spans), unionHold)
	}
	if got := a.memory.total(); got != want {
		t.Errorf("union %d ns, want %d", got, want)
	}
}
