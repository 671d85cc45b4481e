package correlate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// A cause explains a spike when it covers at least half of it. It
// explains the run's spikes when it covers them (at least half of at
// least half of them, or on average half of each) and it is the reason
// rather than merely there: the per-request breakdown shows the stall
// inside the slow requests, or its dose tracks the latency (a rank
// correlation of its exposure with the windows' latency above 0.3), or
// its freezes in the spikes it covers were at least twice as long as in
// the normal windows (median against median), or there are too few
// normal windows to tell.
//
// Those are the figures that hold still between runs of one incident.
// Attached mid-incident, nearly every window is a spike and their
// latencies are close: the ranks are noise, how many spikes a cause
// covers half of moves by a few around half (14 of 23 in one redis run),
// one host delay of 200 ms is most of the summed excess (the shipped
// redis recording: 19 of 23 spikes covered, 52% of the excess), and one
// or two normal windows hold an accident as often as not (a background
// thread's freeze). Each spike weighs the same in the mean coverage; the
// median of three normal windows is no single window's; and the median
// over the covering freezes does not drop to an uncovered spike's when
// the count of covered ones falls under half. "Twice" leaves room for
// noise: a cause as large in the normal windows (36 ms against 34) is
// merely there, and explains the spikes in part. So does one that covers
// at least half of a fifth of them; a sliver of each explains nothing.
const (
	explainCoverage = 0.5
	explainShare    = 0.5
	partlyShare     = 0.2
	explainSpearman = 0.3
	largerBy        = 2
	compareMin      = 3 // normal windows
)

// outsideShown is the stall time of the serving threads, over the run,
// from which the share outside the timed requests is worth a word.
const outsideShown = 10e6 // 10 ms

// weigh relates each cause to the spikes over the windows with latency.
func (r *Result) weigh(seen []*Window, cfg Config) {
	spike := map[uint64]*Spike{}
	for i := range r.Spikes {
		spike[r.Spikes[i].Index] = &r.Spikes[i]
	}
	for _, c := range stall.AllCauses() {
		if !c.Timed() || cfg.Untraced[c] {
			continue
		}
		cc := weighCause(c, seen, spike, cfg)
		r.Correlation[c] = &cc
	}
	byIndex := map[uint64]*Window{}
	for _, w := range seen {
		byIndex[w.Index] = w
	}
	r.PressureOwn = cfg.PressureOwn
	for _, sp := range r.Spikes {
		if len(sp.Causes) == 0 || sp.Causes[0].Coverage < explainCoverage {
			r.Uncovered++
			if sp.HasBudget {
				r.uncoveredBudget.Add(&sp.Budget)
			}
			if w := byIndex[sp.Index]; w != nil && w.HasPressure {
				r.UncoveredPressure.Known++
				r.UncoveredPressure.SomeNs += w.PressureNs
				r.UncoveredPressure.WindowNs += cfg.WindowNs
			}
		}
	}
}

