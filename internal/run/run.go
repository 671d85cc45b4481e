// Package run describes one tracing run as the analysis sees it: what
// was traced, on which clock and in which windows, the per-cause
// thresholds, and how latency spikes are found. The engine takes a
// Description; a recording's header converts to and from one at the
// format's edge (internal/record), and the report renders one
// (internal/output), so the analysis depends on neither.
package run

import (
	"time"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// Description is a run's settings, fixed when it starts.
type Description struct {
	Target string // "system-wide", "pid 1234 (db)", ...
	Kernel string // the traced machine's kernel release
	// Started is the wall clock at StartNs; zero when unknown.
	Started time.Time
	// StartNs is CLOCK_MONOTONIC at the start: event times are on it.
	StartNs  uint64
	WindowNs uint64 // every window's length
	Probes   []stall.ProbeStatus
	// MinEventNs are the per-cause thresholds below which stalls were
	// counted but not streamed; MinStallNs those below which the kernel
	// did not count them at all.
	MinEventNs [stall.NumCauses]uint64
	MinStallNs [stall.NumCauses]uint64
	// StacksMinNs is the shortest streamed stall whose stacks were
	// taken (--stacks-min); 0 when none were.
	StacksMinNs uint64
	Spikes      Spikes
	// LatencyFunction is the function a request timer in the kernel timed
	// ("" for other sources), for the verdict on stalls outside it.
	LatencyFunction string
	// Latency is where the request latencies came from; its zero value
	// is none (or a recording from before the header said).
	Latency LatencySource
	// FlightRecorder runs keep only their most recent data.
	FlightRecorder bool
	// PressureScope is whose memory PSI the windows carry: the target's
	// own cgroup v2 group (its path in the hierarchy), or "system" for
	// the whole machine; "" when the run read none, or did not say
	// (recordings before 1.6), which is taken as the system's.
	PressureScope string
	// MemoryCgroup is the target's memory cgroup as the run started (the
	// group whose limit binds it, its limit, usage and page cache); nil
	// when the run read none (system-wide, a target without one, older
	// recordings).
	MemoryCgroup *memcg.Reading
}

// PressureIsTargets says whether the windows' PSI is the target's own
// group's, not every process's on the machine.
func (d Description) PressureIsTargets() bool {
	return d.PressureScope != "" && d.PressureScope != "system"
}

// LatencyKind is the kind of a run's latency source, by the name the
// formats write ("" is none).
type LatencyKind string

// The latency sources.
const (
	LatencyNone   LatencyKind = ""
	LatencyFile   LatencyKind = "file"       // --latency-file
	LatencyProm   LatencyKind = "prometheus" // --latency-prom
	LatencyUprobe LatencyKind = "uprobe"     // --latency-uprobe
	LatencyKernel LatencyKind = "kernel"     // the target's own sockets
)

// LatencyKinds are the latency sources, every kind but none, in the
// order docs/FORMAT.md names them. A test keeps every LatencyKind here;
// internal/latency/source's tests walk it for each place a source is
// wired (its flag, help, Describe, Open, the formats' documentation).
func LatencyKinds() []LatencyKind {
	return []LatencyKind{LatencyFile, LatencyProm, LatencyUprobe, LatencyKernel}
}

// LatencySource says where a run's request latencies came from, for the
// report and the view: a kind, and what of it (a path, a URL and metric,
// a function, the sockets and what their timing leaves out).
type LatencySource struct {
	Kind   LatencyKind
	Detail string
}

// String is the one line the report and the view show, "" for none:
// "kernel: requests on 0.0.0.0:6379 (12 connections at start); ...".
func (l LatencySource) String() string {
	switch {
	case l.Kind == LatencyNone:
		return ""
	case l.Detail == "":
		return string(l.Kind)
	}
	return string(l.Kind) + ": " + l.Detail
}

// Spikes are the spike detection settings of a run with a latency source.
type Spikes struct {
	K       float64    // a spike is over the baseline by K of its spread
	FloorNs uint64     // and by at least this much
	SLONs   uint64     // --slo: a fixed bound instead of a baseline
	On      Percentile // the latency of a window compared
}

// Percentile is which latency of a window spikes are judged on.
type Percentile uint8

// The percentiles --spike-on takes; the zero value is the default.
const (
	P99 Percentile = iota
	P999
	Max
	numPercentiles
)

// percentileNames are the names --spike-on, the recording's header and
// the JSON summary give them.
var percentileNames = [numPercentiles]string{P99: "p99", P999: "p999", Max: "max"}

// String is p's name: "p999".
func (p Percentile) String() string {
	if p < numPercentiles {
		return percentileNames[p]
	}
	return percentileNames[P99]
}

// ParsePercentile is the percentile named s; false when none is.
func ParsePercentile(s string) (Percentile, bool) {
	for p, name := range percentileNames {
		if name == s {
			return Percentile(p), true
		}
	}
	return P99, false
}

// Windows are the run's windows.
func (d Description) Windows() window.Grid { return window.Grid{StartNs: d.StartNs, LenNs: d.WindowNs} }

// Correlates says whether the run looks for latency spikes: it had a
// latency source.
func (d Description) Correlates() bool { return d.Spikes.K > 0 || d.Spikes.SLONs > 0 }

// Clock shows a wall-clock time as every output does: UTC to the
// millisecond with its zone (03:34:53.512 UTC), since windows are a
// fraction of a second and a report is read on other machines.
func Clock(t time.Time) string { return t.UTC().Format("15:04:05.000 MST") }

// WallAt is the wall clock at mono, a time on the run's clock; false
// when the run's wall clock start is not known.
func (d Description) WallAt(mono uint64) (time.Time, bool) {
	if d.Started.IsZero() {
		return time.Time{}, false
	}
	return d.Started.Add(time.Duration(mono - d.StartNs)), true
}

// End is how a run ended and what it counted.
type End struct {
	EndNs      uint64 // CLOCK_MONOTONIC
	DurationNs uint64
	Events     uint64
	LateEvents uint64
	Windows    uint64
	Note       string
	// Dropped counts events the recorder could not write in time.
	Dropped uint64
	// Latency is what the latency source gave and what of it was left
	// out; nil without a source (and in recordings before format 1.3).
	Latency *latency.Account
	// BadRecords counts ring-buffer records that could not be read or
	// decoded (an unknown cause, a short record).
	BadRecords uint64
	// Pressure is the memory stall the kernel's PSI counted over the run,
	// per scope (the system, the target's cgroup v2); none where the run
	// did not read it (replays of recordings before 1.5).
	Pressure []Pressure
	// MemoryCgroup is the target's memory cgroup as the run ended: with
	// Description's as it started, the report's figures of the group
	// (MemoryCgroup); nil where not read.
	MemoryCgroup *memcg.Reading
}

// MemoryCgroup is the target's memory cgroup over the run d ended as e
// says: the readings as it started and as it ended.
func MemoryCgroup(d Description, e End) memcg.Span {
	return memcg.Span{Start: d.MemoryCgroup, End: e.MemoryCgroup}
}

// Pressure is the growth of one scope's memory PSI over [FromNs, ToNs].
type Pressure struct {
	Scope          string // "system", or the cgroup's path in the cgroup2 hierarchy
	FromNs, ToNs   uint64 // CLOCK_MONOTONIC
	SomeNs, FullNs uint64
	// Err says why the scope has no figure ("PSI is off"); the figures
	// are zero then, not measured.
	Err string
}

// System says whether the scope is the whole machine.
func (p Pressure) System() bool { return p.Scope == "system" }
