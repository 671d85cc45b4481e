package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

const (
	start = uint64(10 * time.Second)
	sec   = uint64(time.Second)
	ms    = uint64(time.Millisecond)
)

type sink struct {
	stalls   []stall.Event
	windows  []*aggregate.Window
	flushes  int
	analyses []*correlate.Result
}

func (s *sink) Stall(e *stall.Event) error       { s.stalls = append(s.stalls, *e); return nil }
func (s *sink) Window(w *aggregate.Window) error { s.windows = append(s.windows, w); return nil }
func (s *sink) Flush() error                     { s.flushes++; return nil }
func (s *sink) Analysis(a *correlate.Result)     { s.analyses = append(s.analyses, a) }
func stallAt(c stall.Cause, ts, dur uint64, tid uint32) stall.Event {
	return stall.Event{Cause: c, TsNs: ts, DurNs: dur, PID: 100, TID: tid, Comm: "db",
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
}

// Stalls go on at once; windows close gap-free and in order; the newest
// window of each close carries the kernel's new losses; an event for a
// closed window counts late in the oldest open one; the last is partial.
func TestWindowsCloseInOrder(t *testing.T) {
	s := &sink{}
	e := New(run.Description{StartNs: start, WindowNs: sec}, Options{Sinks: []Sink{s}})
	e.Event(stallAt(stall.MemcgReclaim, start+sec/2, 5000, 11))
	e.Event(stall.Event{Kind: stall.KindExit, TsNs: start + sec/2, TID: 12, PID: 100, Comm: "gone"})
	if len(s.stalls) != 1 {
		t.Fatalf("%d stalls passed on, want 1 (an exit is not a stall)", len(s.stalls))
	}
	e.SetLost(3)
	ws, spikes := e.Close(start + 2*sec + 1)
	if len(ws) != 2 || spikes != 0 || ws[0].Index != 0 || ws[1].Index != 1 {
		t.Fatalf("closed %d windows (%d spikes)", len(ws), spikes)
	}
	if ws[0].LostEvents != 0 || ws[1].LostEvents != 3 || ws[0].Causes[stall.MemcgReclaim].Count != 1 {
		t.Errorf("window 0 %+v, window 1 lost %d", ws[0].Causes[stall.MemcgReclaim], ws[1].LostEvents)
	}
	e.Event(stallAt(stall.DirectReclaim, start+sec/2, 7000, 11)) // window 0 closed already
	e.SetLost(5)
	ws, _ = e.Finish(start + 2*sec + sec/2)
	if len(ws) != 1 || !ws[0].Partial || ws[0].Causes[stall.DirectReclaim].Count != 1 || ws[0].LostEvents != 2 {
		t.Fatalf("finish closed %d windows: %+v", len(ws), ws)
	}
	if e.Events() != 3 || e.LateEvents() != 1 || e.Windows() != 3 || len(s.windows) != 3 || s.flushes < 2 {
		t.Errorf("events %d late %d windows %d (sink %d, flushes %d)", e.Events(), e.LateEvents(), e.Windows(), len(s.windows), s.flushes)
	}
	if e.Analysis() != nil || len(s.analyses) != 0 {
		t.Error("an analysis without a latency source")
	}
}

// feedSpikeRun is ten windows of 50 requests at 1 ms p99, but window 7
// at 20 ms with a 15 ms memcg stall of tid 11.
func feedSpikeRun(e *Engine) (spikes int) {
	for i := uint64(0); i < 10; i++ {
		p := ms
		if i == 7 {
			p = 20 * ms
			e.Event(stallAt(stall.MemcgReclaim, start+i*sec+1000, 15*ms, 11))
		}
		for j := uint64(0); j < 50; j++ {
			e.Latency(latency.Reading{Sample: latency.Sample{TsNs: start + i*sec + j*ms, LatencyNs: p}})
		}
		_, n := e.Close(start + (i+1)*sec)
		spikes += n
	}
	return spikes
}

// With a latency source the engine finds the spike as its window closes,
// charges it to the stall in it, and hands the same analysis to the view
// as the report gets.
func TestSpikeFoundAndCharged(t *testing.T) {
	s := &sink{}
	e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}},
		Options{Sinks: []Sink{s}, Spikes: correlate.Config{MinHist: 3}})
	if n := feedSpikeRun(e); n != 1 {
		t.Fatalf("Close reported %d spikes, want 1", n)
	}
	e.Finish(start + 10*sec)
	a := e.Analysis()
	if a == nil || len(a.Spikes) != 1 || a.Spikes[0].Index != 7 || a.Windows != 10 {
		t.Fatalf("analysis %+v", a)
	}
	if c := a.Spikes[0].Causes[0]; c.Cause != stall.MemcgReclaim || c.WorstTID != 11 || c.Process != "db" || c.StallNs != 15*ms {
		t.Errorf("spike charged to %+v", c)
	}
	if len(s.analyses) == 0 || s.analyses[len(s.analyses)-1] != a {
		t.Error("the view's last analysis is not the report's")
	}
	if s.windows[7].Latency == nil || s.windows[7].Latency.P99Ns != 20*ms {
		t.Errorf("window 7 latency %+v", s.windows[7].Latency)
	}
	// As it stood after seven windows: no spike yet; after all: the same.
	if at := e.AnalysisAt(7); len(at.Spikes) != 0 || at.Windows != 7 {
		t.Errorf("after 7 windows: %d spikes in %d windows", len(at.Spikes), at.Windows)
	}
	if at := e.AnalysisAt(e.Windows()); at != a {
		t.Error("AnalysisAt the end is not the final analysis")
	}
}

