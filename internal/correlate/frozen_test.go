package correlate

import (
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// closedLoop is a run of windows in which a closed-loop client's p99
// stays at 1 ms, as its requests' p99.9 and max do, but where tails says
// otherwise: {p99.9, max} in ms, by window. Redis's one thread (7044)
// was frozen in memcg reclaim for memcg ms (by window).
func closedLoop(n int, tails map[int][2]float64, memcg map[int]float64) []Window {
	ws := series(repeat(1, n), nil)
	for i, t := range tails {
		ws[i].Latency.P999Ns, ws[i].Latency.MaxNs = uint64(t[0]*float64(ms)), uint64(t[1]*float64(ms))
	}
	for i, m := range memcg {
		ns := uint64(m * float64(ms))
		ws[i].StallNs[stall.MemcgReclaim] = ns
		ws[i].Hits = []Hits{{Cause: stall.MemcgReclaim, Threads: 1, WorstTID: 7044, WorstNs: ns, LongestNs: ns, Process: "redis-server"}}
	}
	return ws
}

// A closed-loop client queues few requests behind a freeze: redis froze
// 40 ms, p99 held at 1 ms, and the four requests in flight waited the
// freeze out (p99.9 38 ms, max 42 ms). With a 5 ms SLO the window is no
// spike, but it is named a frozen window, with its tail and what froze it;
// and a window whose p99.9 kept to the SLO while one request (a single
// connection's) went over it is one too.
func TestATailOverTheSLOIsAFrozenWindow(t *testing.T) {
	ws := closedLoop(20, map[int][2]float64{7: {38, 42}, 12: {2, 9}}, map[int]float64{7: 40, 12: 8})
	r := Analyze(ws, Config{SLONs: 5 * ms, StartNs: 1e9})
	if len(r.Spikes) != 0 {
		t.Fatalf("p99 held, yet %d spikes: %s", len(r.Spikes), r.Spikes[0].Verdict)
	}
	if len(r.Frozen) != 2 || r.Frozen[0].Index != 7 || r.Frozen[1].Index != 12 {
		t.Fatalf("frozen windows %+v, want windows 7 and 12", r.Frozen)
	}
	f := r.Frozen[0]
	if f.P999Ns != 38*ms || f.MaxNs != 42*ms || f.P99Ns != ms || !f.SLO || f.ExcessNs != 37*ms || !f.Frozen {
		t.Errorf("window 7: %+v", f)
	}
	want := "P99 1 ms held at +7s, but P99.9 38 ms and max 42 ms (SLO 5 ms, 37 ms over): memcg_reclaim 40 ms across 1 thread of redis-server (worst tid 7044: 40 ms) covers all of the excess"
	if f.Verdict != want {
		t.Errorf("verdict %q\nwant    %q", f.Verdict, want)
	}
	if v := r.Frozen[1].Verdict; !strings.HasPrefix(v, "P99 1 ms held at +12s, but P99.9 2 ms and max 9 ms (SLO 5 ms, 4 ms over)") {
		t.Errorf("window 12: %q", v)
	}
	want = "No latency spikes in 20 windows. In 2 windows p99 held but the service froze (p99.9 up to 38 ms, max up to 42 ms): memcg_reclaim covers at least half of them."
	if r.Conclusion != want || r.FrozenWords() == "" || !strings.HasSuffix(want, r.FrozenWords()) {
		t.Errorf("conclusion %q\nwant       %q", r.Conclusion, want)
	}
	// Without an SLO a tail alone is no frozen window: there is nothing
	// to say it broke.
	if r := Analyze(ws, Config{}); len(r.Frozen) != 0 || len(r.Spikes) != 0 {
		t.Errorf("no SLO: %d frozen windows, %d spikes", len(r.Frozen), len(r.Spikes))
	}
}

// A window in which the thread that served requests was frozen a tenth of
// the time is a frozen window, whatever its latency and with no SLO: the
// freeze took that much of the service's time. The rule weighs the
// longest one serving thread was frozen, not their sum, and never a
// thread that served no request.
func TestAServingThreadFrozenATenthIsAFrozenWindow(t *testing.T) {
	thread := func(tid uint32, frozenMs uint64) *aggregate.ThreadWindow {
		tw := &aggregate.ThreadWindow{PID: 7044, TID: tid, Comm: "redis-server", TotalNs: frozenMs * ms}
		tw.ByCause[stall.MemcgReclaim] = aggregate.CauseTotal{Count: 4, TotalNs: frozenMs * ms, MaxNs: frozenMs * ms / 4}
		return tw
	}
	var ws []Window
	for i := uint64(0); i < 20; i++ {
		w := &aggregate.Window{Index: i, StartNs: 1e9 + i*1e9, EndNs: 2e9 + i*1e9, Threads: map[uint32]*aggregate.ThreadWindow{}}
		w.Latency = &Latency{Index: i, Count: 5000, P50Ns: ms / 10, P99Ns: ms / 2, P999Ns: ms, MaxNs: 2 * ms,
			Requests: &latency.Requests{TIDs: []uint32{7044, 7045}}}
		switch i {
		case 8: // 150 ms of a 1 s window
			w.Threads[7044] = thread(7044, 150)
		case 12: // 90 ms in each of two serving threads: neither a tenth
			w.Threads[7044], w.Threads[7045] = thread(7044, 90), thread(7045, 90)
		case 16: // a thread that served nothing froze for half the window
			w.Threads[7050] = thread(7050, 500)
		}
		for _, tw := range w.Threads {
			w.Causes[stall.MemcgReclaim].Merge(tw.ByCause[stall.MemcgReclaim])
		}
		ws = append(ws, Summarize(w))
	}
	if ws[8].ServedFrozenNs != 150*ms || ws[12].ServedFrozenNs != 90*ms || ws[16].ServedFrozenNs != 0 {
		t.Fatalf("the serving threads' longest freeze: %d, %d, %d ns", ws[8].ServedFrozenNs, ws[12].ServedFrozenNs, ws[16].ServedFrozenNs)
	}
	r := Analyze(ws, Config{StartNs: 1e9})
	if len(r.Spikes) != 0 || len(r.Frozen) != 1 || r.Frozen[0].Index != 8 {
		t.Fatalf("%d spikes, frozen windows %+v: want window 8 alone", len(r.Spikes), r.Frozen)
	}
	f := r.Frozen[0]
	if f.SLO || f.BaselineNs != ms/2 || f.ServedFrozenNs != 150*ms ||
		!strings.HasPrefix(f.Verdict, "P99 500 µs held at +8s (P99.9 1 ms, max 2 ms, 2 ms over p99); a thread that served requests was frozen 150 ms (15% of the window): memcg_reclaim 150 ms") {
		t.Errorf("window 8: %s", f.Verdict)
	}
	// With an SLO the tail's rule is added to the freeze's, not put in
	// its place.
	if r := Analyze(ws, Config{SLONs: 5 * ms}); len(r.Frozen) != 1 || r.Frozen[0].Index != 8 {
		t.Errorf("with an SLO: frozen windows %+v", r.Frozen)
	}
}

// A frozen window is the incident's, not the normal the baseline is made
// of: p99 stayed under twice its 1 ms baseline through a long freeze (1.8
// ms), and the window after it, at 2.5 ms, is still a spike.
func TestFrozenWindowsStayOutOfTheBaseline(t *testing.T) {
	p99 := append(append(repeat(1, 10), repeat(1.8, 20)...), 2.5, 1)
	ws := series(p99, nil)
	for i := 10; i < 30; i++ {
		ws[i].ServedFrozenNs = 200 * ms
		ws[i].Latency.Requests = &latency.Requests{TIDs: []uint32{7044}}
	}
	r := Analyze(ws, Config{})
	if len(r.Frozen) != 20 {
		t.Fatalf("%d frozen windows, want 20", len(r.Frozen))
	}
	if len(r.Spikes) != 1 || r.Spikes[0].Index != 30 || r.Spikes[0].BaselineNs != ms {
		t.Errorf("spikes %+v: want window 30, against the 1 ms baseline", r.Spikes)
	}
}

// The latency the run measured is kept whether or not anything spiked:
// each figure's lowest and highest over the windows in which requests
// completed, not over an empty window nor one the source could not tell.
func TestTheLatencyMeasuredIsKept(t *testing.T) {
	ws := series([]float64{1, 3, -1, 2, 0.5}, nil)
	ws[1].Latency.P999Ns, ws[1].Latency.MaxNs = 4*ms, 9*ms
	ws[3].Latency.Skipped = "the histogram's counters went back"
	ws[3].Latency.MaxNs = 900 * ms
	r := Analyze(ws, Config{SLONs: 10 * ms})
	m := r.Measured
	want := Measured{Windows: 3, P99: Range{ms / 2, 3 * ms}, P999: Range{ms / 2, 4 * ms}, Max: Range{ms / 2, 9 * ms}, HasP999: true}
	if m != want {
		t.Errorf("measured %+v\nwant     %+v", m, want)
	}
	// A recording from before p99.9 was kept: none to show.
	for i := range ws {
		if ws[i].Latency != nil {
			ws[i].Latency.P999Ns = 0
		}
	}
	if m := Analyze(ws, Config{}).Measured; m.HasP999 || m.P999 != (Range{}) || m.Max != want.Max {
		t.Errorf("without p99.9: %+v", m)
	}
}

// The frozen windows' words open with where their slow requests' time
// went, as the verdict does for spikes: a closed-loop client's freezes
// are all the slow time there is, and a run of them named only by the
// causes that cover half of a window hid a CPU wait that held a fifth
// of it (issue 45's mixed incident).
func TestFrozenWindowsSayTheirSlowRequestsBudget(t *testing.T) {
	ws := closedLoop(20, map[int][2]float64{7: {38, 42}, 12: {30, 34}}, map[int]float64{7: 40, 12: 24})
	for i, runq := range map[int]uint64{7: 2, 12: 10} {
		var b stall.Budget
		b[stall.PartOf(stall.MemcgReclaim)] = ws[i].StallNs[stall.MemcgReclaim]
		b[stall.PartOf(stall.RunqWait)] = runq * ms
		b[stall.PartOnCPU] = ms
		rq := &latency.Requests{Slow: 1, SlowNs: b.Total(), SlowBudget: b, TIDs: []uint32{7044}}
		rq.SlowStallNs[stall.MemcgReclaim] = ws[i].StallNs[stall.MemcgReclaim]
		rq.SlowExcessStallNs[stall.MemcgReclaim] = ws[i].StallNs[stall.MemcgReclaim]
		ws[i].Latency.Requests = rq
	}
	r := Analyze(ws, Config{SLONs: 5 * ms, StartNs: 1e9})
	if len(r.Frozen) != 2 || !r.HasFrozenBudget {
		t.Fatalf("%d frozen windows, budget %v", len(r.Frozen), r.HasFrozenBudget)
	}
	want := "In 2 windows p99 held but the service froze (p99.9 up to 38 ms, max up to 42 ms; the slow requests' time: " +
		"82% memcg_reclaim, 15% waiting for a CPU (runq_wait), 3% on CPU): memcg_reclaim covers at least half of them."
	if r.FrozenWords() != want {
		t.Errorf("frozen windows: %q\nwant            %q", r.FrozenWords(), want)
	}
}
