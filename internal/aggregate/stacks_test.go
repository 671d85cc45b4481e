package aggregate

import (
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

func stackOf(fns ...string) *stall.Stack {
	var user []stall.Frame
	for _, f := range fns {
		user = append(user, stall.Frame{Func: f, Module: "/bin/x"})
	}
	return stall.NewStack(nil, user, "")
}

func TestStackTableCountsPerCauseThreadAndStack(t *testing.T) {
	var tab StackTable
	a, a2, b := stackOf("read", "main"), stackOf("read", "main"), stackOf("fault", "main")
	for _, ev := range []stall.Event{
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 1, PID: 1, Comm: "x", DurNs: 10, Stack: a},
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 1, PID: 1, Comm: "x", DurNs: 20, Stack: a2}, // the same frames
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 1, PID: 1, Comm: "x", DurNs: 5, Stack: b},
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 2, PID: 1, Comm: "y", DurNs: 7, Stack: a},
		{Kind: stall.KindStall, Cause: stall.Compaction, TID: 1, PID: 1, DurNs: 3, Pass: 1, Stack: a},
		{Kind: stall.KindStall, Cause: stall.Compaction, TID: 1, PID: 1, DurNs: 4, Pass: 2, Stack: a}, // the same attempt
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 1, PID: 1, DurNs: 100},                // no stack
		{Kind: stall.KindExit, TID: 1, PID: 1, Stack: a},
	} {
		tab.Add(&ev)
	}
	got := tab.Samples(func(pid uint32) string { return "proc" })
	type row struct {
		cause        stall.Cause
		tid          uint32
		count, ns    uint64
		stack        *stall.Stack
		comm, parent string
	}
	want := []row{
		{stall.MemcgReclaim, 1, 2, 30, a, "x", "proc"},
		{stall.MemcgReclaim, 2, 1, 7, a, "y", "proc"},
		{stall.Compaction, 1, 1, 7, a, "", "proc"},
		{stall.MemcgReclaim, 1, 1, 5, b, "x", "proc"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Cause != w.cause || g.TID != w.tid || g.Count != w.count || g.Ns != w.ns || g.Stack.Key() != w.stack.Key() ||
			g.Comm != w.comm || g.Process != w.parent {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	top, total := TopStacks(got, 1, stall.MemcgReclaim, 1)
	if len(top) != 1 || top[0].Ns != 30 || total != 35 {
		t.Errorf("top stacks of tid 1: %+v of %d, want the 30 ns one of 35", top, total)
	}
	tab.Unstacked = true
	tab.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 1, PID: 1, DurNs: 100})
	tab.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.TaskMigration, TID: 1, PID: 1})
	if n := tab.Len(); n != 5 {
		t.Errorf("%d rows after an unstacked stall and a migration, want 5 (the stall only)", n)
	}
}

// A table's rows' stacks come to MaxStackTableBytes at most, each row's
// counted: every output writes a row's stack whole, and one stack of
// megabytes in a thousand threads would be written a thousand times.
// Past that, a thread's stalls are counted for their cause under one
// stack that says so, and none is lost.
func TestStackTableBoundsItsRows(t *testing.T) {
	var frames []stall.Frame
	for range 256 {
		frames = append(frames, stall.Frame{Func: strings.Repeat("f", stall.MaxNameBytes), Module: stall.KernelModule})
	}
	big := stall.NewStack(frames, nil, "")
	var tab StackTable
	threads := 2*MaxStackTableBytes/big.Size() + 1
	for tid := range uint32(threads) {
		for _, s := range []*stall.Stack{big, stackOf("read"), big} {
			tab.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: tid, PID: 1, DurNs: 10, Stack: s})
		}
	}
	var bytes int
	var stalls, leftOut uint64
	for _, r := range tab.Samples(nil) {
		bytes += r.Stack.Size()
		stalls += r.Count
		if r.Stack.LeftOut() {
			leftOut += r.Count
			if r.Count != 2 && r.Count != 3 || !strings.Contains(r.Stack.Note, "left out") {
				t.Errorf("tid %d: %d stalls under %q, want its 2 or 3 of those left out", r.TID, r.Count, r.Stack.Note)
			}
		}
	}
	if bytes > MaxStackTableBytes+stall.LeftOutStack("").Size()*threads || stalls != uint64(3*threads) {
		t.Errorf("%d bytes of stacks in %d rows for %d stalls; want %d at most for %d", bytes, tab.Len(), stalls,
			MaxStackTableBytes, 3*threads)
	}
	if n := StacksLeftOut(tab.Samples(nil)); n.Count != leftOut || n.Count < uint64(threads) || n.TotalNs != 10*n.Count {
		t.Errorf("StacksLeftOut %+v, want the %d stalls left out", n, leftOut)
	}
	tab.Reset()
	tab.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 1, PID: 1, DurNs: 10, Stack: big})
	if s := tab.Samples(nil); len(s) != 1 || s[0].Stack != big {
		t.Errorf("after Reset: %+v, want the stack itself", s)
	}
}

