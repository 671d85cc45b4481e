package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// commonKeys are on every stall line: the CLI contract's keys plus the CPU.
var commonKeys = []string{"type", "ts_ns", "pid", "tid", "comm", "cause", "dur_ns", "cpu"}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func withCommon(extra ...string) []string {
	out := append(append([]string{}, commonKeys...), extra...)
	sort.Strings(out)
	return out
}

// decodeLines parses NDJSON output, one object per line, keeping numbers exact.
func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("output does not end in a newline: %q", b)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if d.More() {
			t.Fatalf("more than one value on line %q", line)
		}
		out = append(out, m)
	}
	return out
}

func stallJSON(t *testing.T, ev stall.Event) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	n := NewNDJSON(&buf)
	if err := n.Stall(&ev); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("Stall wrote through before Flush")
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	return lines[0]
}

func num(t *testing.T, m map[string]any, k string) int64 {
	t.Helper()
	v, ok := m[k]
	if !ok {
		t.Fatalf("key %q missing from %v", k, m)
	}
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("key %q = %#v, not a number", k, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("key %q = %v: %v", k, n, err)
	}
	return i
}

func str(t *testing.T, m map[string]any, k string) string {
	t.Helper()
	v, ok := m[k].(string)
	if !ok {
		t.Fatalf("key %q = %#v, not a string", k, m[k])
	}
	return v
}

func base(c stall.Cause) stall.Event {
	return stall.Event{Kind: stall.KindStall, Cause: c, TsNs: 123456789012, DurNs: 4321,
		PID: 100, TID: 101, Comm: "worker", CPU: 3, Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
}

func TestStallLineCommonFields(t *testing.T) {
	m := stallJSON(t, base(stall.DirectReclaim))
	if str(t, m, "type") != "stall" || str(t, m, "cause") != "direct_reclaim" || str(t, m, "comm") != "worker" {
		t.Errorf("line = %v", m)
	}
	if num(t, m, "ts_ns") != 123456789012 || num(t, m, "dur_ns") != 4321 || num(t, m, "pid") != 100 ||
		num(t, m, "tid") != 101 || num(t, m, "cpu") != 3 {
		t.Errorf("line = %v", m)
	}
}

func TestStallLineKeysPerCause(t *testing.T) {
	cases := []struct {
		cause stall.Cause
		edit  func(*stall.Event)
		want  []string
	}{
		{stall.DirectReclaim, nil, withCommon("order", "gfp", "pages")},
		{stall.MemcgReclaim, nil, withCommon("order", "gfp", "pages", "cgroup_id")},
		{stall.MemcgReclaim, func(e *stall.Event) { e.SoftLimit = true },
			withCommon("order", "gfp", "pages", "cgroup_id", "softlimit")},
		{stall.NodeReclaim, nil, withCommon("order", "gfp", "pages", "node")},
		{stall.Compaction, func(e *stall.Event) { e.Mode, e.Status = "async", "skipped" },
			withCommon("order", "gfp", "priority", "status")},
		{stall.NUMAMigration, func(e *stall.Event) { e.Reason, e.Mode = "numa_misplaced", "async" },
			withCommon("pages", "reason", "mode")},
		{stall.NUMATaskMove, nil, withCommon("move", "src_cpu", "dst_cpu", "src_node", "dst_node")},
		{stall.NUMATaskMove, func(e *stall.Event) { e.Swap, e.OtherTID = true, 9 },
			withCommon("move", "src_cpu", "dst_cpu", "src_node", "dst_node", "other_tid")},
		{stall.MmapLock, nil, withCommon("write", "acquired")},
	}
	for _, c := range cases {
		ev := base(c.cause)
		if c.edit != nil {
			c.edit(&ev)
		}
		m := stallJSON(t, ev)
		if got := keys(m); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: keys %v, want %v", c.cause, got, c.want)
		}
	}
}

