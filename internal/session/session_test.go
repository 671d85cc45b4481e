package session

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tracer"
)

// fakeReader serves records pushed by the test, like a ring buffer.
type fakeReader struct {
	mu       sync.Mutex
	queue    [][]byte
	flushed  bool
	deadline time.Time
	wake     chan struct{}
	order    *[]string
}

func newReader(order *[]string) *fakeReader {
	return &fakeReader{wake: make(chan struct{}, 1), order: order}
}

func (r *fakeReader) push(b []byte) {
	r.mu.Lock()
	r.queue = append(r.queue, b)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *fakeReader) SetDeadline(t time.Time) { r.mu.Lock(); r.deadline = t; r.mu.Unlock() }

func (r *fakeReader) ReadInto(rec *ringbuf.Record) error {
	for {
		r.mu.Lock()
		if len(r.queue) > 0 {
			rec.RawSample = append(rec.RawSample[:0], r.queue[0]...)
			r.queue = r.queue[1:]
			r.mu.Unlock()
			return nil
		}
		if r.flushed {
			r.mu.Unlock()
			return ringbuf.ErrFlushed
		}
		wait := time.Until(r.deadline)
		r.mu.Unlock()
		if wait <= 0 {
			return os.ErrDeadlineExceeded
		}
		select {
		case <-r.wake:
		case <-time.After(wait):
		}
	}
}

func (r *fakeReader) Flush() error {
	r.mu.Lock()
	r.flushed = true
	*r.order = append(*r.order, "flush")
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

type fakeKernel struct {
	mu       sync.Mutex
	order    *[]string
	added    []uint32
	lost     uint64
	detached bool
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
func (k *fakeKernel) Detach() error {
	k.mu.Lock()
	k.detached = true
	*k.order = append(*k.order, "detach")
	k.mu.Unlock()
	return nil
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

// rawRecord builds a raw ring-buffer record the way the kernel lays it out.
func rawRecord(t *testing.T, kind, cause uint32, ts, dur uint64, tid uint32) []byte {
	t.Helper()
	b := make([]byte, tracer.EventSize)
	// Field offsets of struct event (bpf/numatrace.h): ts_ns 0, dur_ns 8,
	// kind 40, cause 44, pid 48, tid 52. The decoder tests check the layout.
	put64 := func(off int, v uint64) { *(*uint64)(unsafe.Pointer(&b[off])) = v }
	put32 := func(off int, v uint32) { *(*uint32)(unsafe.Pointer(&b[off])) = v }
	put64(0, ts)
	put64(8, dur)
	put32(40, kind)
	put32(44, cause)
	put32(48, tid)
	put32(52, tid)
	ev, err := tracer.NewDecoder(nil).Decode(b)
	if err != nil || ev.TsNs != ts || ev.TID != tid || uint32(ev.Cause) != cause {
		t.Fatalf("record layout drifted: %+v %v", ev, err)
	}
	return b
}

type clock struct{ ns atomic.Uint64 }

func (c *clock) now() uint64 { return c.ns.Load() }

func TestRunStreamsWindowsAndStopsInOrder(t *testing.T) {
	var order []string
	rd := newReader(&order)
	k := &fakeKernel{order: &order}
	sink := &fakeSink{}
	clk := &clock{}
	clk.ns.Store(1_000_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		res, err := Run(ctx, rd, tracer.NewDecoder(nil), k, Options{
			Window: 40 * time.Millisecond, Grace: 0, Now: clk.now, Sink: sink,
			Rescan: func() ([]uint32, error) { return []uint32{77}, nil }, RescanEvery: 5 * time.Millisecond,
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	start := uint64(1_000_000_000)
	rd.push(rawRecord(t, 0, uint32(stall.MemcgReclaim), start+10_000_000, 5000, 11))
	rd.push(rawRecord(t, 0, uint32(stall.DirectReclaim), start+50_000_000, 7000, 12))
	rd.push(rawRecord(t, 1, 0, start+60_000_000, 0, 12)) // exit: not a stall line
	time.Sleep(50 * time.Millisecond)
	clk.ns.Store(start + 130_000_000) // three windows of 40ms have ended
	k.mu.Lock()
	k.lost = 3
	k.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	// A record that arrives while stopping is drained, not lost.
	rd.push(rawRecord(t, 0, uint32(stall.MmapLock), start+131_000_000, 100, 11))
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
	if res.Events != 4 || res.TargetGone || len(res.Summary.Threads) != 1 {
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
		res, err := Run(context.Background(), newReader(&order), tracer.NewDecoder(nil), &fakeKernel{order: &order},
			Options{Window: time.Second, Now: clk.now, Gone: gone})
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
	rd := newReader(&order)
	ctx, cancel := context.WithCancel(context.Background())
	clk := &clock{}
	done := make(chan *Result, 1)
	go func() {
		res, _ := Run(ctx, rd, tracer.NewDecoder(nil), &fakeKernel{order: &order}, Options{Window: time.Second, Now: clk.now})
		done <- res
	}()
	rd.push([]byte{1, 2, 3})
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
	rd := newReader(&order)
	k := &fakeKernel{order: &order}
	sink := &fakeSink{}
	clk := &clock{}
	start := uint64(1_000_000_000)
	clk.ns.Store(start)
	lat := make(chan latency.Sample, 1024)
	var dumps atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		res, err := Run(ctx, rd, tracer.NewDecoder(nil), k, Options{
			Window: 40 * time.Millisecond, Now: clk.now, Sink: sink, Latency: lat,
			Correlate: correlate.Config{MinHist: 3}, DumpOnSpike: true,
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
			rd.push(rawRecord(t, 0, uint32(stall.MemcgReclaim), start+i*win+1000, 15_000_000, 11))
		}
		for j := uint64(0); j < 50; j++ {
			lat <- latency.Sample{TsNs: start + i*win + j*100_000, LatencyNs: p}
		}
	}
	time.Sleep(100 * time.Millisecond)
	clk.ns.Store(start + 10*win + 1)
	time.Sleep(100 * time.Millisecond)
	cancel()
	res := <-done
	c := res.Correlation
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
		_, err := Run(ctx, newReader(&order), tracer.NewDecoder(nil), &fakeKernel{order: &order}, Options{
			Window: time.Second, Now: clk.now, SnapshotEvery: 20 * time.Millisecond,
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
