package perfetto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

const (
	startNs  = 1_000_000_000
	windowNs = 1_000_000 // 1 ms
)

func header() record.Header {
	return record.Header{Numatrace: "test", StartNs: startNs, WindowNs: windowNs, Target: "pid 100 (db)",
		Host: record.Host{Hostname: "h", Kernel: "6.12", CPUs: 4, CPUNode: map[int]int{0: 0, 1: 0, 2: 1, 3: 1}}}
}

// ev returns a stall with no node or CPU details, as the tracer sends.
func ev(c stall.Cause, pid, tid uint32, comm string, endRel, dur uint64) stall.Event {
	return stall.Event{Kind: stall.KindStall, Cause: c, TsNs: startNs + endRel, DurNs: dur, PID: pid, TID: tid,
		Comm: comm, Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
}

// fixture is two threads of one process: stalls of five causes over four
// 1 ms windows (window 2 empty), a NUMA task move, an exit, a lost-events
// reading, and an end 4.5 ms after the start.
func fixture() ([]stall.Event, []record.Lost, run.End) {
	memcg := ev(stall.MemcgReclaim, 100, 100, "db", 500_000, 200_000)
	memcg.GFP, memcg.Pages, memcg.CgroupID = 0xcc0, 32, 7

	direct := ev(stall.DirectReclaim, 100, 101, "db-worker", 1_700_123, 1_234)
	direct.Order, direct.GFP, direct.Pages = 2, 0x100cca, 5
	direct.CPU = 2

	compact := ev(stall.Compaction, 100, 101, "db-worker", 1_900_000, 50_000)
	compact.Order, compact.GFP, compact.Mode, compact.Status = 3, 0x140cca, "COMPACT_PRIO_ASYNC", "skipped"
	compact.Pass, compact.AttemptNs = 2, 80_000

	move := ev(stall.NUMATaskMove, 100, 101, "db-worker", 2_000_000, 0)
	move.Node, move.DstNode, move.SrcCPU, move.DstCPU = 0, 1, 1, 3

	nodeRec := ev(stall.NodeReclaim, 100, 100, "db", 3_200_000, 100_000)
	nodeRec.Node, nodeRec.Pages = 0, 9
	nodeRec.Nested = true

	mmap := ev(stall.MmapLock, 100, 100, "db", 3_500_000, 1_000_000)
	mmap.Write, mmap.Acquired = true, true

	exit := ev(0, 100, 101, "db-worker", 3_600_000, 0)
	exit.Kind, exit.CPU = stall.KindExit, 3

	evs := []stall.Event{memcg, direct, compact, move, nodeRec, mmap, exit}
	lost := []record.Lost{{MonoNs: startNs + 2_000_000, LostEvents: 3}}
	end := run.End{EndNs: startNs + 4_500_000, DurationNs: 4_500_000, Events: uint64(len(evs))}
	return evs, lost, end
}

func writeRecording(t *testing.T, h record.Header, evs []stall.Event, lost []record.Lost, end *run.End) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.ntr")
	w, err := record.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		w.Event(&evs[i])
	}
	for _, l := range lost {
		w.Lost(l)
	}
	var e run.End
	if end != nil {
		e = *end
	}
	if err := w.Close(e); err != nil {
		t.Fatal(err)
	}
	return path
}

type jsonEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Pid  uint32          `json:"pid"`
	Tid  uint32          `json:"tid"`
	S    string          `json:"s"`
	Args json.RawMessage `json:"args"`
}