// A window keeps, per cause and per thread, the stack of its longest
// stall that carried one: what a spike names.
func TestWindowKeepsTheLongestStallsStack(t *testing.T) {
	a := New(window.Grid{StartNs: 0, LenNs: 1e9})
	short, long := stackOf("short"), stackOf("long")
	for _, ev := range []stall.Event{
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 10, TID: 1, PID: 1, DurNs: 5, Stack: short},
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 20, TID: 1, PID: 1, DurNs: 50, Stack: long},
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 30, TID: 1, PID: 1, DurNs: 500}, // longer, no stack
		{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 40, TID: 2, PID: 1, DurNs: 7, Stack: short},
	} {
		a.Add(&ev)
	}
	ws := a.CloseAll(1e9)
	w := ws[0]
	if c := w.Causes[stall.MemcgReclaim]; c.Stack != long || c.StackNs != 50 || c.MaxNs != 500 {
		t.Errorf("the window's memcg_reclaim: stack %v of %d ns, max %d", c.Stack, c.StackNs, c.MaxNs)
	}
	if s := w.Threads[2].ByCause[stall.MemcgReclaim].Stack; s != short {
		t.Errorf("tid 2's stack %v, want its own", s)
	}
	var merged CauseTotal
	merged.Merge(w.Threads[2].ByCause[stall.MemcgReclaim])
	merged.Merge(w.Threads[1].ByCause[stall.MemcgReclaim])
	if merged.Stack != long {
		t.Errorf("merged: stack %v, want the longest's", merged.Stack)
	}
}

// A serving thread's waits (stall.KindWait) are counted in the summary's
// Waits by part, thread and stack, those without a stack too, and in
// nothing of the stalls': no stack row, no window, no memory stall.
func TestWaitsAreCountedApartFromStalls(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	lock, read := stackOf("futex", "serve"), stackOf("pread64", "os_file_read")
	for _, ev := range []stall.Event{
		{Kind: stall.KindWait, Reason: "other_wait", TsNs: start + 10, DurNs: 3e6, TID: 101, PID: 100, Comm: "w1", Stack: lock},
		{Kind: stall.KindWait, Reason: "other_wait", TsNs: start + 20, DurNs: 2e6, TID: 101, PID: 100, Comm: "w1", Stack: lock},
		{Kind: stall.KindWait, Reason: "other_wait", TsNs: start + 30, DurNs: 4e6, TID: 101, PID: 100, Comm: "w1"},
		{Kind: stall.KindWait, Reason: "disk_io", TsNs: start + 40, DurNs: 9e6, TID: 102, PID: 100, Comm: "w2", Stack: read},
	} {
		a.Add(&ev)
	}
	windows := a.CloseAll(start + 3*win)
	for _, w := range windows {
		if len(w.Threads) != 0 {
			t.Errorf("window %d has threads %+v: waits are no stalls", w.Index, w.Threads)
		}
	}
	s := a.Summarize(snapshot())
	if len(s.Stacks) != 0 || s.MemoryStallNs != 0 {
		t.Errorf("stacks %+v, memory stall %d: waits are no stalls", s.Stacks, s.MemoryStallNs)
	}
	type row struct {
		part      string
		tid       uint32
		count, ns uint64
		stack     *stall.Stack
	}
	want := []row{{"disk_io", 102, 1, 9e6, read}, {"other_wait", 101, 2, 5e6, lock}, {"other_wait", 101, 1, 4e6, nil}}
	if len(s.Waits) != len(want) {
		t.Fatalf("waits %+v, want %+v", s.Waits, want)
	}
	for i, w := range want {
		g := s.Waits[i]
		if g.Kind != w.part || g.TID != w.tid || g.Count != w.count || g.Ns != w.ns || (g.Stack == nil) != (w.stack == nil) ||
			g.Stack.Key() != w.stack.Key() || g.Process != "main" {
			t.Errorf("wait row %d: %+v, want %+v (of process main)", i, g, w)
		}
	}
}
