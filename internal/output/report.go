package output

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/wire"
)

// Report is everything the final summary shows.
type Report struct {
	Target     string // "system-wide", "pid 1234", ...
	Kernel     string
	DurationNs uint64
	Probes     []stall.ProbeStatus
	Summary    aggregate.Summary
	Events     uint64 // events streamed
	LateEvents uint64
	Windows    uint64
	Note       string // e.g. the target exited
	// TopThreads limits the text report; JSON always lists every thread.
	TopThreads int
	// MinEventNs are the per-cause thresholds below which stalls were
	// counted but not streamed.
	MinEventNs [stall.NumCauses]uint64
	// StacksMinNs is the shortest streamed stall whose stacks were taken;
	// 0 when none were.
	StacksMinNs uint64
	// Correlation is set when a latency source was.
	Correlation *correlate.Result
	// Latency is what the latency source gave and what of it was left
	// out; nil without a source (or from a recording older than that).
	Latency *latency.Account
	// LatencySource is where the latencies came from; none when unknown
	// (a recording from before its header said).
	LatencySource run.LatencySource
	// BadRecords counts ring-buffer records that could not be decoded.
	BadRecords uint64
	// Pressure is what PSI counted over the run; none where not read.
	Pressure []run.Pressure
	// Started is the wall clock at the run's start; zero when unknown.
	Started time.Time
	// Findings are doctor's, read on the traced machine as the run
	// started; none when doctor did not run (older recordings).
	Findings []doctor.Finding
	// MemoryCgroup is the target's memory cgroup as the run started and
	// as it ended; unknown where the run read none.
	MemoryCgroup memcg.Span
}

// NewReport is a run's report: its description, how it ended, the
// kernel's final aggregates as the engine summarized them, and the spike
// analysis (nil without a latency source). Live runs and replays build it
// alike, so `report` on a recording prints what the live run printed.
func NewReport(d run.Description, end run.End, sum aggregate.Summary, c *correlate.Result, topThreads int) *Report {
	return &Report{Target: d.Target, Kernel: d.Kernel, DurationNs: end.DurationNs, Probes: d.Probes, Summary: sum,
		Events: end.Events, LateEvents: end.LateEvents, Windows: end.Windows, Note: end.Note, TopThreads: topThreads,
		MinEventNs: d.MinEventNs, StacksMinNs: d.StacksMinNs, Correlation: c, Latency: end.Latency, LatencySource: d.Latency, BadRecords: end.BadRecords,
		Pressure: end.Pressure, Started: d.Started, MemoryCgroup: run.MemoryCgroup(d, end)}
}

type probesJSON struct {
	Attached []string           `json:"attached"`
	Failed   []wire.ProbeStatus `json:"failed"`
	Skipped  []string           `json:"skipped,omitempty"` // left out by --causes / --no-causes
}

type systemJSON struct {
	KswapdWakeups         uint64 `json:"kswapd_wakeups"`
	KhugepagedCollapses   uint64 `json:"khugepaged_collapses"`
	KhugepagedCollapsedOK uint64 `json:"khugepaged_collapsed_ok"`
	KcompactdPasses       uint64 `json:"kcompactd_passes"`
	KcompactdNs           uint64 `json:"kcompactd_ns"`
	ProactivePasses       uint64 `json:"proactive_compaction_passes"`
	ProactiveNs           uint64 `json:"proactive_compaction_ns"`
	DirectCompactAttempts uint64 `json:"direct_compaction_attempts"`
	TargetsFull           uint64 `json:"cgroup_processes_not_followed"`
	StacksTaken           uint64 `json:"stacks_taken"`
	KernelStacksLost      uint64 `json:"kernel_stacks_lost"`
	UserStacksLost        uint64 `json:"user_stacks_lost"`
}

