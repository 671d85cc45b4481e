// Package session runs one live trace: it takes the kernel's events and
// the service's latencies into the engine, closes windows on the clock,
// records what a recording needs, and when told to stop, detaches, drains
// what is left and takes the kernel's final snapshot. It depends on small
// interfaces, so the loop is tested without root or BPF.
package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/latency/source"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/psi"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// Kernel is the loaded tracer as the session sees it.
type Kernel interface {
	// Stream calls sink for every event the kernel submits until Stop
	// has been called and everything submitted before it was delivered.
	Stream(sink func(stall.Event)) error
	// Stop detaches every probe, so no new events come, and makes Stream
	// drain and return. The maps stay readable.
	Stop() error
	Snapshot() (*stall.Snapshot, error)
	LostEvents() (uint64, error)
	AddPIDs([]uint32) error
	// BadRecords counts records that could not be read or decoded.
	BadRecords() uint64
}

// Recorder takes everything a recording needs. It must not block:
// record.Writer drops (and counts) what the disk cannot take.
type Recorder interface {
	Event(*stall.Event)
	Snapshot(record.Snapshot) error
	Procfs(record.Procfs) error
	Lost(record.Lost)
	Latency(latency.Stats) error
	Flush()
}

// Options configure a session.
type Options struct {
	// Now reads CLOCK_MONOTONIC in ns, the clock of the kernel's timestamps.
	Now func() uint64
	// Latency, if set, is the service's latency source.
	Latency source.Source
	// Warn hears about problems that do not stop tracing (a failed scrape).
	Warn func(error)
	// Rescan, if set, lists processes to add to the target set; it runs
	// every RescanEvery (a cgroup's membership).
	Rescan      func() ([]uint32, error)
	RescanEvery time.Duration
	// Gone is closed when the target no longer exists.
	Gone <-chan struct{}

	// Recorder, if set, receives every event, and every RecordEvery the
	// kernel's aggregates and a procfs reading (ReadProcfs). Its open
	// block is closed every FlushEvery too, so a crash, or a kill -9
	// during the incident, loses at most that much.
	Recorder    Recorder
	RecordEvery time.Duration
	FlushEvery  time.Duration
	ReadProcfs  func(monoNs uint64) (record.Procfs, error)
	// Dump is called, in the session's goroutine, on each DumpRequests
	// message, and with DumpOnSpike whenever a closing window is a
	// latency spike or a frozen window: a flight recorder takes what it
	// holds, and returns the writing of it. That runs on a goroutine of
	// its own while the session goes on, one dump at a time: one asked
	// for meanwhile is not taken (OnDump hears ErrDumpBusy). The run's end
	// waits DumpWait (DefaultDumpWait if 0) at most for a dump still being
	// written.
	DumpRequests <-chan struct{}
	Dump         func(record.Snapshot) (write func() error, err error)
	DumpOnSpike  bool
	DumpWait     time.Duration
	// OnDump reports each dump's outcome, in the session's goroutine.
	OnDump func(error)

	// OnSnapshot, if set, receives the kernel's aggregates every
	// SnapshotEvery (the interactive view's exact histograms and
	// migrations), and the final ones. It must not block.
	OnSnapshot    func(*stall.Snapshot)
	SnapshotEvery time.Duration

	// PSI, if set, reads the kernel's memory pressure as the session
	// starts and as it stops: the run's End says what PSI counted beside
	// what numatrace timed.
	PSI *psi.Sampler
}

// Result is how a finished session ended.
type Result struct {
	// End has the run's end time and counts; the caller adds the note.
	End        run.End
	Final      *stall.Snapshot // the kernel's aggregates when tracing stopped
	TargetGone bool
}

