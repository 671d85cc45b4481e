package output

import (
	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/stall"
)

// The JSON summary's shapes, apart from the domain types they show: the
// core keys per-cause data by stall.Cause, the summary by cause name.

type causeSummaryJSON struct {
	Count    uint64 `json:"count"`
	TotalNs  uint64 `json:"total_ns"`
	MaxNs    uint64 `json:"max_ns"`
	NestedNs uint64 `json:"nested_ns,omitempty"`
	P50Ns    uint64 `json:"p50_ns"`
	P90Ns    uint64 `json:"p90_ns"`
	P99Ns    uint64 `json:"p99_ns"`
	Reason   string `json:"reason,omitempty"` // the kind of wait most of it was (memstall_wait's thrashing)
}

type stallCountJSON struct {
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
}

type migrationsJSON struct {
	Total     uint64 `json:"total"`
	CrossNode uint64 `json:"cross_node"`
}

type threadJSON struct {
	PID        uint32                      `json:"pid"`
	TID        uint32                      `json:"tid"`
	Comm       string                      `json:"comm"`
	Exited     bool                        `json:"exited,omitempty"`
	StallNs    uint64                      `json:"stall_ns"`
	Stalls     map[string]causeSummaryJSON `json:"stalls"`
	Migrations migrationsJSON              `json:"migrations"`
}

type processJSON struct {
	PID        uint32                      `json:"pid"`
	Comm       string                      `json:"comm"`
	Threads    int                         `json:"threads"`
	StallNs    uint64                      `json:"stall_ns"`
	Stalls     map[string]causeSummaryJSON `json:"stalls"`
	Migrations migrationsJSON              `json:"migrations"`
}

// childrenJSON is what a --pid target's untraced descendants stalled,
// and the hint the text report prints.
type childrenJSON struct {
	Processes  uint64                    `json:"processes_stalled"`
	StallNs    uint64                    `json:"stall_ns"`
	Stalls     map[string]stallCountJSON `json:"stalls"`
	NotWatched uint64                    `json:"not_watched"`
	Hint       string                    `json:"hint,omitempty"`
}

type spikeJSON struct {
	Index        uint64             `json:"index"`
	StartNs      uint64             `json:"start_ns"`
	LatencyNs    uint64             `json:"latency_ns"`
	Percentile   string             `json:"percentile"`
	P99Ns        uint64             `json:"p99_ns"`
	BaselineNs   uint64             `json:"baseline_ns"`
	SLO          bool               `json:"slo,omitempty"`
	ExcessNs     uint64             `json:"excess_ns"`
	NoCompletion bool               `json:"no_completion,omitempty"`
	Requests     uint64             `json:"requests"`
	Causes       []causeInSpikeJSON `json:"causes"`
	Verdict      string             `json:"verdict"`
	PSINs        *uint64            `json:"psi_ns,omitempty"` // memory stall PSI counted in the window
	// Budget is where the window's slow requests' time went, when they
	// were timed with their serving threads.
	Budget []partShareJSON `json:"budget,omitempty"`
}

// frozenWindowJSON is a window whose percentile held while the service
// froze: a spike's shape (latency_ns is its maximum, percentile "max",
// p99_ns the figure that held, excess_ns over the SLO or its own p99),
// with its tail and how long a thread that served requests was frozen.
type frozenWindowJSON struct {
	spikeJSON
	P999Ns         uint64 `json:"p999_ns"`
	MaxNs          uint64 `json:"max_ns"`
	ServedFrozenNs uint64 `json:"served_frozen_ns,omitempty"`
}

type causeInSpikeJSON struct {
	Cause            string  `json:"cause"`
	StallNs          uint64  `json:"stall_ns"`
	AroundNs         uint64  `json:"around_ns"`
	Threads          int     `json:"threads"`
	WorstTID         uint32  `json:"worst_tid,omitempty"`
	WorstNs          uint64  `json:"worst_ns,omitempty"`
	LongestNs        uint64  `json:"longest_ns,omitempty"` // its longest single stall in the window
	Reason           string  `json:"reason,omitempty"`     // that stall's kind of wait (memstall_wait's thrashing)
	Process          string  `json:"process,omitempty"`
	ExposureNs       uint64  `json:"exposure_ns"`
	Coverage         float64 `json:"coverage"`
	InSlowRequestsNs uint64  `json:"in_slow_requests_ns,omitempty"`
	// Stack is where its worst-hit thread stalled longest (--stacks-min).
	Stack *framesJSON `json:"stack,omitempty"`
}