// Zero is a legitimate order, node, page count and CPU: it must be written,
// not dropped as an empty value.
func TestStallLineKeepsZeroes(t *testing.T) {
	ev := base(stall.NodeReclaim)
	ev.Order, ev.Node, ev.Pages, ev.GFP, ev.CPU, ev.DurNs = 0, 0, 0, 0, 0, 0
	m := stallJSON(t, ev)
	for _, k := range []string{"order", "node", "pages", "cpu", "dur_ns"} {
		if num(t, m, k) != 0 {
			t.Errorf("%s = %v, want 0", k, m[k])
		}
	}
	if g := str(t, m, "gfp"); g != "0x0" {
		t.Errorf("gfp = %q, want 0x0", g)
	}

	for _, c := range []stall.Cause{stall.DirectReclaim, stall.MemcgReclaim} {
		ev := base(c)
		ev.Order, ev.Pages, ev.CgroupID = 0, 0, 0
		m := stallJSON(t, ev)
		if num(t, m, "order") != 0 || num(t, m, "pages") != 0 {
			t.Errorf("%v: order/pages = %v/%v", c, m["order"], m["pages"])
		}
		if c == stall.MemcgReclaim && num(t, m, "cgroup_id") != 0 {
			t.Errorf("cgroup_id = %v", m["cgroup_id"])
		}
	}

	cm := base(stall.Compaction)
	cm.Order = 0
	if m := stallJSON(t, cm); num(t, m, "order") != 0 {
		t.Errorf("compaction order = %v", m["order"])
	}

	tm := base(stall.NUMATaskMove)
	tm.Node, tm.DstNode, tm.SrcCPU, tm.DstCPU = 0, 0, 0, 0
	m = stallJSON(t, tm)
	for _, k := range []string{"src_node", "dst_node", "src_cpu", "dst_cpu"} {
		if num(t, m, k) != 0 {
			t.Errorf("numa_task_move %s = %v, want 0", k, m[k])
		}
	}

	ml := base(stall.MmapLock) // write=false, acquired=false are answers too
	m = stallJSON(t, ml)
	if m["write"] != false || m["acquired"] != false {
		t.Errorf("mmap_lock write/acquired = %v/%v, want false/false", m["write"], m["acquired"])
	}
}

func TestStallLineValues(t *testing.T) {
	ev := base(stall.MemcgReclaim)
	ev.Order, ev.GFP, ev.Pages, ev.CgroupID, ev.SoftLimit = 3, 0x400cc0, 32, 4242, true
	m := stallJSON(t, ev)
	if num(t, m, "order") != 3 || str(t, m, "gfp") != "0x400cc0" || num(t, m, "pages") != 32 ||
		num(t, m, "cgroup_id") != 4242 || m["softlimit"] != true {
		t.Errorf("memcg line = %v", m)
	}

	nr := base(stall.NodeReclaim)
	nr.Node = 1
	if m := stallJSON(t, nr); num(t, m, "node") != 1 {
		t.Errorf("node = %v", m["node"])
	}

	cp := base(stall.Compaction)
	cp.Order, cp.Mode, cp.Status = 9, "prio_async", "complete"
	m = stallJSON(t, cp)
	if num(t, m, "order") != 9 || str(t, m, "priority") != "prio_async" || str(t, m, "status") != "complete" {
		t.Errorf("compaction line = %v", m)
	}

	nm := base(stall.NUMAMigration)
	nm.Pages, nm.Reason, nm.Mode = 512, "numa_misplaced", "async"
	m = stallJSON(t, nm)
	if num(t, m, "pages") != 512 || str(t, m, "reason") != "numa_misplaced" || str(t, m, "mode") != "async" {
		t.Errorf("numa_migration line = %v", m)
	}

	ml := base(stall.MmapLock)
	ml.Write, ml.Acquired = true, true
	m = stallJSON(t, ml)
	if m["write"] != true || m["acquired"] != true {
		t.Errorf("mmap_lock line = %v", m)
	}
}

