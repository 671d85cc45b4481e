// Package latency turns a service's request latencies into per-window
// statistics. Sources: a file or stream of samples (a load generator's
// log), a uprobe pair on the request handler, or a Prometheus histogram
// (source.go).
package latency

import (
	"sort"
)

// Sample is one request: when it finished (CLOCK_MONOTONIC ns, the clock
// of the kernel's stall timestamps) and how long it took.
type Sample struct {
	TsNs      uint64
	LatencyNs uint64
}

// Stats is one window's latency.
type Stats struct {
	Index uint64 `json:"index"`
	Count uint64 `json:"count"`
	P50Ns uint64 `json:"p50_ns"`
	P99Ns uint64 `json:"p99_ns"`
	MaxNs uint64 `json:"max_ns"`
}

// Windows collects samples into fixed windows aligned with the stall
// windows (same start, same length).
type Windows struct {
	startNs, windowNs uint64
	bins              map[uint64][]uint64
	// Early counts samples from before the start; Late those whose window
	// was already taken. Both are dropped.
	Early, Late uint64
	taken       map[uint64]bool
	// ready holds statistics computed elsewhere (a Prometheus histogram).
	ready map[uint64]Stats
}

// NewWindows starts windows of windowNs at startNs.
func NewWindows(startNs, windowNs uint64) *Windows {
	return &Windows{startNs: startNs, windowNs: windowNs, bins: map[uint64][]uint64{}, taken: map[uint64]bool{}, ready: map[uint64]Stats{}}
}

// Add files one sample under its window.
func (w *Windows) Add(s Sample) {
	if s.TsNs < w.startNs {
		w.Early++
		return
	}
	i := (s.TsNs - w.startNs) / w.windowNs
	if w.taken[i] {
		w.Late++
		return
	}
	w.bins[i] = append(w.bins[i], s.LatencyNs)
}

// Put files statistics already computed for a window.
func (w *Windows) Put(s Stats) {
	if w.taken[s.Index] {
		w.Late++
		return
	}
	w.ready[s.Index] = s
}

// Taken reports whether window i's statistics were taken already.
func (w *Windows) Taken(i uint64) bool { return w.taken[i] }

// Take returns the statistics of window i and forgets its samples.
func (w *Windows) Take(i uint64) *Stats {
	w.taken[i] = true
	if s, ok := w.ready[i]; ok {
		delete(w.ready, i)
		return &s
	}
	v, ok := w.bins[i]
	if !ok {
		return nil
	}
	delete(w.bins, i)
	return Summarize(i, v)
}

// Rest returns the statistics of every window still held, in order.
func (w *Windows) Rest() []Stats {
	idx := make([]uint64, 0, len(w.bins))
	for i := range w.bins {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	var out []Stats
	for _, i := range idx {
		out = append(out, *w.Take(i))
	}
	return out
}

// Summarize computes exact quantiles (nearest rank) of one window.
func Summarize(index uint64, v []uint64) *Stats {
	if len(v) == 0 {
		return &Stats{Index: index}
	}
	s := append([]uint64(nil), v...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	rank := func(q float64) uint64 {
		k := int(q*float64(len(s))+0.999999999) - 1
		if k < 0 {
			k = 0
		}
		if k >= len(s) {
			k = len(s) - 1
		}
		return s[k]
	}
	return &Stats{Index: index, Count: uint64(len(s)), P50Ns: rank(0.50), P99Ns: rank(0.99), MaxNs: s[len(s)-1]}
}