type causeCorrelationJSON struct {
	SpikeShare     float64  `json:"spike_share"`
	NormalShare    float64  `json:"normal_share"`
	Lift           *float64 `json:"lift"`
	Spearman       *float64 `json:"spearman"`
	Covered        float64  `json:"covered"`
	ExcessShare    float64  `json:"excess_share"`
	LargerInSpikes bool     `json:"larger_in_spikes"`
	InSlowRequests *float64 `json:"in_slow_requests,omitempty"`
	Reason         string   `json:"reason,omitempty"` // the covering stalls' kind of wait
}

// causeSummariesJSON keys the causes the kernel kept a histogram of.
func causeSummariesJSON(cs *aggregate.CauseSummaries) map[string]causeSummaryJSON {
	m := map[string]causeSummaryJSON{}
	for c := range cs {
		if s := &cs[c]; s.Has() {
			m[stall.Cause(c).String()] = causeSummaryJSON{Count: s.Count, TotalNs: s.TotalNs, MaxNs: s.MaxNs,
				NestedNs: s.NestedNs, P50Ns: s.P50Ns, P90Ns: s.P90Ns, P99Ns: s.P99Ns, Reason: s.Kind}
		}
	}
	return m
}

// stallCountsJSON keys the causes with stalls.
func stallCountsJSON(sc *[stall.NumCauses]aggregate.StallCount) map[string]stallCountJSON {
	m := map[string]stallCountJSON{}
	for c, s := range sc {
		if s.Any() {
			m[stall.Cause(c).String()] = stallCountJSON(s)
		}
	}
	return m
}

func threadsJSON(ts []aggregate.ThreadSummary) []threadJSON {
	out := make([]threadJSON, len(ts))
	for i := range ts {
		t := &ts[i]
		out[i] = threadJSON{PID: t.PID, TID: t.TID, Comm: t.Comm, Exited: t.Exited, StallNs: t.StallNs,
			Stalls: causeSummariesJSON(&t.Stalls), Migrations: migrationsJSON(t.Migrations)}
	}
	return out
}

func processesJSON(ps []aggregate.ProcessSummary) []processJSON {
	out := make([]processJSON, len(ps))
	for i := range ps {
		p := &ps[i]
		out[i] = processJSON{PID: p.PID, Comm: p.Comm, Threads: p.Threads, StallNs: p.StallNs,
			Stalls: causeSummariesJSON(&p.Stalls), Migrations: migrationsJSON(p.Migrations)}
	}
	return out
}

func spikesJSON(sps []correlate.Spike) []spikeJSON {
	out := make([]spikeJSON, len(sps))
	for i := range sps {
		sp := &sps[i]
		j := spikeJSON{Index: sp.Index, StartNs: sp.StartNs, LatencyNs: sp.LatencyNs, Percentile: sp.Percentile.String(),
			P99Ns: sp.P99Ns, BaselineNs: sp.BaselineNs, SLO: sp.SLO, ExcessNs: sp.ExcessNs, NoCompletion: sp.NoCompletion,
			Requests: sp.Requests, Causes: make([]causeInSpikeJSON, len(sp.Causes)), Verdict: sp.Verdict}
		if sp.HasPressure {
			j.PSINs = &sp.PressureNs
		}
		if sp.HasBudget {
			j.Budget = budgetJSON(&sp.Budget)
		}
		for k, c := range sp.Causes {
			j.Causes[k] = causeInSpikeJSON{Cause: c.Cause.String(), StallNs: c.StallNs, AroundNs: c.AroundNs,
				Threads: c.Threads, WorstTID: c.WorstTID, WorstNs: c.WorstNs, LongestNs: c.LongestNs, Reason: c.Reason, Process: c.Process,
				ExposureNs: c.ExposureNs, Coverage: c.Coverage, InSlowRequestsNs: c.InSlowRequestsNs, Stack: stackFramesJSON(c.Stack)}
		}
		out[i] = j
	}
	return out
}

func frozenWindowsJSON(fs []correlate.Spike) []frozenWindowJSON {
	out := make([]frozenWindowJSON, len(fs))
	for i, sp := range spikesJSON(fs) {
		out[i] = frozenWindowJSON{spikeJSON: sp, P999Ns: fs[i].P999Ns, MaxNs: fs[i].MaxNs, ServedFrozenNs: fs[i].ServedFrozenNs}
	}
	return out
}

func correlationsJSON(cc *[stall.NumCauses]*correlate.CauseCorrelation) map[string]causeCorrelationJSON {
	m := map[string]causeCorrelationJSON{}
	for c, v := range cc {
		if v != nil {
			m[stall.Cause(c).String()] = causeCorrelationJSON(*v)
		}
	}
	return m
}

func causeNames(cs []stall.Cause) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}
