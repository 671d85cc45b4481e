package replay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// The sample recordings replay without damage and show the stall their
// workload makes (memcg on the host; the NUMA scenarios of the VM guests).
func TestShippedRecordings(t *testing.T) {
	const none = stall.NumCauses
	want := map[string]stall.Cause{
		"memcg-host.ntr":           stall.MemcgReclaim,
		"vm-6.1-misplaced.ntr":     stall.NUMAMigration,
		"vm-6.1-zonereclaim1.ntr":  stall.NodeReclaim,
		"vm-6.1-directreclaim.ntr": stall.DirectReclaim,
		"vm-6.1-thp.ntr":           stall.Compaction,
		"vm-6.1-zonereclaim0.ntr":  none,
		"vm-6.1-bind.ntr":          none,
		"redis-memcg-hog.ntr":      stall.MemcgReclaim,
	}
	files, _ := filepath.Glob("../../testdata/recordings/*.ntr")
	if len(files) < len(want) {
		t.Fatalf("%d sample recordings, want %d", len(files), len(want))
	}
	for _, f := range files {
		cause, ok := want[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: no expectation for this recording", f)
			continue
		}
		r, err := record.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), r, Options{})
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(r.Warnings()) != 0 || strings.Contains(rep.Note, "cut short") {
			t.Errorf("%s: damage: %v %q", f, r.Warnings(), rep.Note)
		}
		if rep.Events == 0 || len(rep.Summary.Threads) == 0 {
			t.Errorf("%s: empty report", f)
		}
		if filepath.Base(f) == "redis-memcg-hog.ntr" {
			// The real-server run: replay repeats its spike analysis.
			if c := rep.Correlation; c == nil || len(c.Spikes) < 3 || len(c.Explained) != 1 || c.Explained[0] != stall.MemcgReclaim {
				t.Errorf("%s: correlation %+v", f, c)
			}
			// Its 203 ms window had 3.8 ms of memcg reclaim (12.5 ms the
			// window before): mostly not explained, and said so.
			found := false
			for _, sp := range rep.Correlation.Spikes {
				if sp.Index != 40 {
					continue
				}
				found = true
				if sp.LatencyNs/1e6 != 203 || sp.Causes[0].Coverage > 0.1 || !strings.Contains(sp.Verdict, "look elsewhere") {
					t.Errorf("%s: the 203 ms window: %s", f, sp.Verdict)
				}
			}
			if !found {
				t.Errorf("%s: the 203 ms window (40) is no spike", f)
			}
		}
		if cause == none {
			continue
		}
		var n uint64
		for _, th := range rep.Summary.Threads {
			n += th.Stalls[cause].Count
		}
		if n == 0 {
			t.Errorf("%s: no %s stalls", f, cause)
		}
	}
}

