package stall

import (
	"math"
	"testing"
)

func TestSlotOf(t *testing.T) {
	cases := []struct {
		ns   uint64
		want int
	}{
		{0, 0},
		{1, 0},
		{2, 1},
		{3, 1},
		{4, 2},
		{7, 2},
		{8, 3},
		{1023, 9},
		{1024, 10},
		{1<<39 - 1, 38},
		{1 << 39, 39},
		{1<<40 - 1, 39},
		{1 << 40, 39}, // beyond the last slot: clamped
		{1 << 63, 39},
		{math.MaxUint64, 39},
	}
	for _, c := range cases {
		if got := SlotOf(c.ns); got != c.want {
			t.Errorf("SlotOf(%d) = %d, want %d", c.ns, got, c.want)
		}
	}
}

// Every slot's range must hold exactly the values SlotOf maps to it, and
// the ranges must tile [0, 2^HistSlots) without gaps.
func TestSlotRangeAgreesWithSlotOf(t *testing.T) {
	var prevHi uint64
	for i := 0; i < HistSlots; i++ {
		lo, hi := SlotRange(i)
		if lo != prevHi {
			t.Errorf("slot %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if hi <= lo {
			t.Fatalf("slot %d: empty range [%d, %d)", i, lo, hi)
		}
		if got := SlotOf(lo); got != i {
			t.Errorf("SlotOf(lo=%d) = %d, want %d", lo, got, i)
		}
		if got := SlotOf(hi - 1); got != i {
			t.Errorf("SlotOf(hi-1=%d) = %d, want %d", hi-1, got, i)
		}
		prevHi = hi
	}
	if lo, hi := SlotRange(0); lo != 0 || hi != 2 {
		t.Errorf("SlotRange(0) = [%d, %d), want [0, 2)", lo, hi)
	}
	if lo, hi := SlotRange(10); lo != 1024 || hi != 2048 {
		t.Errorf("SlotRange(10) = [%d, %d), want [1024, 2048)", lo, hi)
	}
}

func TestAdd(t *testing.T) {
	var h Hist
	for _, ns := range []uint64{0, 1, 5, 1000, 3} {
		h.Add(ns)
	}
	if h.Count != 5 || h.TotalNs != 1009 || h.MaxNs != 1000 {
		t.Fatalf("count/total/max = %d/%d/%d, want 5/1009/1000", h.Count, h.TotalNs, h.MaxNs)
	}
	want := map[int]uint64{0: 2, 1: 1, 2: 1, 9: 1}
	for i, c := range h.Slots {
		if c != want[i] {
			t.Errorf("slot %d = %d, want %d", i, c, want[i])
		}
	}
	if m := h.Mean(); m != 1009/5 {
		t.Errorf("Mean = %d, want %d", m, 1009/5)
	}
	var empty Hist
	if m := empty.Mean(); m != 0 {
		t.Errorf("empty Mean = %d, want 0", m)
	}
}

func TestMerge(t *testing.T) {
	var a, b Hist
	a.Add(10)
	a.Add(100)
	b.Add(5000)
	b.Add(10)
	b.Add(0)
	a.Merge(&b)
	if a.Count != 5 || a.TotalNs != 5120 || a.MaxNs != 5000 {
		t.Fatalf("merged count/total/max = %d/%d/%d, want 5/5120/5000", a.Count, a.TotalNs, a.MaxNs)
	}
	if a.Slots[SlotOf(10)] != 2 || a.Slots[SlotOf(100)] != 1 || a.Slots[SlotOf(5000)] != 1 || a.Slots[0] != 1 {
		t.Errorf("merged slots wrong: %v", a.Slots)
	}
	// Merging a smaller max keeps the larger one; merging empty changes nothing.
	var c Hist
	c.Add(1)
	before := a
	a.Merge(&c)
	if a.MaxNs != 5000 {
		t.Errorf("MaxNs = %d after merging a smaller max", a.MaxNs)
	}
	a = before
	a.Merge(&Hist{})
	if a != before {
		t.Errorf("merging an empty hist changed it")
	}
	// b itself is untouched.
	if b.Count != 3 || b.MaxNs != 5000 {
		t.Errorf("Merge modified its argument: %+v", b)
	}
}

func TestQuantileEmpty(t *testing.T) {
	var h Hist
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if v := h.Quantile(q); v != 0 {
			t.Errorf("empty Quantile(%v) = %d, want 0", q, v)
		}
	}
}

