// Package engine turns a run's stall events and request latencies into
// what numatrace reports: per-window totals, latency spikes and what they
// are charged to, and the final report. It knows nothing of BPF, files or
// terminals: the live tracer (internal/session) and a recording
// (internal/replay) feed it the same events, and front ends are Sinks.
//
// An Engine is used from one goroutine.
package engine

import (
	"strconv"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// Grace is how long after a window ends its events may still arrive: a
// window closes this long after its end, live and in replay alike.
const Grace = 250 * time.Millisecond

// Sink receives stalls as they arrive and windows as they close. It must
// not block: the engine runs in the loop that takes the events.
type Sink interface {
	// Stall's event is valid only during the call: keep a copy. It is a
	// stall (stall.KindStall) or a serving thread's wait (stall.KindWait),
	// which a sink that shows stalls alone leaves out.
	Stall(*stall.Event) error
	Window(*aggregate.Window) error
	Flush() error
}

// AnalysisSink is a Sink that also shows the spike analysis: it gets the
// engine's analysis after windows close, as often as its cost allows
// (about 2% of a core), and always at the end.
type AnalysisSink interface {
	Analysis(*correlate.Result)
}

// Options configure an engine beyond what the run's description says.
type Options struct {
	Sinks []Sink
	// Spikes overrides spike detection settings; zero fields come from
	// the run's description (K, floor, start and wall clock) or the
	// defaults.
	Spikes correlate.Config
	// MaxWindows bounds the windows the spike analysis keeps (0:
	// DefaultMaxWindows); past it, the oldest are dropped.
	MaxWindows int
	// LateLatency lets a window's statistics that come after the window
	// closed still join the analysis. Replays of recordings before format
	// 1.3 need it: they close windows by event time, often before the
	// window's latency record is read. Live, a late reading is dropped.
	LateLatency bool
}

// DefaultMaxWindows keeps six days of one-second windows for the spike
// analysis, about 150 bytes each.
const DefaultMaxWindows = 1 << 19

// Engine aggregates one run.
type Engine struct {
	run run.Description
	agg *aggregate.Aggregator
	// scratch is what sinks get a pointer to: taking an argument's
	// address would move every event to the heap.
	scratch  stall.Event
	spikeCfg correlate.Config
	sinks    []Sink
	analysts []AnalysisSink

	// The spike analysis: latency per window, and every closed window's
	// summary while a latency source is set.
	lat        *latency.Windows
	det        *correlate.Detector
	series     []correlate.Window
	maxWindows int
	trimmed    uint64 // windows dropped from the front of series
	before     uint64 // windows that closed before the analysis started
	analysis   *correlate.Result
	stale      bool // analysis is out of date
	// The analysis reruns over the whole run; a view gets it at most at
	// a rate that keeps its cost near 2% of a core.
	computeCost time.Duration
	published   time.Time

	lateLatency    bool
	lost, lastLost uint64
	// pressure is memory PSI's "some" total at the latest reading, and
	// lastPressure at the last close that closed windows: the growth
	// between is the closed windows'.
	pressure, lastPressure    uint64
	pressureSet, havePressure bool
	windows                   uint64
	lastNs                    uint64 // the newest event's time
	sinkErr                   error
}

// New starts an engine for the run d describes: its windows start at
// d.StartNs and last d.WindowNs, and with spike settings (a latency
// source) it correlates latency with stalls.
func New(d run.Description, opt Options) *Engine {
	if d.WindowNs == 0 {
		d.WindowNs = uint64(time.Second)
	}
	e := &Engine{run: d, agg: aggregate.New(d.Windows()), spikeCfg: spikeConfig(d, opt.Spikes),
		sinks: opt.Sinks, maxWindows: opt.MaxWindows, lateLatency: opt.LateLatency}
	if e.maxWindows <= 0 {
		e.maxWindows = DefaultMaxWindows
	}
	for _, s := range opt.Sinks {
		if a, ok := s.(AnalysisSink); ok {
			e.analysts = append(e.analysts, a)
		}
	}
	if d.Correlates() {
		e.correlate()
	}
	return e
}

// spikeConfig fills what cfg leaves zero from the run's description.
func spikeConfig(d run.Description, cfg correlate.Config) correlate.Config {
	if cfg.K == 0 {
		cfg.K = d.Spikes.K
	}
	if cfg.FloorNs == 0 {
		cfg.FloorNs = d.Spikes.FloorNs
	}
	if cfg.SLONs == 0 {
		cfg.SLONs = d.Spikes.SLONs
	}
	if cfg.On == run.P99 {
		cfg.On = d.Spikes.On
	}
	if cfg.Function == "" {
		cfg.Function = d.LatencyFunction
	}
	cfg.WindowNs = d.WindowNs
	cfg.Untraced = stall.Untraced(d.Probes)
	cfg.Source = d.Latency.Kind
	cfg.PressureOwn = d.PressureIsTargets()
	if cfg.StartNs == 0 {
		cfg.StartNs = d.StartNs
	}
	if _, known := d.WallAt(d.StartNs); cfg.WallAt == nil && known {
		cfg.WallAt = func(mono uint64) time.Time { t, _ := d.WallAt(mono); return t }
	}
	return cfg
}

// correlate starts the spike analysis.
func (e *Engine) correlate() {
	if e.lat == nil {
		e.before = e.windows
		e.lat = latency.NewWindows(e.run.Windows(), e.spikeCfg.SLONs)
		e.det = correlate.NewDetector(e.spikeCfg)
		e.stale = true
	}
}

// Run is the run's description.
func (e *Engine) Run() run.Description { return e.run }

// Event takes one event from the source, in the order the source saw
// them. Stalls and waits go on to the sinks at once.
func (e *Engine) Event(ev stall.Event) { e.EventRef(&ev) }

// EventRef takes one event by reference, which it does not keep: replay
// hands millions of events from the reader's own buffer.
func (e *Engine) EventRef(ev *stall.Event) {
	e.agg.Add(ev)
	e.lastNs = max(e.lastNs, ev.TsNs)
	if ev.Kind == stall.KindExit || len(e.sinks) == 0 {
		return
	}
	e.scratch = *ev
	for _, s := range e.sinks {
		e.keep(s.Stall(&e.scratch))
	}
}

// Latency files one reading of the service's latency under its window.
// A reading for a window that has closed is counted late and dropped.
func (e *Engine) Latency(r latency.Reading) {
	e.correlate()
	if r.Window != nil {
		if e.lateLatency && e.lat.Taken(r.Window.Index) && e.attachLate(*r.Window) {
			e.lat.Attached(*r.Window)
			return
		}
		e.lat.Put(*r.Window)
		return
	}
	if r.Samples != nil {
		for _, smp := range r.Samples {
			e.lat.Add(smp)
		}
		return
	}
	e.lat.Add(r.Sample)
}

// attachLate files a closed window's statistics in the analysis.
func (e *Engine) attachLate(st latency.Stats) bool {
	skip := e.before + e.trimmed
	if st.Index < skip || st.Index-skip >= uint64(len(e.series)) {
		return false
	}
	w := &e.series[st.Index-skip]
	if w.Index != st.Index || w.Latency != nil {
		return false
	}
	w.Latency = &st
	e.stale = true
	return true
}

// SetPressure is memory PSI's "some" total now (cumulative): the windows
// the next Close closes get its growth since the last close that closed
// any. Only a reading taken as windows close counts, as a recording
// keeps it (with the close), so a replay weighs the same figures; the
// first only starts the count.
func (e *Engine) SetPressure(totalNs uint64) { e.pressure, e.pressureSet = totalNs, true }

// SetLost is the kernel's count of dropped events so far: the next
// window to close carries the increase.
func (e *Engine) SetLost(total uint64) { e.lost = max(e.lost, total) }

// Close closes every window that ended at or before nowNs, in order and
// without gaps, and returns them with how many were latency spikes (see
// closeBatches for a long stretch).
func (e *Engine) Close(nowNs uint64) ([]*aggregate.Window, int) {
	return e.closeBatches(func(limit int) []*aggregate.Window { return e.agg.CloseBatch(nowNs, limit) })
}

// Finish closes every window up to the one holding endNs, which may be
// partial, and flushes the sinks.
func (e *Engine) Finish(endNs uint64) ([]*aggregate.Window, int) {
	ws, spikes := e.closeBatches(func(limit int) []*aggregate.Window { return e.agg.CloseAllBatch(endNs, limit) })
	if e.lat != nil {
		e.lat.Drop() // samples after the last window: counted, not held
	}
	for _, s := range e.sinks {
		e.keep(s.Flush())
	}
	e.publish(true)
	return ws, spikes
}

// closeBatch bounds the windows closed, and held, at once. A live run
// closes a window or two at a time; a replay can meet a quiet stretch of
// millions (a recording's span allows 4 million windows).
const closeBatch = 4096

// closeBatches closes windows batch by batch (next gives the next batch),
// each through the sinks and the analysis before the next is made. It
// returns them all, or when more than closeBatch closed, those that carry
// the service's latency and the last one: what a caller records.
func (e *Engine) closeBatches(next func(limit int) []*aggregate.Window) ([]*aggregate.Window, int) {
	var out []*aggregate.Window
	spikes, n := 0, 0
	for {
		ws := next(closeBatch)
		if len(ws) == 0 {
			break
		}
		_, s := e.closed(ws)
		spikes += s
		if n += len(ws); n <= closeBatch {
			out = append(out, ws...)
			continue
		}
		kept := out[:0:0]
		for _, w := range append(out, ws...) {
			if w.Latency != nil {
				kept = append(kept, w)
			}
		}
		if last := ws[len(ws)-1]; len(kept) == 0 || kept[len(kept)-1] != last {
			kept = append(kept, last)
		}
		out = kept
	}
	return out, spikes
}

func (e *Engine) closed(ws []*aggregate.Window) ([]*aggregate.Window, int) {
	if len(ws) == 0 {
		return nil, 0
	}
	ws[len(ws)-1].LostEvents = e.lost - e.lastLost
	e.lastLost = e.lost
	if e.pressureSet {
		// All to the newest: live, windows close one at a time.
		if e.havePressure {
			last := ws[len(ws)-1]
			last.PressureNs, last.HasPressure = max(e.pressure, e.lastPressure)-e.lastPressure, true
		}
		e.lastPressure, e.havePressure = max(e.pressure, e.lastPressure), true
	}
	e.windows += uint64(len(ws))
	spikes := 0
	for _, w := range ws {
		if e.lat != nil {
			w.Latency = e.lat.Take(w.Index)
			if e.spike(e.keepWindow(w)) {
				spikes++
			}
		}
		for _, s := range e.sinks {
			e.keep(s.Window(w))
		}
	}
	for _, s := range e.sinks {
		e.keep(s.Flush())
	}
	e.publish(false)
	return ws, spikes
}

// spike says whether a closing window is a spike or a frozen window, as
// it closes: the flight recorder dumps on it. The detector's call is the
// one the report makes of the same window: windows in which nothing
// completed count once requests complete again (until then, the load
// may have stopped).
func (e *Engine) spike(w *correlate.Window) bool {
	j := e.det.Judge(w)
	return j.Spike || j.Gap || j.Frozen
}

// keepWindow adds a closed window to the spike analysis's series, and
// returns what the analysis keeps of it.
func (e *Engine) keepWindow(w *aggregate.Window) *correlate.Window {
	sum := correlate.Summarize(w)
	e.series = append(e.series, sum)
	// Trim in batches of a quarter, not a window at a time: a shift of
	// half a million windows a second would cost more than the analysis.
	if len(e.series) >= e.maxWindows+e.maxWindows/4 {
		n := len(e.series) - e.maxWindows
		e.series = append(e.series[:0], e.series[n:]...)
		e.trimmed += uint64(n)
	}
	e.stale = true
	return &sum
}

// publish hands the analysis to the sinks that show it: always at the
// end, otherwise when the last one is old enough for its cost.
func (e *Engine) publish(final bool) {
	if len(e.analysts) == 0 || e.lat == nil {
		return
	}
	if !final && time.Since(e.published) < 50*e.computeCost {
		return
	}
	t0 := time.Now()
	a := e.Analysis()
	e.published, e.computeCost = time.Now(), time.Since(t0)
	for _, s := range e.analysts {
		s.Analysis(a)
	}
}

// Analysis is the spike analysis over every window closed so far; nil
// when the run has no latency source. The view and the report both show
// this one.
func (e *Engine) Analysis() *correlate.Result {
	if e.lat == nil {
		return nil
	}
	if e.stale || e.analysis == nil {
		e.analysis = correlate.Analyze(e.series, e.spikeCfg)
		if e.trimmed > 0 {
			e.analysis.Conclusion += " (the analysis keeps the last " + itoa(uint64(len(e.series))) +
				" windows; " + itoa(e.trimmed) + " older ones were dropped)"
		}
		e.stale = false
	}
	return e.analysis
}

// AnalysisAt is the spike analysis as it stood when the first n windows
// had closed: what a live view showed at that point. A replay's view
// seeks with it.
func (e *Engine) AnalysisAt(n uint64) *correlate.Result {
	if e.lat == nil {
		return nil
	}
	if n >= e.windows {
		return e.Analysis()
	}
	kept := uint64(0)
	if skip := e.before + e.trimmed; n > skip {
		kept = n - skip
	}
	return correlate.Analyze(e.series[:kept], e.spikeCfg)
}

// keep remembers the first sink error: a broken pipe shows when the
// summary is written, and tracing goes on meanwhile.
func (e *Engine) keep(err error) {
	if err != nil && e.sinkErr == nil {
		e.sinkErr = err
	}
}

// SinkErr is the first error a sink returned.
func (e *Engine) SinkErr() error { return e.sinkErr }

// Events is how many events the engine took.
func (e *Engine) Events() uint64 { return e.agg.Events }

// LateEvents is how many events arrived after their window closed
// (counted in the oldest open one).
func (e *Engine) LateEvents() uint64 { return e.agg.LateEvents }

// Windows is how many windows closed.
func (e *Engine) Windows() uint64 { return e.windows }

// Lost is the kernel's count of dropped events so far.
func (e *Engine) Lost() uint64 { return e.lost }

// LastNs is the newest event's time.
func (e *Engine) LastNs() uint64 { return e.lastNs }

// LateLatency is how many latency readings came after their window closed.
func (e *Engine) LateLatency() uint64 {
	if e.lat == nil {
		return 0
	}
	a := e.lat.Account()
	return a.Late + a.LateWindows
}

// LatencyAccount is what the latency source gave up to nowNs and what of
// it was left out; nil without a latency source. The source's own skips
// (Source.Skipped) are the caller's to add.
func (e *Engine) LatencyAccount(nowNs uint64) *latency.Account {
	if e.lat == nil {
		return nil
	}
	a := e.lat.Account()
	a.StartNs, a.EndNs = e.run.StartNs, max(nowNs, e.run.StartNs)
	var clk latency.Clock
	if !e.run.Started.IsZero() {
		clk = latency.Clock{WallNs: e.run.Started.UnixNano(), MonoNs: int64(e.run.StartNs)}
	}
	a.Guess(clk)
	return &a
}

// Name is the newest name the events gave thread tid ("" if none came):
// after an exec, the new program's.
func (e *Engine) Name(tid uint32) string { return e.agg.Name(tid) }

// Summary combines the kernel's exact aggregates with the names and
// exits the events brought.
func (e *Engine) Summary(final *stall.Snapshot) aggregate.Summary { return e.agg.Summarize(final) }

// End is how this run ended at endNs, with its own counts.
func (e *Engine) End(endNs uint64, note string) run.End {
	return run.End{EndNs: endNs, DurationNs: endNs - e.run.StartNs, Events: e.Events(),
		LateEvents: e.LateEvents(), Windows: e.Windows(), Note: note, Latency: e.LatencyAccount(endNs)}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
