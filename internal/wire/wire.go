// Package wire holds the JSON shapes that more than one format shares
// (a recording's records, the NDJSON stream and summary), apart from the
// domain types they carry, and the conversions between the two. Cause
// names appear here, through the cause table; the core keys per-cause
// data by stall.Cause.
package wire

import (
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// Stats is one window's latency statistics: a recording's latency
// record and the "latency" of an NDJSON window line.
type Stats struct {
	Index    uint64    `json:"index"`
	Count    uint64    `json:"count"`
	P50Ns    uint64    `json:"p50_ns"`
	P99Ns    uint64    `json:"p99_ns"`
	P999Ns   uint64    `json:"p999_ns,omitempty"` // since 1.3
	MaxNs    uint64    `json:"max_ns"`
	Skipped  string    `json:"skipped,omitempty"`
	Requests *Requests `json:"requests,omitempty"`
}

// Requests keys the stall time per cause by the cause's name.
type Requests struct {
	Slow              uint64            `json:"slow"`
	SlowNs            uint64            `json:"slow_ns"`
	SlowStallNs       map[string]uint64 `json:"slow_stall_ns,omitempty"`
	SlowExcessStallNs map[string]uint64 `json:"slow_excess_stall_ns,omitempty"`
	// SlowBudgetNs is where the slow requests' time went, by part (a
	// cause's name, or on_cpu, disk_io, other_wait, unsplit); since 1.6.
	SlowBudgetNs map[string]uint64 `json:"slow_budget_ns,omitempty"`
	FreezeNs     uint64            `json:"freeze_ns"`
	TIDs         []uint32          `json:"tids"`
}

// NewStats is s in the formats' shape.
func NewStats(s latency.Stats) Stats {
	j := Stats{Index: s.Index, Count: s.Count, P50Ns: s.P50Ns, P99Ns: s.P99Ns, P999Ns: s.P999Ns, MaxNs: s.MaxNs,
		Skipped: s.Skipped}
	if r := s.Requests; r != nil {
		// A cause is in both maps when it stalled a slow request, though its
		// time over the slow threshold may be 0.
		j.Requests = &Requests{Slow: r.Slow, SlowNs: r.SlowNs, SlowStallNs: ByName(r.SlowStallNs, r.SlowStallNs),
			SlowExcessStallNs: ByName(r.SlowExcessStallNs, r.SlowStallNs), SlowBudgetNs: ByPartName(&r.SlowBudget),
			FreezeNs: r.FreezeNs, TIDs: r.TIDs}
	}
	return j
}

// Latency is the statistics j holds.
func (j Stats) Latency() *latency.Stats {
	s := &latency.Stats{Index: j.Index, Count: j.Count, P50Ns: j.P50Ns, P99Ns: j.P99Ns, P999Ns: j.P999Ns,
		MaxNs: j.MaxNs, Skipped: j.Skipped}
	if r := j.Requests; r != nil {
		s.Requests = &latency.Requests{Slow: r.Slow, SlowNs: r.SlowNs, SlowStallNs: ByCause(r.SlowStallNs),
			SlowExcessStallNs: ByCause(r.SlowExcessStallNs), FreezeNs: r.FreezeNs, TIDs: r.TIDs}
		if r.SlowExcessStallNs == nil { // written before the field: the whole stall counts
			s.Requests.SlowExcessStallNs = s.Requests.SlowStallNs
		}
		s.Requests.SlowBudget = ByPart(r.SlowBudgetNs)
		if r.SlowBudgetNs == nil { // written before the field: the stalls, and the rest not split
			s.Requests.SlowBudget = stall.NewBudget(r.SlowNs, &stall.RequestStall{ByCause: s.Requests.SlowStallNs,
				FreezeNs: freezeOf(s.Requests.SlowStallNs)}, nil)
		}
	}
	return s
}

// freezeOf is a stall breakdown's freeze time, where the file does not
// say it: its memory stalls' sum.
func freezeOf(ns [stall.NumCauses]uint64) uint64 {
	var f uint64
	for c, v := range ns {
		if stall.Cause(c).Freezes() {
			f += v
		}
	}
	return f
}

// ByPartName keys a budget's parts with time by their names.
func ByPartName(b *stall.Budget) map[string]uint64 {
	m := map[string]uint64{}
	for p, v := range b {
		if v > 0 {
			m[stall.Part(p).String()] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// ByPart reads a budget keyed by part name; a name this version does not
// know (a newer writer's part) goes to the time not split.
func ByPart(m map[string]uint64) stall.Budget {
	var b stall.Budget
	for name, v := range m {
		if p, ok := stall.ParsePart(name); ok {
			b[p] += v
		} else {
			b[stall.PartUnsplit] += v
		}
	}
	return b
}

// byName keys ns by cause name, as the format does, for the causes with
// time in present.
func ByName(ns, present [stall.NumCauses]uint64) map[string]uint64 {
	m := map[string]uint64{}
	for c, v := range ns {
		if present[c] > 0 {
			m[stall.Cause(c).String()] = v
		}
	}
	return m
}

// byCause reads a map keyed by cause name; a name this version does not
// know (a newer writer's cause) is left out, as its events are.
func ByCause(m map[string]uint64) [stall.NumCauses]uint64 {
	var ns [stall.NumCauses]uint64
	for name, v := range m {
		if c, err := stall.ParseCause(name); err == nil {
			ns[c] = v
		}
	}
	return ns
}
