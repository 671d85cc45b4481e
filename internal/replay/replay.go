// Package replay plays a recording back through the same aggregation and
// front ends as a live trace: it is one more source of the same events.
package replay

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/stall"
)

// Options configure a replay.
type Options struct {
	// Speed scales the recording's time: 1 replays in real time, 10 ten
	// times faster; 0 replays as fast as possible.
	Speed float64
	// Sink, if set, receives stalls and windows as they replay.
	Sink session.Sink
	// Grace matches the live loop's: a window closes this long after its end.
	Grace time.Duration
	// TopThreads for the text report.
	TopThreads int
	// OnSnapshot and OnProcfs, if set, receive the recording's kernel
	// snapshots and procfs readings in order with the events.
	OnSnapshot func(record.Snapshot)
	OnProcfs   func(record.Procfs)
}

// Run replays r and returns the report the live run would have printed.
// A recording cut short still replays every complete block; the report's
// note says so.
func Run(ctx context.Context, r *record.Reader, opt Options) (*output.Report, error) {
	h := r.Header()
	window := h.WindowNs
	if window == 0 {
		window = uint64(time.Second)
	}
	p := &player{opt: opt, agg: aggregate.New(h.StartNs, window), grace: uint64(opt.Grace)}
	if err := p.play(ctx, r); err != nil {
		return nil, err
	}
	endNs := p.lastNs
	if p.end != nil && p.end.EndNs > 0 {
		endNs = p.end.EndNs
	}
	p.emit(p.agg.CloseAll(endNs))
	if opt.Sink != nil {
		opt.Sink.Flush()
	}

	if len(p.latencies) > 0 || h.SpikeK > 0 {
		cfg := correlate.Config{K: h.SpikeK, FloorNs: h.SpikeFloorNs, StartNs: h.StartNs,
			WallAt: func(mono uint64) time.Time { return h.Started.Add(time.Duration(mono - h.StartNs)) }}
		p.correlation = correlate.Analyze(p.latencies, p.closed, cfg)
	}
	snap := p.final
	var notes []string
	if snap == nil {
		snap = p.fromEvents()
		notes = append(notes, "the recording has no final kernel snapshot; totals come from the recorded events")
	}
	rep := &output.Report{
		Target:      h.Target,
		Kernel:      h.Host.Kernel,
		Summary:     p.agg.Summarize(snap),
		Events:      p.agg.Events,
		LateEvents:  p.agg.LateEvents,
		Windows:     p.windows,
		TopThreads:  opt.TopThreads,
		Correlation: p.correlation,
	}
	for c, ns := range h.MinEventNs {
		if cause, err := stall.ParseCause(c); err == nil {
			rep.MinEventNs[cause] = ns
		}
	}
	for _, pr := range h.Probes {
		rep.Probes = append(rep.Probes, output.ProbeResult{Name: pr.Name, Attached: pr.Attached, Error: pr.Error})
	}
	if p.end != nil && h.FlightRecorder {
		// A dump holds only the newest blocks: count what it holds.
		rep.DurationNs = endNs - p.firstEvNs
		if p.end.Note != "" {
			notes = append([]string{p.end.Note}, notes...)
		}
		notes = append(notes, "a flight recording: only the most recent data")
	} else if p.end != nil {
		rep.DurationNs, rep.Events, rep.LateEvents, rep.Windows = p.end.DurationNs, p.end.Events, p.end.LateEvents, p.end.Windows
		if p.end.Note != "" {
			notes = append([]string{p.end.Note}, notes...)
		}
		if p.end.Dropped > 0 {
			notes = append(notes, fmt.Sprintf("the recorder dropped %d events (disk too slow)", p.end.Dropped))
		}
	} else {
		rep.DurationNs = endNs - h.StartNs
		notes = append(notes, fmt.Sprintf("the recording was cut short after %d blocks", r.Blocks()))
	}
	rep.Note = strings.Join(notes, "; ")
	return rep, nil
}

