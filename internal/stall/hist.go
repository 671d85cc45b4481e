package stall

import "math/bits"

// HistSlots is the number of log2 buckets, matching HIST_SLOTS in the BPF
// header: slot i holds durations in [2^i, 2^(i+1)) ns; 0 ns lands in slot 0.
const HistSlots = 40

// Hist is an exact count/total/max plus a log2 histogram of durations.
type Hist struct {
	Count   uint64
	TotalNs uint64
	MaxNs   uint64
	// NestedNs is the part of TotalNs spent inside another cause's stall
	// (soft-limit reclaim inside direct reclaim, migration inside
	// compaction): left out of a thread's total freeze time.
	NestedNs uint64
	Slots    [HistSlots]uint64
}

// SlotOf returns the bucket a duration falls in.
func SlotOf(ns uint64) int {
	if ns == 0 {
		return 0
	}
	s := bits.Len64(ns) - 1
	if s >= HistSlots {
		s = HistSlots - 1
	}
	return s
}

// SlotRange returns the bounds [lo, hi) of slot i in ns.
func SlotRange(i int) (lo, hi uint64) {
	if i == 0 {
		return 0, 2
	}
	return 1 << uint(i), 1 << uint(i+1)
}

// Add records one duration.
func (h *Hist) Add(ns uint64) {
	h.Count++
	h.TotalNs += ns
	if ns > h.MaxNs {
		h.MaxNs = ns
	}
	h.Slots[SlotOf(ns)]++
}

// Merge adds o into h.
func (h *Hist) Merge(o *Hist) {
	h.Count += o.Count
	h.TotalNs += o.TotalNs
	h.NestedNs += o.NestedNs
	if o.MaxNs > h.MaxNs {
		h.MaxNs = o.MaxNs
	}
	for i := range h.Slots {
		h.Slots[i] += o.Slots[i]
	}
}

// Quantile estimates the q-quantile (0 < q <= 1) by linear interpolation
// inside the log2 bucket that holds it, capped at the exact maximum. The
// error is bounded by the bucket's width: at most 2x.
func (h *Hist) Quantile(q float64) uint64 {
	var n uint64
	for _, c := range h.Slots {
		n += c
	}
	if n == 0 {
		return 0
	}
	if q <= 0 {
		q = 0
	}
	if q > 1 {
		q = 1
	}
	rank := q * float64(n) // the sample we want, 1-based in spirit
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.Slots {
		if c == 0 {
			continue
		}
		if float64(seen+c) >= rank {
			lo, hi := SlotRange(i)
			if i == HistSlots-1 && h.MaxNs > hi {
				hi = h.MaxNs // the last slot is open-ended
			}
			frac := (rank - float64(seen)) / float64(c)
			v := uint64(float64(lo) + frac*float64(hi-lo))
			if v > h.MaxNs {
				v = h.MaxNs
			}
			return v
		}
		seen += c
	}
	return h.MaxNs
}

// Mean is TotalNs / Count, or 0.
func (h *Hist) Mean() uint64 {
	if h.Count == 0 {
		return 0
	}
	return h.TotalNs / h.Count
}

// FreezeNs is the time this cause alone froze the thread: TotalNs without
// the nested part.
func (h *Hist) FreezeNs() uint64 { return h.TotalNs - h.NestedNs }
