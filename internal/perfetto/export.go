// Package perfetto converts a numatrace recording into Chrome trace-event
// JSON, the format ui.perfetto.dev and chrome://tracing open:
//
//	{"traceEvents":[...],"displayTimeUnit":"ns","metadata":{...}}
//
// Every traced thread gets a track (pid/tid of its events, named from the
// events' comm). A timed stall is a complete slice ("X") on its thread; a
// NUMA task move or task migration, which has no duration, is an instant
// ("i"), as is a thread's exit. Per-window stall time per cause, and the
// drop counters, are counter tracks ("C") on a pseudo-process, pid 0.
//
// Times are CLOCK_MONOTONIC relative to the recording's start (header
// StartNs), in microseconds with nanosecond decimals, so a trace starts
// near 0.
package perfetto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
	"github.com/numatrace/numatrace/internal/wire"
)

// WindowsPID is the pseudo-process holding the counter tracks. Its
// process name is WindowsProcess.
const (
	WindowsPID     = 4194305 // above any real pid (pid_max is 2^22): pid 0 is special to Perfetto
	WindowsProcess = "numatrace windows"
)

// Counter names. A counter event's args are its series: the tracks are
// "stall_ns <cause>" and "lost_events kernel", "lost_events recorder".
const (
	StallCounter = "stall_ns"
	LostCounter  = "lost_events"
)

// DefaultWindowNs is used when neither the options nor the header say.
const DefaultWindowNs = 1_000_000_000

// maxWindowSamples bounds the window counter samples: past it, a run of
// empty windows is one zero sample (the line looks the same).
const maxWindowSamples = 1 << 20

// Options tune the export.
type Options struct {
	// WindowNs is the width of the stall-time counter windows; 0 means
	// the recording header's WindowNs.
	WindowNs uint64
}

// Stats counts what Export wrote.
type Stats struct {
	Slices   int // "X" slices: timed stalls
	Instants int // "i" events: NUMA task moves, task migrations, exits
	Counters int // "C" samples: window stall time and lost events
	Threads  int // distinct (pid, tid) tracks
}

// Export reads every item from r and writes trace-event JSON to w. The
// output is streamed: only the per-window totals and the set of names
// already emitted are held. If reading fails, the JSON is still closed so
// that what was read stays usable, and the error is returned. The caller
// closes r.
func Export(r *record.Reader, w io.Writer, opts Options) (Stats, error) {
	h := r.Header()
	x := &exporter{
		h:        h,
		windowNs: opts.WindowNs,
		bw:       bufio.NewWriterSize(w, 64<<10),
		windows:  map[int64]*[stall.NumCauses]uint64{},
		procName: map[uint32]*aggregate.ProcessName{},
		named:    map[nameKey]bool{},
		threads:  map[[2]uint32]bool{},
	}
	if x.windowNs == 0 {
		x.windowNs = h.WindowNs
	}
	if x.windowNs == 0 {
		x.windowNs = DefaultWindowNs
	}
	if x.windowNs > 1<<62 {
		x.windowNs = 1 << 62
	}
	x.enc = json.NewEncoder(&x.buf)
	x.enc.SetEscapeHTML(false)
	x.grid = window.Grid{StartNs: h.StartNs, LenNs: x.windowNs}
	x.closes = replay.NewWindowCloses(h)

	x.raw(`{"traceEvents":[`)

	var readErr error
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = fmt.Errorf("read recording: %w", err)
			break
		}
		if ns, ok := x.closes.Before(&it); ok {
			x.closeWindows(ns)
		}
		switch it.Kind {
		case record.ItemEvent:
			x.event(&it.Event)
		case record.ItemLost:
			x.lost(it.Lost)
		case record.ItemEnd:
			x.end = it.End
		}
		if ns, ok := x.closes.After(&it); ok {
			x.closeWindows(ns)
		}
		if x.err != nil {
			return x.stats, x.err
		}
	}
	x.windowCounters()
	x.raw("\n],\"displayTimeUnit\":\"ns\",\"metadata\":")
	x.value(x.metadata(r))
	x.raw("}\n")
	if x.err == nil {
		x.err = x.bw.Flush()
	}
	x.stats.Threads = len(x.threads)
	return x.stats, errors.Join(x.err, readErr)
}