// A latency reading for a window that already closed is counted and left
// out, never filed under a later window.
func TestLateLatencyIsDropped(t *testing.T) {
	e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}}, Options{})
	e.Close(start + 2*sec)
	e.Latency(latency.Reading{Sample: latency.Sample{TsNs: start + sec/2, LatencyNs: ms}})
	e.Latency(latency.Reading{Window: &latency.Stats{Index: 1, Count: 5, P99Ns: ms}})
	ws, _ := e.Finish(start + 3*sec)
	if e.LateLatency() != 2 || ws[0].Latency != nil {
		t.Errorf("late readings %d; window %d latency %+v", e.LateLatency(), ws[0].Index, ws[0].Latency)
	}
}

// Past MaxWindows the analysis keeps the newest windows and says so.
func TestAnalysisIsBounded(t *testing.T) {
	e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}},
		Options{Spikes: correlate.Config{MinHist: 3}, MaxWindows: 4})
	feedSpikeRun(e)
	a := e.Analysis()
	if a.Windows != 4 || !strings.Contains(a.Conclusion, "keeps the last 4 windows; 6 older ones were dropped") {
		t.Errorf("%d windows: %s", a.Windows, a.Conclusion)
	}
	if at := e.AnalysisAt(8); at.Windows != 2 {
		t.Errorf("after 8 windows the bounded analysis has %d windows, want 2", at.Windows)
	}
}

// A window in which nothing completed counts as a spike once requests
// complete again (the flight recorder dumps then); the end of the load,
// with nothing after it, does not.
func TestGapIsASpikeWhenLoadResumes(t *testing.T) {
	e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}}, Options{})
	load := func(i uint64) {
		for j := uint64(0); j < 20; j++ {
			e.Latency(latency.Reading{Sample: latency.Sample{TsNs: start + i*sec + j*ms, LatencyNs: ms}})
		}
	}
	spikesAt := func(i uint64) int {
		_, n := e.Close(start + (i+1)*sec)
		return n
	}
	for i := uint64(0); i < 6; i++ {
		load(i)
		if n := spikesAt(i); n != 0 {
			t.Fatalf("window %d: %d spikes", i, n)
		}
	}
	if n := spikesAt(6); n != 0 { // nothing completed: maybe the load stopped
		t.Fatalf("the empty window itself: %d spikes", n)
	}
	load(7)
	if n := spikesAt(7); n != 1 {
		t.Fatalf("load resumed after a gap: %d spikes, want 1", n)
	}
	if n := spikesAt(8) + spikesAt(9); n != 0 {
		t.Fatalf("the load stopped: %d spikes", n)
	}
	e.Finish(start + 10*sec)
	a := e.Analysis()
	if len(a.Spikes) != 1 || !a.Spikes[0].NoCompletion || a.Spikes[0].Index != 6 {
		t.Fatalf("analysis spikes %+v", a.Spikes)
	}
}

// A long quiet stretch closes in batches: the sinks see every window, in
// order, and the engine holds no more than a batch at once; what Close
// returns past a batch is the last window (and any with latency).
func TestLongStretchClosesInBatches(t *testing.T) {
	s := &sink{}
	e := New(run.Description{StartNs: start, WindowNs: sec}, Options{Sinks: []Sink{s}})
	e.Event(stallAt(stall.MemcgReclaim, start+sec/2, 5000, 11))
	const n = 3*closeBatch + 5
	ws, _ := e.Close(start + n*sec)
	if len(ws) != 1 || ws[0].Index != n-1 {
		t.Fatalf("Close returned %d windows (last %d), want only the last, %d", len(ws), ws[len(ws)-1].Index, n-1)
	}
	if len(s.windows) != n {
		t.Fatalf("sinks saw %d windows, want %d", len(s.windows), n)
	}
	for i, w := range s.windows {
		if w.Index != uint64(i) {
			t.Fatalf("window %d is %d: not in order, or a gap", i, w.Index)
		}
	}
	if s.windows[0].Causes[stall.MemcgReclaim].Count != 1 || s.flushes < 3 {
		t.Errorf("the stall's window %+v, %d flushes (one per batch at least)", s.windows[0].Causes[stall.MemcgReclaim], s.flushes)
	}
}

