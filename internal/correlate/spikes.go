package correlate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// Detector finds spikes one window at a time, as they close: the live
// loop uses it to trigger a flight-recorder dump, Analyze over a whole run.
// Only normal windows enter the baseline, so an incident cannot raise its
// own baseline; with an SLO there is no baseline to raise.
type Detector struct {
	cfg     Config
	history []uint64 // latency of recent normal windows
	counts  []uint64 // requests in recent windows with any
	gap     bool     // since the last completion, windows held as spikes had none
}

// NewDetector starts with no history.
func NewDetector(cfg Config) *Detector {
	cfg.defaults()
	return &Detector{cfg: cfg}
}

// baseline is what the next window is judged against: the SLO, or the
// median of the recent normal windows (0 until there are enough).
func (d *Detector) baseline() uint64 {
	if d.cfg.SLONs > 0 {
		return d.cfg.SLONs
	}
	if len(d.history) < d.cfg.MinHist {
		return 0
	}
	return median(d.history)
}

// Judged is the detector's call on one closed window.
type Judged struct {
	Spike    bool   // over the SLO, or well over the baseline
	Baseline uint64 // what it was judged against
	// Held: no request completed in the window, and it is a spike if
	// requests complete again after it; until then the load may just
	// have stopped. The next window with completions says so (Gap).
	Held bool
	// Gap: windows held as spikes came just before this one, which has
	// completions again: they are spikes now.
	Gap bool
	// Frozen: no spike, but the service froze in the window (froze).
	Frozen bool
}

// Judge takes the next closed window (its Latency nil: no request
// completed) and judges it. The live run's flight recorder and the
// report's analysis both ask it, window by window, so a dump fires on a
// gap or a frozen window exactly when the report lists it. A window the
// source could not tell is neither normal nor empty, and leaves no trace.
func (d *Detector) Judge(w *Window) Judged {
	l := w.Latency
	switch {
	case l != nil && l.Skipped != "":
		return Judged{}
	case l == nil || l.Count == 0:
		held := d.emptyIsSpike()
		d.gap = d.gap || held
		return Judged{Held: held, Baseline: d.baseline()}
	}
	d.counts = append(d.counts, l.Count)
	if len(d.counts) > d.cfg.History {
		d.counts = d.counts[1:]
	}
	j := Judged{Gap: d.gap, Baseline: d.baseline()}
	d.gap = false
	v := latencyOn(d.cfg.On, l)
	switch {
	case d.cfg.SLONs > 0:
		j.Spike = v > d.cfg.SLONs
	case j.Baseline > 0:
		j.Spike = float64(v) > d.cfg.K*float64(j.Baseline) && v > d.cfg.FloorNs
	}
	j.Frozen = !j.Spike && d.froze(w)
	if !j.Spike && !j.Frozen { // a frozen window is the incident's too
		d.history = append(d.history, v)
		if len(d.history) > d.cfg.History {
			d.history = d.history[1:]
		}
	}
	return j
}

// frozenShare is the share of a window for which one thread that
// completed requests in it must have been frozen for the window to be a
// frozen one: a tenth of the service's time gone, whatever the latency
// said.
const frozenShare = 0.1

// froze is the one rule for a window whose percentile held but in which
// the service froze: its tail broke the SLO (p99.9 or max over it), or
// one of its serving threads was frozen a tenth of it (frozenShare), when
// the source says which threads served. A closed-loop client queues few
// requests behind a freeze: its p99 holds while its slowest requests
// wait the freeze out, and while the freeze takes the throughput its
// clients would have had.
func (d *Detector) froze(w *Window) bool {
	l := w.Latency
	if slo := d.cfg.SLONs; slo > 0 && (l.P999Ns > slo || l.MaxNs > slo) {
		return true
	}
	return float64(w.ServedFrozenNs) >= frozenShare*float64(d.cfg.WindowNs)
}

// gapMinRequests is the median count of requests per window from which a
// window without any is a stall, not chance: at 20 a window, an empty
// one by chance is a two-in-a-billion event.
const gapMinRequests = 20