type nameKey struct {
	process  bool
	pid, tid uint32
	name     string
}

type exporter struct {
	h        record.Header
	windowNs uint64
	bw       *bufio.Writer
	buf      bytes.Buffer
	enc      *json.Encoder
	n        int // trace events written
	err      error
	stats    Stats

	// Per-window stall ns by cause, keyed by window index. A stall is
	// filed as the report's windows file it: in the window its end falls
	// in (one before the start in the first), and a late one, whose window
	// the live run had closed, in the oldest still open.
	grid       window.Grid
	open       uint64              // the oldest window still open
	closes     replay.WindowCloses // where the live run closed its windows
	windows    map[int64]*[stall.NumCauses]uint64
	seen       [stall.NumCauses]bool // timed causes met anywhere
	minW, maxW int64
	anyWindow  bool

	procName map[uint32]*aggregate.ProcessName // by pid, from the threads seen so far
	named    map[nameKey]bool                  // process and thread names emitted
	threads  map[[2]uint32]bool
	end      *run.End

	counterProcess bool // the pseudo-process is named
}

// usec is a time or duration in ns that marshals as decimal microseconds,
// exactly: 1234567 → 1234.567.
type usec int64

func (u usec) MarshalJSON() ([]byte, error) { return appendUsec(nil, int64(u)), nil }

func appendUsec(b []byte, ns int64) []byte {
	v := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		v = -v
	}
	b = strconv.AppendUint(b, v/1000, 10)
	if frac := v % 1000; frac != 0 {
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return b
}

type traceEvent struct {
	Name string  `json:"name"`
	Cat  string  `json:"cat,omitempty"`
	Ph   string  `json:"ph"`
	Ts   usec    `json:"ts"`
	Dur  *usec   `json:"dur,omitempty"`
	Pid  uint32  `json:"pid"`
	Tid  *uint32 `json:"tid,omitempty"` // nil for a process's own events
	S    string  `json:"s,omitempty"`   // instant scope
	Args any     `json:"args,omitempty"`
}

type nameArgs struct {
	Name string `json:"name"`
}

type sortArgs struct {
	SortIndex int `json:"sort_index"`
}

type exitArgs struct {
	CPU       uint32 `json:"cpu"`
	GroupDead bool   `json:"group_dead"`
}

type lostArgs struct {
	Kernel   uint64 `json:"kernel"`   // ring-buffer reserve failures so far
	Recorder uint64 `json:"recorder"` // events the recorder dropped so far
}

func (x *exporter) raw(s string) {
	if x.err == nil {
		_, x.err = x.bw.WriteString(s)
	}
}

// value writes v as compact JSON.
func (x *exporter) value(v any) {
	if x.err != nil {
		return
	}
	x.buf.Reset()
	if err := x.enc.Encode(v); err != nil {
		x.err = fmt.Errorf("encode trace event: %w", err)
		return
	}
	_, x.err = x.bw.Write(bytes.TrimSuffix(x.buf.Bytes(), []byte("\n")))
}

// emit writes one trace event, one per line.
func (x *exporter) emit(te traceEvent) {
	if x.n > 0 {
		x.raw(",\n")
	} else {
		x.raw("\n")
	}
	x.n++
	x.value(te)
	if te.Ph == "C" && !x.counterProcess {
		// Name the counters' pseudo-process before its first counter,
		// so that an empty recording gives an empty trace.
		x.counterProcess = true
		x.emit(traceEvent{Name: "process_name", Ph: "M", Pid: WindowsPID, Args: nameArgs{WindowsProcess}})
		x.emit(traceEvent{Name: "process_sort_index", Ph: "M", Pid: WindowsPID, Args: sortArgs{-1}})
	}
	switch te.Ph {
	case "X":
		x.stats.Slices++
	case "i":
		x.stats.Instants++
	case "C":
		x.stats.Counters++
	}
}

// rel is a CLOCK_MONOTONIC time relative to the recording's start, signed.
func (x *exporter) rel(ns uint64) int64 { return int64(ns - x.h.StartNs) }

