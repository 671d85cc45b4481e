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
	// 60,001 of them end within the horizon of the newest; what is held
	// beyond those is less than what was kept at the last fold.
	if inHorizon := int(unionHorizon/1e6) + 1; len(a.memory.spans) >= 2*inHorizon {
		t.Fatalf("%d spans held, want fewer than %d", len(a.memory.spans), 2*inHorizon)
	}
	if got := a.memory.total(); got != want {
		t.Errorf("union %d ns, want %d", got, want)
	}
}

// A storm of stalls inside the horizon (every lock wait streamed) is
// merged a logarithmic number of times, not once per stall: before the
// fold was amortized, every stall past the first hold merged them all
// again (this test did not end in 10 minutes), and under make bench's
// storm numatrace fell minutes behind its ring buffers.
func TestMemoryStallUnionStormFoldsRarely(t *testing.T) {
	u := memoryUnion{}
	var want uint64
	const n = 8 * unionHold
	for i := uint64(0); i < n; i++ {
		ev := memStall(stall.MmapLock, (i+1)*1000, 600, false)
		u.add(&ev)
		want += 600
	}
	if u.folds > 4 {
		t.Errorf("%d stalls merged %d times, want at most 4", n, u.folds)
	}
	if got := u.total(); got != want {
		t.Errorf("union %d ns, want %d", got, want)
	}
}

// Past unionKeep merged spans within the horizon, the oldest are folded:
// memory stays bounded, and the total exact while no stall reaches back
// over them.
func TestMemoryStallUnionKeepsABoundedNumber(t *testing.T) {
	u := memoryUnion{}
	var want uint64
	const n = 3 * unionKeep
	for i := uint64(0); i < n; i++ {
		ev := memStall(stall.MmapLock, (i+1)*1000, 600, false)
		u.add(&ev)
		want += 600
	}
	if held := len(u.spans); held > 2*unionKeep {
		t.Errorf("%d spans held, want at most %d", held, 2*unionKeep)
	}
	if got := u.total(); got != want {
		t.Errorf("union %d ns, want %d", got, want)
	}
}

// A stall longer than the horizon reaches back over spans already folded
// away: the union never counts more than the time it spans (it counted
// the folded spans' length twice before).
func TestMemoryStallUnionLongStallOverFoldedSpans(t *testing.T) {
	u := memoryUnion{}
	const n = 3 * unionHold
	for i := uint64(0); i < n; i++ {
		ev := memStall(stall.MemcgReclaim, (i+1)*1e6, 600e3, false) // one a ms, 196 s
		u.add(&ev)
	}
	if u.doneNs == 0 {
		t.Fatal("nothing was folded: the test does not reach back over folded spans")
	}
	end := uint64(n) * 1e6
	long := memStall(stall.MemcgReclaim, end, end, false) // from the run's start
	u.add(&long)
	if got := u.total(); got > end {
		t.Errorf("union %d ns, more than the %d ns from the run's start to the last stall's end", got, end)
	}
	if got, least := u.total(), end-unionHorizon; got < least {
		t.Errorf("union %d ns, less than the horizon's %d ns the long stall covered whole", got, least)
	}
}