type trace struct {
	TraceEvents     []jsonEvent    `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	Metadata        map[string]any `json:"metadata"`
}

func export(t *testing.T, path string, opts Options) (trace, Stats, []byte) {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	st, err := Export(r, &out, opts)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if !json.Valid(out.Bytes()) {
		t.Fatalf("output is not valid JSON:\n%s", out.String())
	}
	var tr trace
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.UseNumber()
	if err := dec.Decode(&tr); err != nil {
		t.Fatalf("decode: %v\n%s", err, out.String())
	}
	return tr, st, out.Bytes()
}

func args(t *testing.T, e jsonEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Args, &m); err != nil {
		t.Fatalf("args of %s %q: %v (%s)", e.Ph, e.Name, err, e.Args)
	}
	return m
}

func find(tr trace, ph, name string, tid uint32) []jsonEvent {
	var out []jsonEvent
	for _, e := range tr.TraceEvents {
		if e.Ph == ph && e.Name == name && e.Tid == tid {
			out = append(out, e)
		}
	}
	return out
}

func TestExport(t *testing.T) {
	evs, lost, end := fixture()
	tr, st, raw := export(t, writeRecording(t, header(), evs, lost, &end), Options{})

	// Thread events carry their tid; a process's own events (its name,
	// counters) carry none, so that no thread 0 is made up for them.
	var loose struct{ TraceEvents []map[string]any }
	if err := json.Unmarshal(raw, &loose); err != nil {
		t.Fatal(err)
	}
	for _, e := range loose.TraceEvents {
		_, hasTid := e["tid"]
		threadEvent := e["ph"] == "X" || e["ph"] == "i" || e["name"] == "thread_name"
		if hasTid != threadEvent {
			t.Errorf("event %v: tid present %v", e, hasTid)
		}
	}

	if tr.DisplayTimeUnit != "ns" {
		t.Errorf("displayTimeUnit = %q", tr.DisplayTimeUnit)
	}

	// Names: one thread_name per thread, the process after its main
	// thread, the counters' pseudo-process.
	names := map[[2]uint32]string{}
	procs := map[uint32][]string{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "M" {
			continue
		}
		switch e.Name {
		case "thread_name":
			k := [2]uint32{e.Pid, e.Tid}
			if _, dup := names[k]; dup {
				t.Errorf("thread %v named twice", k)
			}
			names[k] = args(t, e)["name"].(string)
		case "process_name":
			procs[e.Pid] = append(procs[e.Pid], args(t, e)["name"].(string))
		}
	}
	if want := map[[2]uint32]string{{100, 100}: "db", {100, 101}: "db-worker"}; !reflect.DeepEqual(names, want) {
		t.Errorf("thread names = %v, want %v", names, want)
	}
	if want := map[uint32][]string{100: {"db"}, WindowsPID: {WindowsProcess}}; !reflect.DeepEqual(procs, want) {
		t.Errorf("process names = %v, want %v", procs, want)
	}

	// Slices: ts is the stall's start, both in µs with ns decimals.
	slices := []struct {
		name     string
		tid      uint32
		ts, dur  string
		wantArgs map[string]any
	}{
		{"memcg_reclaim", 100, "300", "200",
			map[string]any{"cpu": 0.0, "order": 0.0, "gfp": "0xcc0", "pages": 32.0, "cgroup_id": 7.0}},
		{"direct_reclaim", 101, "1698.889", "1.234",
			map[string]any{"cpu": 2.0, "order": 2.0, "gfp": "0x100cca", "pages": 5.0}},
		{"compaction", 101, "1850", "50",
			map[string]any{"cpu": 0.0, "order": 3.0, "gfp": "0x140cca", "priority": "COMPACT_PRIO_ASYNC",
				"status": "skipped", "pass": 2.0, "attempt_ns": 80000.0}},
		{"node_reclaim", 100, "3100", "100",
			map[string]any{"cpu": 0.0, "order": 0.0, "gfp": "0x0", "pages": 9.0, "node": 0.0, "nested": true}},
		{"mmap_lock", 100, "2500", "1000",
			map[string]any{"cpu": 0.0, "write": true, "acquired": true}},
	}
	for _, s := range slices {
		got := find(tr, "X", s.name, s.tid)
		if len(got) != 1 {
			t.Errorf("%d %s slices on tid %d, want 1", len(got), s.name, s.tid)
			continue
		}
		e := got[0]
		if e.Pid != 100 || e.Cat != "stall" || e.Ts.String() != s.ts || e.Dur.String() != s.dur {
			t.Errorf("%s: pid %d cat %q ts %s dur %s, want pid 100 cat stall ts %s dur %s",
				s.name, e.Pid, e.Cat, e.Ts, e.Dur, s.ts, s.dur)
		}
		if a := args(t, e); !reflect.DeepEqual(a, s.wantArgs) {
			t.Errorf("%s args = %v, want %v", s.name, a, s.wantArgs)
		}
	}
	if st.Slices != len(slices) {
		t.Errorf("Stats.Slices = %d, want %d", st.Slices, len(slices))
	}

	// Instants: the NUMA task move and the exit, thread-scoped.
	mv := find(tr, "i", "numa_task_move", 101)
	if len(mv) != 1 || mv[0].Ts.String() != "2000" || mv[0].S != "t" || mv[0].Pid != 100 {
		t.Fatalf("numa_task_move instants = %+v", mv)
	}
	if a, want := args(t, mv[0]), map[string]any{"cpu": 0.0, "move": "move", "src_node": 0.0, "dst_node": 1.0,
		"src_cpu": 1.0, "dst_cpu": 3.0}; !reflect.DeepEqual(a, want) {
		t.Errorf("numa_task_move args = %v, want %v", a, want)
	}
	ex := find(tr, "i", "exit", 101)
	if len(ex) != 1 || ex[0].Ts.String() != "3600" || ex[0].S != "t" {
		t.Fatalf("exit instants = %+v", ex)
	}
	if a := args(t, ex[0]); a["group_dead"] != false || a["cpu"] != 3.0 {
		t.Errorf("exit args = %v", a)
	}
	if st.Instants != 2 {
		t.Errorf("Stats.Instants = %d, want 2", st.Instants)
	}
	if len(find(tr, "X", "numa_task_move", 101)) != 0 {
		t.Error("numa_task_move became a slice")
	}

	// Window counters: every window 0..4 (the end falls in 4), then a
	// closing zero at 5 ms; a series per timed cause that appears.
	var samples []jsonEvent
	for _, e := range tr.TraceEvents {
		if e.Ph == "C" && e.Name == StallCounter {
			samples = append(samples, e)
		}
	}
	zero := map[string]any{"direct_reclaim": 0.0, "memcg_reclaim": 0.0, "node_reclaim": 0.0,
		"compaction": 0.0, "mmap_lock": 0.0}
	with := func(kv map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range zero {
			m[k] = v
		}
		for k, v := range kv {
			m[k] = v
		}
		return m
	}
	wantSamples := []struct {
		ts   string
		vals map[string]any
	}{
		{"0", with(map[string]any{"memcg_reclaim": 200000.0})},
		{"1000", with(map[string]any{"direct_reclaim": 1234.0, "compaction": 50000.0})},
		{"2000", zero},
		{"3000", with(map[string]any{"node_reclaim": 100000.0, "mmap_lock": 1000000.0})},
		{"4000", zero},
		{"5000", zero},
	}
	if len(samples) != len(wantSamples) {
		t.Fatalf("%d stall_ns samples, want %d: %+v", len(samples), len(wantSamples), samples)
	}
	for i, w := range wantSamples {
		e := samples[i]
		if e.Ts.String() != w.ts || e.Pid != WindowsPID {
			t.Errorf("sample %d: ts %s pid %d, want ts %s pid 0", i, e.Ts, e.Pid, w.ts)
		}
		if a := args(t, e); !reflect.DeepEqual(a, w.vals) {
			t.Errorf("sample %d (ts %s) = %v, want %v", i, w.ts, a, w.vals)
		}
	}
	// Series are in cause order, so the tracks are stable.
	if !bytes.Contains(raw, []byte(`"args":{"direct_reclaim":0,"memcg_reclaim":200000,"node_reclaim":0,"compaction":0,"mmap_lock":0}`)) {
		t.Errorf("window 0 sample not in cause order:\n%s", raw)
	}

	lostSamples := find(tr, "C", LostCounter, 0)
	if len(lostSamples) != 1 || lostSamples[0].Ts.String() != "2000" {
		t.Fatalf("lost samples = %+v", lostSamples)
	}
	if a := args(t, lostSamples[0]); a["kernel"] != 3.0 || a["recorder"] != 0.0 {
		t.Errorf("lost args = %v", a)
	}
	if st.Counters != len(wantSamples)+1 {
		t.Errorf("Stats.Counters = %d, want %d", st.Counters, len(wantSamples)+1)
	}
	if st.Threads != 2 {
		t.Errorf("Stats.Threads = %d, want 2", st.Threads)
	}

	m := tr.Metadata
	if m["start_ns"] != json.Number("1000000000") || m["window_ns"] != json.Number("1000000") ||
		m["target"] != "pid 100 (db)" || m["complete"] != true {
		t.Errorf("metadata = %v", m)
	}
	if h, _ := m["host"].(map[string]any); h["hostname"] != "h" {
		t.Errorf("metadata host = %v", m["host"])
	}
	if e, _ := m["end"].(map[string]any); e["end_ns"] != json.Number("1004500000") {
		t.Errorf("metadata end = %v", m["end"])
	}
}

func TestExportWindowOverride(t *testing.T) {
	evs, lost, end := fixture()
	tr, _, _ := export(t, writeRecording(t, header(), evs, lost, &end), Options{WindowNs: 2 * windowNs})
	var got []string
	for _, e := range tr.TraceEvents {
		if e.Ph == "C" && e.Name == StallCounter {
			a := args(t, e)
			var sum float64
			for _, v := range a {
				sum += v.(float64)
			}
			got = append(got, fmt.Sprintf("%s=%.0f", e.Ts, sum))
		}
	}
	want := []string{"0=251234", "2000=1100000", "4000=0", "6000=0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("2 ms windows: %v, want %v", got, want)
	}
	if tr.Metadata["window_ns"] != json.Number("2000000") {
		t.Errorf("metadata window_ns = %v", tr.Metadata["window_ns"])
	}
}

func TestExportEmpty(t *testing.T) {
	for _, end := range []*run.End{nil, {EndNs: startNs + 5*windowNs}} {
		tr, st, raw := export(t, writeRecording(t, header(), nil, nil, end), Options{})
		if tr.TraceEvents == nil || len(tr.TraceEvents) != 0 {
			t.Errorf("traceEvents = %v, want []:\n%s", tr.TraceEvents, raw)
		}
		if !bytes.Contains(raw, []byte(`"traceEvents":[`)) {
			t.Errorf("no traceEvents array:\n%s", raw)
		}
		if st != (Stats{}) {
			t.Errorf("stats = %+v", st)
		}
	}
}

// A recording cut short: the header only. Still an empty, valid trace.
func TestExportHeaderOnly(t *testing.T) {
	path := writeRecording(t, header(), nil, nil, nil)
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	if _, err := Export(r, &out, Options{}); err != nil {
		t.Fatal(err)
	}
	var tr trace
	if err := json.Unmarshal(out.Bytes(), &tr); err != nil || tr.TraceEvents == nil {
		t.Fatalf("%v: %s", err, out.String())
	}
}

// The args of a stall carry exactly the details the NDJSON stall line
// does, less what the track and slice already say.
func TestArgsMatchStallLine(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		e := randomEvent(rng, startNs+uint64(i))
		var line map[string]any
		b := output.AppendStallLine(nil, &e)
		if err := json.Unmarshal(b, &line); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"type", "ts_ns", "pid", "tid", "comm", "cause", "dur_ns"} {
			delete(line, k)
		}
		var got map[string]any
		b, _ = json.Marshal(stallArgs(&e))
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, line) {
			t.Fatalf("%v: args %v, stall line %v", e.Cause, got, line)
		}
	}
}

func randomEvent(rng *rand.Rand, ts uint64) stall.Event {
	causes := []stall.Cause{stall.DirectReclaim, stall.MemcgReclaim, stall.NodeReclaim, stall.Compaction,
		stall.NUMAMigration, stall.NUMATaskMove, stall.MmapLock}
	tid := uint32(100 + rng.Intn(6))
	c := causes[rng.Intn(len(causes))]
	var dur uint64
	if c.Timed() {
		dur = uint64(rng.Int63n(3_000_000))
	}
	e := ev(c, tid/2*2, tid, []string{"db", "worker", "", "kswapd0"}[tid%4], ts-startNs, dur)
	e.CPU = uint32(rng.Intn(4))
	if rng.Intn(10) == 0 {
		e.Kind = stall.KindExit
		e.GroupDead = rng.Intn(2) == 0
	}
	if rng.Intn(2) == 0 {
		e.Order, e.GFP, e.Pages, e.CgroupID = int32(rng.Intn(11)), rng.Uint32(), uint64(rng.Intn(1000)), rng.Uint64()>>1
		e.Node, e.DstNode = int32(rng.Intn(3)-1), int32(rng.Intn(2))
		e.SrcCPU, e.DstCPU = int32(rng.Intn(4)), int32(rng.Intn(4))
		e.Reason = []string{"", "numa_misplaced", "compaction"}[rng.Intn(3)]
		e.Mode = []string{"", "async", "sync_light"}[rng.Intn(3)]
		e.Status = []string{"", "success", "complete"}[rng.Intn(3)]
		e.OtherTID, e.Pass, e.AttemptNs = uint32(rng.Intn(3)), uint32(rng.Intn(3)), uint64(rng.Intn(1e6))
		e.SoftLimit, e.Write, e.Acquired = rng.Intn(2) == 0, rng.Intn(2) == 0, rng.Intn(2) == 0
		e.Swap, e.Stick, e.Nested = rng.Intn(2) == 0, rng.Intn(2) == 0, rng.Intn(2) == 0
	}
	return e
}

// Many random events, out of order as the ring buffer hands them over,
// across several blocks: every timed stall is one slice, and the window
// samples add up to the stall time per cause.
func TestExportRandom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		windowNs uint64
	}{{"1ms", 0}, {"1ns collapsed", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(2))
			var evs []stall.Event
			ts := uint64(startNs + 5_000_000)
			for i := 0; i < 20000; i++ {
				ts += uint64(rng.Intn(200_000))
				evs = append(evs, randomEvent(rng, ts-uint64(rng.Intn(50_000))))
			}
			tr, st, _ := export(t, writeRecording(t, header(), evs, nil, nil), Options{WindowNs: tc.windowNs})

			wantSlices, wantInstants := 0, 0
			wantNs := map[string]float64{}
			threads := map[[2]uint32]bool{}
			for _, e := range evs {
				threads[[2]uint32{e.PID, e.TID}] = true
				switch {
				case e.Kind == stall.KindExit:
					wantInstants++
				case e.Cause.Timed() && e.DurNs > 0:
					wantSlices++
				default:
					wantInstants++
				}
				if e.Kind == stall.KindStall && e.Cause.Timed() {
					wantNs[e.Cause.String()] += float64(e.DurNs)
				}
			}
			gotSlices, gotInstants, samples := 0, 0, 0
			gotNs := map[string]float64{}
			var prev map[string]any
			for _, e := range tr.TraceEvents {
				switch e.Ph {
				case "X":
					gotSlices++
				case "i":
					gotInstants++
				case "C":
					samples++
					a := args(t, e)
					for k, v := range a {
						gotNs[k] += v.(float64)
					}
					if tc.windowNs == 1 && prev != nil && !allZero(prev) && !allZero(a) {
						// 1 ns windows never hold two stalls' ends in a
						// row here, so every non-empty one is followed by
						// a zero.
						t.Fatalf("two non-zero samples in a row at %s", e.Ts)
					}
					prev = a
				}
			}
			if gotSlices != wantSlices || st.Slices != wantSlices {
				t.Errorf("slices: %d in JSON, %d in stats, want %d", gotSlices, st.Slices, wantSlices)
			}
			if gotInstants != wantInstants || st.Instants != wantInstants {
				t.Errorf("instants: %d in JSON, %d in stats, want %d", gotInstants, st.Instants, wantInstants)
			}
			if st.Counters != samples || st.Threads != len(threads) {
				t.Errorf("stats %+v: %d samples, %d threads", st, samples, len(threads))
			}
			if !reflect.DeepEqual(gotNs, wantNs) {
				t.Errorf("window totals %v, want %v", gotNs, wantNs)
			}
			if tc.windowNs == 1 && samples > 3*len(evs) {
				t.Errorf("%d samples for %d events: empty runs not collapsed", samples, len(evs))
			}
		})
	}
}

func allZero(m map[string]any) bool {
	for _, v := range m {
		if v.(float64) != 0 {
			return false
		}
	}
	return true
}

func TestAppendUsec(t *testing.T) {
	for ns, want := range map[int64]string{0: "0", 1: "0.001", 10: "0.01", 999: "0.999", 1000: "1",
		1_234_567: "1234.567", 1_200_000: "1200", 1_500: "1.5", -1_500: "-1.5", -1: "-0.001",
		3_600_000_000_001: "3600000000.001"} {
		if got := string(appendUsec(nil, ns)); got != want {
			t.Errorf("appendUsec(%d) = %q, want %q", ns, got, want)
		}
	}
}

// A stall that began before the recording did gets a negative start,
// not a wrapped-around one; its window is the one its end falls in.
// Perfetto and chrome://tracing place an event before 0 ahead of the
// trace: a stall under way at the start is drawn from 0 with the part in
// the trace, and keeps what was cut in its details; an instant or a
// lost-events reading before the start is drawn at 0.
func TestExportBeforeStart(t *testing.T) {
	e := ev(stall.DirectReclaim, 1, 1, "x", 100_000, 300_000) // began 200 µs before the start
	e.Order = 2
	move := ev(stall.NUMATaskMove, 1, 1, "x", 0, 0)
	move.TsNs = startNs - 50_000
	lost := []record.Lost{{MonoNs: startNs - 10_000, LostEvents: 1}}
	tr, _, _ := export(t, writeRecording(t, header(), []stall.Event{e, move}, lost, nil), Options{})
	x := find(tr, "X", "direct_reclaim", 1)
	if len(x) != 1 || x[0].Ts.String() != "0" || x[0].Dur.String() != "100" {
		t.Fatalf("slices = %+v", x)
	}
	a := args(t, x[0])
	if a["before_start_ns"] != 200000.0 || a["dur_ns"] != 300000.0 || a["order"] != 2.0 {
		t.Errorf("the cut slice's args = %v", a)
	}
	i := find(tr, "i", "numa_task_move", 1)
	if len(i) != 1 || i[0].Ts.String() != "0" || args(t, i[0])["before_start_ns"] != 50000.0 {
		t.Errorf("instants = %+v", i)
	}
	for _, ev := range tr.TraceEvents {
		if ts, err := ev.Ts.Float64(); err == nil && ts < 0 {
			t.Errorf("%s %q at %s, before the trace", ev.Ph, ev.Name, ev.Ts)
		}
	}
}

// Every shipped recording exports with no event before the trace's start.
func TestShippedRecordingsExportFromZero(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/recordings/*.ntr")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no shipped recordings (%v)", err)
	}
	for _, path := range paths {
		tr, _, _ := export(t, path, Options{})
		before := 0
		for _, ev := range tr.TraceEvents {
			if ev.Ts == "" {
				continue
			}
			ts, err := ev.Ts.Float64()
			if err != nil {
				t.Fatalf("%s: ts %q: %v", path, ev.Ts, err)
			}
			if ts < 0 {
				if before++; before <= 3 {
					t.Errorf("%s: %s %q at %s µs, before the trace", filepath.Base(path), ev.Ph, ev.Name, ev.Ts)
				}
			}
		}
		if before > 3 {
			t.Errorf("%s: %d events before the trace in all", filepath.Base(path), before)
		}
	}
}
