// Package correlate answers the incident's question: did the stalls cause
// the latency spikes, and which threads did they hit? It works on windows:
// latency per window from a latency source, stall time per window from the
// aggregator, both indexed the same way.
//
// A spike is a window whose latency is over the SLO, or, without one, well
// over the recent normal windows. A cause explains a spike by dose, not by
// presence: the longest freeze it caused one thread has to cover most of
// the spike's excess over the reference (or, with a source that times
// requests in the kernel, most of the slow requests' own time has to be
// that stall), and over the run its freeze time has to track the latency.
package correlate

import (
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// Latency is one window's request latency.
type Latency = latency.Stats

// Config tunes spike detection.
type Config struct {
	// SLONs, if set, makes every window whose latency is over it a spike,
	// from the first window on: no baseline is needed.
	SLONs uint64
	// Without an SLO, a spike is over K × the median of the last History
	// normal windows (default 2 and 30) and over FloorNs (default 1 ms),
	// once MinHist normal windows (default 5) were seen.
	K       float64
	FloorNs uint64
	History int
	MinHist int
	// On is the latency a window is judged by: p99 (default), p999 or max.
	On run.Percentile
	// WindowNs is the window's length: a window in which no request
	// completed, while requests completed before and after it, made
	// every request wait at least this long.
	WindowNs uint64
	// Function names the timed function, for a source that times one in
	// the kernel: the verdict says when stalls fall outside it.
	Function string
	// Untraced causes had no probe attached: no verdict lists them as 0.
	Untraced [stall.NumCauses]bool
	// Source is the latency source's kind: advice for one source (time an
	// outer function) is given only for it.
	Source run.LatencyKind
	// PressureOwn: the windows' PSI is the target's own cgroup's; else it
	// is the whole machine's, every process's, and is said to be.
	PressureOwn bool
	WallAt      func(monoNs uint64) time.Time // for verdict lines; nil prints offsets
	StartNs     uint64
}

func (c *Config) defaults() {
	if c.K <= 0 {
		c.K = 2
	}
	if c.FloorNs == 0 {
		c.FloorNs = uint64(time.Millisecond)
	}
	if c.History <= 0 {
		c.History = 30
	}
	if c.MinHist <= 0 {
		c.MinHist = 5
	}
	if c.WindowNs == 0 {
		c.WindowNs = uint64(time.Second)
	}
}

// latencyOn is l's latency by p. A recording from before p999 was kept
// falls back on the maximum, the nearest figure it has.
func latencyOn(p run.Percentile, l *Latency) uint64 {
	switch p {
	case run.P999:
		if l.P999Ns > 0 || l.Count == 0 {
			return l.P999Ns
		}
		return l.MaxNs
	case run.Max:
		return l.MaxNs
	}
	return l.P99Ns
}

// percentileLabel is p as verdicts print it.
func percentileLabel(p run.Percentile) string {
	switch p {
	case run.P999:
		return "P99.9"
	case run.Max:
		return "Max"
	}
	return "P99"
}

// Window is what the analysis needs of one closed window: the service's
// latency in it, and per cause the stall time and who stalled. The engine
// keeps one per window for the whole run, so the analysis it hands the
// view and the one in the report are the same function of the same data.
type Window struct {
	Index   uint64
	StartNs uint64
	Latency *Latency // nil: no request completed
	StallNs [stall.NumCauses]uint64
	Hits    []Hits // the causes that stalled
	// ServedStallNs is the freeze time of the threads that completed
	// requests in the window, when the source says which threads those
	// were (a request timer in the kernel).
	ServedStallNs uint64
	// ServedFrozenNs is the longest one of those threads was frozen in
	// the window: what the rule for a frozen window weighs (Detector).
	ServedFrozenNs uint64
	// PressureNs is the memory stall PSI counted in the window (the
	// target's cgroup, else the system), when PSI was read (HasPressure).
	PressureNs  uint64
	HasPressure bool
}

// Hits are one cause's stalls in one window.
type Hits struct {
	Cause    stall.Cause
	Threads  int
	WorstTID uint32
	WorstNs  uint64 // the longest one thread was frozen by it, in total
	// LongestNs is its longest single stall, of any thread: a window's
	// total can be many short waits, none of which held a request long.
	LongestNs uint64
	Process   string // comm of the most affected process
	// Stack is where the worst thread's longest stall of the cause that
	// carried a stack stalled; nil when none did.
	Stack *stall.Stack
	// Reason is the kind of wait of the longest stall (LongestNs).
	Reason string
}

// hit returns w's hits for cause c.
func (w *Window) hit(c stall.Cause) Hits {
	if w != nil {
		for _, h := range w.Hits {
			if h.Cause == c {
				return h
			}
		}
	}
	return Hits{Cause: c}
}

// Summarize keeps what the analysis needs of a closed window. Who stalled
// is kept for every window, even one without requests yet: a replay of an
// older recording may read a window's latency after the window closed.
func Summarize(w *aggregate.Window) Window {
	out := Window{Index: w.Index, StartNs: w.StartNs, Latency: w.Latency, PressureNs: w.PressureNs, HasPressure: w.HasPressure}
	for c := range out.StallNs {
		out.StallNs[c] = w.Causes[c].TotalNs
		if out.StallNs[c] == 0 {
			continue
		}
		if h, ok := hits(w, stall.Cause(c)); ok {
			out.Hits = append(out.Hits, h)
		}
	}
	if w.Latency != nil && w.Latency.Requests != nil {
		for _, tid := range w.Latency.Requests.TIDs {
			if t := w.Threads[tid]; t != nil {
				out.ServedStallNs += t.TotalNs
				out.ServedFrozenNs = max(out.ServedFrozenNs, t.TotalNs)
			}
		}
	}
	return out
}

// hits finds who stalled on cause c in w, and which process suffered most.
func hits(w *aggregate.Window, c stall.Cause) (Hits, bool) {
	type proc struct {
		ns   uint64
		name aggregate.ProcessName
	}
	h := Hits{Cause: c}
	procs := map[uint32]*proc{}
	for _, t := range w.Threads {
		ns := t.ByCause[c].TotalNs
		if ns == 0 {
			continue
		}
		h.Threads++
		if t.ByCause[c].MaxNs > h.LongestNs {
			h.LongestNs, h.Reason = t.ByCause[c].MaxNs, t.ByCause[c].Reason
		}
		p := procs[t.PID]
		if p == nil {
			p = &proc{}
			procs[t.PID] = p
		}
		p.ns += ns
		p.name.Offer(t.PID, t.TID, t.Comm)
		if ns > h.WorstNs || (ns == h.WorstNs && t.TID < h.WorstTID) {
			h.WorstNs, h.WorstTID, h.Stack = ns, t.TID, t.ByCause[c].Stack
		}
	}
	if h.Threads == 0 {
		return h, false
	}
	if h.Stack == nil {
		h.Stack = w.Causes[c].Stack // another thread's, if the worst one's had none
	}
	var top *proc
	var topPID uint32
	for pid, p := range procs {
		if top == nil || p.ns > top.ns || (p.ns == top.ns && pid < topPID) {
			top, topPID = p, pid
		}
	}
	h.Process = top.name.String()
	return h, true
}

// CauseInSpike is one cause's share of one spike.
type CauseInSpike struct {
	Cause    stall.Cause
	StallNs  uint64 // in the spike window, all traced threads
	AroundNs uint64 // in the windows either side
	Threads  int
	WorstTID uint32
	WorstNs  uint64
	Process  string // comm of the most affected process
	// LongestNs is its longest single stall in the window, and Reason
	// that stall's kind of wait (memstall_wait's thrashing).
	LongestNs uint64
	Reason    string
	// ExposureNs is the longest one thread was frozen by the cause, in
	// this window or the one before it (whose backlog this one drains).
	ExposureNs uint64
	// Coverage is the share of the spike the stall accounts for, 0 to 1:
	// of the slow requests' own excess over the reference when requests
	// were timed in the kernel, else of the window's.
	Coverage float64
	// InSlowRequestsNs is the cause's stall time inside the slow requests,
	// when requests were timed in the kernel.
	InSlowRequestsNs uint64
	// inSlowExcessNs is the same, each request's counted up to its own
	// excess: what coverage is measured with.
	inSlowExcessNs uint64
	// Stack is where the cause's worst-hit thread stalled longest in the
	// window, when its stalls carried stacks (--stacks-min).
	Stack *stall.Stack
}

// Spike is one window whose latency jumped.
type Spike struct {
	Index   uint64
	StartNs uint64
	// LatencyNs is the window's latency by the percentile spikes are
	// judged by; the window's length when no request completed in it.
	LatencyNs  uint64
	Percentile run.Percentile
	P99Ns      uint64
	// BaselineNs is what the window was judged against: the SLO, or the
	// median of the recent normal windows.
	BaselineNs   uint64
	SLO          bool
	ExcessNs     uint64
	NoCompletion bool // no request completed in the window
	Requests     uint64
	Causes       []CauseInSpike
	Verdict      string
	// PressureNs is the memory stall PSI counted in the window, when it
	// was read (HasPressure).
	PressureNs  uint64
	HasPressure bool
	// Budget is where the window's slow requests' time went, when they
	// were timed with their serving threads' counters (HasBudget).
	Budget    stall.Budget
	HasBudget bool
	// P999Ns and MaxNs are the window's tail.
	P999Ns, MaxNs uint64
	// Frozen: the window is no spike (the percentile spikes are judged
	// by held) but the service froze in it, by the Detector's rule; it is
	// one of Result.Frozen, its LatencyNs is the window's maximum and its
	// excess is over the SLO, or over its own p99 without one.
	Frozen bool
	// ServedFrozenNs is the longest one of the threads that completed
	// requests in the window was frozen in it, where the source says
	// which threads those were.
	ServedFrozenNs uint64

	timed bool // coverage is of the slow requests' excess, timed in the kernel
}

// on is the window's latency by p.
func (sp *Spike) on(p run.Percentile) uint64 {
	switch p {
	case run.P999:
		return sp.P999Ns
	case run.Max:
		return sp.MaxNs
	}
	return sp.P99Ns
}

// CauseCorrelation is one cause's relation to the spikes over the run.
type CauseCorrelation struct {
	SpikeShare  float64  // spike windows with this cause's stalls
	NormalShare float64  // normal windows with them
	Lift        *float64 // spike / normal share; null when normal windows never had it
	// Spearman is the rank correlation of the cause's dose in a window
	// (the longest freeze of one thread) with the window's latency:
	// whether the stall tracks the latency. Null if undefined.
	Spearman *float64
	// Covered is the share of spikes in which it covers at least half.
	Covered float64
	// ExcessShare is the share of the spikes' summed excess latency it
	// covers: reported, not judged by, since one long host delay can be
	// most of that sum.
	ExcessShare float64
	// LargerInSpikes says its median dose in the spikes it covers at
	// least half of is at least twice its median in the normal windows,
	// or that there were too few normal ones (under 3) to tell.
	LargerInSpikes bool
	// InSlowRequests is the share of the slow requests' time that was
	// this stall, over the run, when requests were timed in the kernel.
	InSlowRequests *float64
	// Reason is the kind of wait (memstall_wait's thrashing) of the
	// stall that covered most of the spikes it covers.
	Reason string
}

// UncoveredPressure is the memory stall PSI counted in the windows of
// the spikes no cause covers.
type UncoveredPressure struct {
	Known    int    // uncovered spikes whose window had a PSI reading
	SomeNs   uint64 // PSI's memory "some" in those windows
	WindowNs uint64 // their length
}

// Share is the part of those windows' time PSI counted as memory stall.
func (u UncoveredPressure) Share() float64 {
	if u.WindowNs == 0 {
		return 0
	}
	// At most all of it: a reading late by a window puts two windows'
	// growth in one.
	return min(1, float64(u.SomeNs)/float64(u.WindowNs))
}

// Result is the whole analysis.
type Result struct {
	// Windows counts the windows with requests, and those between them in
	// which none completed when such a gap counts as a spike.
	Windows int
	Spikes  []Spike
	// Correlation is each weighed cause's relation to the spikes; nil
	// for a cause that was not weighed (counted, or not traced).
	Correlation [stall.NumCauses]*CauseCorrelation
	Explained   []stall.Cause // causes that explain the spikes
	Partly      []stall.Cause // causes that explain some of them
	// Uncovered is how many spikes no cause covers at least half of.
	Uncovered int
	// UncoveredPressure is what PSI counted in those spikes' windows, of
	// the Known ones it was read for: whether memory stalled in them in
	// places no probe sees.
	UncoveredPressure UncoveredPressure
	// PressureOwn: that PSI is the target's own group's, not the whole
	// machine's (every process's).
	PressureOwn bool
	// OutsideShare is the share of the serving threads' stall time that
	// fell outside the timed requests; null unless requests were timed in
	// the kernel.
	OutsideShare *float64
	// Budget is where the spikes' slow requests' time went, summed over
	// the spikes that have one (HasBudget): the verdict's first words.
	Budget     stall.Budget
	HasBudget  bool
	Conclusion string
	// FrozenBudget is where the frozen windows' slow requests' time went,
	// summed over those that have one (HasFrozenBudget): the frozen
	// windows' words open with it, as the verdict does with Budget.
	FrozenBudget    stall.Budget
	HasFrozenBudget bool

	outsideNs uint64 // the serving threads' stall time, over the run
	// uncoveredBudget is the budget of the spikes no cause covers.
	uncoveredBudget stall.Budget

	// Frozen are the windows that are no spikes, the percentile spikes
	// are judged by having held, in which the service froze (Detector):
	// a closed-loop client queues few requests behind a freeze, so its
	// p99 holds while its slowest requests waited the freeze out. Each is
	// attributed as a spike is, against its tail.
	Frozen []Spike
	// Measured is the latency the run measured, spikes or not.
	Measured Measured
	// On is the percentile spikes were judged by: the one that held in
	// the frozen windows.
	On run.Percentile
	// frozenWords is what the conclusion says of the frozen windows.
	frozenWords string
}

// Measured is the latency a run measured: each figure's lowest and
// highest over the windows in which requests completed.
type Measured struct {
	Windows        int // with requests
	P99, P999, Max Range
	// HasP999: the windows kept their p99.9 (recordings since format
	// 1.3); P999 is over those that did.
	HasP999 bool
}

// Range is the lowest and the highest of a figure.
type Range struct{ Lo, Hi uint64 }

func (r *Range) add(v uint64, first bool) {
	if first {
		r.Lo, r.Hi = v, v
		return
	}
	r.Lo, r.Hi = min(r.Lo, v), max(r.Hi, v)
}

// add counts one window's latency in.
func (m *Measured) add(l *Latency) {
	first := m.Windows == 0
	m.Windows++
	m.P99.add(l.P99Ns, first)
	m.Max.add(l.MaxNs, first)
	if l.P999Ns > 0 {
		m.P999.add(l.P999Ns, !m.HasP999)
		m.HasP999 = true
	}
}

// Analyze finds the spikes in a run's windows (in index order) and weighs
// each cause against them. The detector judges each window as the live
// run's did when it closed.
func Analyze(ws []Window, cfg Config) *Result {
	cfg.defaults()
	res := &Result{Spikes: []Spike{}, Explained: []stall.Cause{}, Partly: []stall.Cause{}, Frozen: []Spike{}, On: cfg.On}
	det := NewDetector(cfg)
	var seen []*Window
	type heldWindow struct {
		i    int
		base uint64
	}
	var held []heldWindow // empty windows that are spikes if requests complete again
	for i := range ws {
		w := &ws[i]
		j := det.Judge(w)
		if j.Held {
			held = append(held, heldWindow{i, j.Baseline})
			continue
		}
		if w.Latency == nil || w.Latency.Count == 0 || w.Latency.Skipped != "" {
			continue // too sparse a load to tell, or the source could not tell
		}
		if j.Gap {
			for _, h := range held {
				g := &ws[h.i]
				seen = append(seen, g)
				prev, next := neighbours(ws, h.i)
				res.Spikes = append(res.Spikes, attribute(g, prev, next, cfg.WindowNs, h.base, noCompletion, cfg))
			}
		}
		held = held[:0]
		seen = append(seen, w)
		res.Measured.add(w.Latency)
		prev, next := neighbours(ws, i)
		switch {
		case j.Spike:
			res.Spikes = append(res.Spikes, attribute(w, prev, next, latencyOn(cfg.On, w.Latency), j.Baseline, overReference, cfg))
		case j.Frozen:
			res.Frozen = append(res.Frozen, attributeFrozen(w, prev, next, cfg))
		}
	}
	res.Windows = len(seen)
	res.weigh(seen, cfg)
	res.outside(ws)
	res.spikesBudget()
	res.conclude(cfg)
	return res
}

// neighbours are the windows just before and after ws[i], where the
// series has them.
func neighbours(ws []Window, i int) (prev, next *Window) {
	if i > 0 && ws[i-1].Index+1 == ws[i].Index {
		prev = &ws[i-1]
	}
	if i+1 < len(ws) && ws[i+1].Index == ws[i].Index+1 {
		next = &ws[i+1]
	}
	return prev, next
}
