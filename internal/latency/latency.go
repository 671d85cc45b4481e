// Package latency turns a service's request latencies into per-window
// statistics and accounts for what it could not use. The sources that
// acquire them are in internal/latency/source, apart, so that nothing
// built on these statistics imports net/http.
package latency

import (
	"slices"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// Sample is one request: when it finished (CLOCK_MONOTONIC ns, the clock
// of the kernel's stall timestamps) and how long it took. A request timed
// in the kernel also says which thread served it and how much of its time
// that thread spent in each kind of stall.
type Sample struct {
	TsNs      uint64
	LatencyNs uint64
	TID       uint32              // 0 when the source does not know
	Stall     *stall.RequestStall // nil when the source does not know
}

// Stats is one window's latency.
type Stats struct {
	Index  uint64
	Count  uint64
	P50Ns  uint64
	P99Ns  uint64
	P999Ns uint64 // since format 1.3; 0 before
	MaxNs  uint64
	// Skipped, if set, says why the window's latency is unknown (a
	// histogram's counters went back): the window is left out of the
	// analysis, neither normal nor empty.
	Skipped string
	// Requests is the window's per-request stall breakdown, from a
	// source that times requests in the kernel.
	Requests *Requests
}

// Requests is what the stalls did to one window's requests, measured per
// request in the thread that served it.
type Requests struct {
	// Slow are the requests over the SLO (without one, those at or above
	// the window's p99): how many, their summed latency, and the stall
	// time per cause inside them.
	Slow        uint64
	SlowNs      uint64
	SlowStallNs [stall.NumCauses]uint64
	// SlowExcessStallNs is the same with each request's stall counted up
	// to its latency over the slow threshold: what of the excess a cause
	// can account for, so that a routine stall in requests just over the
	// SLO does not cover them all.
	SlowExcessStallNs [stall.NumCauses]uint64
	// SlowBudget is where the slow requests' time went, summed over them
	// (stall.Budget): it adds up to their latency, SlowNs.
	SlowBudget stall.Budget
	// FreezeNs is the stall time inside all of the window's requests.
	FreezeNs uint64
	// TIDs are the threads that completed requests in the window.
	TIDs []uint32
}

// Windows collects samples into fixed windows aligned with the stall
// windows (same start, same length), and accounts for every reading it
// cannot use (Account).
type Windows struct {
	grid  window.Grid
	sloNs uint64 // requests over it are slow; 0: the window's p99
	bins  map[uint64][]Sample
	taken map[uint64]bool
	next  uint64 // one past the newest window taken: windows are taken in order
	// ready holds statistics computed elsewhere (a Prometheus histogram).
	ready map[uint64]Stats
	acct  Account
}

// aheadNs is how far past the oldest open window a sample may lie and
// still be held for its window: a request cannot finish in the future,
// so one further ahead is in another clock or unit, and holding it until
// the end would let such a source fill memory.
const aheadNs = 60 * uint64(time.Second)

// NewWindows starts the windows of grid; a request over sloNs
// (if not zero) is slow.
func NewWindows(grid window.Grid, sloNs uint64) *Windows {
	return &Windows{grid: grid, sloNs: sloNs, bins: map[uint64][]Sample{},
		taken: map[uint64]bool{}, ready: map[uint64]Stats{}}
}

// Add files one sample under its window. One from before the start, too
// far ahead, or for a window already taken is counted and dropped.
func (w *Windows) Add(s Sample) {
	if s.TsNs < w.grid.StartNs { // counted, not folded into the first window
		w.acct.outside(s.TsNs, false)
		return
	}
	i := w.grid.Index(s.TsNs)
	if i < w.next || w.taken[i] {
		w.acct.Late++
		return
	}
	if s.TsNs-w.grid.Start(w.next) >= aheadNs+2*w.grid.LenNs {
		w.acct.outside(s.TsNs, true)
		return
	}
	w.bins[i] = append(w.bins[i], s)
}

// Put files statistics already computed for a window.
func (w *Windows) Put(s Stats) {
	if w.taken[s.Index] {
		w.acct.LateWindows++
		return
	}
	w.ready[s.Index] = s
}

// Taken reports whether window i's statistics were taken already.
func (w *Windows) Taken(i uint64) bool { return w.taken[i] }

// Take returns the statistics of window i and forgets its samples.
func (w *Windows) Take(i uint64) *Stats {
	w.taken[i] = true
	w.next = max(w.next, i+1)
	if s, ok := w.ready[i]; ok {
		delete(w.ready, i)
		w.acct.window(s)
		return &s
	}
	v, ok := w.bins[i]
	if !ok {
		return nil
	}
	delete(w.bins, i)
	w.acct.Samples += uint64(len(v))
	return SummarizeSamples(i, v, w.sloNs)
}

// Attached counts a window's statistics that came after the window was
// taken and were still put to use (a replay of a recording from before
// format 1.3 reads them late).
func (w *Windows) Attached(s Stats) { w.acct.window(s) }

// Drop forgets what is still held when the run ends: samples after its
// last window, and statistics for windows that never closed. Both are
// counted.
func (w *Windows) Drop() {
	for i, v := range w.bins {
		for _, s := range v {
			w.acct.outside(s.TsNs, true)
		}
		delete(w.bins, i)
	}
	w.acct.LateWindows += uint64(len(w.ready))
	clear(w.ready)
}

// Account is what the windows took and left out so far. Its span (StartNs,
// EndNs) and what the samples left out look like (Likely) are the
// caller's to fill in.
func (w *Windows) Account() Account { return w.acct }

// Summarize computes exact quantiles (nearest rank) of one window's
// latencies.
func Summarize(index uint64, v []uint64) *Stats {
	if len(v) == 0 {
		return &Stats{Index: index}
	}
	s := append([]uint64(nil), v...)
	slices.Sort(s) // sort.Slice's reflection was 8% of a busy reader's time
	return &Stats{Index: index, Count: uint64(len(s)), P50Ns: rank(s, 0.50), P99Ns: rank(s, 0.99),
		P999Ns: rank(s, 0.999), MaxNs: s[len(s)-1]}
}

// rank is the nearest-rank q-quantile of sorted s.
func rank(s []uint64, q float64) uint64 {
	k := int(q*float64(len(s))+0.999999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// SummarizeSamples is Summarize, with the per-request stall breakdown of
// the samples that carry one: requests over sloNs (or, without one, at
// or above the window's p99) are the slow ones.
func SummarizeSamples(index uint64, v []Sample, sloNs uint64) *Stats {
	lat := make([]uint64, len(v))
	for i, s := range v {
		lat[i] = s.LatencyNs
	}
	st := Summarize(index, lat)
	slow := sloNs
	if slow == 0 {
		slow = st.P99Ns
	}
	var r *Requests
	tids := map[uint32]bool{}
	for _, s := range v {
		if s.Stall == nil {
			continue
		}
		if r == nil {
			r = &Requests{}
		}
		r.FreezeNs += s.Stall.FreezeNs
		if s.TID != 0 && !tids[s.TID] {
			tids[s.TID] = true
			r.TIDs = append(r.TIDs, s.TID)
		}
		if (sloNs > 0 && s.LatencyNs > slow) || (sloNs == 0 && s.LatencyNs >= slow) {
			r.Slow++
			r.SlowNs += s.LatencyNs
			b := s.Stall.Budget(s.LatencyNs)
			r.SlowBudget.Add(&b)
			over := s.LatencyNs - slow // >= 0: the request is slow
			for c, ns := range s.Stall.ByCause {
				if ns > 0 {
					r.SlowStallNs[c] += ns
					r.SlowExcessStallNs[c] += min(ns, over)
				}
			}
		}
	}
	if r != nil {
		slices.Sort(r.TIDs)
	}
	st.Requests = r
	return st
}
