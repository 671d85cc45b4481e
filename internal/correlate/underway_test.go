package correlate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// incident is a run attached to the redis memcg incident already under
// way, judged against a 5 ms SLO, as the issue measured it: nearly every
// window over the SLO at close latencies (7-12 ms). In the covered spikes
// redis froze 10 ms or more and the freeze covers all the excess; in the
// others a CPU or the host held it (p99 10-12 ms) and its freeze was 1-2
// ms, under half the excess. Those come first, so that no big freeze
// before them is taken for their backlog. Normal windows (p99 3-4 ms)
// carry the given doses: the worst thread's memcg freeze, which may be a
// background thread's (jemalloc_bg_thd) and hold no request.
func incident(spikes, covered int, normalDoses []float64) (p99, memcg []float64) {
	for i := 0; i < spikes-covered; i++ {
		p99 = append(p99, 10+float64(i*29%25)/10)
		memcg = append(memcg, 1+float64(i%3)/2)
	}
	normal := 0
	for i := 0; i < covered; i++ {
		if i%3 == 1 && normal < len(normalDoses) { // a calm window now and then
			p99 = append(p99, 3+float64(i%4)/2)
			memcg = append(memcg, normalDoses[normal])
			normal++
		}
		p99 = append(p99, 7+float64(i*37%30)/10)
		memcg = append(memcg, 10+float64(i*53%150)/10)
	}
	for ; normal < len(normalDoses); normal++ {
		p99 = append(p99, 3.5)
		memcg = append(memcg, normalDoses[normal])
	}
	return p99, memcg
}

// wantMemcgExplains checks the one category the issue asks for: the
// spikes are explained by memcg_reclaim, not in part.
func wantMemcgExplains(t *testing.T, r *Result) {
	t.Helper()
	if len(r.Explained) != 1 || r.Explained[0] != stall.MemcgReclaim || len(r.Partly) != 0 ||
		!strings.Contains(r.Conclusion, "explained by memcg_reclaim") {
		t.Errorf("explained %v, partly %v: %s", r.Explained, r.Partly, r.Conclusion)
	}
}

// The runs the issue measured (client log, --slo 5ms): every window over
// the SLO in which redis froze 10 ms or more was charged to memcg_reclaim,
// yet three of six read "explained only in part". None may: with close
// latencies the rank correlation is noise (here at most 0.3), a couple of
// normal windows are no reference for the freeze's size, and one host
// delay of 200 ms (the shipped redis recording has one, covered 6%) is
// most of the summed excess.
func TestTheIncidentUnderWayIsExplainedInEveryRun(t *testing.T) {
	t.Run("10 s: 14 of 23 covered, two normal windows, one with a background thread's 24 ms freeze", func(t *testing.T) {
		p99, memcg := incident(23, 14, []float64{0.8, 24})
		r := Analyze(series(p99, memcg), Config{SLONs: 5 * ms})
		checkSetUp(t, r, 23, 14)
		wantMemcgExplains(t, r)
	})
	t.Run("25 s: 19 of 25 covered, one a host delay of 200 ms", func(t *testing.T) {
		p99, memcg := incident(24, 19, []float64{0.6, 1.2, 0.9, 1.5, 0.7})
		p99, memcg = append(p99, 205), append(memcg, 12) // after a calm window: no backlog to borrow
		r := Analyze(series(p99, memcg), Config{SLONs: 5 * ms})
		checkSetUp(t, r, 25, 19)
		if cc := r.Correlation[stall.MemcgReclaim]; cc.ExcessShare >= 0.5 {
			t.Fatalf("the set-up is wrong: the host delay leaves memcg_reclaim %.2f of the summed excess", cc.ExcessShare)
		}
		wantMemcgExplains(t, r)
	})
	// PostgreSQL timed in the kernel: each slow request's own stall time
	// says the reclaim was inside it, in all 25 spikes. The worst freeze of
	// a window is the checkpointer's, longer in the normal windows, where
	// it held no request.
	t.Run("postgres: 25 of 25 covered, inside the slow requests", func(t *testing.T) {
		p99, memcg := incident(25, 25, []float64{70, 64, 81, 58})
		ws := series(p99, memcg)
		for i := range ws {
			l := ws[i].Latency
			if l.P99Ns <= 5*ms {
				continue
			}
			slow := uint64(12) // the requests at or over the window's p99
			l.Requests = &latency.Requests{Slow: slow, SlowNs: slow * l.P99Ns}
			l.Requests.SlowStallNs[stall.MemcgReclaim] = slow * (l.P99Ns - 2*ms)
			l.Requests.SlowExcessStallNs[stall.MemcgReclaim] = slow * (l.P99Ns - 5*ms)
			// The backends' freezes: the checkpointer's are longer.
			ws[i].Hits[0].WorstNs = 30*ms + uint64(i)*ms
		}
		r := Analyze(ws, Config{SLONs: 5 * ms})
		checkSetUp(t, r, 25, 25)
		wantMemcgExplains(t, r)
	})
}

