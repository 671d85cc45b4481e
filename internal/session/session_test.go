package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/session/sessiontest"
	"github.com/numatrace/numatrace/internal/stall"
)

// snapshot is what the fake kernel's maps hold: one memcg stall of tid 11.
func snapshot() *stall.Snapshot {
	s := &stall.Snapshot{}
	h := &stall.Hist{}
	h.Add(5000)
	s.Thread(10, 11, "worker").Hists[stall.MemcgReclaim] = h
	return s
}

func newKernel() *sessiontest.Kernel { return sessiontest.NewKernel(snapshot) }

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
	h := run.Description{StartNs: startNs, WindowNs: uint64(w)}
	if latency {
		h.Spikes.K = 2
	}
	return engine.New(h, opt)
}

type clock struct{ ns atomic.Uint64 }

func (c *clock) now() uint64 { return c.ns.Load() }

func TestRunStreamsWindowsAndStopsInOrder(t *testing.T) {
	k := newKernel()
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
	k.Push(event(stall.KindStall, stall.MemcgReclaim, start+10_000_000, 5000, 11))
	k.Push(event(stall.KindStall, stall.DirectReclaim, start+50_000_000, 7000, 12))
	k.Push(event(stall.KindExit, 0, start+60_000_000, 0, 12)) // exit: not a stall line
	time.Sleep(50 * time.Millisecond)
	k.SetLost(3)
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
	k.Push(event(stall.KindStall, stall.MmapLock, start+131_000_000, 100, 11))
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
	if order := k.Calls(); !slices.Equal(order, want) {
		t.Errorf("shutdown order %v, want %v", order, want)
	}
	if added := k.Added(); len(added) == 0 || added[0] != 77 {
		t.Errorf("rescan did not add pids: %v", added)
	}
}

