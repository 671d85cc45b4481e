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
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tracer"
)

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
}

// Run traces until ctx ends or the target goes, then returns the result.
func Run(ctx context.Context, rd Reader, dec *tracer.Decoder, k Kernel, opt Options) (*Result, error) {
	s := &run{opt: opt, k: k, agg: aggregate.New(opt.Now(), uint64(opt.Window))}
	s.startNs = opt.Now()
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
	return &Result{
		Summary:    s.agg.Summarize(snap),
		DurationNs: endNs - s.startNs,
		Events:     s.agg.Events,
		LateEvents: s.agg.LateEvents,
		Windows:    s.windows,
		BadRecords: badRecords,
		TargetGone: s.gone,
	}, nil
}

type run struct {
	opt      Options
	k        Kernel
	agg      *aggregate.Aggregator
	startNs  uint64
	windows  uint64
	lastLost uint64
	gone     bool
}

func (s *run) loop(ctx context.Context, events <-chan stall.Event) {
	tick := time.NewTicker(s.opt.Window / 4)
	defer tick.Stop()
	var rescan <-chan time.Time
	if s.opt.Rescan != nil && s.opt.RescanEvery > 0 {
		t := time.NewTicker(s.opt.RescanEvery)
		defer t.Stop()
		rescan = t.C
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
		case <-s.opt.Gone:
			s.gone = true
			return
		case <-ctx.Done():
			return
		}
	}
}

func (s *run) add(ev stall.Event) {
	s.agg.Add(ev)
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
	}
	s.windows += uint64(len(ws))
	if s.opt.Sink == nil {
		return
	}
	for _, w := range ws {
		s.opt.Sink.Window(w)
	}
	s.opt.Sink.Flush()
}