func writeRecording(t *testing.T, withSnapshot, withEnd bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.ntr")
	w, err := record.Create(path, record.Header{StartNs: 1000, WindowNs: uint64(time.Second), Target: "pid 7 (db)"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		ev := stall.Event{Cause: stall.MemcgReclaim, TsNs: 1000 + uint64(i)*uint64(300*time.Millisecond),
			DurNs: 5000, PID: 7, TID: 8, Comm: "db", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
		w.Event(&ev)
	}
	exit := stall.Event{Kind: stall.KindExit, TsNs: 3 * uint64(time.Second), PID: 7, TID: 8, Comm: "db-renamed",
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
	w.Event(&exit)
	if withSnapshot {
		snap := &stall.Snapshot{}
		h := &stall.Hist{}
		for i := 0; i < 25; i++ { // the kernel counted more than it streamed
			h.Add(5000)
		}
		snap.Thread(7, 8, "db").Hists[stall.MemcgReclaim] = h
		w.Snapshot(record.Snapshot{MonoNs: 4e9, Final: true, Data: snap})
	}
	if withEnd {
		w.Close(run.End{EndNs: 4e9, DurationNs: 4e9 - 1000, Events: 11, Windows: 4, Note: "target exited"})
	} else {
		w.Flush()
		w.Close(run.End{})
		b, _ := os.ReadFile(path)
		os.WriteFile(path, b[:len(b)-5], 0o644) // cut inside the last block
	}
	return path
}

func TestReportTakesTotalsFromTheFinalSnapshot(t *testing.T) {
	rep := replayFile(t, writeRecording(t, true, true))
	th := rep.Summary.Threads[0]
	if th.Stalls[stall.MemcgReclaim].Count != 25 || th.Comm != "db-renamed" || !th.Exited {
		t.Fatalf("thread %+v: want the snapshot's 25 stalls and the exit's name", th)
	}
	if rep.DurationNs != 4e9-1000 || rep.Windows != 4 || rep.Note != "target exited" || rep.Target != "pid 7 (db)" {
		t.Fatalf("report %+v", rep)
	}
}

// A recording cut before its snapshot and its end record: the totals
// come from its 10 streamed stalls, and the note says both.
func TestCutRecordingFallsBackToEvents(t *testing.T) {
	rep := replayFile(t, writeRecording(t, false, false))
	want := "the recording has no final kernel snapshot; totals come from the recorded events; the recording was cut short after 1 blocks"
	if rep.Note != want {
		t.Fatalf("note %q, want %q", rep.Note, want)
	}
	if th := rep.Summary.Threads; len(th) != 1 || th[0].Stalls[stall.MemcgReclaim].Count != 10 {
		t.Fatalf("threads %+v: want the 10 recorded stalls", th)
	}
}

func TestSpeedPacesTheReplay(t *testing.T) {
	r, err := record.Open(writeRecording(t, true, true))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	// The events span 2.7 s of recorded time; at 20x that is at least 135 ms.
	if _, err := Run(context.Background(), r, Options{Speed: 20}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 130*time.Millisecond {
		t.Fatalf("replay at 20x took %s, less than the recording's pace allows", el)
	}
}

// Latency windows are recorded, and replay repeats the live analysis.
func TestReplayRepeatsTheCorrelation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.ntr")
	win := uint64(time.Second)
	w, err := record.Create(path, record.Header{StartNs: 1000, WindowNs: win, SpikeK: 2, SpikeFloorNs: uint64(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 10; i++ {
		p99 := uint64(2 * time.Millisecond)
		if i == 7 {
			p99 = 40 * uint64(time.Millisecond)
			ev := stall.Event{Cause: stall.MemcgReclaim, TsNs: 1000 + i*win + 500, DurNs: 30e6, PID: 5, TID: 6,
				Comm: "redis-server", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
			w.Event(&ev)
		}
		w.Latency(latency.Stats{Index: i, Count: 100, P50Ns: 1e6, P99Ns: p99, MaxNs: p99})
	}
	w.Close(run.End{EndNs: 1000 + 10*win, DurationNs: 10 * win})
	rep := replayFile(t, path)
	c := rep.Correlation
	// 30 ms of memcg reclaim in a 40 ms window over a 2 ms normal one
	// covers most of its excess: it explains the spike.
	if c == nil || len(c.Spikes) != 1 || c.Spikes[0].Index != 7 || c.Spikes[0].Causes[0].WorstTID != 6 ||
		len(c.Explained) != 1 || c.Explained[0] != stall.MemcgReclaim {
		t.Fatalf("correlation %+v", c)
	}
	if !strings.Contains(c.Spikes[0].Verdict, "memcg_reclaim 30 ms across 1 thread of redis-server") {
		t.Fatalf("verdict %q", c.Spikes[0].Verdict)
	}
}

// A recording from before format 1.3 closes its windows by event time,
// often before a window's latency record is read: the analysis still has
// every window's latency, as the live run's had.
func TestOldRecordingKeepsLateLatency(t *testing.T) {
	const sec = uint64(time.Second)
	h := record.Header{StartNs: sec, WindowNs: sec, SpikeK: 2}
	h.Version.Major, h.Version.Minor = 1, 2
	f := NewFeeder(h, Options{})
	ev := func(ts uint64) record.Item {
		return record.Item{Kind: record.ItemEvent, Event: stall.Event{Cause: stall.MemcgReclaim, TsNs: ts, DurNs: 1000,
			PID: 7, TID: 8, Comm: "db", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}}
	}
	for i := uint64(0); i < 10; i++ {
		it := ev(sec + i*sec + sec/2)
		f.Item(&it)
		// The event of the next window closes this one (by event time)
		// before its latency record, as the live writer ordered them.
		it = ev(sec + (i+1)*sec + sec/2)
		f.Item(&it)
		f.Item(&record.Item{Kind: record.ItemLatency, Latency: &latency.Stats{Index: i, Count: 10, P50Ns: 1e6, P99Ns: 2e6, MaxNs: 3e6}})
	}
	rep := f.Finish(1)
	if c := rep.Correlation; c == nil || c.Windows != 10 {
		t.Fatalf("analysis %+v, want all 10 windows' latency", c)
	}
	if late := f.Engine().LateLatency(); late != 0 {
		t.Errorf("%d latency records counted late", late)
	}
}

// A recording killed before any event (or before its end record) ends
// where its newest record is, never before it started: the start
// snapshot and the lost records say how long tracing ran.
func TestKilledRecordingHasASaneDuration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.ntr")
	start := uint64(50 * time.Second)
	w, err := record.Create(path, record.Header{StartNs: start, WindowNs: uint64(time.Second), Target: "system-wide"})
	if err != nil {
		t.Fatal(err)
	}
	w.Snapshot(record.Snapshot{MonoNs: start, Data: &stall.Snapshot{}})
	w.Lost(record.Lost{MonoNs: start + uint64(1750*time.Millisecond)})
	w.Flush()
	w.Close(run.End{})
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-5], 0o644) // killed: the end record's block is cut
	rep := replayFile(t, path)
	if rep.DurationNs != uint64(1750*time.Millisecond) || rep.Events != 0 || !strings.Contains(rep.Note, "cut short") {
		t.Fatalf("duration %d ns, %d events, note %q: want 1.75 s from the last lost record, no events, cut short",
			rep.DurationNs, rep.Events, rep.Note)
	}
}

// replayFile replays the recording at path as fast as it goes.
func replayFile(t *testing.T, path string) *output.Report {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := Run(context.Background(), r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// cancelAfter stops the replay once it has seen n stalls.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Stall(*stall.Event) error {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return nil
}
func (c *cancelAfter) Window(*aggregate.Window) error { return nil }
func (c *cancelAfter) Flush() error                   { return nil }

// A paced replay stopped by Ctrl-C (or SIGTERM, SIGHUP) reports what it
// replayed, as attach reports what it traced, and says where it stopped.
func TestStoppedReplayReportsWhatItReplayed(t *testing.T) {
	r, err := record.Open(writeRecording(t, true, true))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := Run(ctx, r, Options{Speed: 100, Sinks: []engine.Sink{&cancelAfter{n: 3, cancel: cancel}}})
	if err != nil {
		t.Fatalf("a stopped replay failed: %v", err)
	}
	// The events are 300 ms apart from 1 µs after the start: the third at 600 ms.
	want := "the replay was stopped 600ms into the recording: what follows was not replayed"
	if !strings.Contains(rep.Note, want) {
		t.Errorf("note %q, want it to say %q", rep.Note, want)
	}
	if len(rep.Summary.Threads) != 1 || rep.Summary.Threads[0].Stalls[stall.MemcgReclaim].Count != 3 {
		t.Fatalf("threads %+v: want the 3 replayed stalls", rep.Summary.Threads)
	}
}
