// Package window is the one rule for which window a time falls in: a
// run's clock cut into equal windows from its start. Every package that
// files something under a window (stall totals, latency, the Perfetto
// counters) asks a Grid, so the same time falls in the same window
// everywhere.
package window

// Grid is a run's windows: LenNs long each, the first from StartNs
// (CLOCK_MONOTONIC).
type Grid struct {
	StartNs uint64
	LenNs   uint64
}

// Index is the window holding ts. Times before the start fold into the
// first window: the kernel stamps a stall at its end, and a stall that
// ended just before the first window opened still belongs to the run.
func (w Grid) Index(ts uint64) uint64 {
	if ts < w.StartNs || w.LenNs == 0 {
		return 0
	}
	return (ts - w.StartNs) / w.LenNs
}

// Start is where window i begins.
func (w Grid) Start(i uint64) uint64 { return w.StartNs + i*w.LenNs }

// End is where window i ends (the next one's start).
func (w Grid) End(i uint64) uint64 { return w.Start(i + 1) }
