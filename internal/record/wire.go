package record

import (
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/wire"
)

// The recording's JSON records as they are on disk (docs/FORMAT.md),
// apart from the domain types they carry: a field of those can be
// renamed or retyped, and these, with their conversions, keep the format.

// EndRecord is the end record as the format has it; the Perfetto export
// shows it as it is.
type EndRecord struct {
	EndNs      uint64       `json:"end_ns"`
	DurationNs uint64       `json:"duration_ns"`
	Events     uint64       `json:"events"`
	LateEvents uint64       `json:"late_events"`
	Windows    uint64       `json:"windows"`
	Note       string       `json:"note,omitempty"`
	Dropped    uint64       `json:"dropped"`
	Latency    *accountJSON `json:"latency,omitempty"` // since 1.3
	BadRecords uint64       `json:"bad_records,omitempty"`
	PSI        []psiJSON    `json:"psi,omitempty"` // since 1.5
	// MemoryCgroup is the target's memory cgroup as tracing ended
	// (later 1.5 writers).
	MemoryCgroup *wire.Memcg `json:"memory_cgroup,omitempty"`
}

type psiJSON struct {
	Scope  string `json:"scope"`
	FromNs uint64 `json:"from_ns"`
	ToNs   uint64 `json:"to_ns"`
	SomeNs uint64 `json:"some_ns"`
	FullNs uint64 `json:"full_ns"`
	Error  string `json:"error,omitempty"`
}

type accountJSON struct {
	StartNs        uint64     `json:"start_ns"`
	EndNs          uint64     `json:"end_ns"`
	Samples        uint64     `json:"samples"`
	Windows        uint64     `json:"windows"`
	Before         uint64     `json:"before_trace,omitempty"`
	After          uint64     `json:"after_trace,omitempty"`
	OutsideMinNs   uint64     `json:"outside_min_ns,omitempty"`
	OutsideMaxNs   uint64     `json:"outside_max_ns,omitempty"`
	Likely         string     `json:"likely,omitempty"`
	Late           uint64     `json:"late,omitempty"`
	LateWindows    uint64     `json:"late_windows,omitempty"`
	SkippedWindows uint64     `json:"skipped_windows,omitempty"`
	Skipped        []skipJSON `json:"skipped,omitempty"`
}

type skipJSON struct {
	Kind string `json:"kind"` // wire.SkipKey; before, a phrase (phraseSkips)
	N    uint64 `json:"n"`
}

// phraseSkips are the kinds as recordings wrote them before they had
// keys (format 1.3 to early 1.5): the phrases the report said them in.
var phraseSkips = map[string]latency.SkipKind{
	"malformed lines":                          latency.SkipMalformed,
	"lines without a latency":                  latency.SkipNoLatency,
	"failed scrapes":                           latency.SkipScrapes,
	"counter resets":                           latency.SkipResets,
	"bucket layout changes":                    latency.SkipLayouts,
	"pipelined exchanges":                      latency.SkipPipelined,
	"late writes of a response":                latency.SkipLateWrites,
	"requests counted from when they were due": latency.SkipDueWaits,
}

func (j skipJSON) skip() latency.Skip {
	if k, ok := phraseSkips[j.Kind]; ok {
		return latency.Skip{Kind: k, N: j.N}
	}
	return wire.NewSkip(j.Kind, j.N)
}

// NewEndRecord is e in the format's shape.
func NewEndRecord(e run.End) EndRecord {
	return EndRecord{EndNs: e.EndNs, DurationNs: e.DurationNs, Events: e.Events, LateEvents: e.LateEvents,
		Windows: e.Windows, Note: e.Note, Dropped: e.Dropped, Latency: toAccountJSON(e.Latency), BadRecords: e.BadRecords,
		PSI: toPSIJSON(e.Pressure), MemoryCgroup: wire.NewMemcg(e.MemoryCgroup)}
}

func toPSIJSON(ps []run.Pressure) []psiJSON {
	var out []psiJSON
	for _, p := range ps {
		out = append(out, psiJSON{Scope: p.Scope, FromNs: p.FromNs, ToNs: p.ToNs, SomeNs: p.SomeNs, FullNs: p.FullNs, Error: p.Err})
	}
	return out
}

func (j psiJSON) pressure() run.Pressure {
	return run.Pressure{Scope: j.Scope, FromNs: j.FromNs, ToNs: j.ToNs, SomeNs: j.SomeNs, FullNs: j.FullNs, Err: j.Error}
}

func (j EndRecord) end() *run.End {
	return &run.End{EndNs: j.EndNs, DurationNs: j.DurationNs, Events: j.Events, LateEvents: j.LateEvents,
		Windows: j.Windows, Note: j.Note, Dropped: j.Dropped, Latency: j.Latency.account(), BadRecords: j.BadRecords,
		Pressure: pressures(j.PSI), MemoryCgroup: j.MemoryCgroup.Reading()}
}

func pressures(js []psiJSON) []run.Pressure {
	var out []run.Pressure
	for _, j := range js {
		out = append(out, j.pressure())
	}
	return out
}

func toAccountJSON(a *latency.Account) *accountJSON {
	if a == nil {
		return nil
	}
	j := &accountJSON{StartNs: a.StartNs, EndNs: a.EndNs, Samples: a.Samples, Windows: a.Windows, Before: a.Before,
		After: a.After, OutsideMinNs: a.OutsideMinNs, OutsideMaxNs: a.OutsideMaxNs, Likely: a.Likely, Late: a.Late,
		LateWindows: a.LateWindows, SkippedWindows: a.SkippedWindows}
	for _, s := range a.Skipped {
		j.Skipped = append(j.Skipped, skipJSON{Kind: wire.SkipKey(s), N: s.N})
	}
	return j
}

func (j *accountJSON) account() *latency.Account {
	if j == nil {
		return nil
	}
	a := &latency.Account{StartNs: j.StartNs, EndNs: j.EndNs, Samples: j.Samples, Windows: j.Windows, Before: j.Before,
		After: j.After, OutsideMinNs: j.OutsideMinNs, OutsideMaxNs: j.OutsideMaxNs, Likely: j.Likely, Late: j.Late,
		LateWindows: j.LateWindows, SkippedWindows: j.SkippedWindows}
	for _, s := range j.Skipped {
		a.Skipped = append(a.Skipped, s.skip())
	}
	return a
}
