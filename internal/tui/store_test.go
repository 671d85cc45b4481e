package tui

import (
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

// feed gives the store two windows: tid 11 (pid 10) stalls in memcg
// reclaim in both, tid 21 (pid 20) in compaction in the second.
func feed(s *Store) {
	ev := func(tid, pid uint32, c stall.Cause, ts, dur uint64) *stall.Event {
		return &stall.Event{Kind: stall.KindStall, Cause: c, TsNs: ts, DurNs: dur, PID: pid, TID: tid, Comm: "t" + itoa(tid), CPU: 1, Pass: 1}
	}
	w0 := &aggregate.Window{Index: 0, StartNs: 0, EndNs: 1e9, Threads: map[uint32]*aggregate.ThreadWindow{}}
	w1 := &aggregate.Window{Index: 1, StartNs: 1e9, EndNs: 2e9, Threads: map[uint32]*aggregate.ThreadWindow{}}
	add := func(w *aggregate.Window, e *stall.Event) {
		s.Stall(e)
		tw := w.Threads[e.TID]
		if tw == nil {
			tw = &aggregate.ThreadWindow{PID: e.PID, TID: e.TID, Comm: e.Comm}
			w.Threads[e.TID] = tw
		}
		tw.TotalNs += e.DurNs
		ct := &tw.ByCause[e.Cause]
		ct.Count++
		ct.TotalNs += e.DurNs
		ct.MaxNs = max(ct.MaxNs, e.DurNs)
		w.Causes[e.Cause].TotalNs += e.DurNs
	}
	add(w0, ev(11, 10, stall.MemcgReclaim, 5e8, 3000))
	add(w0, ev(11, 10, stall.MemcgReclaim, 6e8, 5000))
	s.Window(w0)
	add(w1, ev(11, 10, stall.MemcgReclaim, 15e8, 1000))
	add(w1, ev(21, 20, stall.Compaction, 16e8, 70000))
	s.Window(w1)
}

func rowOf(t *testing.T, rows []Row, tid uint32) Row {
	t.Helper()
	for _, r := range rows {
		if r.TID == tid {
			return r
		}
	}
	t.Fatalf("no row for tid %d", tid)
	return Row{}
}

func TestStoreAggregatesWindowsAndEvents(t *testing.T) {
	s := NewStore(Info{Machine: Machine{CPUNode: map[int]int{0: 0, 1: 1}}}, 0)
	feed(s)
	f := s.Frame()
	r := rowOf(t, f.Rows, 11)
	mc := r.ByCause[stall.MemcgReclaim]
	if mc.Count != 3 || mc.TotalNs != 9000 || mc.MaxNs != 5000 || r.StallNs != 9000 {
		t.Errorf("tid 11: %+v, stall %d; want 3 stalls, 9000 ns, max 5000", mc, r.StallNs)
	}
	if r.Node != 1 {
		t.Errorf("tid 11 ran on cpu 1 (node 1), shown on node %d", r.Node)
	}
	if len(f.Windows) != 2 || f.Windows[1].CauseNs[stall.Compaction] != 70000 {
		t.Errorf("windows: %+v", f.Windows)
	}
	d, ok := s.Detail(11)
	if !ok {
		t.Fatal("no detail for tid 11")
	}
	if d.Exact || d.Hists[stall.MemcgReclaim].Count != 3 {
		t.Errorf("histogram from events: exact=%v count=%d, want 3", d.Exact, d.Hists[stall.MemcgReclaim].Count)
	}
	if len(d.Recent) != 3 || d.Recent[0].TsNs != 15e8 || d.Recent[2].TsNs != 5e8 {
		t.Errorf("recent events not newest first: %+v", d.Recent)
	}
	if len(d.Timeline) != 2 || d.Timeline[0].Ns != 8000 || d.Timeline[1].Ns != 1000 {
		t.Errorf("timeline %+v, want 8000 then 1000", d.Timeline)
	}

	// The kernel's snapshot brings migrations and its exact histograms.
	exact := &stall.Hist{}
	for i := 0; i < 7; i++ {
		exact.Add(2000)
	}
	s.Snapshot(&stall.Snapshot{Threads: map[uint32]*stall.ThreadStats{
		11: {PID: 10, TID: 11, Hists: map[stall.Cause]*stall.Hist{stall.MemcgReclaim: exact}, Migrations: 4, CrossNodeMigrations: 3},
		30: {PID: 30, TID: 30, Comm: "mover", Hists: map[stall.Cause]*stall.Hist{}, Migrations: 9},
	}, LostEvents: 5, HistEvicted: 7})
	f = s.Frame()
	if r := rowOf(t, f.Rows, 11); r.Migr != 4 || r.CrossNode != 3 {
		t.Errorf("migrations %d/%d, want 4/3", r.Migr, r.CrossNode)
	}
	if r := rowOf(t, f.Rows, 30); r.Migr != 9 || r.Comm != "mover" {
		t.Errorf("a thread seen only in the snapshot: %+v", r)
	}
	if f.Lost != 5 || f.Evicted != 7 {
		t.Errorf("lost %d, evicted %d, want 5 and 7", f.Lost, f.Evicted)
	}
	if d, _ := s.Detail(11); !d.Exact || d.Hists[stall.MemcgReclaim].Count != 7 {
		t.Errorf("exact histogram not used: exact=%v count=%d", d.Exact, d.Hists[stall.MemcgReclaim].Count)
	}
}

func TestStoreKeepsRecentEventsInARing(t *testing.T) {
	s := NewStore(Info{}, 0)
	for i := 1; i <= recentEvents+5; i++ {
		s.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.MmapLock, TsNs: uint64(i), DurNs: 1, TID: 1, PID: 1})
	}
	d, _ := s.Detail(1)
	if len(d.Recent) != recentEvents || d.Recent[0].TsNs != recentEvents+5 || d.Recent[recentEvents-1].TsNs != 6 {
		t.Fatalf("ring holds %d, newest %d, oldest %d", len(d.Recent), d.Recent[0].TsNs, d.Recent[len(d.Recent)-1].TsNs)
	}
}