type summaryJSON struct {
	Type             string                      `json:"type"`
	Headline         Headline                    `json:"headline"`
	Started          string                      `json:"started,omitempty"` // the wall clock at the start, RFC 3339
	DurationNs       uint64                      `json:"duration_ns"`
	LostEvents       uint64                      `json:"lost_events"`
	LostEventsPerCPU []uint64                    `json:"lost_events_per_cpu"`
	Target           string                      `json:"target"`
	Kernel           string                      `json:"kernel"`
	Events           uint64                      `json:"events"`
	LateEvents       uint64                      `json:"late_events"`
	Windows          uint64                      `json:"windows"`
	Probes           probesJSON                  `json:"probes"`
	Threads          []threadJSON                `json:"threads"`
	Processes        []processJSON               `json:"processes"`
	System           systemJSON                  `json:"system"`
	HistMapFull      bool                        `json:"histogram_map_full"`
	HistEvicted      uint64                      `json:"histograms_evicted"`
	Causes           map[string]causeSummaryJSON `json:"causes"`
	Unlisted         map[string]stallCountJSON   `json:"unlisted,omitempty"`
	StreamMinNs      map[string]uint64           `json:"stream_min_ns"`
	Note             string                      `json:"note,omitempty"`
	Children         *childrenJSON               `json:"children,omitempty"`
	Spikes           []spikeJSON                 `json:"spikes,omitempty"`
	FrozenWindows    []frozenWindowJSON          `json:"frozen_windows,omitempty"`
	Correlation      *correlationJSON            `json:"correlation,omitempty"`
	BadRecords       uint64                      `json:"bad_records"`
	LatencyInput     *latencyInputJSON           `json:"latency_input,omitempty"`
	LatencySource    *latencySourceJSON          `json:"latency_source,omitempty"`
	Stacks           []stackJSON                 `json:"stacks"`
	Waits            []waitJSON                  `json:"waits"`
	MemoryStallNs    uint64                      `json:"memory_stall_ns"`
	PSI              []pressureJSON              `json:"psi,omitempty"`
	MemoryCgroup     *memcgSpanJSON              `json:"memory_cgroup,omitempty"`
}

// memcgSpanJSON is the target's memory cgroup as the run started and as
// it ended, each absent where it was not read.
type memcgSpanJSON struct {
	Start *wire.Memcg `json:"start,omitempty"`
	End   *wire.Memcg `json:"end,omitempty"`
}

func memcgSpan(s memcg.Span) *memcgSpanJSON {
	if !s.Known() {
		return nil
	}
	return &memcgSpanJSON{Start: wire.NewMemcg(s.Start), End: wire.NewMemcg(s.End)}
}

// latencySourceJSON is where the latencies came from.
type latencySourceJSON struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func latencySource(l run.LatencySource) *latencySourceJSON {
	if l.Kind == run.LatencyNone {
		return nil
	}
	return &latencySourceJSON{Kind: string(l.Kind), Detail: l.Detail}
}

// latencyInputJSON is what the latency source gave and what of it was
// left out.
type latencyInputJSON struct {
	Usable         bool              `json:"usable"`
	Samples        uint64            `json:"samples"`
	Windows        uint64            `json:"windows"`
	OutsideTrace   uint64            `json:"outside_trace"`
	BeforeTrace    uint64            `json:"before_trace"`
	AfterTrace     uint64            `json:"after_trace"`
	OutsideMinNs   *uint64           `json:"outside_min_ns,omitempty"`
	OutsideMaxNs   *uint64           `json:"outside_max_ns,omitempty"`
	Likely         string            `json:"likely,omitempty"`
	LateSamples    uint64            `json:"late_samples"`
	LateWindows    uint64            `json:"late_windows"`
	SkippedWindows uint64            `json:"skipped_windows"`
	Skipped        map[string]uint64 `json:"skipped"`
	Warnings       []string          `json:"warnings"`
}

func latencyInput(a *latency.Account) *latencyInputJSON {
	if a == nil {
		return nil
	}
	j := &latencyInputJSON{Usable: a.Usable(), Samples: a.Samples, Windows: a.Windows, OutsideTrace: a.Outside(),
		BeforeTrace: a.Before, AfterTrace: a.After, Likely: a.Likely, LateSamples: a.Late, LateWindows: a.LateWindows,
		SkippedWindows: a.SkippedWindows, Skipped: map[string]uint64{}, Warnings: []string{}}
	if a.Outside() > 0 {
		lo, hi := a.OutsideMinNs, a.OutsideMaxNs
		j.OutsideMinNs, j.OutsideMaxNs = &lo, &hi
	}
	for _, s := range a.Skipped {
		j.Skipped[wire.SkipKey(s)] += s.N
	}
	for _, p := range a.Problems() {
		j.Warnings = append(j.Warnings, p.Text)
	}
	return j
}

type correlationJSON struct {
	Windows     int                             `json:"windows"`
	Causes      map[string]causeCorrelationJSON `json:"causes"`
	ExplainedBy []string                        `json:"explained_by"`
	Partly      []string                        `json:"partly_explained_by"`
	Uncovered   int                             `json:"uncovered_spikes"`
	Outside     *float64                        `json:"outside_share,omitempty"`
	Conclusion  string                          `json:"conclusion"`
	// UncoveredPSINs is what PSI counted in the uncovered spikes' windows
	// it was read for; UncoveredPSIScope whose it is: "target" (its own
	// cgroup) or "system" (every process's).
	UncoveredPSINs    *uint64 `json:"uncovered_psi_ns,omitempty"`
	UncoveredPSIScope string  `json:"uncovered_psi_scope,omitempty"`
	// Budget is where the spikes' slow requests' time went, by part, worst
	// first; absent where they were not timed with their threads.
	Budget []partShareJSON `json:"budget,omitempty"`
	// FrozenBudget is the same of the frozen windows' slow requests.
	FrozenBudget []partShareJSON `json:"frozen_budget,omitempty"`
}

