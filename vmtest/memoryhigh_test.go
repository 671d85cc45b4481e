package vmtest

import (
	"math"
	"testing"
	"time"
)

// Scenario 8 (Done-when (d)): a process over its cgroup v2 memory.high,
// without swap, so the kernel throttles it (mem_cgroup_handle_over_high)
// instead of reclaiming. numatrace must say it waited for memory.high
// (memstall_wait, reason memory_high), and its stall time for the
// process must be the group's own: within 10% of memory.pressure's
// "some" growth over the same span.
func checkMemoryHigh(t *testing.T, k Kernel, r *result) {
	p := r.Pressure
	if p == nil {
		t.Fatal("the guest read no memory.pressure for the group")
	}
	t.Logf("workload: %v", r.Workload.Extra)
	byCause := map[string]int64{}
	var waitNs int64
	reasons := map[string]int64{}
	for _, s := range r.Stalls {
		if s.PID != r.Workload.PID {
			continue
		}
		byCause[s.Cause] += s.TotalNs
		if s.Cause == "memstall_wait" {
			waitNs += s.TotalNs
			for why, ns := range s.ReasonNs {
				reasons[why] += ns
			}
		}
	}
	t.Logf("the process's stall time by cause (ns): %v; memstall_wait by reason (ns): %v", byCause, reasons)
	t.Logf("%s %s: PSI some +%s, full +%s (system some +%s) over %s; numatrace: %d stalls, union %s, sum %s",
		k.Name, p.Group, ms(p.SomeNs), ms(p.FullNs), ms(p.SystemSomeNs), ms(int64(p.ToNs-p.FromNs)),
		p.Stalls, ms(p.UnionNs), ms(p.SumNs))
	t.Logf("numatrace's sentence: %s", p.Sentence)
	// Not held to a bound, only shown: "full" is the time the group's one
	// busy thread stalled off CPU, which is memstall_wait's.
	t.Logf("PSI full +%s against memstall_wait %s", ms(p.FullNs), ms(waitNs))
	if waitNs == 0 {
		t.Fatal("no memstall_wait on the throttled process")
	}
	if high := reasons["memory_high"]; high*2 <= waitNs {
		t.Errorf("memory_high is %s of the process's %s of memstall_wait: the throttling is not named", ms(high), ms(waitNs))
	}
	// A second of throttling at least, or the comparison says little.
	if p.SomeNs < int64(time.Second) {
		t.Fatalf("the group's memory.pressure grew by %s only: the workload was not throttled", ms(p.SomeNs))
	}
	if off := math.Abs(float64(p.UnionNs-p.SomeNs)) / float64(p.SomeNs); off > 0.10 {
		t.Errorf("numatrace's stall time for the process %s, the group's PSI some %s: %.1f%% apart, more than 10%%",
			ms(p.UnionNs), ms(p.SomeNs), off*100)
	}
}

// ms formats ns as milliseconds.
func ms(ns int64) string { return (time.Duration(ns) / time.Microsecond * time.Microsecond).String() }