// emptyIsSpike is the one rule for a window in which no request
// completed, judged from the windows before it: the load was dense
// enough that an empty window means the service stopped completing
// requests (the recent windows with requests had a median of
// gapMinRequests), and a window is longer than the SLO (else an empty
// one need not be over it).
func (d *Detector) emptyIsSpike() bool {
	dense := len(d.counts) > 0 && median(d.counts) >= gapMinRequests
	return dense && (d.cfg.SLONs == 0 || d.cfg.WindowNs > d.cfg.SLONs)
}

func median(v []uint64) uint64 {
	s := append([]uint64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// exposure is the longest one thread was frozen by c in w or the window
// before it: requests completing in w waited behind either.
func exposure(w, prev *Window, c stall.Cause) uint64 {
	return max(w.hit(c).WorstNs, prev.hit(c).WorstNs)
}

func stallNs(w *Window, c stall.Cause) uint64 {
	if w == nil {
		return 0
	}
	return w.StallNs[c]
}

// slowExcess is the slow requests' summed latency over the reference,
// when requests were timed in the kernel; 0 without that breakdown.
func slowExcess(w *Window, ref uint64) uint64 {
	r := w.Latency
	if r == nil || r.Requests == nil || r.Requests.Slow == 0 {
		return 0
	}
	if floor := r.Requests.Slow * ref; r.Requests.SlowNs > floor {
		return r.Requests.SlowNs - floor
	}
	return 0
}

// coverage is the share of the spike's excess cause c accounts for: of
// the slow requests' own excess when they were timed in the kernel,
// else of the window's.
func coverage(ci *CauseInSpike, excess, slow uint64) float64 {
	if slow > 0 {
		return min(1, float64(ci.inSlowExcessNs)/float64(slow))
	}
	if excess == 0 {
		return 0
	}
	return min(1, float64(ci.ExposureNs)/float64(excess))
}

// judgedAs is what a window being attributed was judged to be.
type judgedAs int

const (
	overReference judgedAs = iota // a spike: its percentile over the SLO or baseline
	noCompletion                  // a spike: no request completed in it
	frozenIn                      // a frozen window: attributed by its maximum
)

// attribute weighs each cause against one spike of latency value over
// base, or one frozen window (its maximum over base).
func attribute(w, prev, next *Window, value, base uint64, as judgedAs, cfg Config) Spike {
	sp := Spike{Index: w.Index, StartNs: w.StartNs, LatencyNs: value, Percentile: cfg.On, BaselineNs: base,
		SLO: cfg.SLONs > 0, NoCompletion: as == noCompletion, PressureNs: w.PressureNs, HasPressure: w.HasPressure,
		Frozen: as == frozenIn}
	if sp.Frozen {
		sp.Percentile, sp.SLO = run.Max, cfg.SLONs > 0 && base == cfg.SLONs
	}
	if value > base {
		sp.ExcessNs = value - base
	}
	if l := w.Latency; l != nil {
		sp.P99Ns, sp.P999Ns, sp.MaxNs, sp.Requests = l.P99Ns, l.P999Ns, l.MaxNs, l.Count
	}
	sp.ServedFrozenNs = w.ServedFrozenNs
	slow := slowExcess(w, base)
	sp.timed = slow > 0
	if l := w.Latency; sp.timed && l != nil && l.Requests != nil && l.Requests.SlowBudget.Total() > 0 {
		sp.Budget, sp.HasBudget = l.Requests.SlowBudget, true
	}
	for _, c := range stall.AllCauses() {
		if !c.Timed() || cfg.Untraced[c] {
			continue
		}
		h := w.hit(c)
		ci := CauseInSpike{Cause: c, StallNs: w.StallNs[c], AroundNs: stallNs(prev, c) + stallNs(next, c),
			Threads: h.Threads, WorstTID: h.WorstTID, WorstNs: h.WorstNs, Process: h.Process, LongestNs: h.LongestNs,
			Reason: h.Reason, ExposureNs: h.WorstNs, Stack: h.Stack}
		if l := w.Latency; l != nil && l.Requests != nil {
			ci.InSlowRequestsNs = l.Requests.SlowStallNs[c]
			ci.inSlowExcessNs = l.Requests.SlowExcessStallNs[c]
		}
		ci.Coverage = coverage(&ci, sp.ExcessNs, slow)
		sp.Causes = append(sp.Causes, ci)
	}
	// A backlog: when no stall in the window itself covers half of the
	// spike, the freeze of the window before, whose queued requests
	// complete in this one, may. Only then, so that one stall is not
	// charged with the next spike when that one has its own.
	if !sp.timed && topCoverage(sp.Causes) < explainCoverage {
		for i := range sp.Causes {
			ci := &sp.Causes[i]
			ci.ExposureNs = exposure(w, prev, ci.Cause)
			ci.Coverage = coverage(ci, sp.ExcessNs, 0)
			if ph := prev.hit(ci.Cause); ph.WorstNs > w.hit(ci.Cause).WorstNs && ph.Stack != nil {
				ci.Stack = ph.Stack // the freeze whose backlog this is
			}
		}
	}
	sort.SliceStable(sp.Causes, func(i, j int) bool {
		a, b := sp.Causes[i], sp.Causes[j]
		if a.Coverage != b.Coverage {
			return a.Coverage > b.Coverage
		}
		// Both cover as much: the one whose single freeze was longest
		// held the slowest requests, not the one with more short waits.
		if a.LongestNs != b.LongestNs {
			return a.LongestNs > b.LongestNs
		}
		return a.StallNs > b.StallNs
	})
	sp.Verdict = verdict(sp, cfg)
	return sp
}

// attributeFrozen attributes a frozen window as a spike of its maximum:
// over the SLO, or without one (or with a tail that kept to it) over the
// window's own p99, which is also where the slow requests timed in the
// kernel begin.
func attributeFrozen(w, prev, next *Window, cfg Config) Spike {
	l := w.Latency
	base := l.P99Ns
	if cfg.SLONs > 0 && l.MaxNs > cfg.SLONs {
		base = cfg.SLONs
	}
	return attribute(w, prev, next, l.MaxNs, base, frozenIn, cfg)
}

func fmtDur(ns uint64) string {
	switch {
	case ns == 0:
		return "0"
	case ns < 1e6:
		return fmt.Sprintf("%.0f µs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%.0f ms", float64(ns)/1e6)
}

// covers says how much of the spike a cause accounts for, in words.
func covers(ci CauseInSpike, sp Spike) string {
	pct := fmt.Sprintf("%.0f%%", ci.Coverage*100)
	if sp.timed {
		return pct + " of the slow requests' excess"
	}
	if ci.Coverage >= 1 {
		return "all of the excess"
	}
	return pct + " of the " + fmtDur(sp.ExcessNs) + " excess"
}

// verdict is the spike's one-line explanation, e.g.
// "P99 41 ms at 12:00:03 (SLO 5 ms, 36 ms over): memcg_reclaim 38 ms
// across 1 thread of redis-server (worst tid 1234: 38 ms) covers all of
// the excess; compaction 0; ...", and when no stall covers half of it,
// where to look instead.
func verdict(sp Spike, cfg Config) string {
	when := fmt.Sprintf("+%s", time.Duration(sp.StartNs-cfg.StartNs).Round(time.Second))
	if cfg.WallAt != nil {
		when = run.Clock(cfg.WallAt(sp.StartNs))
	}
	ref := "baseline " + fmtDur(sp.BaselineNs)
	if sp.SLO {
		ref = "SLO " + fmtDur(sp.BaselineNs)
	}
	head := fmt.Sprintf("%s %s at %s (%s, %s over)", percentileLabel(cfg.On), fmtDur(sp.LatencyNs), when, ref, fmtDur(sp.ExcessNs))
	switch {
	case sp.NoCompletion:
		head = fmt.Sprintf("No request completed for %s at %s (%s)", time.Duration(cfg.WindowNs), when, ref)
	case sp.Frozen:
		head = frozenHead(sp, when, cfg)
	}
	var parts []string
	for _, c := range sp.Causes {
		if c.StallNs == 0 && c.ExposureNs == 0 {
			continue // a spike names only the causes that stalled in it
		}
		s := c.Cause.String() + " 0 in the window"
		if c.StallNs > 0 {
			s = fmt.Sprintf("%s %s across %d thread", c.Cause.Label(c.Reason), fmtDur(c.StallNs), c.Threads)
			if c.Threads != 1 {
				s += "s"
			}
			if c.Process != "" {
				s += " of " + c.Process
			}
			s += fmt.Sprintf(" (worst tid %d: %s)", c.WorstTID, fmtDur(c.WorstNs))
		}
		if c.ExposureNs > c.WorstNs {
			s += fmt.Sprintf(", %s in one thread the window before,", fmtDur(c.ExposureNs))
		}
		parts = append(parts, s+" covers "+covers(c, sp))
	}
	out := head
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, "; ")
	}
	if sp.HasBudget {
		out += "; its slow requests' time: " + BudgetWords(&sp.Budget)
	}
	top := topCoverage(sp.Causes)
	switch {
	case top < explainCoverage && memoryUnseen(sp, cfg):
		out += fmt.Sprintf(". PSI counted %s of memory stall in the target's group in the window that no probe timed:"+
			" memory is still likely behind it", fmtDur(sp.PressureNs))
	case top < explainCoverage && sp.HasBudget:
		if l, ok := Largest(&sp.Budget); ok {
			out += fmt.Sprintf(". No stall covers half of it: its slow requests' time went mostly to %s", l.Part.Words())
		}
	case top == 0:
		out += ". No stall in it: look elsewhere"
	case top < explainCoverage:
		out += ". The stalls cover less than half of it: look elsewhere for the rest"
	}
	return out
}

// frozenHead opens a frozen window's verdict: the percentile that held,
// the tail that did not, and how long a serving thread was frozen, e.g.
// "P99 412 µs held at 12:00:03, but P99.9 38 ms and max 42 ms (SLO 5 ms,
// 37 ms over); a thread that served requests was frozen 120 ms (24% of
// the window)".
func frozenHead(sp Spike, when string, cfg Config) string {
	// The figures above the one that held (a recording from before p99.9
	// was kept has none of it).
	var tail []string
	if cfg.On == run.P99 && sp.P999Ns > 0 {
		tail = append(tail, "P99.9 "+fmtDur(sp.P999Ns))
	}
	if cfg.On != run.Max {
		tail = append(tail, "max "+fmtDur(sp.MaxNs))
	}
	head := fmt.Sprintf("%s %s held at %s", percentileLabel(cfg.On), fmtDur(sp.on(cfg.On)), when)
	switch {
	case sp.SLO:
		head += fmt.Sprintf(", but %s (SLO %s, %s over)", strings.Join(tail, " and "), fmtDur(sp.BaselineNs), fmtDur(sp.ExcessNs))
	case len(tail) > 0:
		head += fmt.Sprintf(" (%s, %s over p99)", strings.Join(tail, ", "), fmtDur(sp.ExcessNs))
	}
	if sp.ServedFrozenNs > 0 {
		head += fmt.Sprintf("; a thread that served requests was frozen %s (%.0f%% of the window)",
			fmtDur(sp.ServedFrozenNs), 100*float64(sp.ServedFrozenNs)/float64(cfg.WindowNs))
	}
	return head
}

// unseenShare is the share of the slow requests' time no counter split
// (waits off a CPU numatrace cannot name, time not split) from which
// memory management may be behind it where numatrace cannot see it.
const unseenShare = 0.3

// memoryUnseen says whether a spike no stall covers is likely memory
// management's still: PSI of the target's own group counted memory stall
// in its window, and its requests' own time does not say otherwise
// (most of it is unaccounted for, or it was not split at all). A
// machine-wide PSI belongs to every process: it says nothing of the
// target's requests.
func memoryUnseen(sp Spike, cfg Config) bool {
	if !cfg.PressureOwn || !sp.HasPressure || float64(sp.PressureNs) < memoryLikely*float64(cfg.WindowNs) {
		return false
	}
	return !sp.HasBudget || unaccounted(&sp.Budget) >= unseenShare
}

// topCoverage is the highest coverage of any cause.
func topCoverage(cs []CauseInSpike) float64 {
	top := 0.0
	for _, c := range cs {
		top = max(top, c.Coverage)
	}
	return top
}