func TestStoreBoundsLiveWindows(t *testing.T) {
	s := NewStore(Info{}, 3)
	for i := uint64(0); i < 5; i++ {
		s.Window(&aggregate.Window{Index: i, Threads: map[uint32]*aggregate.ThreadWindow{}})
	}
	f := s.Frame()
	if len(f.Windows) != 3 || f.Windows[0].Index != 2 {
		t.Fatalf("kept %d windows from %d, want the newest 3", len(f.Windows), f.Windows[0].Index)
	}
}

func TestSortFilterAndGroup(t *testing.T) {
	s := NewStore(Info{}, 0)
	feed(s)
	rows := s.Frame().Rows
	SortRows(rows, SortTotal)
	if rows[0].TID != 21 {
		t.Errorf("by total: tid %d first, want 21 (70 µs)", rows[0].TID)
	}
	SortRows(rows, SortCause0+SortKey(stall.MemcgReclaim))
	if rows[0].TID != 11 {
		t.Errorf("by memcg_reclaim: tid %d first, want 11", rows[0].TID)
	}
	if got := FilterRows(rows, "T2"); len(got) != 1 || got[0].TID != 21 {
		t.Errorf("filter t2 (case-insensitive): %+v", got)
	}
	if got := FilterRows(rows, "10"); len(got) != 1 || got[0].TID != 11 {
		t.Errorf("filter by pid 10: %+v", got)
	}
	procs := aggregate.Processes(rows)
	if len(procs) != 2 {
		t.Fatalf("%d processes, want 2", len(procs))
	}
	for k := SortKey(0); k < numSortKeys; k++ {
		if k.String() == "" {
			t.Errorf("sort key %d has no name", k)
		}
	}
}

func TestStackedChartSplitsCellsByCause(t *testing.T) {
	var a, b WindowSummary
	a.CauseNs[stall.MemcgReclaim] = 300
	a.CauseNs[stall.Compaction] = 300
	b.CauseNs[stall.MemcgReclaim] = 100
	g := stacked([]WindowSummary{a, b, {}}, 4)
	col := func(x int) (s []int) {
		for r := range g {
			s = append(s, g[r][x])
		}
		return
	}
	// Window a fills four cells, two per cause, memcg at the bottom.
	want := []int{int(stall.Compaction), int(stall.Compaction), int(stall.MemcgReclaim), int(stall.MemcgReclaim)}
	if got := col(0); !equal(got, want) {
		t.Errorf("column a %v, want %v", got, want)
	}
	// b is 1/6 of a's height: one cell at least.
	if got := col(1); !equal(got, []int{-1, -1, -1, int(stall.MemcgReclaim)}) {
		t.Errorf("column b %v", got)
	}
	if got := col(2); !equal(got, []int{-1, -1, -1, -1}) {
		t.Errorf("empty window drawn: %v", got)
	}
	if s := sparkline([]uint64{0, 1, 8}); s != " ▂█" {
		t.Errorf("sparkline %q", s)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A process with no main-thread row is named after its lowest tid on
// every refresh, not after whichever thread the store's map yields first.
func TestProcessRowKeepsItsNameAcrossRefreshes(t *testing.T) {
	s := NewStore(Info{}, 0)
	w := &aggregate.Window{Threads: map[uint32]*aggregate.ThreadWindow{}}
	for tid, comm := range map[uint32]string{11: "bg", 12: "worker", 13: "io"} {
		w.Threads[tid] = &aggregate.ThreadWindow{PID: 10, TID: tid, Comm: comm, TotalNs: 1}
	}
	s.Window(w)
	for i := 0; i < 100; i++ {
		procs := aggregate.Processes(s.Frame().Rows)
		if len(procs) != 1 {
			t.Fatalf("%d processes, want 1", len(procs))
		}
		if procs[0].Comm != "bg" {
			t.Fatalf("refresh %d: process named %q, want bg (tid 11)", i, procs[0].Comm)
		}
	}
}
