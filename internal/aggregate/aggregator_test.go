package aggregate

import (
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

const (
	start = 1_000_000
	win   = 100
)

func stallEv(ts uint64, tid uint32, c stall.Cause, dur uint64) *stall.Event {
	return &stall.Event{Kind: stall.KindStall, Cause: c, TsNs: ts, DurNs: dur, PID: 1, TID: tid, Comm: "t"}
}

func indexes(ws []*Window) []uint64 {
	out := []uint64{}
	for _, w := range ws {
		out = append(out, w.Index)
	}
	return out
}

func TestNewDefaultsWindow(t *testing.T) {
	a := New(window.Grid{StartNs: 0, LenNs: 0})
	if a.grid.LenNs != 1e9 {
		t.Fatalf("windowNs = %d, want 1e9 when 0 is given", a.grid.LenNs)
	}
}

func TestEventsLandInTheirWindow(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(stallEv(start, 1, stall.DirectReclaim, 5))       // window 0, first ns
	a.Add(stallEv(start+win-1, 1, stall.DirectReclaim, 7)) // window 0, last ns
	a.Add(stallEv(start+win, 1, stall.Compaction, 11))     // window 1, first ns
	a.Add(stallEv(start+3*win+50, 2, stall.MmapLock, 13))  // window 3
	a.Add(stallEv(start-10, 3, stall.NUMAMigration, 17))   // before start: window 0
	ws := a.Close(start + 4*win)
	if got, want := indexes(ws), []uint64{0, 1, 2, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("closed windows %v, want %v", got, want)
	}
	for i, w := range ws {
		if w.StartNs != start+uint64(i)*win || w.EndNs != start+uint64(i+1)*win {
			t.Errorf("window %d spans [%d, %d)", i, w.StartNs, w.EndNs)
		}
	}
	w0 := ws[0]
	if c := w0.Causes[stall.DirectReclaim]; c != (CauseTotal{Count: 2, TotalNs: 12, MaxNs: 7}) {
		t.Errorf("window 0 direct_reclaim = %+v", c)
	}
	if c := w0.Causes[stall.NUMAMigration]; c.Count != 1 || c.TotalNs != 17 {
		t.Errorf("window 0 numa_migration = %+v (event before start belongs to window 0)", c)
	}
	if len(w0.Threads) != 2 || w0.Threads[1].TotalNs != 12 || w0.Threads[1].ByCause[stall.DirectReclaim].Count != 2 {
		t.Errorf("window 0 threads wrong: %+v", w0.Threads)
	}
	if c := ws[1].Causes[stall.Compaction]; c.Count != 1 || c.TotalNs != 11 {
		t.Errorf("window 1 compaction = %+v", c)
	}
	if len(ws[2].Threads) != 0 {
		t.Errorf("window 2 should be empty, has %d threads", len(ws[2].Threads))
	}
	for _, c := range ws[2].Causes {
		if c.Count != 0 {
			t.Errorf("window 2 should be empty, causes %+v", ws[2].Causes)
		}
	}
	if th := ws[3].Threads[2]; th == nil || th.TotalNs != 13 || th.PID != 1 || th.TID != 2 {
		t.Errorf("window 3 thread 2 = %+v", th)
	}
	if a.Events != 5 || a.LateEvents != 0 {
		t.Errorf("Events/LateEvents = %d/%d, want 5/0", a.Events, a.LateEvents)
	}
}

func TestCloseIsGapFreeAndIncremental(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	if ws := a.Close(start - 1); len(ws) != 0 {
		t.Fatalf("Close before start returned %d windows", len(ws))
	}
	if ws := a.Close(start + win - 1); len(ws) != 0 {
		t.Fatalf("Close before the first window ended returned %v", indexes(ws))
	}
	// A window closes once its end is reached: end <= now.
	if ws := a.Close(start + win); !reflect.DeepEqual(indexes(ws), []uint64{0}) {
		t.Fatalf("Close(end of window 0) = %v, want [0]", indexes(ws))
	}
	a.Add(stallEv(start+5*win+1, 1, stall.DirectReclaim, 1))
	ws := a.Close(start + 4*win + 99)
	if got, want := indexes(ws), []uint64{1, 2, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Close = %v, want %v", got, want)
	}
	// Closing again at the same time returns nothing.
	if ws := a.Close(start + 4*win + 99); len(ws) != 0 {
		t.Fatalf("second Close returned %v", indexes(ws))
	}
	ws = a.Close(start + 6*win)
	if got, want := indexes(ws), []uint64{4, 5}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Close = %v, want %v", got, want)
	}
	if ws[1].Causes[stall.DirectReclaim].Count != 1 {
		t.Errorf("the event in window 5 was lost")
	}
	if len(a.open) != 0 {
		t.Errorf("%d windows still open", len(a.open))
	}
}

