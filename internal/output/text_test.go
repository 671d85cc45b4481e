package output

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/output -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (rerun with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestDur(t *testing.T) {
	cases := []struct {
		ns   uint64
		want string
	}{
		{0, "0ns"},
		{1, "1ns"},
		{812, "812ns"},
		{999, "999ns"},
		{1000, "1.0µs"},
		{16_400, "16.4µs"},
		{999_000, "999.0µs"},
		{999_949, "999.9µs"},
		{1_000_000, "1.00ms"},
		{3_210_000, "3.21ms"},
		{999_990_000, "999.99ms"},
		{1_000_000_000, "1.00s"},
		{1_500_000_000, "1.50s"},
		{90_000_000_000, "90.00s"},
	}
	for _, c := range cases {
		if got := Dur(c.ns); got != c.want {
			t.Errorf("Dur(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}

// Rounding must not produce "1000.0µs" or "1000.00ms": a value that rounds
// up to the next unit is shown in that unit.
func TestDurRoundsIntoNextUnit(t *testing.T) {
	cases := []struct {
		ns   uint64
		want string
	}{
		{999_950, "1.00ms"},
		{999_999, "1.00ms"},
		{999_995_000, "1.00s"},
		{999_999_999, "1.00s"},
	}
	for _, c := range cases {
		if got := Dur(c.ns); got != c.want {
			t.Errorf("Dur(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}

func histOf(durs ...uint64) *stall.Hist {
	h := &stall.Hist{}
	for _, d := range durs {
		h.Add(d)
	}
	return h
}

// richReport has two processes, an exited thread, a thread with only
// migrations, count-only task moves, failed probes and lost events.
func richReport() *Report {
	snap := &stall.Snapshot{LostEvents: 12, LostPerCPU: []uint64{12},
		System: stall.SystemStats{KswapdWakeups: 3, KhugepagedCollapses: 4, KhugepagedCollapsedOK: 2,
			KcompactdPasses: 5, KcompactdNs: 1_500_000, ProactivePasses: 1, ProactiveNs: 2_000,
			DirectCompactAttempts: 6}}
	db := snap.Thread(100, 100, "postgres")
	db.Hists[stall.DirectReclaim] = histOf(12_000, 15_000, 300_000, 4_200_000)
	db.Hists[stall.Compaction] = histOf(800, 900)
	db.Hists[stall.NUMATaskMove] = histOf(0, 0, 0)
	db.Migrations, db.CrossNodeMigrations = 40, 7
	w := snap.Thread(100, 104, "pg-writer")
	w.Hists[stall.MmapLock] = histOf(50_000, 60_000, 70_000, 2_000_000_000)
	m := snap.Thread(200, 201, "java")
	m.Hists[stall.MemcgReclaim] = histOf(1_000, 2_000, 3_000, 1_000, 5)
	m.Hists[stall.NUMAMigration] = histOf(123_456)
	idle := snap.Thread(200, 202, "GC Thread#0")
	idle.Migrations, idle.CrossNodeMigrations = 3, 1

	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9})
	a.Add(&stall.Event{Kind: stall.KindExit, PID: 100, TID: 104, Comm: "pg-writer"})
	return &Report{
		Target: "cgroup /sys/fs/cgroup/db.slice", Kernel: "6.8.0-45-generic", DurationNs: 10_000_400_000,
		Probes: []stall.ProbeStatus{{Name: "reclaim", Attached: true}, {Name: "compaction", Attached: true},
			{Name: "numa", Attached: false, Error: "x"}, {Name: "mmap_lock", Attached: false, Error: "y"}},
		Summary: a.Summarize(snap), Events: 42, Windows: 10,
		Note: "target cgroup /sys/fs/cgroup/db.slice exited after 10s",
	}
}

func TestTextGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := richReport().Text(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", buf.Bytes())
}

func TestTextEmptyGolden(t *testing.T) {
	var buf bytes.Buffer
	r := &Report{Target: "system-wide", Kernel: "6.1.0", DurationNs: 1_234_567_890,
		Probes: []stall.ProbeStatus{{Name: "reclaim", Attached: true}}}
	if err := r.Text(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "empty.txt", buf.Bytes())
}

func TestTextContents(t *testing.T) {
	var buf bytes.Buffer
	richReport().Text(&buf)
	out := buf.String()
	lines := strings.Split(out, "\n")
	if want := "numatrace: cgroup /sys/fs/cgroup/db.slice for 10s on 6.8.0-45-generic"; lines[0] != want {
		t.Errorf("header = %q\nwant     %q", lines[0], want)
	}
	if want := "probes 2/4 attached | events 42 | lost events 12"; lines[1] != want {
		t.Errorf("second line = %q\nwant          %q", lines[1], want)
	}
	for _, want := range []string{
		"not attached: numa, mmap_lock (see `numatrace probes`)",
		"WARNING: 12 events were dropped",
		"THREADS (4)",
		"pg-writer*", // exited
		"(* = thread exited)",
		"SYSTEM-WIDE (never charged to a thread)",
		"kswapd wakeups 3 | khugepaged collapses 4 (2 succeeded)",
		"kcompactd passes 5 (1.50ms) | proactive/sysctl compaction passes 1 (2.0µs)\n  direct compaction attempts 6",
		"note: target cgroup /sys/fs/cgroup/db.slice exited after 10s",
		"mmap_lock of tid 104 (pg-writer): 4 stalls, total 2.00s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	threads := threadSection(t, out)
	// Threads in stall-time order: pg-writer (2s), postgres, java, then the idle GC thread.
	order := []string{"pg-writer*", "postgres", "java", "GC Thread#0"}
	last := -1
	for _, name := range order {
		i := strings.Index(threads, name)
		if i < 0 || i < last {
			t.Errorf("thread %q out of order", name)
		}
		last = i
	}
	// numa_task_move is a count: no durations on its row.
	for _, l := range strings.Split(threads, "\n") {
		if strings.Contains(l, "numa_task_move") && !strings.HasPrefix(strings.TrimSpace(l), "numa_task_move of") {
			f := strings.Fields(l)
			if len(f) < 6 || f[1] != "3" || f[2] != "-" || f[3] != "-" || f[4] != "-" || f[5] != "-" {
				t.Errorf("numa_task_move row %q: want count 3 and - for durations", l)
			}
		}
		if strings.Contains(l, "numa_task_move of") {
			t.Errorf("a histogram was drawn for count-only numa_task_move: %q", l)
		}
	}
	// The idle thread gets a row with only its migrations.
	for _, l := range strings.Split(threads, "\n") {
		if strings.Contains(l, "GC Thread#0") {
			f := strings.Fields(l)
			if f[len(f)-3] != "-" || f[len(f)-2] != "3" || f[len(f)-1] != "1" {
				t.Errorf("idle thread row %q", l)
			}
		}
	}
}

// threadSection returns the THREADS table of a report, from its title to
// the line under it.
func threadSection(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "\nTHREADS (")
	j := strings.Index(out, "(* = thread exited)")
	if i < 0 || j < i {
		t.Fatalf("no THREADS table in\n%s", out)
	}
	return out[i+1 : j]
}

func TestTextProcessTable(t *testing.T) {
	var buf bytes.Buffer
	richReport().Text(&buf)
	out := buf.String()
	i := strings.Index(out, "PROCESSES (2)\n")
	j := strings.Index(out, "\nTHREADS (")
	if i < 0 || j < i {
		t.Fatalf("no PROCESSES table before THREADS in\n%s", out)
	}
	rows := strings.Split(strings.TrimSpace(out[i:j]), "\n")
	if len(rows) != 4 {
		t.Fatalf("process table has %d lines, want title, heads and 2 rows:\n%s", len(rows), out[i:j])
	}
	// postgres: 2.00s of mmap_lock in pg-writer beats its 4.53ms of reclaim.
	if f := strings.Fields(rows[2]); f[0] != "100" || f[1] != "postgres" || f[2] != "2" || f[4] != "mmap_lock" {
		t.Errorf("first process row %q", rows[2])
	}
	if f := strings.Fields(rows[3]); f[0] != "200" || f[1] != "java" || f[4] != "numa_migration" {
		t.Errorf("second process row %q", rows[3])
	}
}

// The column says where the STALL beside it went: run-queue wait, which
// is not a freeze, is no process's worst cause however long it is (a
// redis froze 76.69ms in memcg_reclaim and read "runq_wait" there).
func TestProcessWorstCauseIsAFreeze(t *testing.T) {
	r := richReport()
	snap := &stall.Snapshot{}
	m := snap.Thread(200, 201, "java")
	m.Hists[stall.MemcgReclaim] = histOf(1_000, 2_000)
	m.Hists[stall.RunqWait] = histOf(900_000_000)
	r.Summary = aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9}).Summarize(snap)
	var buf bytes.Buffer
	r.Text(&buf)
	out := buf.String()
	i := strings.Index(out, "\nPROCESSES (1)\n")
	if i < 0 {
		t.Fatalf("no PROCESSES table in\n%s", out)
	}
	rows := strings.Split(out[i+1:], "\n")
	if f := strings.Fields(rows[2]); len(f) < 5 || f[0] != "200" || f[3] != "3.0µs" || f[4] != "memcg_reclaim" {
		t.Errorf("process row %q: want java's 3.0µs of stall, most of it memcg_reclaim", rows[2])
	}
}

func TestTextNoLostNoFailedNoNote(t *testing.T) {
	var buf bytes.Buffer
	r := &Report{Target: "pid 1 (init)", Kernel: "k", Probes: []stall.ProbeStatus{{Name: "a", Attached: true}}}
	r.Text(&buf)
	out := buf.String()
	for _, unwanted := range []string{"not attached", "WARNING", "note:", "THREADS"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("report has %q:\n%s", unwanted, out)
		}
	}
	if !strings.Contains(out, "No stalls or migrations recorded.") {
		t.Errorf("empty report lacks the no-stalls line:\n%s", out)
	}
}

func TestTextTopThreads(t *testing.T) {
	snap := &stall.Snapshot{}
	for tid := uint32(1); tid <= 30; tid++ {
		snap.Thread(1, tid, "t").Hists[stall.DirectReclaim] = histOf(uint64(tid) * 1000)
	}
	sum := aggregate.New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(snap)
	for _, c := range []struct {
		top  int
		head string
		rows int
	}{
		{5, "THREADS (top 5 of 30 by stall time)", 5},
		{0, "THREADS (top 20 of 30 by stall time)", 20}, // 0 means the default
		{50, "THREADS (30)", 30},
	} {
		var buf bytes.Buffer
		(&Report{Summary: sum, TopThreads: c.top}).Text(&buf)
		out := threadSection(t, buf.String())
		if !strings.HasPrefix(out, c.head+"\n") {
			t.Errorf("top %d: no %q in\n%s", c.top, c.head, out)
		}
		rows := strings.Count(out, " direct_reclaim ")
		if rows != c.rows {
			t.Errorf("top %d: %d rows, want %d", c.top, rows, c.rows)
		}
		// The worst thread is always first, right under the column heads.
		lines := strings.Split(out, "\n")
		if !strings.HasPrefix(strings.TrimSpace(lines[1]), "PID  TID") {
			t.Fatalf("top %d: column heads %q", c.top, lines[1])
		}
		if f := strings.Fields(lines[2]); len(f) < 2 || f[1] != "30" {
			t.Errorf("top %d: first row %q, want tid 30", c.top, lines[2])
		}
	}
}

func TestTextHistogramsLimited(t *testing.T) {
	snap := &stall.Snapshot{}
	for tid := uint32(1); tid <= HistogramsShown+4; tid++ {
		snap.Thread(1, tid, "t").Hists[stall.MmapLock] = histOf(uint64(tid) * 1000)
	}
	var buf bytes.Buffer
	(&Report{Summary: aggregate.New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(snap)}).Text(&buf)
	if n := strings.Count(buf.String(), "mmap_lock of tid"); n != HistogramsShown {
		t.Errorf("%d histograms drawn, want %d", n, HistogramsShown)
	}
	if !strings.Contains(buf.String(), "mmap_lock of tid 14 (t)") || strings.Contains(buf.String(), "mmap_lock of tid 4 (t)") {
		t.Errorf("the largest histograms were not the ones drawn:\n%s", buf.String())
	}
}

// The report must come out the same every time for the same input, also
// when one thread has two causes with the same total.
func TestTextDeterministic(t *testing.T) {
	snap := &stall.Snapshot{}
	th := snap.Thread(1, 1, "t")
	th.Hists[stall.DirectReclaim] = histOf(5000)
	th.Hists[stall.Compaction] = histOf(5000)
	th.Hists[stall.MmapLock] = histOf(5000)
	r := &Report{Summary: aggregate.New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(snap)}
	var first bytes.Buffer
	r.Text(&first)
	for i := 0; i < 30; i++ {
		var b bytes.Buffer
		r.Text(&b)
		if !bytes.Equal(b.Bytes(), first.Bytes()) {
			t.Fatalf("report differs between runs:\n%s\n---\n%s", first.String(), b.String())
		}
	}
}

func TestWriteHist(t *testing.T) {
	var buf bytes.Buffer
	WriteHist(&buf, &stall.Hist{})
	if buf.Len() != 0 {
		t.Errorf("empty histogram drew %q", buf.String())
	}

	h := &stall.Hist{}
	h.Slots[10] = 4 // 1.0µs -> 2.0µs
	h.Slots[12] = 1 // 4.1µs -> 8.2µs
	buf.Reset()
	WriteHist(&buf, h)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 4 { // header + slots 10, 11 (empty, inside the range), 12
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "duration") || !strings.Contains(lines[0], "distribution") {
		t.Errorf("header = %q", lines[0])
	}
	bar := func(l string) int {
		i, j := strings.IndexByte(l, '|'), strings.LastIndexByte(l, '|')
		if i < 0 || j <= i || j-i-1 != 40 {
			t.Fatalf("line %q has no 40-wide bar", l)
		}
		return strings.Count(l[i:j], "*")
	}
	if n := bar(lines[1]); n != 40 {
		t.Errorf("peak bar %d stars, want 40", n)
	}
	if n := bar(lines[2]); n != 0 {
		t.Errorf("empty bucket bar %d stars, want 0", n)
	}
	if n := bar(lines[3]); n != 10 {
		t.Errorf("1/4 bar %d stars, want 10", n)
	}
	if !strings.Contains(lines[1], "1.0µs -> 2.0µs") || !strings.Contains(lines[3], "4.1µs -> 8.2µs") {
		t.Errorf("bucket labels wrong:\n%s", buf.String())
	}

	// A tiny count next to a huge one still shows one star.
	h = &stall.Hist{}
	h.Slots[0], h.Slots[1] = 1_000_000, 1
	buf.Reset()
	WriteHist(&buf, h)
	lines = strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if n := bar(lines[2]); n != 1 {
		t.Errorf("small bucket bar %d stars, want 1", n)
	}
	if !strings.Contains(lines[1], "0ns -> 2ns") {
		t.Errorf("slot 0 label wrong: %q", lines[1])
	}
}

// Probes left out on purpose are neither counted nor reported as failures.
func TestSkippedProbesAreNotFailures(t *testing.T) {
	r := &Report{Target: "system-wide", Kernel: "6.1.0", DurationNs: 1e9, Probes: []stall.ProbeStatus{
		{Name: "mmap_lock", Attached: true}, {Name: "compaction", Skipped: true}, {Name: "numa_migration", Error: "not in this kernel"}}}
	var buf bytes.Buffer
	r.Text(&buf)
	out := buf.String()
	for _, want := range []string{"probes 1/2 attached", "not attached: numa_migration (see", "left out (--causes / --no-causes): compaction"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	js := r.summaryLine()
	if len(js.Probes.Failed) != 1 || js.Probes.Failed[0].Name != "numa_migration" || len(js.Probes.Skipped) != 1 {
		t.Errorf("JSON probes: %+v", js.Probes)
	}
}

// Threads evicted from the kernel's histogram map: the report says how
// many and what the tables miss, and gives the exact totals by cause.
func TestTextEvictedHistograms(t *testing.T) {
	rep := testReport()
	snap := &stall.Snapshot{HistEvicted: 19616, HistEntries: 16384, HistCapacity: 16384,
		CauseTotals: map[stall.Cause]*stall.Hist{}}
	listed := snap.Thread(100, 100, "db")
	lh := &stall.Hist{}
	lh.Add(1000)
	listed.Hists[stall.MmapLock] = lh
	total := &stall.Hist{}
	for i := 0; i < 5; i++ {
		total.Add(1000)
	}
	snap.CauseTotals[stall.MmapLock] = total
	rep.Summary = aggregate.New(window.Grid{StartNs: 0, LenNs: 1}).Summarize(snap)
	if !rep.Summary.HistMapFull {
		t.Error("19616 histograms evicted but HistMapFull unset")
	}
	if u := rep.Summary.Unlisted[stall.MmapLock]; u.Count != 4 || u.TotalNs != 4000 {
		t.Errorf("unlisted mmap_lock = %+v, want 4 stalls of 4µs", u)
	}
	if c := rep.Summary.Causes[stall.MmapLock]; c.Count != 5 || c.TotalNs != 5000 {
		t.Errorf("causes mmap_lock = %+v, want the kernel's 5 stalls", c)
	}
	var buf bytes.Buffer
	if err := rep.unwrapped(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"WARNING: 19616 thread histograms were evicted from the kernel's full map (narrow the target); the thread and process tables miss 4 mmap_lock stalls (4.0µs). Exact totals by cause:",
		"  mmap_lock        5 stalls, total 5.0µs, max 1.0µs",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// unwrapped writes the report as Text does but without fitting it to
// Width, for tests of what it says rather than where its lines break.
func (r *Report) unwrapped(w io.Writer) error {
	r.text(w, Width)
	return nil
}

// A kind of wait in the thread table ("reclaim_throttle (writeback)")
// widened it past 100 columns even one blank apart, and fitWidth wrapped
// its rows as prose: "31592 31592 redis-server memcg_reclaim 93 2.34s ..."
// under a header of single blanks, in the README's real run. The kind
// now goes on a row of its own, under its cause, where the table would
// not fit otherwise, and every row keeps its columns.
func TestThreadTableWithKindsFits(t *testing.T) {
	r := richReport()
	snap := &stall.Snapshot{}
	m := snap.Thread(31592, 31592, "redis-server")
	m.Hists[stall.MemcgReclaim] = histOf(93_300_000, 8_090_000, 100_000)
	m.Hists[stall.RunqWait] = histOf(5_150_000, 34_600)
	m.Hists[stall.ReclaimThrottle] = histOf(84_000_000, 28_000_000)
	snap.Thread(31592, 31596, "jemalloc_bg_thd").Hists[stall.RunqWait] = histOf(14_000)
	r.Summary = aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9}).Summarize(snap)
	for i := range r.Summary.Threads {
		if cs := &r.Summary.Threads[i].Stalls[stall.ReclaimThrottle]; cs.Has() {
			cs.Kind = "writeback"
		}
	}
	var buf bytes.Buffer
	r.Text(&buf)
	out := buf.String()
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > Width {
			t.Errorf("a line of %d columns: %q", len([]rune(l)), l)
		}
	}
	i := strings.Index(out, "\nTHREADS (2)\n")
	if i < 0 {
		t.Fatalf("no THREADS table in\n%s", out)
	}
	rows := strings.Split(out[i+1:], "\n")[1:7]
	want := [][]string{
		{"PID", "TID", "COMM", "CAUSE", "COUNT", "TOTAL", "MAX", "P50", "P99", "MIGR", "X-NODE"},
		{"31592", "31592", "redis-server", "memcg_reclaim", "3"},
		{"runq_wait", "2"},
		{"reclaim_throttle", "2", "112.00ms"},
		{"(writeback)"},
		{"31592", "31596", "jemalloc_bg_thd", "runq_wait", "1"},
	}
	for k, w := range want {
		f := strings.Fields(rows[k])
		if len(f) < len(w) || !slices.Equal(f[:len(w)], w) {
			t.Errorf("thread table row %d %q, want it to begin %q:\n%s", k, rows[k], w, strings.Join(rows, "\n"))
		}
	}
	// The columns line up: each row's CAUSE cell ends where the header's does.
	end := strings.Index(rows[0], "CAUSE") + len("CAUSE")
	for _, k := range []int{1, 2, 3, 4, 5} {
		if len(rows[k]) < end || rows[k][end-1] == ' ' || (len(rows[k]) > end && rows[k][end] != ' ') {
			t.Errorf("row %d's cause does not end under CAUSE (column %d):\n%s\n%s", k, end, rows[0], rows[k])
		}
	}
}
