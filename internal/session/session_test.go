package session

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/stall"
)

// fakeKernel serves events pushed by the test, like the tracer's stream.
type fakeKernel struct {
	mu       sync.Mutex
	order    *[]string
	queue    []stall.Event
	stopped  bool
	wake     chan struct{}
	added    []uint32
	lost     uint64
	bad      uint64
	detached bool
}

func newKernel(order *[]string) *fakeKernel {
	return &fakeKernel{order: order, wake: make(chan struct{}, 1)}
}

func (k *fakeKernel) push(ev stall.Event) {
	k.mu.Lock()
	k.queue = append(k.queue, ev)
	k.mu.Unlock()
	k.poke()
}

func (k *fakeKernel) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Stream delivers what is queued; after Stop it drains and returns.
func (k *fakeKernel) Stream(sink func(stall.Event)) error {
	for {
		k.mu.Lock()
		q := k.queue
		k.queue = nil
		stopped := k.stopped
		k.mu.Unlock()
		for _, ev := range q {
			sink(ev)
		}
		if stopped && len(q) == 0 {
			return nil
		}
		<-k.wake
	}
}

func (k *fakeKernel) Stop() error {
	k.mu.Lock()
	k.detached, k.stopped = true, true
	*k.order = append(*k.order, "detach", "flush")
	k.mu.Unlock()
	k.poke()
	return nil
}

func (k *fakeKernel) Snapshot() (*stall.Snapshot, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	*k.order = append(*k.order, "snapshot")
	s := &stall.Snapshot{LostEvents: k.lost}
	h := &stall.Hist{}
	h.Add(5000)
	s.Thread(10, 11, "worker").Hists[stall.MemcgReclaim] = h
	return s, nil
}
func (k *fakeKernel) LostEvents() (uint64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lost, nil
}
func (k *fakeKernel) AddPIDs(p []uint32) error {
	k.mu.Lock()
	k.added = append(k.added, p...)
	k.mu.Unlock()
	return nil
}
func (k *fakeKernel) BadRecords() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bad
}

type fakeSink struct {
	mu      sync.Mutex
	stalls  []stall.Event
	windows []*aggregate.Window
}

func (s *fakeSink) Stall(e *stall.Event) error {
	s.mu.Lock()
	s.stalls = append(s.stalls, *e)
	s.mu.Unlock()
	return nil
}
func (s *fakeSink) Window(w *aggregate.Window) error {
	s.mu.Lock()
	s.windows = append(s.windows, w)
	s.mu.Unlock()
	return nil
}
func (s *fakeSink) Flush() error { return nil }