func TestLateEventsFoldIntoOldestOpenWindow(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(stallEv(start+10, 1, stall.DirectReclaim, 1))
	if ws := a.Close(start + 2*win); len(ws) != 2 {
		t.Fatalf("closed %d windows, want 2", len(ws))
	}
	// Window 0 and 1 are closed; these belong there but arrive late.
	a.Add(stallEv(start+20, 1, stall.DirectReclaim, 100))
	a.Add(stallEv(start+win+5, 2, stall.Compaction, 200))
	a.Add(stallEv(start-5, 3, stall.MmapLock, 300)) // before start: window 0, also late
	// An on-time event for window 2.
	a.Add(stallEv(start+2*win+1, 1, stall.DirectReclaim, 1000))
	if a.LateEvents != 3 {
		t.Errorf("LateEvents = %d, want 3", a.LateEvents)
	}
	ws := a.Close(start + 3*win)
	if len(ws) != 1 || ws[0].Index != 2 {
		t.Fatalf("closed %v, want [2]", indexes(ws))
	}
	w := ws[0]
	if c := w.Causes[stall.DirectReclaim]; c.Count != 2 || c.TotalNs != 1100 || c.MaxNs != 1000 {
		t.Errorf("window 2 direct_reclaim = %+v, want the late and the on-time event", c)
	}
	if w.Causes[stall.Compaction].TotalNs != 200 || w.Causes[stall.MmapLock].TotalNs != 300 {
		t.Errorf("late events not folded into window 2: %+v", w.Causes)
	}
	if len(w.Threads) != 3 {
		t.Errorf("window 2 has %d threads, want 3", len(w.Threads))
	}
	if a.Events != 5 {
		t.Errorf("Events = %d, want 5", a.Events)
	}
}

func TestCloseAll(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(stallEv(start+10, 1, stall.DirectReclaim, 1))
	a.Add(stallEv(start+2*win+50, 1, stall.DirectReclaim, 2))
	// now is inside window 2: windows 0..2 close, 2 although it has not ended.
	ws := a.CloseAll(start + 2*win + 60)
	if got, want := indexes(ws), []uint64{0, 1, 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("CloseAll = %v, want %v", got, want)
	}
	if ws[2].Causes[stall.DirectReclaim].TotalNs != 2 {
		t.Errorf("window 2 lost its event")
	}
	if len(a.open) != 0 {
		t.Errorf("%d windows left open", len(a.open))
	}
	if ws := a.CloseAll(start + 2*win + 70); len(ws) != 0 {
		t.Errorf("second CloseAll in the same window returned %v", indexes(ws))
	}
}

func TestCloseAllIncludesWindowsAfterNow(t *testing.T) {
	// An event stamped after "now" (it raced the final clock read) still
	// gets its window, and the series stays gap-free.
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(stallEv(start+4*win+1, 7, stall.Compaction, 9))
	ws := a.CloseAll(start + win + 1)
	if got, want := indexes(ws), []uint64{0, 1, 2, 3, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("CloseAll = %v, want %v", got, want)
	}
	if ws[4].Causes[stall.Compaction].Count != 1 {
		t.Errorf("event in window 4 lost")
	}
}

func TestCloseAllBeforeStart(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	ws := a.CloseAll(start - 1)
	if got, want := indexes(ws), []uint64{0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("CloseAll before start = %v, want %v", got, want)
	}
}