func (x *exporter) event(ev *stall.Event) {
	x.names(ev)
	ts := x.rel(ev.TsNs)
	te := traceEvent{Pid: ev.PID, Tid: &ev.TID}
	switch {
	case ev.Kind == stall.KindExit:
		te.Name, te.Cat, te.Ph, te.S, te.Ts = "exit", "thread", "i", "t", usec(ts)
		te.Args = exitArgs{CPU: ev.CPU, GroupDead: ev.GroupDead}
	case ev.Kind != stall.KindStall:
		return // a kind from a newer format
	case ev.Cause.Timed() && ev.DurNs > 0:
		start, dur := ts-int64(ev.DurNs), usec(ev.DurNs)
		te.Name, te.Cat, te.Ph, te.Ts, te.Dur = ev.Cause.String(), "stall", "X", usec(start), &dur
		te.Args = stallArgs(ev)
		if start < 0 { // a stall under way at the start: its part in the trace
			te.Ts, dur = 0, usec(max(ts, 0))
			te.Args = beforeStartArgs{details: te.Args, beforeNs: uint64(-start), durNs: ev.DurNs}
		}
	default:
		// A count, not a wait (numa_task_move, task_migration), or a
		// stall too short to measure: a point in time.
		te.Name, te.Cat, te.Ph, te.S, te.Ts = ev.Cause.String(), "stall", "i", "t", usec(ts)
		if !ev.Cause.Timed() {
			te.Cat = "sched"
		}
		te.Args = stallArgs(ev)
	}
	if te.Ts < 0 { // an instant before the start: drawn at it
		te.Args = beforeStartArgs{details: te.Args, beforeNs: uint64(-te.Ts)}
		te.Ts = 0
	}
	x.emit(te)
	if ev.Kind == stall.KindStall && ev.Cause.Timed() && ev.Cause < stall.NumCauses {
		x.addToWindow(ev)
	}
}

// names emits the process and thread names an event brings, once per
// distinct name. A process is named as aggregate.ProcessName names it
// from the threads seen so far.
func (x *exporter) names(ev *stall.Event) {
	x.threads[[2]uint32{ev.PID, ev.TID}] = true
	if ev.Comm == "" {
		return
	}
	if ev.PID != WindowsPID {
		pn := x.procName[ev.PID]
		if pn == nil {
			pn = &aggregate.ProcessName{}
			x.procName[ev.PID] = pn
		}
		k := nameKey{process: true, pid: ev.PID, name: ev.Comm}
		if pn.Offer(ev.PID, ev.TID, ev.Comm) && !x.named[k] {
			x.named[k] = true
			x.emit(traceEvent{Name: "process_name", Ph: "M", Pid: ev.PID, Args: nameArgs{ev.Comm}})
		}
	}
	k := nameKey{pid: ev.PID, tid: ev.TID, name: ev.Comm}
	if !x.named[k] {
		x.named[k] = true
		x.emit(traceEvent{Name: "thread_name", Ph: "M", Pid: ev.PID, Tid: &ev.TID, Args: nameArgs{ev.Comm}})
	}
}

// closeWindows closes the windows that ended at or before ns, as the
// engine does where the live run closed them (replay.WindowCloses).
func (x *exporter) closeWindows(ns uint64) {
	if ns >= x.grid.StartNs {
		x.open = max(x.open, (ns-x.grid.StartNs)/x.grid.LenNs)
	}
}

// addToWindow counts a stall in its window.
func (x *exporter) addToWindow(ev *stall.Event) {
	idx := int64(max(x.grid.Index(ev.TsNs), x.open))
	t := x.windows[idx]
	if t == nil {
		t = new([stall.NumCauses]uint64)
		x.windows[idx] = t
	}
	t[ev.Cause] += ev.DurNs
	x.seen[ev.Cause] = true
	x.window(idx)
}

// window widens the range of windows the counters cover.
func (x *exporter) window(idx int64) {
	if !x.anyWindow {
		x.minW, x.maxW, x.anyWindow = idx, idx, true
		return
	}
	x.minW, x.maxW = min(x.minW, idx), max(x.maxW, idx)
}

func (x *exporter) lost(l record.Lost) {
	x.emit(traceEvent{Name: LostCounter, Ph: "C", Pid: WindowsPID, Ts: usec(max(x.rel(l.MonoNs), 0)),
		Args: lostArgs{Kernel: l.LostEvents, Recorder: l.Dropped}})
}