func TestQuantileInterpolatesInsideBucket(t *testing.T) {
	// 100 samples all in slot 10 ([1024, 2048)), max well above the bucket
	// so the cap does not interfere.
	var h Hist
	h.Slots[10] = 100
	h.Count = 100
	h.MaxNs = 1 << 20
	cases := []struct {
		q    float64
		want uint64
	}{
		{0.25, 1024 + 256},
		{0.50, 1024 + 512},
		{0.75, 1024 + 768},
		{1.00, 2048},
		{0.001, 1024 + 10}, // rank < 1 is raised to the first sample: 1/100 of the width
		{0, 1024 + 10},
		{-1, 1024 + 10},
		{2, 2048}, // q > 1 is treated as 1
	}
	for _, c := range cases {
		if v := h.Quantile(c.q); v != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, v, c.want)
		}
	}
}

func TestQuantileAcrossBuckets(t *testing.T) {
	// 50 samples in slot 4 ([16, 32)) and 50 in slot 8 ([256, 512)).
	var h Hist
	h.Slots[4] = 50
	h.Slots[8] = 50
	h.Count = 100
	h.MaxNs = 511
	if v := h.Quantile(0.5); v != 32 { // the 50th sample is the last of slot 4
		t.Errorf("p50 = %d, want 32", v)
	}
	if v := h.Quantile(0.6); v != 256+51 { // 10 of 50 into [256, 512): 256 + 0.2*256
		t.Errorf("p60 = %d, want %d", v, 256+51)
	}
	if v := h.Quantile(0.99); v != 256+250 {
		t.Errorf("p99 = %d, want %d", v, 256+250)
	}
	// Quantiles never decrease with q.
	var prev uint64
	for q := 0.01; q <= 1.0001; q += 0.01 {
		v := h.Quantile(q)
		if v < prev {
			t.Fatalf("Quantile(%v) = %d < Quantile(previous) = %d", q, v, prev)
		}
		prev = v
	}
}

func TestQuantileCappedAtMax(t *testing.T) {
	var h Hist
	h.Add(1500) // slot 10: [1024, 2048)
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		if v := h.Quantile(q); v != 1500 {
			t.Errorf("single sample 1500: Quantile(%v) = %d, want 1500 (capped at max)", q, v)
		}
	}

	var g Hist
	for i := 0; i < 10; i++ {
		g.Add(1100)
	}
	// Interpolation would go up to 2048; the exact max is 1100.
	if v := g.Quantile(0.99); v != 1100 {
		t.Errorf("p99 = %d, want 1100", v)
	}
	if v := g.Quantile(0.05); v > 1100 || v < 1024 {
		t.Errorf("p5 = %d, want within [1024, 1100]", v)
	}
}

// Quantiles stay within the 2x error bound of the true value for a spread
// of real durations.
func TestQuantileWithinBucketOfTruth(t *testing.T) {
	var h Hist
	var vals []uint64
	for i := uint64(1); i <= 1000; i++ {
		v := i * 37
		vals = append(vals, v)
		h.Add(v)
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		truth := vals[int(q*float64(len(vals)))-1]
		got := h.Quantile(q)
		if got < truth/2 || got > truth*2 {
			t.Errorf("Quantile(%v) = %d, true value %d: outside 2x", q, got, truth)
		}
		if got > h.MaxNs {
			t.Errorf("Quantile(%v) = %d > max %d", q, got, h.MaxNs)
		}
	}
}

// A histogram of zero-length samples (numa_task_move is counted in the
// kernel with duration 0) has max 0; no quantile may exceed it.
func TestQuantileZeroDurations(t *testing.T) {
	var h Hist
	for i := 0; i < 7; i++ {
		h.Add(0)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		if v := h.Quantile(q); v != 0 {
			t.Errorf("all-zero hist: Quantile(%v) = %d, want 0 (max is 0)", q, v)
		}
	}
}

func TestQuantileLastSlotHoldsHugeValues(t *testing.T) {
	var h Hist
	h.Add(math.MaxUint64)
	if h.Slots[HistSlots-1] != 1 {
		t.Fatalf("huge value not in the last slot")
	}
	if v := h.Quantile(0.5); v == 0 {
		t.Errorf("Quantile of a huge value = 0")
	}
}
