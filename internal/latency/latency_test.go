package latency

import (
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

func TestSummarizeNearestRank(t *testing.T) {
	var v []uint64
	for i := uint64(1); i <= 100; i++ {
		v = append(v, i*1000)
	}
	s := Summarize(3, v)
	if s.Count != 100 || s.P50Ns != 50000 || s.P99Ns != 99000 || s.MaxNs != 100000 || s.Index != 3 {
		t.Fatalf("%+v", s)
	}
	if s := Summarize(0, []uint64{7}); s.P50Ns != 7 || s.P99Ns != 7 {
		t.Fatalf("%+v", s)
	}
}

func TestWindows(t *testing.T) {
	w := NewWindows(window.Grid{StartNs: 1000, LenNs: 100}, 0)
	for _, s := range []Sample{{TsNs: 1000, LatencyNs: 5}, {TsNs: 1099, LatencyNs: 7}, {TsNs: 1100, LatencyNs: 9}, {TsNs: 999, LatencyNs: 1}, {TsNs: 1350, LatencyNs: 3}} {
		w.Add(s)
	}
	if a := w.Account(); a.Before != 1 || a.OutsideMinNs != 999 {
		t.Fatalf("before %d at %d", a.Before, a.OutsideMinNs)
	}
	if s := w.Take(0); s.Count != 2 || s.MaxNs != 7 {
		t.Fatalf("window 0 %+v", s)
	}
	if w.Take(0) != nil {
		t.Fatal("window 0 taken twice")
	}
	w.Add(Sample{TsNs: 1050, LatencyNs: 4}) // too late for window 0
	if a := w.Account(); a.Late != 1 || a.Samples != 2 {
		t.Fatalf("late %d, samples %d", a.Late, a.Samples)
	}
	w.Take(1)
	w.Drop() // window 3's sample, after the last window taken
	if a := w.Account(); a.Samples != 3 || a.After != 1 || a.OutsideMinNs != 999 || a.OutsideMaxNs != 1350 {
		t.Fatalf("account %+v", a)
	}
}

func TestClockConvertsEpochTimes(t *testing.T) {
	c := Clock{WallNs: 1_700_000_000_000_000_000, MonoNs: 5_000_000_000}
	if got := c.Mono(1_700_000_000_500_000_000); got != 5_500_000_000 {
		t.Fatalf("epoch ts → %d", got)
	}
	if got := c.Mono(123); got != 123 {
		t.Fatalf("monotonic ts → %d", got)
	}
}

// A window's requests timed in the kernel: the slow ones are those over
// the SLO (or, without one, at or above the window's p99), and the stall
// time inside them is summed per cause.
func TestSummarizeSamplesBreaksSlowRequestsDown(t *testing.T) {
	var v []Sample
	for i := uint64(1); i <= 100; i++ {
		st := &stall.RequestStall{}
		if i > 95 { // the five slowest froze in memcg reclaim
			st.ByCause[stall.MemcgReclaim] = 8e6
			st.FreezeNs = 8e6
		}
		v = append(v, Sample{TsNs: i, LatencyNs: i * 1e5, TID: uint32(10 + i%2), Stall: st})
	}
	v = append(v, Sample{TsNs: 101, LatencyNs: 1}) // from a source that knows no stalls
	st := SummarizeSamples(4, v, 9.5e6)
	r := st.Requests
	if st.Count != 101 || r == nil || r.Slow != 5 || r.SlowNs != (96+97+98+99+100)*1e5 {
		t.Fatalf("%+v %+v", st, r)
	}
	if r.SlowStallNs[stall.MemcgReclaim] != 40e6 || r.FreezeNs != 40e6 || len(r.TIDs) != 2 || r.TIDs[0] != 10 {
		t.Errorf("%+v", r)
	}
	// Just over the 9.5 ms SLO (by 0.1 to 0.5 ms), an 8 ms stall accounts
	// for no more than each request's own excess.
	if got := r.SlowExcessStallNs[stall.MemcgReclaim]; got != 1.5e6 {
		t.Errorf("stall within the excess %d, want 1.5 ms", got)
	}
	if st := SummarizeSamples(4, v, 0); st.Requests.Slow != 2 || st.P999Ns != 100*1e5 {
		t.Errorf("without an SLO: %d slow (p99 %d), p999 %d", st.Requests.Slow, st.P99Ns, st.P999Ns)
	}
	if st := SummarizeSamples(4, []Sample{{TsNs: 1, LatencyNs: 5}}, 0); st.Requests != nil {
		t.Errorf("a source without stalls gave %+v", st.Requests)
	}
}