func TestStallLineTaskMove(t *testing.T) {
	cases := []struct {
		swap, stick bool
		want        string
	}{
		{false, false, "move"},
		{true, false, "swap"},
		{false, true, "stick"},
	}
	for _, c := range cases {
		ev := base(stall.NUMATaskMove)
		ev.DurNs = 0
		ev.Node, ev.DstNode, ev.SrcCPU, ev.DstCPU = 0, 1, 2, 7
		ev.Swap, ev.Stick = c.swap, c.stick
		if c.swap {
			ev.OtherTID = 555
		}
		m := stallJSON(t, ev)
		if got := str(t, m, "move"); got != c.want {
			t.Errorf("move = %q, want %q", got, c.want)
		}
		if num(t, m, "src_node") != 0 || num(t, m, "dst_node") != 1 || num(t, m, "src_cpu") != 2 || num(t, m, "dst_cpu") != 7 {
			t.Errorf("task move line = %v", m)
		}
		if c.swap && num(t, m, "other_tid") != 555 {
			t.Errorf("other_tid = %v", m["other_tid"])
		}
	}
	// A failed move can leave the nodes unknown: -1 is kept as is.
	ev := base(stall.NUMATaskMove)
	m := stallJSON(t, ev)
	if num(t, m, "src_node") != -1 || num(t, m, "dst_cpu") != -1 {
		t.Errorf("unknown nodes/cpus not written as -1: %v", m)
	}
}

func TestWindowLine(t *testing.T) {
	a := aggregate.New(window.Grid{StartNs: 1000, LenNs: 100})
	a.Add(&stall.Event{Cause: stall.DirectReclaim, TsNs: 1010, DurNs: 50, PID: 1, TID: 2, Comm: "a"})
	a.Add(&stall.Event{Cause: stall.MmapLock, TsNs: 1020, DurNs: 70, PID: 1, TID: 2, Comm: "a"})
	a.Add(&stall.Event{Cause: stall.DirectReclaim, TsNs: 1030, DurNs: 200, PID: 5, TID: 6, Comm: "b"})
	a.Add(&stall.Event{Cause: stall.NUMATaskMove, TsNs: 1040, PID: 5, TID: 6, Comm: "b"})
	ws := a.CloseAll(1100)
	if len(ws) != 2 {
		t.Fatalf("%d windows", len(ws))
	}
	ws[0].LostEvents = 4

	var buf bytes.Buffer
	n := NewNDJSON(&buf)
	for _, w := range ws {
		if err := n.Window(w); err != nil {
			t.Fatal(err)
		}
	}
	n.Flush()
	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	w := lines[0]
	want := []string{"end_ns", "index", "lost_events", "stall_ns", "stalls", "start_ns", "threads", "type"}
	if got := keys(w); !reflect.DeepEqual(got, want) {
		t.Errorf("window keys %v, want %v", got, want)
	}
	if str(t, w, "type") != "window" || num(t, w, "index") != 0 || num(t, w, "start_ns") != 1000 ||
		num(t, w, "end_ns") != 1100 || num(t, w, "stall_ns") != 320 || num(t, w, "lost_events") != 4 {
		t.Errorf("window = %v", w)
	}
	stalls := w["stalls"].(map[string]any)
	if got := keys(stalls); !reflect.DeepEqual(got, []string{"direct_reclaim", "mmap_lock", "numa_task_move"}) {
		t.Errorf("window stalls keys %v", got)
	}
	dr := stalls["direct_reclaim"].(map[string]any)
	if num(t, dr, "count") != 2 || num(t, dr, "total_ns") != 250 || num(t, dr, "max_ns") != 200 {
		t.Errorf("direct_reclaim = %v", dr)
	}
	threads := w["threads"].([]any)
	if len(threads) != 2 {
		t.Fatalf("threads = %v", threads)
	}
	first := threads[0].(map[string]any)
	if got := keys(first); !reflect.DeepEqual(got, []string{"comm", "pid", "stall_ns", "stalls", "tid"}) {
		t.Errorf("window thread keys %v", got)
	}
	if num(t, first, "tid") != 6 || num(t, first, "stall_ns") != 200 || str(t, first, "comm") != "b" {
		t.Errorf("worst thread = %v", first)
	}
	if ts := first["stalls"].(map[string]any); num(t, ts, "direct_reclaim") != 200 || num(t, ts, "numa_task_move") != 0 {
		t.Errorf("worst thread stalls = %v", ts)
	}
	// The empty second window still has its arrays and maps, not null.
	e := lines[1]
	if num(t, e, "index") != 1 || num(t, e, "stall_ns") != 0 {
		t.Errorf("empty window = %v", e)
	}
	if th, ok := e["threads"].([]any); !ok || len(th) != 0 {
		t.Errorf("empty window threads = %#v, want []", e["threads"])
	}
	if st, ok := e["stalls"].(map[string]any); !ok || len(st) != 0 {
		t.Errorf("empty window stalls = %#v, want {}", e["stalls"])
	}
}

