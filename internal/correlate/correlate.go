// Package correlate answers the incident's question: did the stalls cause
// the latency spikes, and which threads did they hit? It works on windows:
// latency per window from a latency source, stall time per window from the
// aggregator, both indexed the same way.
package correlate

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// Latency is one window's request latency.
type Latency = latency.Stats

// Config tunes spike detection.
type Config struct {
	K       float64                       // a spike's p99 is above K × the rolling median (default 2)
	FloorNs uint64                        // and above this absolute floor (default 1 ms)
	History int                           // windows in the rolling median (default 30)
	MinHist int                           // windows of history before anything can be a spike (default 5)
	WallAt  func(monoNs uint64) time.Time // for verdict lines; nil prints offsets
	StartNs uint64
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
}

// CauseInSpike is one cause's share of one spike.
type CauseInSpike struct {
	Cause    string `json:"cause"`
	StallNs  uint64 `json:"stall_ns"`  // in the spike window
	AroundNs uint64 `json:"around_ns"` // in the windows either side
	Threads  int    `json:"threads"`
	WorstTID uint32 `json:"worst_tid,omitempty"`
	WorstNs  uint64 `json:"worst_ns,omitempty"`
	Process  string `json:"process,omitempty"` // comm of the most affected process
}

// Spike is one window whose p99 jumped.
type Spike struct {
	Index      uint64         `json:"index"`
	StartNs    uint64         `json:"start_ns"`
	P99Ns      uint64         `json:"p99_ns"`
	BaselineNs uint64         `json:"baseline_ns"`
	Requests   uint64         `json:"requests"`
	Causes     []CauseInSpike `json:"causes"`
	Verdict    string         `json:"verdict"`
}

// CauseCorrelation is one cause's relation to the spikes over the run.
type CauseCorrelation struct {
	SpikeShare  float64  `json:"spike_share"`  // spike windows with this cause's stalls
	NormalShare float64  `json:"normal_share"` // normal windows with them
	Lift        *float64 `json:"lift"`         // spike / normal share; null when normal windows never had it
	Spearman    *float64 `json:"spearman"`     // rank correlation of stall time and p99; null if undefined
}