func TestExitEventsAndNames(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.DirectReclaim, TsNs: start + 1, DurNs: 5, PID: 1, TID: 2, Comm: "old"})
	a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.DirectReclaim, TsNs: start + 2, DurNs: 5, PID: 1, TID: 2, Comm: "new"})
	a.Add(&stall.Event{Kind: stall.KindExit, TsNs: start + 3, PID: 1, TID: 3, Comm: "gone"})
	a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MmapLock, TsNs: start + 4, DurNs: 5, PID: 1, TID: 4})
	if n := a.Name(2); n != "new" {
		t.Errorf("Name(2) = %q, want the latest comm", n)
	}
	if n := a.Name(3); n != "gone" {
		t.Errorf("Name(3) = %q, want gone (from the exit event)", n)
	}
	if n := a.Name(4); n != "" {
		t.Errorf("Name(4) = %q, want empty", n)
	}
	if !a.Exited(3) || a.Exited(2) || a.Exited(99) {
		t.Errorf("Exited: 3=%v 2=%v 99=%v", a.Exited(3), a.Exited(2), a.Exited(99))
	}
	ws := a.CloseAll(start + 10)
	if len(ws) != 1 {
		t.Fatalf("CloseAll = %v", indexes(ws))
	}
	w := ws[0]
	if _, ok := w.Threads[3]; ok {
		t.Errorf("exit event counted as a stall in the window")
	}
	if c := w.Causes[stall.DirectReclaim]; c.Count != 2 {
		t.Errorf("direct_reclaim count = %d, want 2 (the exit's zero cause must not count)", c.Count)
	}
	if w.Threads[2].Comm != "new" {
		t.Errorf("window comm = %q, want new", w.Threads[2].Comm)
	}
	if a.Events != 4 {
		t.Errorf("Events = %d, want 4", a.Events)
	}
}

func TestTopThreads(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(stallEv(start+1, 5, stall.DirectReclaim, 10))
	a.Add(stallEv(start+1, 3, stall.DirectReclaim, 30))
	a.Add(stallEv(start+1, 4, stall.DirectReclaim, 10))
	a.Add(stallEv(start+1, 2, stall.Compaction, 20))
	a.Add(stallEv(start+1, 2, stall.MmapLock, 15)) // tid 2 total 35
	w := a.CloseAll(start + 1)[0]
	var got []uint32
	for _, th := range w.TopThreads(-1) {
		got = append(got, th.TID)
	}
	if want := []uint32{2, 3, 4, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("TopThreads(-1) = %v, want %v (ties by tid)", got, want)
	}
	if top := w.TopThreads(2); len(top) != 2 || top[0].TID != 2 || top[1].TID != 3 {
		t.Errorf("TopThreads(2) wrong")
	}
	if top := w.TopThreads(0); len(top) != 0 {
		t.Errorf("TopThreads(0) returned %d", len(top))
	}
	if top := w.TopThreads(10); len(top) != 4 {
		t.Errorf("TopThreads(10) returned %d", len(top))
	}
}

func hist(durs ...uint64) *stall.Hist {
	h := &stall.Hist{}
	for _, d := range durs {
		h.Add(d)
	}
	return h
}

func snapshot() *stall.Snapshot {
	s := &stall.Snapshot{LostEvents: 3, LostPerCPU: []uint64{1, 2},
		System: stall.SystemStats{KswapdWakeups: 4, KcompactdNs: 5}}
	// Process 100: main thread 100 and worker 101.
	t100 := s.Thread(100, 100, "main")
	t100.Hists[stall.DirectReclaim] = hist(1000, 3000)
	// The kernel counts task moves with duration 0; give these a duration
	// anyway to prove they are left out of stall time.
	t100.Hists[stall.NUMATaskMove] = hist(0, 700, 300)
	t100.Migrations, t100.CrossNodeMigrations = 10, 4
	t101 := s.Thread(100, 101, "worker")
	t101.Hists[stall.DirectReclaim] = hist(5000)
	t101.Hists[stall.MmapLock] = hist(100, 200)
	t101.Migrations, t101.CrossNodeMigrations = 1, 1
	// Process 200: one thread with only untimed causes and migrations.
	t200 := s.Thread(200, 200, "mover")
	t200.Hists[stall.NUMATaskMove] = hist(0, 0, 0, 0, 0)
	t200.Migrations = 50
	// Process 300: two threads that tie with 201/200 on stall time 0.
	s.Thread(300, 301, "idle1").Migrations = 50
	s.Thread(300, 302, "idle2")
	return s
}