func weighCause(c stall.Cause, seen []*Window, spike map[uint64]*Spike, cfg Config) CauseCorrelation {
	var inSpike, spikes, inNormal, normals, covered int
	var slowNs, slowStallNs uint64
	var excess, coveredExcess float64
	var coveringDoses, normalDoses []float64
	reasons := map[string]int{} // the covering stalls' kinds of wait
	xs := make([]float64, 0, len(seen))
	ys := make([]float64, 0, len(seen))
	for _, w := range seen {
		ns := stallNs(w, c)
		dose := float64(w.hit(c).WorstNs) // the window's own
		if sp := spike[w.Index]; sp != nil {
			spikes++
			if ns > 0 {
				inSpike++
			}
			for _, ci := range sp.Causes {
				if ci.Cause != c {
					continue
				}
				// The dose the spike was judged by, which may be the
				// window before's (a backlog): the rank correlation
				// must agree with the coverage.
				dose = float64(ci.ExposureNs)
				if ci.Coverage >= explainCoverage {
					covered++
					coveringDoses = append(coveringDoses, dose)
					if ci.Reason != "" {
						reasons[ci.Reason]++
					}
				}
				coveredExcess += ci.Coverage * float64(sp.ExcessNs)
			}
			excess += float64(sp.ExcessNs)
		} else {
			normals++
			if ns > 0 {
				inNormal++
			}
			normalDoses = append(normalDoses, dose)
		}
		y := float64(cfg.WindowNs) // no request completed: all waited at least that long
		if w.Latency != nil && w.Latency.Count > 0 {
			y = float64(latencyOn(cfg.On, w.Latency))
			if rq := w.Latency.Requests; rq != nil {
				slowNs += rq.SlowNs
				slowStallNs += inSlowNs(rq, c)
			}
		}
		xs = append(xs, dose)

		ys = append(ys, y)
	}
	cc := CauseCorrelation{Reason: mostOf(reasons)}
	if spikes > 0 {
		cc.SpikeShare = float64(inSpike) / float64(spikes)
		cc.Covered = float64(covered) / float64(spikes)
	}
	if normals > 0 {
		cc.NormalShare = float64(inNormal) / float64(normals)
	}
	if cc.NormalShare > 0 {
		lift := cc.SpikeShare / cc.NormalShare
		cc.Lift = &lift
	}
	if rho, ok := Spearman(xs, ys); ok {
		cc.Spearman = &rho
	}
	if excess > 0 {
		cc.ExcessShare = coveredExcess / excess
	}
	if spikes > 0 {
		covering := medianOf(coveringDoses)
		cc.LargerInSpikes = normals < compareMin || (covering > 0 && covering >= largerBy*medianOf(normalDoses))
	}
	if slowNs > 0 {
		share := float64(slowStallNs) / float64(slowNs)
		cc.InSlowRequests = &share
	}
	return cc
}

// inSlowNs is cause c's time in a window's slow requests: its part of
// their budget, which is the one figure the verdict's shares come from,
// else (a window without one) its stall time in them.
func inSlowNs(rq *latency.Requests, c stall.Cause) uint64 {
	if rq.SlowBudget.Total() > 0 {
		return rq.SlowBudget[stall.PartOf(c)]
	}
	return rq.SlowStallNs[c]
}

// outside is the share of the serving threads' stall time that fell
// outside the timed requests, over the run.
func (r *Result) outside(ws []Window) {
	var served, inside uint64
	known := false
	for i := range ws {
		if l := ws[i].Latency; l != nil && l.Requests != nil {
			known = true
			served += ws[i].ServedStallNs
			inside += l.Requests.FreezeNs
		}
	}
	if !known || served == 0 {
		return
	}
	share := 0.0
	if served > inside {
		share = float64(served-inside) / float64(served)
	}
	r.OutsideShare = &share
	r.outsideNs = served
}

