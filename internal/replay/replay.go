// Package replay plays a recording back through the engine, as one more
// source of the same events as a live trace: the same windows, the same
// spike analysis and the same report.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// Options configure a replay.
type Options struct {
	// Speed scales the recording's time: 1 replays in real time, 10 ten
	// times faster; 0 replays as fast as possible.
	Speed float64
	// Sinks receive stalls and windows as they replay.
	Sinks []engine.Sink
	// TopThreads for the text report.
	TopThreads int
	// OnSnapshot and OnProcfs, if set, receive the recording's kernel
	// snapshots and procfs readings in order with the events.
	OnSnapshot func(record.Snapshot)
	OnProcfs   func(record.Procfs)
	// Workers decode blocks ahead of the engine when replaying as fast
	// as possible: 0 is one per CPU (up to 4), 1 decodes in line.
	Workers int
}

// Run replays r and returns the report the live run printed. A recording
// cut short still replays every complete block; the report's note says so.
// A replay stopped by ctx (Ctrl-C, SIGTERM, SIGHUP) reports what it
// replayed until then, as attach reports what it traced.
func Run(ctx context.Context, r *record.Reader, opt Options) (*output.Report, error) {
	f := NewFeeder(r.Header(), opt)
	var wait func(context.Context, uint64) error
	if opt.Speed == 0 {
		// Decoding is the limit: do it ahead on other cores. (Paced, the
		// recording's own time is.)
		r.Parallel(opt.Workers)
	} else {
		pace := pacer{speed: opt.Speed, started: time.Now()}
		wait = pace.wait
	}
	if err := f.ReadAll(ctx, r, wait); err != nil {
		if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			return nil, err
		}
		f.stopped = true
	}
	return f.Finish(r.Blocks()), nil
}