func TestSummarizeThreads(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.DirectReclaim, TsNs: start, TID: 101, PID: 100, Comm: "renamed"})
	a.Add(&stall.Event{Kind: stall.KindExit, TsNs: start, TID: 302, PID: 300, Comm: "idle2"})
	s := a.Summarize(snapshot())

	if s.Lost != 3 || !reflect.DeepEqual(s.LostPerCPU, []uint64{1, 2}) || s.System.KswapdWakeups != 4 || s.System.KcompactdNs != 5 {
		t.Errorf("lost/system not carried over: %d %v %+v", s.Lost, s.LostPerCPU, s.System)
	}
	var order []uint32
	for _, th := range s.Threads {
		order = append(order, th.TID)
	}
	// 101: 5000+300 = 5300; 100: 4000 (numa_task_move excluded);
	// then stall 0: 200 and 301 have 50 migrations (tie -> tid), 302 none.
	if want := []uint32{101, 100, 200, 301, 302}; !reflect.DeepEqual(order, want) {
		t.Fatalf("thread order %v, want %v", order, want)
	}
	byTID := map[uint32]ThreadSummary{}
	for _, th := range s.Threads {
		byTID[th.TID] = th
	}
	t100 := byTID[100]
	if t100.StallNs != 4000 {
		t.Errorf("tid 100 StallNs = %d, want 4000 (numa_task_move is untimed)", t100.StallNs)
	}
	if t100.PID != 100 || t100.Comm != "main" || t100.Exited {
		t.Errorf("tid 100 = %+v", t100)
	}
	if t100.Migrations != (Migrations{Total: 10, CrossNode: 4}) {
		t.Errorf("tid 100 migrations = %+v", t100.Migrations)
	}
	dr := t100.Stalls[stall.DirectReclaim]
	if dr.Count != 2 || dr.TotalNs != 4000 || dr.MaxNs != 3000 || dr.Hist == nil {
		t.Errorf("tid 100 direct_reclaim = %+v", dr)
	}
	if dr.P50Ns < 512 || dr.P50Ns > 2048 || dr.P99Ns > 3000 || dr.P99Ns < dr.P50Ns || dr.P90Ns < dr.P50Ns || dr.P99Ns < dr.P90Ns {
		t.Errorf("tid 100 direct_reclaim percentiles p50=%d p90=%d p99=%d", dr.P50Ns, dr.P90Ns, dr.P99Ns)
	}
	if tm := t100.Stalls[stall.NUMATaskMove]; !tm.Has() || tm.Count != 3 || tm.TotalNs != 1000 {
		t.Errorf("tid 100 numa_task_move = %+v", tm)
	}
	if n := causesKept(&t100.Stalls); n != 2 {
		t.Errorf("tid 100 has %d causes, want 2", n)
	}
	if c := byTID[101].Comm; c != "renamed" {
		t.Errorf("tid 101 comm = %q, want the latest name from the stream", c)
	}
	if byTID[101].StallNs != 5300 {
		t.Errorf("tid 101 StallNs = %d, want 5300", byTID[101].StallNs)
	}
	if !byTID[302].Exited || byTID[301].Exited {
		t.Errorf("Exited: 302=%v 301=%v", byTID[302].Exited, byTID[301].Exited)
	}
	if th := byTID[200]; th.StallNs != 0 || th.Migrations.Total != 50 {
		t.Errorf("tid 200 = %+v", th)
	}
	if st := byTID[302].Stalls; causesKept(&st) != 0 {
		t.Errorf("tid 302 Stalls = %v, want none", st)
	}
}

func TestSummarizeProcesses(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	s := a.Summarize(snapshot())
	var order []uint32
	for _, p := range s.Processes {
		order = append(order, p.PID)
	}
	if want := []uint32{100, 200, 300}; !reflect.DeepEqual(order, want) {
		t.Fatalf("process order %v, want %v", order, want)
	}
	p := s.Processes[0]
	if p.Threads != 2 || p.StallNs != 9300 || p.Comm != "main" {
		t.Errorf("process 100 = threads %d stall %d comm %q; want 2, 9300, main", p.Threads, p.StallNs, p.Comm)
	}
	if p.Migrations != (Migrations{Total: 11, CrossNode: 5}) {
		t.Errorf("process 100 migrations = %+v", p.Migrations)
	}
	dr := p.Stalls[stall.DirectReclaim]
	if dr.Count != 3 || dr.TotalNs != 9000 || dr.MaxNs != 5000 {
		t.Errorf("process 100 direct_reclaim = %+v, want merged 3/9000/5000", dr)
	}
	if dr.Hist == nil || dr.Hist.Slots[stall.SlotOf(1000)] != 1 || dr.Hist.Slots[stall.SlotOf(3000)] != 1 || dr.Hist.Slots[stall.SlotOf(5000)] != 1 {
		t.Errorf("process 100 direct_reclaim histogram not merged: %+v", dr.Hist)
	}
	if ml := p.Stalls[stall.MmapLock]; ml.Count != 2 || ml.TotalNs != 300 {
		t.Errorf("process 100 mmap_lock = %+v", ml)
	}
	if tm := p.Stalls[stall.NUMATaskMove]; tm.Count != 3 {
		t.Errorf("process 100 numa_task_move = %+v", tm)
	}
	// Merging into the process must not modify the threads' histograms.
	for _, th := range s.Threads {
		if th.TID == 100 && th.Stalls[stall.DirectReclaim].Hist.Count != 2 {
			t.Errorf("thread 100 histogram modified by the process merge")
		}
	}
	if p3 := s.Processes[2]; p3.Threads != 2 || p3.Comm == "" || p3.Migrations.Total != 50 || causesKept(&p3.Stalls) != 0 {
		t.Errorf("process 300 = %+v", p3)
	}
}