// Spearman is the rank correlation of x and y (average ranks for ties);
// false when it is undefined (fewer than 3 points, or a constant series).
func Spearman(x, y []float64) (float64, bool) {
	if len(x) != len(y) || len(x) < 3 {
		return 0, false
	}
	rx, ry := ranks(x), ranks(y)
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx /= float64(len(rx))
	my /= float64(len(ry))
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return sxy / math.Sqrt(sxx*syy), true
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

func (r *Result) conclude(cfg Config) {
	spikes := len(r.Spikes)
	r.frozenWords = r.frozen(cfg)
	switch {
	case r.Windows == 0:
		r.Conclusion = "No latency samples: nothing to correlate."
	case spikes == 0:
		r.Conclusion = fmt.Sprintf("No latency spikes in %s.", prose.Count(uint64(r.Windows), "window"))
	default:
		r.Conclusion = r.judge(spikes, cfg)
	}
	if r.frozenWords != "" {
		r.Conclusion += " " + r.frozenWords
	}
	// A function timed with a uprobe may be too narrow: advice for that
	// source alone (a socket's request is whole from its arrival).
	if cfg.Source == run.LatencyUprobe && r.OutsideShare != nil && *r.OutsideShare >= 0.5 && r.outsideNs >= outsideShown {
		fn := "the timed function"
		if cfg.Function != "" {
			fn = cfg.Function
		}
		r.Conclusion += fmt.Sprintf(" %.0f%% of the stall time of the threads that serve requests fell outside %s:"+
			" requests that queued behind it waited, though %s looked clean. Time an outer function (the event loop's"+
			" iteration) or measure from the client (--latency-file).", *r.OutsideShare*100, fn, fn)
	}
}

// FrozenWords is what the conclusion says of the frozen windows, "" when
// there were none: the report's verdict says it after its own words for a
// run without spikes.
func (r *Result) FrozenWords() string { return r.frozenWords }

// frozen says how many windows froze while the percentile held, their
// worst tail and where their slow requests' time went, and what covers
// at least half of them, e.g. "In 7 windows p99 held but the service
// froze (p99.9 up to 38 ms, max up to 42 ms; the slow requests' time: 78%
// memcg_reclaim, 21% waiting for a CPU (runq_wait)): memcg_reclaim covers
// at least half of 6 of them; no stall covers half of 1."
func (r *Result) frozen(cfg Config) string {
	n := len(r.Frozen)
	if n == 0 {
		return ""
	}
	var p999, most uint64
	covered := map[stall.Cause]int{}
	reasons := map[stall.Cause]map[string]int{}
	uncovered := 0
	for _, f := range r.Frozen {
		p999, most = max(p999, f.P999Ns), max(most, f.MaxNs)
		if len(f.Causes) == 0 || f.Causes[0].Coverage < explainCoverage {
			uncovered++
			continue
		}
		c := f.Causes[0]
		covered[c.Cause]++
		if reasons[c.Cause] == nil {
			reasons[c.Cause] = map[string]int{}
		}
		reasons[c.Cause][c.Reason]++
	}
	tail := "max up to " + fmtDur(most)
	if p999 > 0 && cfg.On == run.P99 {
		tail = "p99.9 up to " + fmtDur(p999) + ", " + tail
	}
	where := "windows"
	them := "them"
	if n == 1 {
		where, them = "window", "it"
	}
	if r.HasFrozenBudget {
		tail += "; the slow requests' time: " + BudgetWords(&r.FrozenBudget)
	}
	s := fmt.Sprintf("In %s %s %s held but the service froze (%s)", prose.Thousands(uint64(n)), where, cfg.On, tail)
	// The causes that cover them, the most first (of two alike, the
	// first in the table, so the words do not flip).
	causes := stall.AllCauses()
	sort.SliceStable(causes, func(i, j int) bool { return covered[causes[i]] > covered[causes[j]] })
	var parts []string
	for i, c := range causes {
		k := covered[c]
		if k == 0 {
			break
		}
		of := fmt.Sprintf("%d", k)
		switch {
		case k == n:
			of = them
		case i == 0:
			of += " of them"
		}
		if i == 0 {
			parts = append(parts, fmt.Sprintf("%s%s covers at least half of %s", notMemory(c), c.Label(mostOf(reasons[c])), of))
		} else {
			parts = append(parts, fmt.Sprintf("%s of %s", c.Label(mostOf(reasons[c])), of))
		}
	}
	words := strings.Join(parts, ", ")
	switch {
	case uncovered == n:
		words = "no stall covers half of " + them
	case uncovered > 0:
		words += fmt.Sprintf("; no stall covers half of %d", uncovered)
	}
	return s + ": " + words + "."
}

// judge names the causes that explain the spikes, by dose.
func (r *Result) judge(spikes int, cfg Config) string {
	var why, partly []string
	perRequest := r.perRequest()
	for _, c := range stall.AllCauses() {
		cc := r.Correlation[c]
		if cc == nil || cc.Covered == 0 {
			continue
		}
		n := int(math.Round(cc.Covered * float64(spikes)))
		tracks := cc.Spearman == nil || *cc.Spearman > explainSpearman
		mean := r.MeanCoverage(c)
		covers := cc.Covered >= explainShare || mean >= explainShare
		switch {
		case covers && (perRequest || tracks || cc.LargerInSpikes):
			r.Explained = append(r.Explained, c)
			why = append(why, fmt.Sprintf("%s (%sit covers at least half of %s%s%s)",
				c.Label(cc.Reason), notMemory(c), ofSpikes(n, spikes), r.reason(*cc, mean, tracks, perRequest, cfg), inSlow(*cc)))
		case cc.Covered >= partlyShare:
			r.Partly = append(r.Partly, c)
			partly = append(partly, fmt.Sprintf("%s (%scovers at least half of %s%s)", c.Label(cc.Reason), notMemory(c), ofSpikes(n, spikes), inSlow(*cc)))
		}
	}
	head := fmt.Sprintf("%s in %s", prose.Count(uint64(spikes), "spike"), prose.Count(uint64(r.Windows), "window"))
	if r.HasBudget {
		head += " (the slow requests' time: " + BudgetWords(&r.Budget) + ")"
	}
	elsewhere := r.elsewhere()
	switch {
	case len(why) > 0:
		s := head + ", explained by " + strings.Join(why, "; ")
		if len(partly) > 0 {
			s += "; in part by " + strings.Join(partly, "; ")
		}
		if r.Uncovered > 0 {
			s += fmt.Sprintf(". No stall covers half of %d of them: %s for those", r.Uncovered, elsewhere)
		}
		return s + "."
	case len(partly) > 0:
		s := fmt.Sprintf("%s, explained only in part by %s", head, strings.Join(partly, "; "))
		if r.Uncovered > 0 {
			s += fmt.Sprintf(". No stall covers half of %d of them: %s for those", r.Uncovered, elsewhere)
		}
		return s + "."
	}
	return fmt.Sprintf("%s, and no stall cause explains them: %s.", head, elsewhere)
}

// MeanCoverage is cause c's coverage averaged over the spikes, each
// counted once: what the verdict weighs, since no one spike, however
// long, moves it far.
func (r *Result) MeanCoverage(c stall.Cause) float64 {
	if len(r.Spikes) == 0 {
		return 0
	}
	sum := 0.0
	for _, sp := range r.Spikes {
		for _, ci := range sp.Causes {
			if ci.Cause == c {
				sum += ci.Coverage
			}
		}
	}
	return sum / float64(len(r.Spikes))
}

// perRequest says most spikes' coverage was timed inside the slow
// requests themselves: the stall was measured where the latency was.
func (r *Result) perRequest() bool {
	timed := 0
	for _, sp := range r.Spikes {
		if sp.timed {
			timed++
		}
	}
	return len(r.Spikes) > 0 && 2*timed >= len(r.Spikes)
}

// reason says why a cause that covers the spikes is their reason.
func (r *Result) reason(cc CauseCorrelation, mean float64, tracks, perRequest bool, cfg Config) string {
	each := fmt.Sprintf(", on average %.0f%% of each", mean*100)
	normals := r.Windows - len(r.Spikes)
	switch {
	case cc.Spearman != nil && tracks:
		return fmt.Sprintf(", and its length tracks %s (rank correlation %.2f)", cfg.On, *cc.Spearman)
	case tracks:
		return ""
	case perRequest:
		return each + " as timed inside the slow requests"
	case normals == 0:
		return each + ", and no normal window to set its length against"
	case normals < compareMin:
		return fmt.Sprintf("%s, and only %d normal windows to set its length against", each, normals)
	}
	return each + ", and its freezes that covered them were at least twice as long as in the normal windows"
}

// inSlow is the cause's share of the slow requests' time, when measured.
func inSlow(cc CauseCorrelation) string {
	if cc.InSlowRequests == nil {
		return ""
	}
	return fmt.Sprintf("; %.0f%% of the slow requests' time was this stall", *cc.InSlowRequests*100)
}

// notMemory says so of a wait that is not memory management's.
func notMemory(c stall.Cause) string {
	if c.Desc().NotMemory {
		return "not memory management: the serving threads waited for a CPU; "
	}
	return ""
}

// medianOf is the median of v (0 for none); it sorts v.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// mostOf is the kind of wait most spikes were covered by ("" for none;
// of two alike, the first by name, so the verdict does not flip).
func mostOf(n map[string]int) string {
	best := ""
	for r, c := range n {
		if c > n[best] || c == n[best] && best != "" && r < best {
			best = r
		}
	}
	return best
}

// memoryLikely is the share of the uncovered spikes' windows PSI must
// count as memory stall for numatrace to say memory is still the likely
// cause, though no probe timed it.
const memoryLikely = 0.1

// elsewhere is where to look for the spikes no stall covers: where their
// slow requests' time went, when it was split (their largest part that is
// no memory stall), else outside memory management; unless PSI of the
// target's own group counted memory stall in their windows that no probe
// saw, and their requests' time does not say otherwise. A machine-wide
// PSI is every process's, and said to be.
func (r *Result) elsewhere() string {
	outside := "look outside memory management (CPU, locks, I/O, the network)"
	if l, ok := r.UncoveredLargest(); ok {
		outside = fmt.Sprintf("their slow requests' time went mostly to %s (%.0f%%)", l.Part.Words(), l.Share*100)
	}
	u := r.UncoveredPressure
	switch {
	case u.Known == 0:
		return outside
	case u.SomeNs == 0: // none machine-wide is none in the target's group either
		return outside + "; PSI agrees (no memory stall in their windows)"
	case r.UncoveredLikelyMemory():
		return fmt.Sprintf("yet PSI counted %s of memory stall in the target's group in their windows (%.0f%% of their time), which no probe timed:"+
			" memory management is still the likely cause, where numatrace cannot see it", fmtDur(u.SomeNs), u.Share()*100)
	case !r.PressureOwn:
		return fmt.Sprintf("%s; PSI counted %s of memory stall machine-wide in their windows (every process's on the machine, not the target's alone)",
			outside, fmtDur(u.SomeNs))
	}
	return fmt.Sprintf("%s; PSI agrees (%s of memory stall in their windows)", outside, fmtDur(u.SomeNs))
}

// UncoveredLargest is the largest part of the uncovered spikes' slow
// requests' time that is no memory stall, where their time was split.
func (r *Result) UncoveredLargest() (PartShare, bool) { return largestNotStalled(&r.uncoveredBudget) }

// largestNotStalled is b's largest part that is no memory stall: where
// time went that the stalls do not explain.
func largestNotStalled(b *stall.Budget) (PartShare, bool) {
	for _, s := range Shares(b) {
		if c, isCause := s.Part.Cause(); !isCause || !c.Freezes() {
			return s, true
		}
	}
	return PartShare{}, false
}

// UncoveredLikelyMemory says whether memory management is still the
// likely cause of the spikes no stall covers: PSI of the target's own
// group counted enough memory stall in their windows, and their slow
// requests' time, where it was split, left enough unaccounted for. The
// conclusion and the report's next step both follow it.
func (r *Result) UncoveredLikelyMemory() bool {
	if r.Uncovered == 0 || !r.PressureOwn || r.UncoveredPressure.Known == 0 || r.UncoveredPressure.Share() < memoryLikely {
		return false
	}
	return r.uncoveredBudget.Total() == 0 || unaccounted(&r.uncoveredBudget) >= unseenShare
}

// ofSpikes is "3 of the 23 spikes", or "the spike" when there was one.
func ofSpikes(n, spikes int) string {
	if spikes == 1 {
		return "the spike"
	}
	return fmt.Sprintf("%d of the %d spikes", n, spikes)
}