// checkSetUp checks that the run is the one meant: so many spikes, so
// many covered, and a rank correlation that cannot explain them.
func checkSetUp(t *testing.T, r *Result, spikes, covered int) {
	t.Helper()
	cc := r.Correlation[stall.MemcgReclaim]
	if len(r.Spikes) != spikes || int(math.Round(cc.Covered*float64(spikes))) != covered ||
		(cc.Spearman != nil && *cc.Spearman > explainSpearman) {
		t.Fatalf("the set-up is wrong: %d spikes, %+v (rank correlation %s)", len(r.Spikes), cc, fmtRho(cc.Spearman))
	}
}

// Runs of the same incident differ by a few spikes each way: how many
// the freeze covers (14 of 23 is 0.61, near the half the count needs),
// how many normal windows there are and whether one holds an accident.
// None of that may move the category.
func TestTheIncidentUnderWayReadsTheSameAcrossNeighbouringRuns(t *testing.T) {
	for _, normals := range [][]float64{nil, {0.8}, {0.8, 24}, {0.6, 1.2, 24}, {0.6, 1.2, 0.9, 1.5, 24}} {
		for covered := 11; covered <= 19; covered++ {
			t.Run(fmt.Sprintf("%d of 23 covered, normal doses %v", covered, normals), func(t *testing.T) {
				p99, memcg := incident(23, covered, normals)
				r := Analyze(series(p99, memcg), Config{SLONs: 5 * ms})
				if len(r.Spikes) != 23 {
					t.Fatalf("the set-up is wrong: %d spikes", len(r.Spikes))
				}
				wantMemcgExplains(t, r)
			})
		}
	}
}

// The control: a cause that is merely there does not explain the spikes,
// however few the normal windows or close the latencies. In every window
// and as large in the normal ones (a median of 36 ms in the spikes, 34 in
// the normal windows: a difference of noise), it explains them only in
// part; a sliver of each spike, by window or inside the slow requests,
// explains nothing.
func TestACauseMerelyThereDoesNotExplain(t *testing.T) {
	t.Run("as large in the normal windows", func(t *testing.T) {
		var p99, memcg []float64
		for i := 0; i < 20; i++ {
			p99 = append(p99, 7+float64(i*37%30)/10)
			memcg = append(memcg, 31+float64(i*7%11))
		}
		for _, dose := range []float64{33, 34, 36, 30, 38} {
			p99 = append(p99, 3.5)
			memcg = append(memcg, dose)
		}
		r := Analyze(series(p99, memcg), Config{SLONs: 5 * ms})
		cc := r.Correlation[stall.MemcgReclaim]
		if len(r.Spikes) != 20 || cc.Covered != 1 || (cc.Spearman != nil && *cc.Spearman > explainSpearman) {
			t.Fatalf("the set-up is wrong: %d spikes, %+v (rank correlation %s)", len(r.Spikes), cc, fmtRho(cc.Spearman))
		}
		if len(r.Explained) != 0 || !slices.Contains(r.Partly, stall.MemcgReclaim) {
			t.Errorf("explained %v, partly %v: %s", r.Explained, r.Partly, r.Conclusion)
		}
	})
	t.Run("a sliver of each spike", func(t *testing.T) {
		p99, _ := incident(23, 23, nil)
		r := Analyze(series(p99, repeat(0.5, len(p99))), Config{SLONs: 5 * ms})
		if len(r.Spikes) != 23 || len(r.Explained) != 0 || len(r.Partly) != 0 {
			t.Errorf("%d spikes, explained %v, partly %v: %s", len(r.Spikes), r.Explained, r.Partly, r.Conclusion)
		}
	})
	t.Run("a sliver of the slow requests", func(t *testing.T) {
		p99, memcg := incident(23, 23, nil)
		ws := series(p99, memcg)
		for i := range ws {
			l := ws[i].Latency
			l.Requests = &latency.Requests{Slow: 12, SlowNs: 12 * l.P99Ns}
			l.Requests.SlowStallNs[stall.MemcgReclaim] = 12 * ms / 2
			l.Requests.SlowExcessStallNs[stall.MemcgReclaim] = 12 * ms / 2
		}
		r := Analyze(ws, Config{SLONs: 5 * ms})
		if len(r.Spikes) != 23 || len(r.Explained) != 0 || len(r.Partly) != 0 {
			t.Errorf("%d spikes, explained %v, partly %v: %s", len(r.Spikes), r.Explained, r.Partly, r.Conclusion)
		}
	})
}