func TestWindowLineLimitsThreads(t *testing.T) {
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 100})
	for tid := uint32(1); tid <= WindowThreads+5; tid++ {
		a.Add(&stall.Event{Cause: stall.DirectReclaim, TsNs: 1, DurNs: uint64(tid), PID: 1, TID: tid})
	}
	l := WindowLine(a.CloseAll(1)[0]).(windowLine)
	if len(l.Threads) != WindowThreads {
		t.Fatalf("%d threads, want %d", len(l.Threads), WindowThreads)
	}
	if l.Threads[0].TID != WindowThreads+5 {
		t.Errorf("first thread %d, want the worst", l.Threads[0].TID)
	}
	// The window total still counts every thread.
	var total uint64
	for tid := uint64(1); tid <= WindowThreads+5; tid++ {
		total += tid
	}
	if l.StallNs != total {
		t.Errorf("StallNs = %d, want %d", l.StallNs, total)
	}
}

func testReport() *Report {
	snap := &stall.Snapshot{LostEvents: 2, LostPerCPU: []uint64{2, 0},
		System: stall.SystemStats{KswapdWakeups: 1, KhugepagedCollapses: 2, KhugepagedCollapsedOK: 1,
			KcompactdPasses: 3, KcompactdNs: 4000, ProactivePasses: 5, ProactiveNs: 6000, DirectCompactAttempts: 7,
			StacksTaken: 8, KernelStacksLost: 9, UserStacksLost: 10}}
	t1 := snap.Thread(100, 100, "db")
	h := &stall.Hist{}
	for _, d := range []uint64{1000, 2000, 40000} {
		h.Add(d)
	}
	t1.Hists[stall.DirectReclaim] = h
	mv := &stall.Hist{}
	mv.Add(0)
	mv.Add(0)
	t1.Hists[stall.NUMATaskMove] = mv
	t1.Migrations, t1.CrossNodeMigrations = 9, 2
	t2 := snap.Thread(100, 101, "db-io")
	t2.Migrations = 1
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1})
	a.Add(&stall.Event{Kind: stall.KindExit, TID: 101, PID: 100, Comm: "db-io"})
	return &Report{
		Target: "pid 100 (db)", Kernel: "6.8.0-test", DurationNs: 5_000_000_000,
		Probes: []stall.ProbeStatus{{Name: "reclaim", Attached: true}, {Name: "numa", Attached: false, Error: "no tracepoint"},
			{Name: "mmap_lock", Attached: true}},
		Summary: a.Summarize(snap), Events: 17, LateEvents: 1, Windows: 5,
	}
}

