package aggregate

import (
	"github.com/numatrace/numatrace/internal/psi"
	"github.com/numatrace/numatrace/internal/stall"
)

// memoryUnion is how long, over the run, at least one traced thread was
// frozen by memory management: the union of the memory stalls' spans,
// the figure PSI's memory "some" counts for the same threads. Nested
// stalls lie inside another and add nothing.
//
// Memory stays bounded on a run of days: spans are held until the newest
// one ends unionHorizon past them, and then only their merged length is
// kept. Under a storm (every lock wait streamed) more than unionKeep
// merged spans can lie within the horizon; the oldest are folded then,
// and the horizon is shorter for that while. A stall that reaches back
// over spans already folded (one longer than the horizon) counts from
// the last of them: the gaps it covered among them are not counted,
// where adding it whole would count their overlap twice.
//
// Folding is amortized: spans are merged again only once as many have
// come as were kept, so a storm costs O(log n) per stall, not a re-sort
// of everything the horizon holds on each one.
type memoryUnion struct {
	fromNs uint64 // the run's start: a stall begun before it counts from it
	spans  []psi.Interval
	doneNs uint64 // the merged length of the spans folded away
	doneTo uint64 // the latest end of those: no span counts before it
	newest uint64 // the latest end seen
	foldAt int    // fold when this many spans are held
	folds  int    // how many times the spans were merged: the work done
}

const (
	unionHorizon = 60e9 // ns
	unionHold    = 1 << 16
	unionKeep    = 1 << 20 // merged spans: up to twice as many are held, 32 MiB
)

func (u *memoryUnion) add(ev *stall.Event) {
	if ev.Kind != stall.KindStall || ev.FreezeNs() == 0 || ev.TsNs <= u.fromNs {
		return
	}
	start := max(ev.TsNs-min(ev.DurNs, ev.TsNs), u.fromNs, u.doneTo)
	if start >= ev.TsNs {
		return
	}
	u.spans = append(u.spans, psi.Interval{Start: start, End: ev.TsNs})
	u.newest = max(u.newest, ev.TsNs)
	if len(u.spans) >= max(u.foldAt, unionHold) {
		u.fold()
	}
}

// fold merges the spans held and keeps only those the horizon has not
// passed.
func (u *memoryUnion) fold() {
	u.folds++
	merged := psi.Merge(u.spans)
	kept := merged[:0]
	for _, iv := range merged {
		if iv.End+unionHorizon < u.newest {
			u.fold1(iv)
		} else {
			kept = append(kept, iv)
		}
	}
	// Merged spans are sorted and disjoint: past the cap, the oldest go.
	if over := len(kept) - unionKeep; over > 0 {
		for _, iv := range kept[:over] {
			u.fold1(iv)
		}
		kept = kept[over:]
	}
	u.spans = append(u.spans[:0], kept...)
	u.foldAt = 2 * len(u.spans)
}

func (u *memoryUnion) fold1(iv psi.Interval) {
	u.doneNs += iv.End - iv.Start
	u.doneTo = max(u.doneTo, iv.End)
}

// total is the union's length so far.
func (u *memoryUnion) total() uint64 { return u.doneNs + uint64(psi.Union(u.spans)) }