// Every sample the engine cannot file is counted by why: before the
// trace, after it (held to the end, or too far ahead to hold), or after
// its window closed. The end of the run and its report carry the count.
func TestLatencyLeftOutIsCounted(t *testing.T) {
	h := run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}, Started: time.Unix(1_764_590_000, 0)}
	e := New(h, Options{})
	add := func(ts uint64) { e.Latency(latency.Reading{Sample: latency.Sample{TsNs: ts, LatencyNs: ms}}) }
	add(start - sec)        // before
	add(start + 2*sec)      // filed
	add(start + 3600*sec)   // far ahead: counted at once
	e.Close(start + 3*sec)  // windows 0-2
	add(start + sec)        // late
	add(start + 5*sec + 1)  // after the end, held until it
	e.Finish(start + 4*sec) // windows 3 and the partial 4
	end := e.End(start+4*sec, "")
	a := end.Latency
	if a == nil || a.Samples != 1 || a.Before != 1 || a.After != 2 || a.Late != 1 || a.OutsideMinNs != start-sec || a.OutsideMaxNs != start+3600*sec {
		t.Fatalf("account %+v", a)
	}
	if a.StartNs != start || a.EndNs != start+4*sec {
		t.Errorf("span %d-%d", a.StartNs, a.EndNs)
	}
	if New(run.Description{StartNs: start, WindowNs: sec}, Options{}).End(start, "").Latency != nil {
		t.Error("an account without a latency source")
	}
}

// A window the source could not tell (its histogram's counters went back)
// is neither normal nor empty: under a dense load, an empty one between
// served windows is a spike ("No request completed"); a skipped one is
// not, live or in the analysis.
func TestSkippedWindowIsNoSpike(t *testing.T) {
	e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}}, Options{Spikes: correlate.Config{MinHist: 3}})
	spikes := 0
	for i := uint64(0); i < 10; i++ {
		st := latency.Stats{Index: i, Count: 100, P50Ns: ms, P99Ns: ms, MaxNs: ms}
		if i == 5 {
			st = latency.Stats{Index: i, Skipped: "counter reset"}
		}
		e.Latency(latency.Reading{Window: &st})
		_, n := e.Close(start + (i+1)*sec)
		spikes += n
	}
	e.Finish(start + 10*sec)
	if a := e.Analysis(); spikes != 0 || len(a.Spikes) != 0 || a.Windows != 9 {
		t.Fatalf("%d spikes live, analysis %d spikes over %d windows: %s", spikes, len(a.Spikes), a.Windows, a.Conclusion)
	}
	if a := e.End(start+10*sec, "").Latency; a.Windows != 9 || a.SkippedWindows != 1 {
		t.Fatalf("account %+v", a)
	}
}

// A batch of samples (the kernel's request timers hand them on so) is
// filed as the same samples one by one would be, each in its own window.
func TestSampleBatchIsFiledLikeSingleSamples(t *testing.T) {
	var batch []latency.Sample
	for i := uint64(0); i < 3; i++ {
		for j := uint64(0); j < 10; j++ {
			batch = append(batch, latency.Sample{TsNs: start + i*sec + j*ms, LatencyNs: (i + 1) * ms})
		}
	}
	one := New(run.Description{StartNs: start, WindowNs: sec}, Options{})
	for _, smp := range batch {
		one.Latency(latency.Reading{Sample: smp})
	}
	many := New(run.Description{StartNs: start, WindowNs: sec}, Options{})
	many.Latency(latency.Reading{Samples: batch})
	a, _ := one.Finish(start + 3*sec - 1)
	b, _ := many.Finish(start + 3*sec - 1)
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("%d and %d windows, want 3 each", len(a), len(b))
	}
	for i := range a {
		if a[i].Latency == nil || b[i].Latency == nil || *a[i].Latency != *b[i].Latency || b[i].Latency.Count != 10 || b[i].Latency.P99Ns != uint64(i+1)*ms {
			t.Errorf("window %d: one by one %+v, as a batch %+v", i, a[i].Latency, b[i].Latency)
		}
	}
}