func TestSummaryLine(t *testing.T) {
	var buf bytes.Buffer
	n := NewNDJSON(&buf)
	if err := n.Summary(testReport()); err != nil {
		t.Fatal(err)
	}
	// Summary flushes by itself.
	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	s := lines[0]
	want := []string{"bad_records", "causes", "duration_ns", "events", "headline", "histogram_map_full", "histograms_evicted", "kernel", "late_events", "lost_events", "lost_events_per_cpu", "memory_stall_ns", "probes",
		"processes", "stacks", "stream_min_ns", "system", "target", "threads", "type", "waits", "windows"}
	if got := keys(s); !reflect.DeepEqual(got, want) {
		t.Errorf("summary keys %v, want %v", got, want)
	}
	if str(t, s, "type") != "summary" || num(t, s, "duration_ns") != 5_000_000_000 || num(t, s, "lost_events") != 2 ||
		num(t, s, "events") != 17 || num(t, s, "windows") != 5 || str(t, s, "target") != "pid 100 (db)" ||
		str(t, s, "kernel") != "6.8.0-test" {
		t.Errorf("summary = %v", s)
	}
	// Without the kernel's per-cause totals (an older recording), the
	// threads' histograms merged.
	causes := s["causes"].(map[string]any)
	if got := keys(causes); !reflect.DeepEqual(got, []string{"direct_reclaim", "numa_task_move"}) {
		t.Errorf("causes %v", got)
	}
	if dr := causes["direct_reclaim"].(map[string]any); num(t, dr, "count") != 3 || num(t, dr, "total_ns") != 43000 {
		t.Errorf("causes.direct_reclaim = %v", dr)
	}
	if num(t, s, "histograms_evicted") != 0 || s["unlisted"] != nil {
		t.Errorf("histograms_evicted %v, unlisted %v with nothing evicted", s["histograms_evicted"], s["unlisted"])
	}
	if lp := s["lost_events_per_cpu"].([]any); len(lp) != 2 {
		t.Errorf("lost_events_per_cpu = %v", lp)
	}
	probes := s["probes"].(map[string]any)
	if att := probes["attached"].([]any); len(att) != 2 || att[0] != "reclaim" || att[1] != "mmap_lock" {
		t.Errorf("attached probes = %v", att)
	}
	failed := probes["failed"].([]any)
	if len(failed) != 1 {
		t.Fatalf("failed probes = %v", failed)
	}
	if f := failed[0].(map[string]any); f["name"] != "numa" || f["attached"] != false || f["error"] != "no tracepoint" {
		t.Errorf("failed probe = %v", f)
	}

	threads := s["threads"].([]any)
	if len(threads) != 2 {
		t.Fatalf("threads = %v", threads)
	}
	th := threads[0].(map[string]any)
	if got := keys(th); !reflect.DeepEqual(got, []string{"comm", "migrations", "pid", "stall_ns", "stalls", "tid"}) {
		t.Errorf("thread keys %v", got)
	}
	if num(t, th, "pid") != 100 || num(t, th, "tid") != 100 || str(t, th, "comm") != "db" || num(t, th, "stall_ns") != 43000 {
		t.Errorf("thread = %v", th)
	}
	mig := th["migrations"].(map[string]any)
	if got := keys(mig); !reflect.DeepEqual(got, []string{"cross_node", "total"}) || num(t, mig, "total") != 9 || num(t, mig, "cross_node") != 2 {
		t.Errorf("migrations = %v", mig)
	}
	stalls := th["stalls"].(map[string]any)
	if got := keys(stalls); !reflect.DeepEqual(got, []string{"direct_reclaim", "numa_task_move"}) {
		t.Errorf("stalls keys %v", got)
	}
	dr := stalls["direct_reclaim"].(map[string]any)
	if got := keys(dr); !reflect.DeepEqual(got, []string{"count", "max_ns", "p50_ns", "p90_ns", "p99_ns", "total_ns"}) {
		t.Errorf("cause keys %v", got)
	}
	if num(t, dr, "count") != 3 || num(t, dr, "total_ns") != 43000 || num(t, dr, "max_ns") != 40000 {
		t.Errorf("direct_reclaim = %v", dr)
	}
	p50, p99 := num(t, dr, "p50_ns"), num(t, dr, "p99_ns")
	if p50 < 1024 || p50 > 4096 || p99 < p50 || p99 > 40000 {
		t.Errorf("p50/p99 = %d/%d", p50, p99)
	}
	tm := stalls["numa_task_move"].(map[string]any)
	if num(t, tm, "count") != 2 || num(t, tm, "total_ns") != 0 || num(t, tm, "max_ns") != 0 {
		t.Errorf("numa_task_move = %v", tm)
	}
	// Percentiles of a count-only cause can not exceed its max of 0.
	if num(t, tm, "p50_ns") != 0 || num(t, tm, "p99_ns") != 0 {
		t.Errorf("numa_task_move p50/p99 = %v/%v, want 0 (max_ns is 0)", tm["p50_ns"], tm["p99_ns"])
	}

	exited := threads[1].(map[string]any)
	if exited["exited"] != true || num(t, exited, "tid") != 101 {
		t.Errorf("second thread = %v, want tid 101 exited", exited)
	}
	if st := exited["stalls"].(map[string]any); len(st) != 0 {
		t.Errorf("thread without stalls has stalls %v", st)
	}

	procs := s["processes"].([]any)
	if len(procs) != 1 {
		t.Fatalf("processes = %v", procs)
	}
	p := procs[0].(map[string]any)
	if num(t, p, "pid") != 100 || num(t, p, "threads") != 2 || str(t, p, "comm") != "db" || num(t, p, "stall_ns") != 43000 {
		t.Errorf("process = %v", p)
	}
	if pm := p["migrations"].(map[string]any); num(t, pm, "total") != 10 || num(t, pm, "cross_node") != 2 {
		t.Errorf("process migrations = %v", pm)
	}

	sys := s["system"].(map[string]any)
	wantSys := map[string]int64{"kswapd_wakeups": 1, "khugepaged_collapses": 2, "khugepaged_collapsed_ok": 1,
		"kcompactd_passes": 3, "kcompactd_ns": 4000, "proactive_compaction_passes": 5,
		"proactive_compaction_ns": 6000, "direct_compaction_attempts": 7, "cgroup_processes_not_followed": 0,
		"stacks_taken": 8, "kernel_stacks_lost": 9, "user_stacks_lost": 10}
	if len(sys) != len(wantSys) {
		t.Errorf("system keys %v", keys(sys))
	}
	for k, v := range wantSys {
		if num(t, sys, k) != v {
			t.Errorf("system %s = %v, want %d", k, sys[k], v)
		}
	}
}

func TestSummaryLineEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := NewNDJSON(&buf).Summary(&Report{Target: "system-wide", Note: "target pid 1 exited"}); err != nil {
		t.Fatal(err)
	}
	s := decodeLines(t, buf.Bytes())[0]
	for _, k := range []string{"threads", "processes", "lost_events_per_cpu"} {
		if a, ok := s[k].([]any); !ok || len(a) != 0 {
			t.Errorf("%s = %#v, want []", k, s[k])
		}
	}
	probes := s["probes"].(map[string]any)
	for _, k := range []string{"attached", "failed"} {
		if a, ok := probes[k].([]any); !ok || len(a) != 0 {
			t.Errorf("probes.%s = %#v, want []", k, probes[k])
		}
	}
	if s["note"] != "target pid 1 exited" {
		t.Errorf("note = %v", s["note"])
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSummaryReportsWriteErrors(t *testing.T) {
	if err := NewNDJSON(failWriter{}).Summary(&Report{}); err == nil {
		t.Fatal("Summary to a failing writer returned nil")
	}
}

func TestStreamOfLines(t *testing.T) {
	var buf bytes.Buffer
	n := NewNDJSON(&buf)
	for i := 0; i < 3; i++ {
		ev := base(stall.MmapLock)
		ev.TsNs = uint64(i)
		n.Stall(&ev)
	}
	n.Summary(&Report{})
	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4", len(lines))
	}
	for i, l := range lines[:3] {
		if l["type"] != "stall" || num(t, l, "ts_ns") != int64(i) {
			t.Errorf("line %d = %v", i, l)
		}
	}
	if lines[3]["type"] != "summary" {
		t.Errorf("last line = %v", lines[3])
	}
}
