package correlate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/numatrace/numatrace/internal/stall"
)

// A cause explains a spike when it covers at least half of it; it
// explains the run's spikes when it does so in at least half of them and
// it is the reason rather than merely there. Either its dose tracks the
// latency (a positive rank correlation of its exposure with the windows'
// latency), or it covers at least half of the spikes' whole excess and
// froze threads longer in the spikes than in the normal windows. The
// second holds where the first cannot be seen: attached mid-incident,
// nearly every window is a spike and their latencies are close, so the
// ranks are noise (the same redis incident read "explained" in one run
// and "explained only in part" in the next). Present in every window but
// no larger in the spikes, or covering a sliver of each, a cause does not
// explain them. A cause that covers at least half of a fifth of the
// spikes explains them in part. "Tracks" means a rank correlation above
// 0.3: a weak one (0.1) is what a cause that is merely always there
// shows, such as run-queue wait on a busy machine.
const (
	explainCoverage = 0.5
	explainShare    = 0.5
	partlyShare     = 0.2
	explainSpearman = 0.3
	explainExcess   = 0.5
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
	for _, sp := range r.Spikes {
		if len(sp.Causes) == 0 || sp.Causes[0].Coverage < explainCoverage {
			r.Uncovered++
		}
	}
}

func weighCause(c stall.Cause, seen []*Window, spike map[uint64]*Spike, cfg Config) CauseCorrelation {
	var inSpike, spikes, inNormal, normals, covered int
	var slowNs, slowStallNs uint64
	var excess, coveredExcess float64
	var spikeDoses, normalDoses []float64
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
				}
				coveredExcess += ci.Coverage * float64(sp.ExcessNs)
			}
			excess += float64(sp.ExcessNs)
			spikeDoses = append(spikeDoses, dose)
		} else {
			normals++
			if ns > 0 {
				inNormal++
			}
			normalDoses = append(normalDoses, dose)
		}
		y := float64(cfg.WindowNs) // no request completed: all waited at least that long
		if w.Latency != nil && w.Latency.Count > 0 {
			y = float64(cfg.On.of(w.Latency))
			if rq := w.Latency.Requests; rq != nil {
				slowNs += rq.SlowNs
				slowStallNs += rq.SlowStallNs[c]
			}
		}
		xs = append(xs, dose)

		ys = append(ys, y)
	}
	cc := CauseCorrelation{}
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
	cc.LargerInSpikes = spikes > 0 && (normals == 0 || medianOf(spikeDoses) > medianOf(normalDoses))
	if slowNs > 0 {
		share := float64(slowStallNs) / float64(slowNs)
		cc.InSlowRequests = &share
	}
	return cc
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
	switch {
	case r.Windows == 0:
		r.Conclusion = "No latency samples: nothing to correlate."
	case spikes == 0:
		r.Conclusion = fmt.Sprintf("No latency spikes in %d windows.", r.Windows)
	default:
		r.Conclusion = r.judge(spikes, cfg)
	}
	if r.OutsideShare != nil && *r.OutsideShare >= 0.5 && r.outsideNs >= outsideShown {
		fn := "the timed function"
		if cfg.Function != "" {
			fn = cfg.Function
		}
		r.Conclusion += fmt.Sprintf(" %.0f%% of the stall time of the threads that serve requests fell outside %s:"+
			" requests that queued behind it waited, though %s looked clean. Time an outer function (the event loop's"+
			" iteration) or measure from the client (--latency-file).", *r.OutsideShare*100, fn, fn)
	}
}

// judge names the causes that explain the spikes, by dose.
func (r *Result) judge(spikes int, cfg Config) string {
	var why, partly []string
	for _, c := range stall.AllCauses() {
		cc := r.Correlation[c]
		if cc == nil || cc.Covered == 0 {
			continue
		}
		n := int(math.Round(cc.Covered * float64(spikes)))
		tracks := cc.Spearman == nil || *cc.Spearman > explainSpearman
		dominates := cc.ExcessShare >= explainExcess && cc.LargerInSpikes
		switch {
		case cc.Covered >= explainShare && (tracks || dominates):
			r.Explained = append(r.Explained, c)
			rho := ""
			switch {
			case cc.Spearman != nil && tracks:
				rho = fmt.Sprintf(", and its length tracks %s (rank correlation %.2f)", cfg.On, *cc.Spearman)
			case !tracks:
				rho = fmt.Sprintf(", and %.0f%% of their whole excess latency", cc.ExcessShare*100)
			}
			why = append(why, fmt.Sprintf("%s (%sit covers at least half of %d of the %d spikes%s%s)",
				c, notMemory(c), n, spikes, rho, inSlow(*cc)))
		case cc.Covered >= partlyShare:
			r.Partly = append(r.Partly, c)
			partly = append(partly, fmt.Sprintf("%s (%scovers at least half of %d of the %d spikes%s)", c, notMemory(c), n, spikes, inSlow(*cc)))
		}
	}
	head := fmt.Sprintf("%d spikes in %d windows", spikes, r.Windows)
	elsewhere := "look outside memory management (CPU, locks, I/O, the network)"
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
