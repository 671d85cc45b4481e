package run

// Windows cut a run's clock into equal windows from its start. Every
// package that files something under a window (stalls, latency, the
// Perfetto counters) asks Index, so the same time falls in the same window
// everywhere.
type Windows struct {
	StartNs uint64
	LenNs   uint64
}

// Index is the window holding ts. Times before the start fold into the
// first window: the kernel stamps a stall at its end, and a stall that
// ended just before the first window opened still belongs to the run.
func (w Windows) Index(ts uint64) uint64 {
	if ts < w.StartNs || w.LenNs == 0 {
		return 0
	}
	return (ts - w.StartNs) / w.LenNs
}

// Start is where window i begins.
func (w Windows) Start(i uint64) uint64 { return w.StartNs + i*w.LenNs }

// End is where window i ends (the next one's start).
func (w Windows) End(i uint64) uint64 { return w.Start(i + 1) }
