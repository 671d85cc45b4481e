// Package session runs one live trace: it reads events from a ring-buffer
// reader, aggregates them into windows, hands stalls and windows to a
// sink, and when told to stop, detaches, drains what is left and takes
// the kernel's final snapshot. It depends on small interfaces, so the loop
// is tested without root or BPF.
package session

import (
	"context"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tracer"
)

// Recorder takes everything the session sees, for a recording. It must
// not block: record.Writer drops (and counts) what the disk cannot take.
type Recorder interface {
	Event(*stall.Event)
	Snapshot(record.Snapshot) error
	Procfs(record.Procfs) error
	Lost(record.Lost)
	Latency(latency.Stats) error
	Flush()
}

// Reader is the ring-buffer reader: *ringbuf.Reader satisfies it.
type Reader interface {
	tracer.RecordReader
	// Flush makes pending reads return what is buffered, then ErrFlushed.
	Flush() error
}

// Kernel is what the session needs from the loaded tracer.
type Kernel interface {
	Snapshot() (*stall.Snapshot, error)
	LostEvents() (uint64, error)
	AddPIDs([]uint32) error
	// Detach stops new events at the source; maps stay readable.
	Detach() error
}

// Sink receives stalls as they arrive and windows as they close.
type Sink interface {
	Stall(*stall.Event) error
	Window(*aggregate.Window) error
	Flush() error
}

// Options configure a session.
type Options struct {
	Window time.Duration
	// Grace is how long after a window ends its events may still arrive.
	Grace time.Duration
	// Now reads CLOCK_MONOTONIC in ns, the clock of the kernel's timestamps.
	Now func() uint64
	// Sink may be nil: only the summary is wanted.
	Sink Sink
	// Rescan, if set, lists processes to add to the target set; it runs
	// every RescanEvery (a cgroup's membership).
	Rescan      func() ([]uint32, error)
	RescanEvery time.Duration
	// Gone is closed when the target no longer exists.
	Gone <-chan struct{}
	// StartNs, if set, is where the first window starts (a recording's
	// header states it before the session begins).
	StartNs uint64

	// Recorder, if set, receives every event, and every RecordEvery the
	// kernel's aggregates and a procfs reading (ReadProcfs).
	Recorder    Recorder
	RecordEvery time.Duration
	ReadProcfs  func(monoNs uint64) (record.Procfs, error)
	// Dump is called, in the session's goroutine, on each DumpRequests
	// message: a flight recorder writes out what it holds.
	DumpRequests <-chan struct{}
	Dump         func(record.Snapshot) error
	// OnDump reports each dump's outcome.
	OnDump func(error)

	// Latency, if set, delivers the service's request latencies; the
	// session files them under the stall windows and, at the end,
	// correlates the two with Correlate.
	Latency <-chan latency.Sample
	// LatencyWindows delivers whole windows' statistics instead (a
	// Prometheus histogram scraped once per window).
	LatencyWindows <-chan latency.Stats
	Correlate      correlate.Config
	// DumpOnSpike calls Dump whenever a closing window is a latency
	// spike: the flight recorder keeps the moments that matter.
	DumpOnSpike bool

	// OnSnapshot, if set, receives the kernel's aggregates every
	// SnapshotEvery (the interactive view's exact histograms and
	// migrations). It must not block.
	OnSnapshot    func(*stall.Snapshot)
	SnapshotEvery time.Duration
}

// Result is what a finished session saw.
type Result struct {
	Summary    aggregate.Summary
	DurationNs uint64
	Events     uint64
	LateEvents uint64
	Windows    uint64
	BadRecords uint64
	TargetGone bool
	// Final is the kernel's aggregates when tracing stopped.
	Final *stall.Snapshot
	EndNs uint64
	// Correlation is set when a latency source was.
	Correlation *correlate.Result
}

// Run traces until ctx ends or the target goes, then returns the result.
func Run(ctx context.Context, rd Reader, dec *tracer.Decoder, k Kernel, opt Options) (*Result, error) {
	if opt.StartNs == 0 {
		opt.StartNs = opt.Now()
	}
	s := &run{opt: opt, k: k, agg: aggregate.New(opt.StartNs, uint64(opt.Window))}
	if opt.Latency != nil || opt.LatencyWindows != nil {
		s.lat = latency.NewWindows(opt.StartNs, uint64(opt.Window))
		s.det = correlate.NewDetector(opt.Correlate)
	}
	s.record(false)
	events := make(chan stall.Event, 1<<16)
	var badRecords uint64 // written by the reader goroutine, read after it ends
	go func() {
		defer close(events)
		tracer.Stream(rd, dec, func(ev stall.Event) { events <- ev }, func(error) { badRecords++ })
	}()

	s.loop(ctx, events)

	// Stop the source first, so the drain ends and the snapshot covers the
	// same span as the stream.
	detachErr := k.Detach()
	if err := rd.Flush(); err != nil {
		return nil, err
	}
	for ev := range events {
		s.add(ev)
	}
	endNs := opt.Now()
	s.emit(s.agg.CloseAll(endNs))
	if detachErr != nil {
		return nil, detachErr
	}
	snap, err := k.Snapshot()
	if err != nil {
		return nil, err
	}
	if opt.OnSnapshot != nil {
		opt.OnSnapshot(snap)
	}
	if opt.Recorder != nil {
		if err := opt.Recorder.Snapshot(record.Snapshot{MonoNs: endNs, Final: true, Data: snap}); err != nil {
			return nil, err
		}
		s.procfs(endNs)
	}
	var corr *correlate.Result
	if s.lat != nil {
		cfg := opt.Correlate
		cfg.StartNs = opt.StartNs
		corr = correlate.Analyze(s.latencies, s.closed, cfg)
	}
	return &Result{
		Correlation: corr,
		Final:       snap,
		EndNs:       endNs,
		Summary:     s.agg.Summarize(snap),
		DurationNs:  endNs - opt.StartNs,
		Events:      s.agg.Events,
		LateEvents:  s.agg.LateEvents,
		Windows:     s.windows,
		BadRecords:  badRecords,
		TargetGone:  s.gone,
	}, nil
}