// Result is the whole analysis.
type Result struct {
	Windows     int                         `json:"windows"` // windows with latency data
	Spikes      []Spike                     `json:"spikes"`
	Correlation map[string]CauseCorrelation `json:"correlation"`
	Explained   []string                    `json:"explained_by"` // causes that explain the spikes
	Conclusion  string                      `json:"conclusion"`
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

// Window is what the analysis needs of one closed window: the service's
// latency in it, and per cause the stall time and who stalled. The engine
// keeps one per window for the whole run, so the analysis it hands the
// view and the one in the report are the same function of the same data.
type Window struct {
	Index   uint64
	StartNs uint64
	Latency *Latency // nil: no request completed
	StallNs [stall.NumCauses]uint64
	Hits    []Hits // the causes that stalled, for windows with requests
}

// Hits are one cause's stalls in one window.
type Hits struct {
	Cause    stall.Cause
	Threads  int
	WorstTID uint32
	WorstNs  uint64
	Process  string // comm of the most affected process
}

// Summarize keeps what the analysis needs of a closed window. Who stalled
// is kept for every window, even one without requests yet: a replay of an
// older recording may read a window's latency after the window closed.
func Summarize(w *aggregate.Window) Window {
	out := Window{Index: w.Index, StartNs: w.StartNs, Latency: w.Latency}
	for c := range out.StallNs {
		out.StallNs[c] = w.Causes[c].TotalNs
		if out.StallNs[c] == 0 {
			continue
		}
		if h, ok := hits(w, stall.Cause(c)); ok {
			out.Hits = append(out.Hits, h)
		}
	}
	return out
}

// hits finds who stalled on cause c in w, and which process suffered most.
func hits(w *aggregate.Window, c stall.Cause) (Hits, bool) {
	type proc struct {
		ns      uint64
		comm    string
		commTID uint32
	}
	h := Hits{Cause: c}
	procs := map[uint32]*proc{}
	for _, t := range w.Threads {
		ns := t.ByCause[c].TotalNs
		if ns == 0 {
			continue
		}
		h.Threads++
		p := procs[t.PID]
		if p == nil {
			p = &proc{}
			procs[t.PID] = p
		}
		p.ns += ns
		// Name a process after its main thread, else its lowest tid.
		if p.comm == "" || t.TID == t.PID || (p.commTID != t.PID && t.TID < p.commTID) {
			p.comm, p.commTID = t.Comm, t.TID
		}
		if ns > h.WorstNs || (ns == h.WorstNs && t.TID < h.WorstTID) {
			h.WorstNs, h.WorstTID = ns, t.TID
		}
	}
	if h.Threads == 0 {
		return h, false
	}
	var top *proc
	var topPID uint32
	for pid, p := range procs {
		if top == nil || p.ns > top.ns || (p.ns == top.ns && pid < topPID) {
			top, topPID = p, pid
		}
	}
	h.Process = top.comm
	return h, true
}

// Analyze finds the spikes in a run's windows (in index order) and weighs
// each cause against them.
func Analyze(ws []Window, cfg Config) *Result {
	cfg.defaults()
	res := &Result{Correlation: map[string]CauseCorrelation{}, Spikes: []Spike{}, Explained: []string{}}
	det := NewDetector(cfg)
	spike := map[uint64]bool{}
	var seen []*Window
	for i := range ws {
		w := &ws[i]
		if w.Latency == nil || w.Latency.Count == 0 {
			continue
		}
		seen = append(seen, w)
		if is, base := det.Observe(*w.Latency); is {
			spike[w.Index] = true
			var prev, next *Window
			if i > 0 && ws[i-1].Index+1 == w.Index {
				prev = &ws[i-1]
			}
			if i+1 < len(ws) && ws[i+1].Index == w.Index+1 {
				next = &ws[i+1]
			}
			res.Spikes = append(res.Spikes, attribute(w, prev, next, base, cfg))
		}
	}
	res.Windows = len(seen)
	for _, c := range stall.AllCauses() {
		if !c.Timed() {
			continue
		}
		res.Correlation[c.String()] = correlation(c, seen, spike)
	}
	res.conclude(len(res.Spikes))
	return res
}

// Detector finds spikes one window at a time, as they close: the live
// loop uses it to trigger a flight-recorder dump, Analyze over a whole run.
type Detector struct {
	cfg     Config
	history []uint64
}

// NewDetector starts with no history.
func NewDetector(cfg Config) *Detector {
	cfg.defaults()
	return &Detector{cfg: cfg}
}

// Observe takes the next window with requests and says whether it is a
// spike, with the rolling median it was measured against.
func (d *Detector) Observe(l Latency) (spike bool, baseline uint64) {
	if l.Count == 0 {
		return false, 0
	}
	if len(d.history) >= d.cfg.MinHist {
		baseline = median(d.history)
		spike = float64(l.P99Ns) > d.cfg.K*float64(baseline) && l.P99Ns > d.cfg.FloorNs
	}
	d.history = append(d.history, l.P99Ns)
	if len(d.history) > d.cfg.History {
		d.history = d.history[1:]
	}
	return spike, baseline
}

func stallNs(w *Window, c stall.Cause) uint64 {
	if w == nil {
		return 0
	}
	return w.StallNs[c]
}

func attribute(w, prev, next *Window, base uint64, cfg Config) Spike {
	l := w.Latency
	sp := Spike{Index: w.Index, StartNs: w.StartNs, P99Ns: l.P99Ns, BaselineNs: base, Requests: l.Count}
	for _, c := range stall.AllCauses() {
		if !c.Timed() {
			continue
		}
		ci := CauseInSpike{Cause: c.String(), StallNs: w.StallNs[c], AroundNs: stallNs(prev, c) + stallNs(next, c)}
		for _, h := range w.Hits {
			if h.Cause == c {
				ci.Threads, ci.WorstTID, ci.WorstNs, ci.Process = h.Threads, h.WorstTID, h.WorstNs, h.Process
			}
		}
		sp.Causes = append(sp.Causes, ci)
	}
	sort.SliceStable(sp.Causes, func(i, j int) bool { return sp.Causes[i].StallNs > sp.Causes[j].StallNs })
	sp.Verdict = verdict(sp, cfg)
	return sp
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

// verdict is the spike's one-line explanation, e.g.
// "P99 41 ms at 12:00:03 (baseline 9 ms): memcg_reclaim 38 ms across 12
// threads of redis-server (worst tid 1234: 31 ms); compaction 0; ...".
func verdict(sp Spike, cfg Config) string {
	when := fmt.Sprintf("+%s", time.Duration(sp.StartNs-cfg.StartNs).Round(time.Second))
	if cfg.WallAt != nil {
		when = cfg.WallAt(sp.StartNs).Format("15:04:05")
	}
	var parts []string
	for _, c := range sp.Causes {
		if c.StallNs == 0 {
			parts = append(parts, c.Cause+" 0")
			continue
		}
		s := fmt.Sprintf("%s %s across %d thread", c.Cause, fmtDur(c.StallNs), c.Threads)
		if c.Threads != 1 {
			s += "s"
		}
		if c.Process != "" {
			s += " of " + c.Process
		}
		parts = append(parts, s+fmt.Sprintf(" (worst tid %d: %s)", c.WorstTID, fmtDur(c.WorstNs)))
	}
	return fmt.Sprintf("P99 %s at %s (baseline %s): %s", fmtDur(sp.P99Ns), when, fmtDur(sp.BaselineNs), strings.Join(parts, "; "))
}

func correlation(c stall.Cause, seen []*Window, spike map[uint64]bool) CauseCorrelation {
	var inSpike, spikes, inNormal, normals int
	xs := make([]float64, 0, len(seen))
	ys := make([]float64, 0, len(seen))
	for _, w := range seen {
		ns := stallNs(w, c)
		if spike[w.Index] {
			spikes++
			if ns > 0 {
				inSpike++
			}
		} else {
			normals++
			if ns > 0 {
				inNormal++
			}
		}
		xs = append(xs, float64(ns))
		ys = append(ys, float64(w.Latency.P99Ns))
	}
	cc := CauseCorrelation{}
	if spikes > 0 {
		cc.SpikeShare = float64(inSpike) / float64(spikes)
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
	return cc
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

// A cause explains the spikes when its stalls are in most spike windows,
// at least twice as often as in normal windows, and its stall time rises
// with p99. The rank correlation only has to be positive: over a long run
// of windows without the cause, its ties at zero dilute it even when every
// spike has the cause.
const (
	explainShare    = 0.5
	explainLift     = 2
	explainSpearman = 0.0
)

func (r *Result) conclude(spikes int) {
	if r.Windows == 0 {
		r.Conclusion = "No latency samples: nothing to correlate."
		return
	}
	if spikes == 0 {
		r.Conclusion = fmt.Sprintf("No latency spikes in %d windows.", r.Windows)
		return
	}
	var why []string
	for _, c := range stall.AllCauses() {
		cc, ok := r.Correlation[c.String()]
		if !ok {
			continue
		}
		liftOK := cc.Lift == nil || *cc.Lift >= explainLift
		if cc.SpikeShare >= explainShare && liftOK && cc.Spearman != nil && *cc.Spearman > explainSpearman {
			r.Explained = append(r.Explained, c.String())
			lift := "only in spike windows"
			if cc.Lift != nil {
				lift = fmt.Sprintf("lift %.1f", *cc.Lift)
			}
			why = append(why, fmt.Sprintf("%s (in %.0f%% of spike windows vs %.0f%% of normal ones, %s, rank correlation %.2f)",
				c, cc.SpikeShare*100, cc.NormalShare*100, lift, *cc.Spearman))
		}
	}
	if len(why) == 0 {
		r.Conclusion = fmt.Sprintf("%d spikes in %d windows, and no stall cause explains them: look outside memory management (CPU, locks, I/O, the network).", spikes, r.Windows)
		return
	}
	r.Conclusion = fmt.Sprintf("%d spikes in %d windows, explained by %s.", spikes, r.Windows, strings.Join(why, "; "))
}