// counterArgs is one sample's series, in cause order.
type counterArgs []struct {
	name string
	v    uint64
}

func (c counterArgs) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, s := range c {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, s.name)
		b = append(b, ':')
		b = strconv.AppendUint(b, s.v, 10)
	}
	return append(b, '}'), nil
}

// windowCounters writes a stall_ns sample at the start of every window
// from the recording's start (or, for a flight recording, the first window
// with a stall) to the last window with a stall or the recording's end,
// with a series for every timed cause met anywhere, zero where it did not
// stall; then a closing zero sample at the end of the last window. A
// stall counts in the window its end falls in, with its whole duration,
// and in its own cause even when nested in another stall (as in the NDJSON
// window lines), so the series may add up to more than the freeze time.
func (x *exporter) windowCounters() {
	var causes []stall.Cause
	for c, ok := range x.seen {
		if ok {
			causes = append(causes, stall.Cause(c))
		}
	}
	if len(causes) == 0 || x.err != nil {
		return
	}
	if !x.h.FlightRecorder {
		x.window(0)
	}
	if x.end != nil && x.end.EndNs > x.h.StartNs {
		x.window(int64(x.grid.Index(x.end.EndNs - 1)))
	}
	sample := func(idx int64, t *[stall.NumCauses]uint64) {
		args := make(counterArgs, len(causes))
		for i, c := range causes {
			args[i].name = c.String()
			if t != nil {
				args[i].v = t[c]
			}
		}
		x.emit(traceEvent{Name: StallCounter, Cat: "window", Ph: "C", Pid: WindowsPID, Ts: usec(idx * int64(x.windowNs)), Args: args})
	}
	all := uint64(x.maxW-x.minW) < maxWindowSamples
	if all {
		for idx := x.minW; idx <= x.maxW && x.err == nil; idx++ {
			sample(idx, x.windows[idx])
		}
	} else {
		idxs := make([]int64, 0, len(x.windows))
		for idx := range x.windows {
			idxs = append(idxs, idx)
		}
		slices.Sort(idxs)
		if idxs[0] != x.minW {
			sample(x.minW, nil)
		}
		for i, idx := range idxs {
			sample(idx, x.windows[idx])
			if next := idx + 1; next <= x.maxW && (i+1 == len(idxs) || idxs[i+1] != next) {
				sample(next, nil) // back to zero for the empty run
			}
		}
	}
	sample(x.maxW+1, nil)
}

type metadata struct {
	Source         string             `json:"source"`
	Numatrace      string             `json:"numatrace,omitempty"`
	Format         string             `json:"format_version"`
	Started        string             `json:"started,omitempty"`
	Clock          string             `json:"clock"`
	StartNs        uint64             `json:"start_ns"`
	WindowNs       uint64             `json:"window_ns"`
	Target         string             `json:"target,omitempty"`
	Host           record.Host        `json:"host"`
	Probes         []wire.ProbeStatus `json:"probes,omitempty"`
	FlightRecorder bool               `json:"flight_recorder,omitempty"`
	End            *record.EndRecord  `json:"end,omitempty"`
	Complete       bool               `json:"complete"`
	Truncated      bool               `json:"truncated,omitempty"`
	Warnings       []string           `json:"warnings,omitempty"`
}

func (x *exporter) metadata(r *record.Reader) metadata {
	m := metadata{Source: "numatrace recording", Numatrace: x.h.Numatrace,
		Format:  fmt.Sprintf("%d.%d", x.h.Version.Major, x.h.Version.Minor),
		Clock:   "CLOCK_MONOTONIC; trace times are relative to start_ns",
		StartNs: x.h.StartNs, WindowNs: x.windowNs, Target: x.h.Target, Host: x.h.Host, Probes: x.h.Probes,
		FlightRecorder: x.h.FlightRecorder, Complete: x.end != nil,
		Truncated: r.Truncated(), Warnings: r.Warnings()}
	if x.end != nil {
		e := record.NewEndRecord(*x.end)
		m.End = &e
	}
	if !x.h.Started.IsZero() {
		m.Started = x.h.Started.Format(time.RFC3339Nano)
	}
	return m
}