type run struct {
	opt      Options
	k        Kernel
	agg      *aggregate.Aggregator
	windows  uint64
	lastLost uint64
	gone     bool

	lat       *latency.Windows
	det       *correlate.Detector
	latencies []latency.Stats
	closed    []*aggregate.Window // kept for the correlation
}

func (s *run) loop(ctx context.Context, events <-chan stall.Event) {
	tick := time.NewTicker(s.opt.Window / 4)
	defer tick.Stop()
	var rescan, recordTick, snapTick <-chan time.Time
	if s.opt.Rescan != nil && s.opt.RescanEvery > 0 {
		t := time.NewTicker(s.opt.RescanEvery)
		defer t.Stop()
		rescan = t.C
	}
	if s.opt.Recorder != nil && s.opt.RecordEvery > 0 {
		t := time.NewTicker(s.opt.RecordEvery)
		defer t.Stop()
		recordTick = t.C
	}
	if s.opt.OnSnapshot != nil && s.opt.SnapshotEvery > 0 {
		t := time.NewTicker(s.opt.SnapshotEvery)
		defer t.Stop()
		snapTick = t.C
	}
	grace := uint64(s.opt.Grace)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return // the reader stopped on its own
			}
			s.add(ev)
		case <-tick.C:
			if now := s.opt.Now(); now > grace {
				s.emit(s.agg.Close(now - grace))
			}
		case <-rescan:
			if pids, err := s.opt.Rescan(); err == nil {
				s.k.AddPIDs(pids)
			}
		case smp := <-s.opt.Latency:
			s.lat.Add(smp)
		case st := <-s.opt.LatencyWindows:
			s.lat.Put(st)
		case <-recordTick:
			s.record(false)
		case <-snapTick:
			if snap, err := s.k.Snapshot(); err == nil {
				s.opt.OnSnapshot(snap)
			}
		case <-s.opt.DumpRequests:
			s.dump()
		case <-s.opt.Gone:
			s.gone = true
			return
		case <-ctx.Done():
			return
		}
	}
}

// record writes the kernel's aggregates and a procfs reading, and closes
// the open block so a crash loses at most RecordEvery of data.
func (s *run) record(final bool) {
	if s.opt.Recorder == nil {
		return
	}
	now := s.opt.Now()
	if snap, err := s.k.Snapshot(); err == nil {
		s.opt.Recorder.Snapshot(record.Snapshot{MonoNs: now, Final: final, Data: snap})
	}
	s.procfs(now)
	s.opt.Recorder.Flush()
}

func (s *run) procfs(now uint64) {
	if s.opt.ReadProcfs == nil {
		return
	}
	if p, err := s.opt.ReadProcfs(now); err == nil {
		s.opt.Recorder.Procfs(p)
	}
}

func (s *run) dump() {
	if s.opt.Dump == nil {
		return
	}
	snap, err := s.k.Snapshot()
	if err == nil {
		err = s.opt.Dump(record.Snapshot{MonoNs: s.opt.Now(), Final: true, Data: snap})
	}
	if s.opt.OnDump != nil {
		s.opt.OnDump(err)
	}
}

func (s *run) add(ev stall.Event) {
	s.agg.Add(ev)
	if s.opt.Recorder != nil {
		s.opt.Recorder.Event(&ev)
	}
	if s.opt.Sink != nil && ev.Kind == stall.KindStall {
		s.opt.Sink.Stall(&ev) // a broken pipe shows when the summary is written
	}
}

// emit hands closed windows to the sink; the newest carries the records
// the kernel dropped since the last windows were emitted.
func (s *run) emit(ws []*aggregate.Window) {
	if len(ws) == 0 {
		return
	}
	if lost, err := s.k.LostEvents(); err == nil {
		ws[len(ws)-1].LostEvents = lost - s.lastLost
		s.lastLost = lost
		if s.opt.Recorder != nil {
			s.opt.Recorder.Lost(record.Lost{MonoNs: ws[len(ws)-1].EndNs, LostEvents: lost})
		}
	}
	s.windows += uint64(len(ws))
	dumping := false
	if s.lat != nil {
		for _, w := range ws {
			if st := s.lat.Take(w.Index); st != nil {
				w.Latency = st
				s.latencies = append(s.latencies, *st)
				if spike, _ := s.det.Observe(*st); spike && s.opt.DumpOnSpike && !dumping {
					dumping = true
					defer s.dump() // once the windows are recorded
				}
				if s.opt.Recorder != nil {
					s.opt.Recorder.Latency(*st)
				}
			}
			s.closed = append(s.closed, w)
		}
	}
	if s.opt.Sink == nil {
		return
	}
	for _, w := range ws {
		s.opt.Sink.Window(w)
	}
	s.opt.Sink.Flush()
}