type player struct {
	opt      Options
	agg      *aggregate.Aggregator
	grace    uint64
	final    *stall.Snapshot
	end      *record.End
	lastNs   uint64
	lost     uint64
	lastLost uint64
	windows  uint64
	// fallback holds histograms rebuilt from the events, for a recording
	// cut short before any kernel snapshot; dropped at the first snapshot.
	fallback  *stall.Snapshot
	started   time.Time
	firstNs   uint64
	firstEvNs uint64

	latencies   []latency.Stats
	byIndex     map[uint64]latency.Stats
	closed      []*aggregate.Window
	correlation *correlate.Result
}

func (p *player) play(ctx context.Context, r *record.Reader) error {
	p.started = time.Now()
	for {
		it, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch it.Kind {
		case record.ItemEvent:
			if err := p.pace(ctx, it.Event.TsNs); err != nil {
				return err
			}
			p.event(it.Event)
		case record.ItemSnapshot:
			p.fallback = nil
			p.final = it.Snapshot.Data // the last one wins; the final one is written last
			if p.opt.OnSnapshot != nil {
				p.opt.OnSnapshot(*it.Snapshot)
			}
		case record.ItemProcfs:
			if p.opt.OnProcfs != nil {
				p.opt.OnProcfs(*it.Procfs)
			}
		case record.ItemLost:
			p.lost = it.Lost.LostEvents
		case record.ItemEnd:
			p.end = it.End
		case record.ItemLatency:
			p.latencies = append(p.latencies, *it.Latency)
			if p.byIndex == nil {
				p.byIndex = map[uint64]latency.Stats{}
			}
			p.byIndex[it.Latency.Index] = *it.Latency
		}
	}
}

// pace sleeps so events come out at Speed times their recorded pace.
func (p *player) pace(ctx context.Context, ts uint64) error {
	if p.opt.Speed <= 0 {
		return ctx.Err()
	}
	if p.firstNs == 0 {
		p.firstNs = ts
	}
	if ts < p.firstNs {
		return nil
	}
	due := p.started.Add(time.Duration(float64(ts-p.firstNs) / p.opt.Speed))
	if wait := time.Until(due); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (p *player) event(ev stall.Event) {
	if p.firstEvNs == 0 || ev.TsNs < p.firstEvNs {
		p.firstEvNs = ev.TsNs
	}
	p.agg.Add(ev)
	if p.final == nil {
		p.rebuild(&ev)
	}
	if ev.TsNs > p.lastNs {
		p.lastNs = ev.TsNs
	}
	if p.opt.Sink != nil && ev.Kind == stall.KindStall {
		p.opt.Sink.Stall(&ev)
	}
	if ev.TsNs > p.grace {
		p.emit(p.agg.Close(ev.TsNs - p.grace))
	}
}

func (p *player) emit(ws []*aggregate.Window) {
	if len(ws) == 0 {
		return
	}
	ws[len(ws)-1].LostEvents = p.lost - p.lastLost
	p.lastLost = p.lost
	p.windows += uint64(len(ws))
	for _, w := range ws {
		if st, ok := p.byIndex[w.Index]; ok {
			w.Latency = &st
		}
	}
	p.closed = append(p.closed, ws...)
	if p.opt.Sink == nil {
		return
	}
	for _, w := range ws {
		p.opt.Sink.Window(w)
	}
}

// rebuild adds ev to the histograms rebuilt from the recorded events,
// for recordings cut short before any kernel snapshot.
func (p *player) rebuild(ev *stall.Event) {
	if ev.Kind != stall.KindStall || !ev.Counts() {
		return
	}
	if p.fallback == nil {
		p.fallback = &stall.Snapshot{}
	}
	th := p.fallback.Thread(ev.PID, ev.TID, ev.Comm)
	h := th.Hists[ev.Cause]
	if h == nil {
		h = &stall.Hist{}
		th.Hists[ev.Cause] = h
	}
	h.Add(ev.LongestNs())
}

// fromEvents is the rebuilt snapshot.
func (p *player) fromEvents() *stall.Snapshot {
	s := p.fallback
	if s == nil {
		s = &stall.Snapshot{}
	}
	s.LostEvents = p.lost
	return s
}
