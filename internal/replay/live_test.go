package replay

import (
	"bytes"
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/session/sessiontest"
	"github.com/numatrace/numatrace/internal/stall"
)

// windowCounter counts the windows the live engine closed.
type windowCounter struct {
	*output.NDJSON
	n atomic.Int32
}

func (w *windowCounter) Window(win *aggregate.Window) error {
	w.n.Add(1)
	return w.NDJSON.Window(win)
}

// A live run's recording replays to the same windows, window lines and
// summary, although the live loop closed windows on its clock and events
// arrived late: a replay closes its windows where the lost records say the
// live run did.
func TestReplayClosesWindowsWhereTheLiveRunDid(t *testing.T) {
	const sec = uint64(time.Second)
	start := 100 * sec
	var now atomic.Uint64
	now.Store(start)
	path := filepath.Join(t.TempDir(), "live.ntr")
	h := record.Header{StartNs: start, WindowNs: sec, Target: "pid 7 (db)", SpikeK: 2,
		Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	w, err := record.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	sink := &windowCounter{NDJSON: output.NewNDJSON(&live)}
	eng := engine.New(h.Run(), engine.Options{Sinks: []engine.Sink{sink}})
	k := sessiontest.NewKernel(func() *stall.Snapshot {
		s := &stall.Snapshot{}
		h := &stall.Hist{}
		h.Add(5000)
		s.Thread(7, 8, "db").Hists[stall.MemcgReclaim] = h
		return s
	})
	lat := make(latencyFeed, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *session.Result, 1)
	go func() {
		res, err := session.Run(ctx, k, eng, session.Options{Now: now.Load, Recorder: w, Latency: lat})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	ev := func(ts uint64) stall.Event {
		return stall.Event{Cause: stall.MemcgReclaim, TsNs: ts, DurNs: 5000, PID: 7, TID: 8, Comm: "db",
			Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
	}
	k.Push(ev(start + sec/2))
	lat <- latency.Reading{Sample: latency.Sample{TsNs: start + sec/3, LatencyNs: 1e6}}
	time.Sleep(30 * time.Millisecond)
	now.Store(start + sec + sec/3) // window 0 closes on the next tick
	waitFor(t, func() bool { return sink.n.Load() == 1 })
	k.SetLost(4)
	// Window 0 is closed: this one is late, counted in window 1.
	k.Push(ev(start+sec-1000), ev(start+sec+sec/5))
	time.Sleep(30 * time.Millisecond)
	now.Store(start + 2*sec + sec/2)
	waitFor(t, func() bool { return sink.n.Load() == 2 })
	now.Store(start + 2*sec + sec/2 + 1)
	cancel()
	res := <-done
	if err := w.Close(eng.End(res.End.EndNs, "")); err != nil {
		t.Fatal(err)
	}
	if eng.LateEvents() != 1 {
		t.Fatalf("the live run had %d late events, want 1", eng.LateEvents())
	}
	if err := sink.Summary(output.NewReport(eng.Run(), res.End, eng.Summary(res.Final), eng.Analysis(), 20)); err != nil {
		t.Fatal(err)
	}

	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var replayed bytes.Buffer
	nd := output.NewNDJSON(&replayed)
	rep, err := Run(context.Background(), r, Options{Sinks: []engine.Sink{nd}, TopThreads: 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.Summary(rep); err != nil {
		t.Fatal(err)
	}
	if live.String() != replayed.String() {
		t.Fatalf("the replay differs from the live run:\nlive:\n%s\nreplay:\n%s", live.String(), replayed.String())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// latencyFeed is a latency source the test feeds.
type latencyFeed chan latency.Reading

func (f latencyFeed) Run(ctx context.Context, out chan<- latency.Reading, _ func(error)) error {
	for {
		select {
		case r := <-f:
			out <- r
		case <-ctx.Done():
			return nil
		}
	}
}

func (f latencyFeed) Close() error { return nil }

func (f latencyFeed) Skipped() []latency.Skip { return nil }