// Each closed window gets the growth of PSI's memory total since the
// close before it that closed windows; the first such reading only starts
// the count, as a replay, which has only those, sees it.
func TestWindowsGetPSIGrowth(t *testing.T) {
	d := run.Description{StartNs: 1e9, WindowNs: 1e9}
	e := New(d, Options{})
	e.SetPressure(100) // a reading at a close that closed nothing: not counted
	if ws, _ := e.Close(1e9 + 1); len(ws) != 0 {
		t.Fatalf("closed %d windows", len(ws))
	}
	e.SetPressure(500)
	ws, _ := e.Close(2e9)
	if len(ws) != 1 || ws[0].HasPressure {
		t.Fatalf("first window: %+v", ws)
	}
	e.SetPressure(800)
	ws, _ = e.Close(3e9)
	if len(ws) != 1 || ws[0].PressureNs != 300 {
		t.Fatalf("second window: %+v", ws)
	}
	e2 := New(d, Options{})
	if ws, _ := e2.Close(2e9); len(ws) != 1 || ws[0].HasPressure {
		t.Fatalf("a run without PSI has none: %+v", ws)
	}
}

// The flight recorder's trigger and the report judge a window in which
// no request completed by one rule: the live run fires on a gap exactly
// where the report lists one, whether the load was dense only lately,
// only earlier, throughout or never.
func TestLiveAndReportAgreeOnGaps(t *testing.T) {
	load := func(phases ...[2]uint64) []uint64 { // {windows, requests in each}
		var counts []uint64
		for _, p := range phases {
			for range p[0] {
				counts = append(counts, p[1])
			}
		}
		return counts
	}
	runs := []struct {
		name   string
		counts []uint64
	}{
		{"dense lately", load([2]uint64{40, 5}, [2]uint64{30, 100}, [2]uint64{1, 0}, [2]uint64{5, 100})},
		{"dense earlier", load([2]uint64{40, 100}, [2]uint64{30, 5}, [2]uint64{1, 0}, [2]uint64{10, 100})},
		{"dense throughout", load([2]uint64{10, 100}, [2]uint64{2, 0}, [2]uint64{10, 100}, [2]uint64{1, 0}, [2]uint64{3, 100})},
		{"sparse throughout", load([2]uint64{10, 5}, [2]uint64{1, 0}, [2]uint64{10, 5})},
	}
	for _, r := range runs {
		e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{K: 2}}, Options{})
		var fired []uint64 // the windows whose close fires the flight recorder
		for i, n := range r.counts {
			if n > 0 {
				st := latency.Stats{Index: uint64(i), Count: n, P50Ns: ms, P99Ns: ms, MaxNs: ms}
				e.Latency(latency.Reading{Window: &st})
			}
			if _, k := e.Close(start + uint64(i+1)*sec); k > 0 {
				fired = append(fired, uint64(i))
			}
		}
		e.Finish(start + uint64(len(r.counts))*sec)
		// Each spike the report lists, at the window whose close fires
		// for it live: an empty window's is the next one with requests.
		var listed []uint64
		for _, sp := range e.Analysis().Spikes {
			at := sp.Index
			for at < uint64(len(r.counts)) && r.counts[at] == 0 {
				at++
			}
			if len(listed) == 0 || listed[len(listed)-1] != at {
				listed = append(listed, at)
			}
		}
		if !slices.Equal(fired, listed) {
			t.Errorf("%s: live fires at windows %v, the report's spikes are at %v", r.name, fired, listed)
		}
	}
}

// The flight recorder fires on a frozen window, by the rule the report
// lists it by: a window whose p99 held while its max broke the SLO, and
// one in which the thread that served the requests was frozen 150 ms of
// its second, dump as the spike does, and the report names those three
// windows and no other.
func TestLiveAndReportAgreeOnFrozenWindows(t *testing.T) {
	e := New(run.Description{StartNs: start, WindowNs: sec, Spikes: run.Spikes{SLONs: 5 * ms}}, Options{})
	var fired []uint64
	for i := uint64(0); i < 20; i++ {
		st := latency.Stats{Index: i, Count: 100, P50Ns: ms / 2, P99Ns: ms, P999Ns: ms, MaxNs: 2 * ms,
			Requests: &latency.Requests{TIDs: []uint32{7044}}}
		switch i {
		case 5:
			st.P999Ns, st.MaxNs = 3*ms, 30*ms
		case 9:
			e.Event(stallAt(stall.MemcgReclaim, start+i*sec+sec/2, 150*ms, 7044))
		case 14:
			st.P99Ns, st.P999Ns, st.MaxNs = 20*ms, 20*ms, 20*ms
		}
		e.Latency(latency.Reading{Window: &st})
		if _, k := e.Close(start + (i+1)*sec); k > 0 {
			fired = append(fired, i)
		}
	}
	e.Finish(start + 20*sec)
	a := e.Analysis()
	var listed []uint64
	for _, sp := range append(slices.Clone(a.Spikes), a.Frozen...) {
		listed = append(listed, sp.Index)
	}
	slices.Sort(listed)
	if want := []uint64{5, 9, 14}; !slices.Equal(fired, want) || !slices.Equal(listed, want) {
		t.Errorf("live fires at windows %v, the report lists %v; want %v for both", fired, listed, want)
	}
}
