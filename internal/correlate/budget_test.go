package correlate

import (
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// budgetOf is a budget of the parts given.
func budgetOf(parts map[stall.Part]uint64) stall.Budget {
	var b stall.Budget
	for p, ns := range parts {
		b[p] = ns
	}
	return b
}

// A disk-bound server, no memory pressure: its spikes' verdict is where
// their slow requests' time went, disk I/O wait first, and a PSI of the
// target's own group that counted memory stall meanwhile (a backup job
// beside it in the group) is not taken for their cause: their time is
// accounted for.
func TestTheVerdictIsTheBudget(t *testing.T) {
	ws := series(append(repeat(1, 10), 30, 1, 40, 1), nil)
	disk := budgetOf(map[stall.Part]uint64{stall.PartDiskIO: 61 * ms, stall.PartOnCPU: 22 * ms,
		stall.PartOf(stall.MemcgReclaim): 9 * ms, stall.PartOtherWait: 8 * ms})
	for _, i := range []int{10, 12} {
		ws[i].Latency.Requests = &latency.Requests{Slow: 5, SlowNs: 100 * ms, SlowBudget: disk, TIDs: []uint32{7}}
		ws[i].PressureNs, ws[i].HasPressure = 400*ms, true
	}
	r := Analyze(ws, Config{WindowNs: uint64(time.Second), PressureOwn: true})
	if len(r.Spikes) != 2 || !r.HasBudget || r.Budget.Total() != 200*ms {
		t.Fatalf("spikes %d, budget %v (%v)", len(r.Spikes), r.Budget, r.HasBudget)
	}
	for _, want := range []string{
		"2 spikes in 14 windows (the slow requests' time: 61% disk I/O wait, 22% on CPU, 9% memcg_reclaim, 8% waiting off CPU on a lock, a sleep, another thread or the network (other_wait))",
		"no stall cause explains them: their slow requests' time went mostly to disk I/O wait (61%)",
	} {
		if !strings.Contains(r.Conclusion, want) {
			t.Errorf("conclusion %q\nwant %q", r.Conclusion, want)
		}
	}
	if strings.Contains(r.Conclusion, "likely cause") || r.UncoveredLikelyMemory() {
		t.Errorf("the target's PSI taken for the cause of accounted-for time: %q", r.Conclusion)
	}
	if v := r.Spikes[0].Verdict; !strings.Contains(v, "its slow requests' time: 61% disk I/O wait") ||
		!strings.Contains(v, "No stall covers half of it: its slow requests' time went mostly to disk I/O wait") {
		t.Errorf("spike verdict %q", v)
	}
	// Where most of their time is unaccounted for, the target's own PSI
	// says memory is still the likely cause.
	unseen := budgetOf(map[stall.Part]uint64{stall.PartOtherWait: 80 * ms, stall.PartOnCPU: 20 * ms})
	for _, i := range []int{10, 12} {
		ws[i].Latency.Requests.SlowBudget = unseen
	}
	r = Analyze(ws, Config{WindowNs: uint64(time.Second), PressureOwn: true})
	if !r.UncoveredLikelyMemory() || !strings.Contains(r.Conclusion, "memory management is still the likely cause") {
		t.Errorf("conclusion %q", r.Conclusion)
	}
}
