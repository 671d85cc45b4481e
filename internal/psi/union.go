package psi

import (
	"cmp"
	"slices"
	"time"
)

// Interval is a stretch of CLOCK_MONOTONIC time, [Start, End) in ns: one
// stall numatrace timed. One with End <= Start is empty.
type Interval struct{ Start, End uint64 }

// Union is the time covered by at least one interval: numatrace's own
// counterpart of PSI's "some", where stalls of different threads that
// overlap count once. It sorts a copy, so ivs is left as it was.
func Union(ivs []Interval) time.Duration {
	s := slices.Clone(ivs)
	slices.SortFunc(s, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	var total, end uint64 // end: of the merged run so far
	for _, iv := range s {
		if iv.End <= iv.Start || iv.End <= end {
			continue // empty, or inside what is already counted
		}
		total += iv.End - max(iv.Start, end)
		end = iv.End
	}
	return time.Duration(total)
}

// Clip is the parts of ivs inside [from, to], in their order, without the
// empty ones: a run's stalls cut to a PSI span (Span.From, Span.To).
func Clip(ivs []Interval, from, to uint64) []Interval {
	var out []Interval
	for _, iv := range ivs {
		c := Interval{Start: max(iv.Start, from), End: min(iv.End, to)}
		if c.End > c.Start {
			out = append(out, c)
		}
	}
	return out
}

// Merge sorts ivs in place and merges those that overlap or touch: the
// disjoint intervals of their union, in order, in ivs' own storage.
func Merge(ivs []Interval) []Interval {
	slices.SortFunc(ivs, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	out := ivs[:0]
	for _, iv := range ivs {
		if iv.End <= iv.Start {
			continue
		}
		if n := len(out); n > 0 && iv.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, iv.End)
			continue
		}
		out = append(out, iv)
	}
	return out
}