// Run traces until ctx ends or the target goes, then returns how it ended.
// The engine's header says when the run started and how long a window is.
func Run(ctx context.Context, k Kernel, eng *engine.Engine, opt Options) (*Result, error) {
	s := &tracing{opt: opt, k: k, eng: eng}
	var psiStart psi.Snapshot
	if opt.PSI != nil {
		psiStart = opt.PSI.Take()
	}
	s.record()
	events := make(chan stall.Event, 1<<16)
	var streamErr error // read once events is closed
	go func() {
		defer close(events)
		streamErr = k.Stream(func(ev stall.Event) { events <- ev })
	}()
	lat := s.startLatency(ctx)

	s.loop(ctx, events, lat)

	// Stop the source first, so the drain ends and the snapshot covers the
	// same span as the stream.
	stopErr := k.Stop()
	var pressure []run.Pressure
	if opt.PSI != nil {
		pressure = pressures(psi.Between(psiStart, opt.PSI.Take()))
	}
	for ev := range events {
		s.add(ev)
	}
	s.stopLatency(lat)
	endNs := opt.Now()
	s.close(endNs, true)
	s.waitDump()
	if streamErr != nil {
		return nil, streamErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	snap, err := k.Snapshot()
	if err != nil {
		return nil, err
	}
	if opt.OnSnapshot != nil {
		opt.OnSnapshot(snap)
	}
	if r := opt.Recorder; r != nil {
		if err := r.Snapshot(record.Snapshot{MonoNs: endNs, Final: true, Data: snap}); err != nil {
			return nil, err
		}
		s.procfs(endNs)
	}
	end := eng.End(endNs, "")
	end.BadRecords = k.BadRecords()
	end.Pressure = pressure
	if end.Latency != nil {
		end.Latency.Skipped = opt.Latency.Skipped()
	}
	return &Result{End: end, Final: snap, TargetGone: s.gone}, nil
}

// pressures are PSI's spans as the run's end keeps them.
func pressures(spans []psi.Span) []run.Pressure {
	var out []run.Pressure
	for _, sp := range spans {
		p := run.Pressure{Scope: sp.Scope.Name, FromNs: sp.From, ToNs: sp.To,
			SomeNs: uint64(sp.Growth.Some), FullNs: uint64(sp.Growth.Full)}
		if sp.Err != nil {
			p.Err = sp.Err.Error()
		}
		out = append(out, p)
	}
	return out
}

// tracing is a session while it runs.
type tracing struct {
	opt  Options
	k    Kernel
	eng  *engine.Engine
	gone bool
	jobs []*job

	latStop context.CancelFunc
	latDone chan struct{}

	// dumping is where the dump being written says how it went; nil
	// when none is.
	dumping chan error

	// The latest memory PSI reading for the windows, and when the next
	// is due.
	psiLast, psiNext uint64
	psiHave          bool

	warnMu   sync.Mutex // warn is called from the reading goroutines too
	lastWarn string
	saidBad  bool                         // bad records were said
	said     map[latency.ProblemKind]bool // the kinds of discarded input said so far
}

// job is periodic work done on the loop's tick.
type job struct {
	every time.Duration
	due   time.Time
	run   func()
}

// warn passes on a problem that does not stop tracing, once until a
// different one comes (a cgroup that fails every rescan says so once).
func (s *tracing) warn(err error) {
	if s.opt.Warn == nil || err == nil {
		return
	}
	s.warnMu.Lock()
	repeat := err.Error() == s.lastWarn
	s.lastWarn = err.Error()
	s.warnMu.Unlock()
	if !repeat {
		s.opt.Warn(err)
	}
}

// startLatency runs the latency source until the session stops.
func (s *tracing) startLatency(ctx context.Context) <-chan latency.Reading {
	if s.opt.Latency == nil {
		return nil
	}
	out := make(chan latency.Reading, 1<<14)
	ctx, s.latStop = context.WithCancel(ctx)
	s.latDone = make(chan struct{})
	go func() {
		defer close(s.latDone)
		s.warn(s.opt.Latency.Run(ctx, out, s.warn))
	}()
	return out
}

// stopLatency ends the source and takes what it had sent.
func (s *tracing) stopLatency(lat <-chan latency.Reading) {
	if s.latStop == nil {
		return
	}
	s.latStop()
	<-s.latDone
	for {
		select {
		case r := <-lat:
			s.eng.Latency(r)
		default:
			return
		}
	}
}

// loop takes events and latencies until the run ends. Everything periodic
// (closing windows, rescans, snapshots, records) runs on one tick.
func (s *tracing) loop(ctx context.Context, events <-chan stall.Event, lat <-chan latency.Reading) {
	window := time.Duration(s.eng.Run().WindowNs)
	period := window / 4
	s.every(s.opt.RescanEvery, s.opt.Rescan != nil, s.rescan)
	s.every(s.opt.RecordEvery, s.opt.Recorder != nil, s.record)
	s.every(s.opt.FlushEvery, s.opt.Recorder != nil, func() { s.opt.Recorder.Flush() })
	s.every(s.opt.SnapshotEvery, s.opt.OnSnapshot != nil, s.snapshot)
	for _, j := range s.jobs {
		period = min(period, j.every)
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return // the stream stopped on its own
			}
			s.add(ev)
		case r := <-lat:
			s.eng.Latency(r)
		case now := <-tick.C:
			s.tick(now, events, lat)
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

// every adds a periodic job, if it is wanted.
func (s *tracing) every(d time.Duration, wanted bool, f func()) {
	if wanted && d > 0 {
		s.jobs = append(s.jobs, &job{every: d, due: time.Now().Add(d), run: f})
	}
}

// tick closes the windows whose grace has run out, and runs the jobs
// that are due. What reached the session before the windows close is in
// them: a loop that fell behind (a loaded machine, a slow dump) finds
// the tick ready beside a queue of events and readings, and select would
// take the tick first as often as not.
func (s *tracing) tick(now time.Time, events <-chan stall.Event, lat <-chan latency.Reading) {
	s.dumpWritten()
	if mono, grace := s.opt.Now(), uint64(engine.Grace); mono > grace {
		s.arrived(events, lat)
		s.close(mono-grace, false)
	}
	for _, j := range s.jobs {
		if !now.Before(j.due) {
			j.due = now.Add(j.every)
			j.run()
		}
	}
}

// arrived takes the events and latency readings already queued, and no
// more: a stream that keeps coming cannot hold the tick up.
func (s *tracing) arrived(events <-chan stall.Event, lat <-chan latency.Reading) {
	for n := len(events); n > 0; n-- {
		ev, ok := <-events
		if !ok {
			break
		}
		s.add(ev)
	}
	for n := len(lat); n > 0; n-- {
		s.eng.Latency(<-lat)
	}
}

func (s *tracing) add(ev stall.Event) {
	if s.opt.Recorder != nil {
		s.opt.Recorder.Event(&ev)
	}
	s.eng.Event(ev)
}

// close closes the windows that ended by upTo (all of them when final)
// and records where: a replay closes its windows at the same points.
func (s *tracing) close(upTo uint64, final bool) {
	if lost, err := s.k.LostEvents(); err == nil {
		s.eng.SetLost(lost)
	}
	closeFn := s.eng.Close
	if final {
		closeFn = s.eng.Finish
	}
	psiNs, psiOK := s.pressure(upTo)
	ws, spikes := closeFn(upTo)
	if len(ws) == 0 {
		return
	}
	s.discards(upTo)
	if r := s.opt.Recorder; r != nil {
		for _, w := range ws {
			if w.Latency != nil {
				r.Latency(*w.Latency)
			}
		}
		r.Lost(record.Lost{MonoNs: upTo, LostEvents: s.eng.Lost(), PSISomeNs: psiNs, PSI: psiOK})
	}
	if spikes > 0 && s.opt.DumpOnSpike {
		s.dump()
	}
}

// pressure reads memory PSI's "some" total for the engine's windows, as
// they are about to close: the target's cgroup's where it has one, else
// the system's. Only when windows close, at most once a window.
func (s *tracing) pressure(upTo uint64) (uint64, bool) {
	if s.opt.PSI == nil || upTo < s.psiNext {
		return s.psiLast, s.psiHave
	}
	s.psiNext = upTo + s.eng.Run().WindowNs/2
	snap := s.opt.PSI.Take()
	for i := len(snap.Readings) - 1; i >= 0; i-- { // the group is listed after the system (Snapshot.Scope)
		if r := snap.Readings[i]; r.Err == nil {
			s.psiLast, s.psiHave = uint64(r.Totals.Some), true
			s.eng.SetPressure(s.psiLast)
			break
		}
	}
	return s.psiLast, s.psiHave
}

// discards says, the first time each kind comes up, what the run has
// had to leave out: latency readings outside the trace or too late for
// their window, and ring-buffer records that could not be decoded. The
// report carries the final counts. (A source says its own skips, such as
// malformed lines, as it meets them.)
func (s *tracing) discards(nowNs uint64) {
	if s.said == nil {
		s.said = map[latency.ProblemKind]bool{}
	}
	if n := s.k.BadRecords(); n > 0 && !s.saidBad {
		s.saidBad = true
		s.warn(errors.New(prose.BadRecords(n) + " (more are counted in the report)"))
	}
	a := s.eng.LatencyAccount(nowNs)
	if a == nil || a.Outside()+a.Late+a.LateWindows == 0 {
		return
	}
	for _, p := range a.Problems() {
		switch p.Kind {
		case latency.ProblemOutside, latency.ProblemLate, latency.ProblemLateWindows:
			if !s.said[p.Kind] {
				s.said[p.Kind] = true
				s.warn(errors.New(p.Text + " (more are counted in the report)"))
			}
		}
	}
}

func (s *tracing) rescan() {
	pids, err := s.opt.Rescan()
	if err == nil {
		err = s.k.AddPIDs(pids)
	}
	s.warn(err)
}

func (s *tracing) snapshot() {
	if snap, err := s.k.Snapshot(); err == nil {
		s.opt.OnSnapshot(snap)
	}
}

// record writes the kernel's aggregates and a procfs reading, and closes
// the open block.
func (s *tracing) record() {
	r := s.opt.Recorder
	if r == nil {
		return
	}
	now := s.opt.Now()
	if snap, err := s.k.Snapshot(); err == nil {
		s.warn(r.Snapshot(record.Snapshot{MonoNs: now, Data: snap}))
	}
	s.procfs(now)
	r.Flush()
}

func (s *tracing) procfs(now uint64) {
	if s.opt.ReadProcfs == nil {
		return
	}
	if p, err := s.opt.ReadProcfs(now); err == nil {
		s.warn(s.opt.Recorder.Procfs(p))
	}
}

// DefaultDumpWait is how long the run's end waits for a dump still being
// written, when Options.DumpWait is 0.
const DefaultDumpWait = 10 * time.Second

// ErrDumpBusy is what OnDump hears of a dump asked for while the last one
// is still being written: it is not taken, nor kept for later.
var ErrDumpBusy = errors.New("the last dump is still being written: this one is not taken")

// UnfinishedDumpError is what OnDump hears when the run ended with a dump
// still being written, and stopped waiting for it.
type UnfinishedDumpError struct{ Waited time.Duration }

func (e *UnfinishedDumpError) Error() string {
	return fmt.Sprintf("the dump was still being written %s after the run ended: not waited for further, it may be incomplete", e.Waited)
}

// dump takes what the flight recorder holds, on the loop, and writes it
// on a goroutine of its own: a slow file cannot hold the session up.
func (s *tracing) dump() {
	if s.opt.Dump == nil {
		return
	}
	if s.dumping != nil {
		s.onDump(ErrDumpBusy)
		return
	}
	snap, err := s.k.Snapshot()
	var write func() error
	if err == nil {
		write, err = s.opt.Dump(record.Snapshot{MonoNs: s.opt.Now(), Final: true, Data: snap})
	}
	if err != nil {
		s.onDump(err)
		return
	}
	done := make(chan error, 1) // the writer never waits for the session
	s.dumping = done
	go func() { done <- write() }()
}

// dumpWritten takes the outcome of the dump being written, if it is
// done: asked on each tick, so said at most a tick after.
func (s *tracing) dumpWritten() {
	select {
	case err := <-s.dumping: // nil when no dump is being written: never ready
		s.dumped(err)
	default:
	}
}

// dumped takes the outcome of the dump that was being written.
func (s *tracing) dumped(err error) {
	s.dumping = nil
	s.onDump(err)
}

// waitDump waits, as the run ends, for the dump being written, if any,
// at most DumpWait.
func (s *tracing) waitDump() {
	if s.dumping == nil {
		return
	}
	wait := s.opt.DumpWait
	if wait <= 0 {
		wait = DefaultDumpWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-s.dumping:
		s.dumped(err)
	case <-t.C:
		s.dumped(&UnfinishedDumpError{Waited: wait})
	}
}

func (s *tracing) onDump(err error) {
	if s.opt.OnDump != nil {
		s.opt.OnDump(err)
	}
}