// event is one decoded event, as the tracer hands it over.
func event(kind stall.Kind, cause stall.Cause, ts, dur uint64, tid uint32) stall.Event {
	return stall.Event{Kind: kind, Cause: cause, TsNs: ts, DurNs: dur, PID: tid, TID: tid,
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
}

// newEngine starts a run at startNs with windows of w.
func newEngine(startNs uint64, w time.Duration, opt engine.Options, latency bool) *engine.Engine {
	h := record.Header{StartNs: startNs, WindowNs: uint64(w)}
	if latency {
		h.SpikeK = 2
	}
	return engine.New(h, opt)
}

type clock struct{ ns atomic.Uint64 }

func (c *clock) now() uint64 { return c.ns.Load() }

func TestRunStreamsWindowsAndStopsInOrder(t *testing.T) {
	var order []string
	k := newKernel(&order)
	sink := &fakeSink{}
	clk := &clock{}
	start := uint64(1_000_000_000)
	clk.ns.Store(start)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		eng := newEngine(start, 40*time.Millisecond, engine.Options{Sinks: []engine.Sink{sink}}, false)
		res, err := Run(ctx, k, eng, Options{Now: clk.now,
			Rescan: func() ([]uint32, error) { return []uint32{77}, nil }, RescanEvery: 5 * time.Millisecond,
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	k.push(event(stall.KindStall, stall.MemcgReclaim, start+10_000_000, 5000, 11))
	k.push(event(stall.KindStall, stall.DirectReclaim, start+50_000_000, 7000, 12))
	k.push(event(stall.KindExit, 0, start+60_000_000, 0, 12)) // exit: not a stall line
	time.Sleep(50 * time.Millisecond)
	k.mu.Lock()
	k.lost = 3
	k.mu.Unlock()
	// Three windows of 40ms have ended, and the grace after them.
	clk.ns.Store(start + 130_000_000 + uint64(engine.Grace))
	time.Sleep(50 * time.Millisecond)
	sink.mu.Lock()
	onTime := len(sink.windows)
	sink.mu.Unlock()
	if onTime != 3 {
		t.Errorf("%d windows closed on time, want 3", onTime)
	}
	// Tracing stops at +130ms: the window it falls in is partial. A record
	// that arrives while stopping is drained, not lost.
	clk.ns.Store(start + 130_000_000)
	k.push(event(stall.KindStall, stall.MmapLock, start+131_000_000, 100, 11))
	cancel()
	res := <-done

	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.stalls) != 3 {
		t.Fatalf("sink got %d stall lines, want 3", len(sink.stalls))
	}
	if len(sink.windows) != 4 {
		t.Fatalf("%d windows, want 3 closed on time + 1 partial at the end", len(sink.windows))
	}
	for i, w := range sink.windows {
		if w.Index != uint64(i) {
			t.Fatalf("window %d has index %d: not gap-free", i, w.Index)
		}
	}
	if sink.windows[0].Causes[stall.MemcgReclaim].Count != 1 || sink.windows[1].Causes[stall.DirectReclaim].Count != 1 {
		t.Errorf("stalls in the wrong windows")
	}
	if !sink.windows[3].Partial || sink.windows[2].Partial {
		t.Errorf("partial flags wrong")
	}
	var lost uint64
	for _, w := range sink.windows {
		lost += w.LostEvents
	}
	if lost != 3 {
		t.Errorf("windows carry %d lost events, want 3", lost)
	}
	if res.End.Events != 4 || res.TargetGone || len(res.Final.Threads) != 1 {
		t.Errorf("result %+v", res)
	}
	want := []string{"detach", "flush", "snapshot"}
	if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Errorf("shutdown order %v, want %v", order, want)
	}
	k.mu.Lock()
	if len(k.added) == 0 || k.added[0] != 77 {
		t.Errorf("rescan did not add pids: %v", k.added)
	}
	k.mu.Unlock()
}

func TestRunEndsWhenTargetGoes(t *testing.T) {
	var order []string
	gone := make(chan struct{})
	clk := &clock{}
	done := make(chan *Result, 1)
	go func() {
		res, err := Run(context.Background(), newKernel(&order), newEngine(0, time.Second, engine.Options{}, false),
			Options{Now: clk.now, Gone: gone})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	close(gone)
	select {
	case res := <-done:
		if !res.TargetGone {
			t.Fatal("TargetGone not set")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("session did not end when the target went")
	}
}

func TestRunCountsBadRecords(t *testing.T) {
	var order []string
	k := newKernel(&order)
	ctx, cancel := context.WithCancel(context.Background())
	clk := &clock{}
	done := make(chan *Result, 1)
	go func() {
		res, _ := Run(ctx, k, newEngine(0, time.Second, engine.Options{}, false), Options{Now: clk.now})
		done <- res
	}()
	k.mu.Lock()
	k.bad = 1 // the tracer's stream could not decode one record
	k.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if res := <-done; res.BadRecords != 1 {
		t.Fatalf("bad records %d, want 1", res.BadRecords)
	}
}

// Latency samples land in their windows, and the spike window is charged
// to the stall that happened in it.
func TestRunCorrelatesLatency(t *testing.T) {
	var order []string
	k := newKernel(&order)
	sink := &fakeSink{}
	clk := &clock{}
	start := uint64(1_000_000_000)
	clk.ns.Store(start)
	lat := chanSource(make(chan latency.Reading, 1024))
	var dumps atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	eng := newEngine(start, 40*time.Millisecond,
		engine.Options{Sinks: []engine.Sink{sink}, Spikes: correlate.Config{MinHist: 3}}, true)
	go func() {
		res, err := Run(ctx, k, eng, Options{
			Now: clk.now, Latency: lat, DumpOnSpike: true,
			Dump: func(record.Snapshot) error { dumps.Add(1); return nil },
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	const win = uint64(40 * time.Millisecond)
	for i := uint64(0); i < 10; i++ {
		p := uint64(time.Millisecond)
		if i == 7 {
			p = 20 * uint64(time.Millisecond)
			k.push(event(stall.KindStall, stall.MemcgReclaim, start+i*win+1000, 15_000_000, 11))
		}
		for j := uint64(0); j < 50; j++ {
			lat <- latency.Reading{Sample: latency.Sample{TsNs: start + i*win + j*100_000, LatencyNs: p}}
		}
	}
	time.Sleep(100 * time.Millisecond)
	clk.ns.Store(start + 10*win + 1 + uint64(engine.Grace))
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	c := eng.Analysis()
	if c == nil || len(c.Spikes) != 1 || c.Spikes[0].Index != 7 {
		t.Fatalf("correlation %+v", c)
	}
	if c.Spikes[0].Causes[0].Cause != "memcg_reclaim" || c.Spikes[0].Causes[0].WorstTID != 11 {
		t.Fatalf("spike attribution %+v", c.Spikes[0])
	}
	if dumps.Load() != 1 {
		t.Fatalf("%d flight-recorder dumps, want 1 for the one spike", dumps.Load())
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.windows) < 10 || sink.windows[7].Latency == nil || sink.windows[7].Latency.P99Ns != 20*uint64(time.Millisecond) {
		t.Fatalf("window 7 latency %+v", sink.windows[7].Latency)
	}
}

func TestRunHandsSnapshotsToTheView(t *testing.T) {
	var order []string
	clk := &clock{}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []*stall.Snapshot
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := Run(ctx, newKernel(&order), newEngine(0, time.Second, engine.Options{}, false), Options{
			Now: clk.now, SnapshotEvery: 20 * time.Millisecond,
			OnSnapshot: func(s *stall.Snapshot) { mu.Lock(); got = append(got, s); mu.Unlock() }})
		if err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(150 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	// Periodic ones, then the final one after detaching.
	if len(got) < 3 || got[len(got)-1].Threads[11] == nil {
		t.Fatalf("%d snapshots", len(got))
	}
	if !slices.Contains(order, "detach") || order[len(order)-1] != "snapshot" || slices.Index(order, "detach") > len(order)-2 {
		t.Errorf("the last snapshot is not taken after detaching: %v", order[max(0, len(order)-3):])
	}
}

// chanSource is a latency source fed by the test.
type chanSource chan latency.Reading

func (c chanSource) Run(ctx context.Context, out chan<- latency.Reading, _ func(error)) error {
	for {
		select {
		case r := <-c:
			out <- r
		case <-ctx.Done():
			return nil
		}
	}
}

func (c chanSource) Close() error { return nil }