// ReadAll feeds every item r holds, waiting on pace (if set) before each
// event; it stops early when ctx ends.
func (f *Feeder) ReadAll(ctx context.Context, r *record.Reader, pace func(context.Context, uint64) error) error {
	for {
		it, err := r.NextRef()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if it.Kind == record.ItemEvent && pace != nil {
			if err := pace(ctx, it.Event.TsNs); err != nil {
				return err
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		f.Item(it)
	}
}

// Feeder hands a recording's items to an engine, closing windows where
// the live run closed them: at its lost records since format 1.3, by
// event time before.
type Feeder struct {
	eng *engine.Engine
	h   record.Header
	doc *doctor.Report // the header's, read once; nil without one
	opt Options

	closes WindowCloses // where the live run closed its windows

	final *stall.Snapshot // the last kernel snapshot: the final one is written last
	end   *run.End
	// fallback holds histograms rebuilt from the events, for a recording
	// cut short before any kernel snapshot; dropped at the first snapshot.
	fallback  *aggregate.EventHists
	firstEvNs uint64
	// lastNs is the newest time any record carries: where a recording
	// killed before its end record, or before any event, stopped.
	lastNs uint64
	// stopped: the replay was stopped before the recording's end.
	stopped bool
}

// NewFeeder starts an engine for the recording h heads.
func NewFeeder(h record.Header, opt Options) *Feeder {
	eng := engine.New(h.Run(), engine.Options{Sinks: opt.Sinks, LateLatency: !h.ClosesAtLost()})
	return &Feeder{eng: eng, h: h, doc: doctor.Recorded(h), opt: opt, closes: NewWindowCloses(h)}
}

// Engine is the engine being fed; its Run is the recording's description.
func (f *Feeder) Engine() *engine.Engine { return f.eng }

// Doctor is doctor's reading of the traced machine the recording
// carries, nil if none: the report's findings and the view's.
func (f *Feeder) Doctor() *doctor.Report { return f.doc }

// Item feeds one item of the recording.
func (f *Feeder) Item(it *record.Item) {
	if ns, ok := f.closes.Before(it); ok {
		f.eng.Close(ns)
	}
	switch it.Kind {
	case record.ItemEvent:
		f.event(&it.Event)
	case record.ItemLost:
		f.lastNs = max(f.lastNs, it.Lost.MonoNs)
		f.eng.SetLost(it.Lost.LostEvents)
		if it.Lost.PSI {
			f.eng.SetPressure(it.Lost.PSISomeNs)
		}
	case record.ItemLatency:
		// Written with the windows it belongs to, before or after their
		// lost record: either way before they close here.
		f.eng.Latency(latency.Reading{Window: it.Latency})
	case record.ItemSnapshot:
		f.lastNs = max(f.lastNs, it.Snapshot.MonoNs)
		f.fallback = nil
		f.final = it.Snapshot.Data
		if f.opt.OnSnapshot != nil {
			f.opt.OnSnapshot(*it.Snapshot)
		}
	case record.ItemProcfs:
		f.lastNs = max(f.lastNs, it.Procfs.MonoNs)
		if f.opt.OnProcfs != nil {
			f.opt.OnProcfs(*it.Procfs)
		}
	case record.ItemEnd:
		f.end = it.End
	}
	if ns, ok := f.closes.After(it); ok {
		f.eng.Close(ns)
	}
}

func (f *Feeder) event(ev *stall.Event) {
	if f.firstEvNs == 0 || ev.TsNs < f.firstEvNs {
		f.firstEvNs = ev.TsNs
	}
	f.eng.EventRef(ev)
	if f.final == nil {
		if f.fallback == nil {
			f.fallback = &aggregate.EventHists{}
		}
		f.fallback.Add(ev)
	}
}

// EndNs is when the recording says tracing stopped, else the newest time
// in it (an event, a snapshot, a lost or procfs record), and never before
// tracing started.
func (f *Feeder) EndNs() uint64 {
	if f.end != nil && f.end.EndNs > 0 {
		return f.end.EndNs
	}
	return max(f.eng.LastNs(), f.lastNs, f.h.StartNs)
}

// Finish closes the remaining windows and builds the report; blocks is
// how many blocks the reader got through.
func (f *Feeder) Finish(blocks int) *output.Report {
	f.closes.End() // the end closes everything, as the live run did
	endNs := f.EndNs()
	f.eng.Finish(endNs)
	snap := f.final
	var notes []string
	if snap == nil {
		snap = f.fromEvents()
		notes = append(notes, "the recording has no final kernel snapshot; totals come from the recorded events")
	}
	own := f.eng.End(endNs, "")
	var end run.End
	switch {
	case f.end != nil && f.h.FlightRecorder:
		// A dump holds only the newest blocks: count what it holds.
		end = own
		end.DurationNs = endNs - f.firstEvNs
		end.MemoryCgroup = f.end.MemoryCgroup
		if f.end.Note != "" {
			notes = append([]string{f.end.Note}, notes...)
		}
		notes = append(notes, "a flight recording: only the most recent data")
	case f.end != nil:
		end = *f.end
		if f.end.Note != "" {
			notes = append([]string{f.end.Note}, notes...)
		}
		if f.end.Dropped > 0 {
			notes = append(notes, fmt.Sprintf("the recorder dropped %d events (disk too slow)", f.end.Dropped))
		}
	case f.stopped:
		end = own
		notes = append(notes, fmt.Sprintf("the replay was stopped %s into the recording: what follows was not replayed",
			time.Duration(end.DurationNs).Round(time.Millisecond)))
	default:
		end = own
		notes = append(notes, fmt.Sprintf("the recording was cut short after %d blocks", blocks))
	}
	end.Note = strings.Join(notes, "; ")
	rep := output.NewReport(f.eng.Run(), end, f.eng.Summary(snap), f.eng.Analysis(), f.opt.TopThreads)
	if f.doc != nil {
		rep.Findings = f.doc.Findings
	}
	return rep
}

// fromEvents is the rebuilt snapshot, with the last lost count.
func (f *Feeder) fromEvents() *stall.Snapshot {
	s := &stall.Snapshot{}
	if f.fallback != nil {
		s = f.fallback.Snapshot()
	}
	s.LostEvents = f.eng.Lost()
	return s
}

// pacer sleeps so events come out at speed times their recorded pace.
type pacer struct {
	speed   float64
	started time.Time
	firstNs uint64
}

func (p *pacer) wait(ctx context.Context, ts uint64) error {
	if p.speed <= 0 {
		return ctx.Err()
	}
	if p.firstNs == 0 {
		p.firstNs = ts
	}
	if ts < p.firstNs {
		return nil
	}
	due := p.started.Add(time.Duration(float64(ts-p.firstNs) / p.speed))
	if wait := time.Until(due); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