// partShareJSON is one part of a budget: a cause's name, or on_cpu,
// disk_io, other_wait, unsplit.
type partShareJSON struct {
	Part  string  `json:"part"`
	Ns    uint64  `json:"ns"`
	Share float64 `json:"share"`
}

// budgetJSON is b's parts worst first, those correlate names.
func budgetJSON(b *stall.Budget) []partShareJSON {
	var out []partShareJSON
	for _, p := range correlate.Shares(b) {
		out = append(out, partShareJSON{Part: p.Part.String(), Ns: p.Ns, Share: p.Share})
	}
	return out
}

func (r *Report) summaryLine() summaryJSON {
	s := summaryJSON{Type: "summary", Headline: r.Headline(), DurationNs: r.DurationNs, LostEvents: r.Summary.Lost,
		LostEventsPerCPU: r.Summary.LostPerCPU, Target: r.Target, Kernel: r.Kernel,
		Events: r.Events, LateEvents: r.LateEvents, Windows: r.Windows, Threads: threadsJSON(r.Summary.Threads),
		Processes: processesJSON(r.Summary.Processes), Note: r.Note, HistMapFull: r.Summary.HistMapFull,
		HistEvicted: r.Summary.HistEvicted, Causes: causeSummariesJSON(&r.Summary.Causes),
		Unlisted:   stallCountsJSON(&r.Summary.Unlisted),
		Probes:     probesJSON{Attached: []string{}, Failed: []wire.ProbeStatus{}},
		BadRecords: r.BadRecords, LatencyInput: latencyInput(r.Latency), LatencySource: latencySource(r.LatencySource),
		MemoryCgroup: memcgSpan(r.MemoryCgroup)}
	if c := r.Correlation; c != nil {
		s.Spikes = spikesJSON(c.Spikes)
		s.FrozenWindows = frozenWindowsJSON(c.Frozen)
		s.Correlation = &correlationJSON{Windows: c.Windows, Causes: correlationsJSON(&c.Correlation),
			ExplainedBy: causeNames(c.Explained), Partly: causeNames(c.Partly), Uncovered: c.Uncovered,
			Outside: c.OutsideShare, Conclusion: c.Conclusion}
		if u := c.UncoveredPressure; u.Known > 0 {
			s.Correlation.UncoveredPSINs = &u.SomeNs
			s.Correlation.UncoveredPSIScope = "system"
			if c.PressureOwn {
				s.Correlation.UncoveredPSIScope = "target"
			}
		}
		if c.HasBudget {
			s.Correlation.Budget = budgetJSON(&c.Budget)
		}
		if c.HasFrozenBudget {
			s.Correlation.FrozenBudget = budgetJSON(&c.FrozenBudget)
		}
	}
	if c := r.Summary.Children; c != nil {
		s.Children = &childrenJSON{Processes: c.Processes, StallNs: c.StallNs, Stalls: stallCountsJSON(&c.Stalls),
			NotWatched: c.NotWatched, Hint: r.ChildrenHint()}
	}
	s.StreamMinNs = map[string]uint64{}
	for c, ns := range r.MinEventNs {
		if ns > 0 {
			s.StreamMinNs[stall.Cause(c).String()] = ns
		}
	}
	if s.LostEventsPerCPU == nil {
		s.LostEventsPerCPU = []uint64{}
	}
	for _, p := range r.Probes {
		switch {
		case p.Skipped:
			s.Probes.Skipped = append(s.Probes.Skipped, p.Name)
		case p.Attached:
			s.Probes.Attached = append(s.Probes.Attached, p.Name)
		default:
			s.Probes.Failed = append(s.Probes.Failed, wire.NewProbe(p))
		}
	}
	if !r.Started.IsZero() {
		s.Started = r.Started.UTC().Format(time.RFC3339Nano)
	}
	sys := r.Summary.System
	s.System = systemJSON(sys)
	s.Stacks = stacksJSON(r.Summary.Stacks)
	s.Waits = waitsJSON(r.Summary.Waits)
	s.MemoryStallNs = r.Summary.MemoryStallNs
	s.PSI = pressuresJSON(r.Pressure, r.Summary.MemoryStallNs)
	return s
}

// Print writes the report at the end of a run: the NDJSON summary line
// when nd is set, else the text, as wide as w (WidthOf). A reader that went away (a closed pipe,
// as with `| head`) is not an error.
func Print(rep *Report, nd *NDJSON, w io.Writer) error {
	var err error
	if nd != nil {
		err = nd.Summary(rep)
	} else {
		err = rep.TextWidth(w, WidthOf(w))
	}
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