func TestRunEndsWhenTargetGoes(t *testing.T) {
	gone := make(chan struct{})
	clk := &clock{}
	done := make(chan *Result, 1)
	go func() {
		res, err := Run(context.Background(), newKernel(), newEngine(0, time.Second, engine.Options{}, false),
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
	k := newKernel()
	ctx, cancel := context.WithCancel(context.Background())
	clk := &clock{}
	done := make(chan *Result, 1)
	go func() {
		res, _ := Run(ctx, k, newEngine(0, time.Second, engine.Options{}, false), Options{Now: clk.now})
		done <- res
	}()
	k.SetBad(1) // the tracer's stream could not decode one record
	time.Sleep(20 * time.Millisecond)
	cancel()
	if res := <-done; res.End.BadRecords != 1 {
		t.Fatalf("bad records %d, want 1", res.End.BadRecords)
	}
}

// Latency samples land in their windows, and the spike window is charged
// to the stall that happened in it. The test moves the clock only once
// the session has every reading and the stall, and stops it only once the
// windows closed: no step depends on how fast this machine runs it.
func TestRunCorrelatesLatency(t *testing.T) {
	var dumps atomic.Int32
	const win = uint64(40 * time.Millisecond)
	ls := startLatencySession(t, time.Duration(win), correlate.Config{MinHist: 3}, Options{
		DumpOnSpike: true,
		Dump:        func(record.Snapshot) (func() error, error) { dumps.Add(1); return func() error { return nil }, nil },
	})
	k, sink, start := ls.k, ls.sink, ls.start
	for i := uint64(0); i < 10; i++ {
		p := uint64(time.Millisecond)
		if i == 7 {
			p = 20 * uint64(time.Millisecond)
			k.Push(event(stall.KindStall, stall.MemcgReclaim, start+i*win+1000, 15_000_000, 11))
		}
		ls.handReadings(t, start+i*win, p)
	}
	waitFor(t, "the stall to reach the session", func() bool { return k.Delivered() == 1 })
	ls.clk.ns.Store(start + 10*win + 1 + uint64(engine.Grace))
	waitFor(t, "ten windows to close", func() bool { return sink.closed() >= 10 })
	ls.stop()
	c := ls.eng.Analysis()
	if c == nil || len(c.Spikes) != 1 || c.Spikes[0].Index != 7 {
		t.Fatalf("correlation %+v", c)
	}
	if c.Spikes[0].Causes[0].Cause != stall.MemcgReclaim || c.Spikes[0].Causes[0].WorstTID != 11 {
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

// A session that falls behind (a loaded machine, a flight-recorder dump
// that takes long to take what the recorder holds) finds the tick ready
// beside the events and readings that came in meanwhile, and select
// takes the tick first as often as not. Those reached the session before
// their window's grace ran out, so they are in the window, not counted
// late. The tick is taken first here, every time: no sleep decides it.
func TestTheTickTakesWhatArrivedBeforeIt(t *testing.T) {
	const window = 40 * time.Millisecond
	start := uint64(1_000_000_000)
	clk, sink := &clock{}, &fakeSink{}
	eng := newEngine(start, window, engine.Options{Sinks: []engine.Sink{sink}}, true)
	s := &tracing{opt: Options{Now: clk.now}, k: newKernel(), eng: eng}
	events := make(chan stall.Event, 1)
	events <- event(stall.KindStall, stall.MemcgReclaim, start+1000, 5000, 11)
	lat := make(chan latency.Reading, 50)
	for j := uint64(0); j < 50; j++ {
		lat <- latency.Reading{Sample: latency.Sample{TsNs: start + j*100_000, LatencyNs: 1000}}
	}
	// Window 0's grace has run out when the tick is taken.
	clk.ns.Store(start + uint64(window) + uint64(engine.Grace))
	s.tick(time.Now(), events, lat)
	// Then the loop takes whatever the tick left, as it would.
	for len(events) > 0 {
		s.add(<-events)
	}
	for len(lat) > 0 {
		eng.Latency(<-lat)
	}

	if sink.closed() != 1 {
		t.Fatalf("%d windows closed, want window 0", sink.closed())
	}
	w := sink.windows[0]
	if w.Latency == nil || w.Latency.Count != 50 {
		t.Errorf("window 0 latency %+v, want its 50 readings", w.Latency)
	}
	if n := w.Causes[stall.MemcgReclaim].Count; n != 1 {
		t.Errorf("window 0 has %d memcg stalls, want the 1 that arrived in time", n)
	}
	if end := eng.End(clk.now(), ""); end.Latency == nil || end.Latency.Late != 0 || end.LateEvents != 0 {
		t.Errorf("late readings %+v, late events %d: want none", end.Latency, end.LateEvents)
	}
}

// latencySession is a session over a fake kernel and a latency source
// the test hands readings to, on a clock the test moves, from start.
type latencySession struct {
	k      *sessiontest.Kernel
	sink   *fakeSink
	clk    *clock
	lat    *handSource
	eng    *engine.Engine
	start  uint64
	cancel context.CancelFunc
	done   chan *Result
}

// startLatencySession runs a session with opts, its clock, latency
// source and windows of w filled in.
func startLatencySession(t *testing.T, w time.Duration, spikes correlate.Config, opts Options) *latencySession {
	t.Helper()
	ls := &latencySession{k: newKernel(), sink: &fakeSink{}, clk: &clock{}, lat: newHandSource(),
		start: 1_000_000_000, done: make(chan *Result, 1)}
	ls.clk.ns.Store(ls.start)
	ls.eng = newEngine(ls.start, w, engine.Options{Sinks: []engine.Sink{ls.sink}, Spikes: spikes}, true)
	opts.Now, opts.Latency = ls.clk.now, ls.lat
	var ctx context.Context
	ctx, ls.cancel = context.WithCancel(context.Background())
	go func() {
		res, err := Run(ctx, ls.k, ls.eng, opts)
		if err != nil {
			t.Error(err)
		}
		ls.done <- res
	}()
	return ls
}

// handReadings hands the session 50 readings of latencyNs, 0.1 ms apart
// from fromNs.
func (ls *latencySession) handReadings(t *testing.T, fromNs, latencyNs uint64) {
	t.Helper()
	var rs []latency.Reading
	for j := uint64(0); j < 50; j++ {
		rs = append(rs, latency.Reading{Sample: latency.Sample{TsNs: fromNs + j*100_000, LatencyNs: latencyNs}})
	}
	ls.lat.Hand(t, rs...)
}

// stop ends the session and returns its result.
func (ls *latencySession) stop() *Result {
	ls.cancel()
	return <-ls.done
}

func TestRunHandsSnapshotsToTheView(t *testing.T) {
	k := newKernel()
	clk := &clock{}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []*stall.Snapshot
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := Run(ctx, k, newEngine(0, time.Second, engine.Options{}, false), Options{
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
	order := k.Calls()
	if !slices.Contains(order, "detach") || order[len(order)-1] != "snapshot" || slices.Index(order, "detach") > len(order)-2 {
		t.Errorf("the last snapshot is not taken after detaching: %v", order[max(0, len(order)-3):])
	}
}

// closed is how many windows have closed.
func (s *fakeSink) closed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.windows)
}

// waitFor waits until cond holds: what the test waits for happens
// whatever the machine's load, only later under more of it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// handSource is a latency source that the test hands readings to.
type handSource struct {
	in     chan []latency.Reading
	handed chan struct{}
}

func newHandSource() *handSource {
	return &handSource{in: make(chan []latency.Reading), handed: make(chan struct{})}
}

// Hand gives the session rs, and returns once all of them are in its
// queue: the session has received them.
func (h *handSource) Hand(t *testing.T, rs ...latency.Reading) {
	t.Helper()
	select {
	case h.in <- rs:
	case <-time.After(time.Minute):
		t.Fatal("the session did not start its latency source in a minute")
	}
	<-h.handed
}

func (h *handSource) Run(ctx context.Context, out chan<- latency.Reading, _ func(error)) error {
	for {
		select {
		case rs := <-h.in:
			for _, r := range rs {
				out <- r
			}
			h.handed <- struct{}{}
		case <-ctx.Done():
			return nil
		}
	}
}

func (h *handSource) Close() error { return nil }

func (h *handSource) Skipped() []latency.Skip { return nil }

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

func (c chanSource) Skipped() []latency.Skip { return nil }

// brokenStream is a tracer whose ring buffer cannot be read.
type brokenStream struct{ *sessiontest.Kernel }

func (brokenStream) Stream(func(stall.Event)) error { return errors.New("open ring buffer: no") }

// A stream that cannot be read ends the run with its error, not with an
// empty report.
func TestRunFailsWhenTheStreamCannotBeRead(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), brokenStream{newKernel()}, newEngine(0, time.Second, engine.Options{}, false),
			Options{Now: (&clock{}).now})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "open ring buffer") {
			t.Fatalf("Run = %v, want the stream's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end when its stream failed")
	}
}

// skippingSource is a chanSource that says it skipped malformed lines.
type skippingSource struct{ chanSource }

func (skippingSource) Skipped() []latency.Skip {
	return []latency.Skip{{Kind: latency.SkipMalformed, N: 7}}
}

// What the run leaves out is said the first time each kind comes up,
// however long the run goes on: samples outside the trace, samples after
// their window, records the kernel sent that could not be decoded. The
// run's end carries the counts, and what the source skipped.
func TestRunSaysEachDiscardOnce(t *testing.T) {
	k := newKernel()
	clk := &clock{}
	start := uint64(100_000_000_000)
	clk.ns.Store(start)
	const win = uint64(40 * time.Millisecond)
	lat := skippingSource{chanSource(make(chan latency.Reading, 1024))}
	var mu sync.Mutex
	var warned []string
	said := func() int { mu.Lock(); defer mu.Unlock(); return len(warned) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	sink := &fakeSink{}
	eng := newEngine(start, 40*time.Millisecond, engine.Options{Sinks: []engine.Sink{sink}}, true)
	go func() {
		res, err := Run(ctx, k, eng, Options{Now: clk.now, Latency: lat,
			Warn: func(err error) { mu.Lock(); warned = append(warned, err.Error()); mu.Unlock() }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// Each step waits for what the session must have done, not for time:
	// a loaded machine delays its ticks. Discards are said as windows close.
	for i := uint64(1); i <= 10; i++ { // ten windows, each with samples from before the trace and a bad record
		for j := uint64(0); j < 10; j++ {
			lat.chanSource <- latency.Reading{Sample: latency.Sample{TsNs: start/2 + j, LatencyNs: 1}}
		}
		k.SetBad(i)
		clk.ns.Store(start + i*win + uint64(engine.Grace))
		waitFor(t, fmt.Sprintf("window %d to close", i), func() bool { return sink.closed() >= int(i) })
	}
	lat.chanSource <- latency.Reading{Sample: latency.Sample{TsNs: start + win, LatencyNs: 1}} // late: its window has closed
	// It is said as a later window closes, once the session has it.
	for i := uint64(11); said() < 3 && i < 1000; i++ {
		clk.ns.Store(start + i*win + uint64(engine.Grace))
		waitFor(t, fmt.Sprintf("window %d to close", i), func() bool { return sink.closed() >= int(i) })
	}
	cancel()
	res := <-done
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"ring-buffer record from the kernel could not be read or decoded",
		"latency samples lie outside the trace: their times are about 50.0 s after boot, the trace covered 100.0–100.",
		"1 latency sample came after its window had closed and was left out",
	}
	if len(warned) != len(want) {
		t.Fatalf("warnings %q: want %d", warned, len(want))
	}
	for i, w := range want {
		if !strings.Contains(warned[i], w) {
			t.Errorf("warning %d: %q, want it to say %q", i, warned[i], w)
		}
	}
	a := res.End.Latency
	if a == nil || a.Before != 100 || a.Late != 1 || len(a.Skipped) != 1 || a.Skipped[0].N != 7 {
		t.Fatalf("end account %+v", a)
	}
	if res.End.BadRecords != 10 {
		t.Errorf("bad records %d in the end, want 10", res.End.BadRecords)
	}
}

// A dump whose file takes forever to write (a FIFO nobody reads, a hung
// disk) holds up nothing: the session keeps taking events and closing
// windows while it is written, a dump asked for meanwhile is said not to
// be taken, and the run's end waits for it only so long, and says so.
func TestADumpThatBlocksHoldsNothingUp(t *testing.T) {
	requests := make(chan struct{}, 1)
	writing, never := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(never) })
	var mu sync.Mutex
	var outcomes []error
	said := func() []error { mu.Lock(); defer mu.Unlock(); return slices.Clone(outcomes) }
	const window = 40 * time.Millisecond
	ls := startLatencySession(t, window, correlate.Config{}, Options{
		DumpRequests: requests,
		Dump: func(record.Snapshot) (func() error, error) {
			return func() error { close(writing); <-never; return nil }, nil
		},
		DumpWait: 50 * time.Millisecond,
		OnDump:   func(err error) { mu.Lock(); outcomes = append(outcomes, err); mu.Unlock() },
	})
	k, sink, start := ls.k, ls.sink, ls.start
	requests <- struct{}{}
	<-writing
	k.Push(event(stall.KindStall, stall.MemcgReclaim, start+1000, 5000, 11))
	ls.clk.ns.Store(start + uint64(window) + uint64(engine.Grace))
	within(t, 10*time.Second, "window 0 to close while the dump is written", func() bool { return sink.closed() >= 1 })
	sink.mu.Lock()
	n := sink.windows[0].Causes[stall.MemcgReclaim].Count
	sink.mu.Unlock()
	if n != 1 {
		t.Errorf("window 0 has %d memcg stalls, want the 1 pushed while the dump was written", n)
	}
	requests <- struct{}{}
	within(t, 10*time.Second, "the second request to be said not taken", func() bool { return len(said()) == 1 })
	if got := said()[0]; !errors.Is(got, ErrDumpBusy) {
		t.Errorf("the second request: %v, want ErrDumpBusy", got)
	}
	ended := make(chan *Result, 1)
	go func() { ended <- ls.stop() }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end while the dump was still being written")
	}
	var unfinished *UnfinishedDumpError
	if got := said(); len(got) != 2 || !errors.As(got[1], &unfinished) || !strings.Contains(got[1].Error(), "may be incomplete") {
		t.Errorf("dump outcomes %v: want the one not taken, then the one given up at the end", got)
	}
}

// within waits up to d until cond holds.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
	}
}

// A dump written is said once it is, and the next one asked for is taken.
func TestADumpWrittenIsSaidAndTheNextTaken(t *testing.T) {
	requests := make(chan struct{}, 1)
	outcomes := make(chan error, 4)
	var writes atomic.Int32
	ls := startLatencySession(t, 40*time.Millisecond, correlate.Config{}, Options{
		DumpRequests: requests,
		Dump: func(record.Snapshot) (func() error, error) {
			return func() error { writes.Add(1); return nil }, nil
		},
		OnDump: func(err error) { outcomes <- err },
	})
	for i := 0; i < 2; i++ {
		requests <- struct{}{}
		select {
		case err := <-outcomes:
			if err != nil {
				t.Fatalf("dump %d: %v", i+1, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("dump %d was never said", i+1)
		}
	}
	ls.stop()
	if n := writes.Load(); n != 2 || len(outcomes) != 0 {
		t.Errorf("%d dumps written, %d more outcomes: want 2, and each said once", n, len(outcomes))
	}
}