// The process is named after its main thread whatever order the threads
// come in (map iteration is random, so try many times).
func TestSummarizeProcessNamedAfterMainThread(t *testing.T) {
	for i := 0; i < 50; i++ {
		s := &stall.Snapshot{}
		for tid := uint32(501); tid <= 508; tid++ {
			s.Thread(500, tid, "worker")
		}
		s.Thread(500, 500, "leader")
		sum := New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(s)
		if len(sum.Processes) != 1 || sum.Processes[0].Comm != "leader" || sum.Processes[0].Threads != 9 {
			t.Fatalf("process = %+v, want comm leader with 9 threads", sum.Processes)
		}
	}
	// Without a main thread, some thread's name is used rather than none.
	s := &stall.Snapshot{}
	s.Thread(600, 601, "w")
	if sum := New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(s); sum.Processes[0].Comm != "w" {
		t.Errorf("process without main thread comm = %q", sum.Processes[0].Comm)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(&stall.Snapshot{})
	if len(s.Threads) != 0 || len(s.Processes) != 0 {
		t.Errorf("empty snapshot gave %d threads, %d processes", len(s.Threads), len(s.Processes))
	}
}

func TestCloseAllMarksOnlyTheCutWindowPartial(t *testing.T) {
	a := New(window.Grid{StartNs: 1000, LenNs: 100})
	ws := a.CloseAll(1250) // windows [1000,1100) [1100,1200) [1200,1300)
	if len(ws) != 3 {
		t.Fatalf("%d windows", len(ws))
	}
	if ws[0].Partial || ws[1].Partial || !ws[2].Partial {
		t.Fatalf("partial flags %v %v %v, want only the last", ws[0].Partial, ws[1].Partial, ws[2].Partial)
	}
}

// TestThreadRowsAcrossOpenWindows sends one thread's events back and
// forth between open windows (events arrive out of order): each window
// keeps one row per thread, holding exactly that window's events, the
// same as summing the events by window and thread independently.
func TestThreadRowsAcrossOpenWindows(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	type key struct {
		w   uint64
		tid uint32
	}
	want := map[key]uint64{}
	order := []struct {
		w   uint64
		tid uint32
	}{{2, 1}, {1, 1}, {2, 1}, {0, 1}, {1, 1}, {3, 2}, {1, 2}, {3, 1}, {0, 2}, {3, 2}, {2, 2}, {1, 1}}
	for n, o := range order {
		dur := uint64(n + 1)
		a.Add(stallEv(start+o.w*win+uint64(n), o.tid, stall.DirectReclaim, dur))
		want[key{o.w, o.tid}] += dur
	}
	got := map[key]uint64{}
	for _, w := range a.CloseAll(start + 4*win - 1) {
		for tid, tw := range w.Threads {
			if tw.TID != tid {
				t.Errorf("window %d: row of %d filed under %d", w.Index, tw.TID, tid)
			}
			got[key{w.Index, tid}] = tw.ByCause[stall.DirectReclaim].TotalNs
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows by window and thread: got %v, want %v", got, want)
	}
}

// Closed windows' rows are the consumers': no thread's state keeps one
// (and with it the window's slab) once its window has closed.
func TestClosedRowsAreNotKept(t *testing.T) {
	a := New(window.Grid{StartNs: start, LenNs: win})
	for tid := uint32(1); tid <= 50; tid++ {
		a.Add(stallEv(start+1, tid, stall.MmapLock, 3))
	}
	a.Add(stallEv(start+win+1, 7, stall.MmapLock, 3)) // thread 7 goes on in window 1
	a.Close(start + win)
	a.threads.All(func(tid uint32, st *threadState) {
		if st.tw != nil && st.win != 2 {
			t.Errorf("thread %d keeps its row of window %d", tid, st.win-1)
		}
	})
	if st := a.threads.Get(7); st.tw == nil || st.tw.TotalNs != 3 {
		t.Errorf("thread 7's row in the open window: %+v", st.tw)
	}
}

// causesKept is how many causes the kernel kept a histogram of.
func causesKept(cs *CauseSummaries) int {
	n := 0
	for c := range cs {
		if cs[c].Has() {
			n++
		}
	}
	return n
}
