package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/stall"
)

// quietReport is 10 s of a machine on which threads only moved between
// CPUs: 32 migrations, none across nodes.
func quietReport() *Report {
	sum := aggregate.Summary{
		Threads: []aggregate.ThreadSummary{{PID: 1, TID: 1, Comm: "init", Migrations: aggregate.Migrations{Total: 20}},
			{PID: 7, TID: 8, Comm: "sshd", Migrations: aggregate.Migrations{Total: 12}}},
		Processes: []aggregate.ProcessSummary{{PID: 1, Comm: "init", Threads: 1, Migrations: aggregate.Migrations{Total: 20}},
			{PID: 7, Comm: "sshd", Threads: 1, Migrations: aggregate.Migrations{Total: 12}}},
	}
	sum.Threads[0].Stalls[stall.TaskMigration] = aggregate.CauseSummary{Count: 20}
	sum.Threads[1].Stalls[stall.TaskMigration] = aggregate.CauseSummary{Count: 12}
	return &Report{Target: "system-wide", Kernel: "6.18", DurationNs: 10e9, Summary: sum}
}

// A quiet machine gets a plain answer, first and last, not rows of 0ns.
func TestQuietRunSaysSo(t *testing.T) {
	var b bytes.Buffer
	if err := quietReport().Text(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	const verdict = "VERDICT: Nothing froze a thread for memory in 10s; 32 task migrations, none across nodes."
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if lines[3] != verdict || lines[len(lines)-1] != verdict {
		t.Errorf("the report does not open and end with %q:\n%s", verdict, out)
	}
	if strings.Contains(out, "PROCESSES") || strings.Contains(out, "THREADS") {
		t.Errorf("a quiet run lists threads that did not stall:\n%s", out)
	}
	if !strings.Contains(out, "No thread stalled; 2 threads only moved between CPUs of one node (were left out: --json lists them).") {
		t.Errorf("the report does not say what it left out:\n%s", out)
	}
	if h := quietReport().Headline(); !strings.HasPrefix(h.Next, "nothing to fix in memory management") || len(h.Worst) != 0 {
		t.Errorf("headline %+v", h)
	}
}

// When the recorded machine's doctor found what explains the main
// cause, the next step is that finding and its fix, not general advice.
func TestNextStepIsTheRecordedFinding(t *testing.T) {
	r := quietReport()
	r.Summary.Threads[0].StallNs, r.Summary.Processes[0].StallNs = 5e6, 5e6
	r.Summary.Threads[0].Stalls[stall.NodeReclaim] = aggregate.CauseSummary{Count: 3, TotalNs: 5e6, MaxNs: 3e6}
	r.Summary.Causes[stall.NodeReclaim] = aggregate.CauseSummary{Count: 3, TotalNs: 5e6, MaxNs: 3e6}
	if h := r.Headline(); !strings.Contains(h.Next, "vm.zone_reclaim_mode") || h.Finding != nil {
		t.Errorf("without findings, next %q", h.Next)
	}
	r.Findings = []doctor.Finding{
		{Check: "thp_defrag", Severity: doctor.Warn, Title: "THP defrag=always"},
		{Check: "zone_reclaim_mode", Severity: doctor.Warn, Title: "vm.zone_reclaim_mode=1: allocations reclaim their own node",
			Fix: "sysctl -w vm.zone_reclaim_mode=0"},
	}
	h := r.Headline()
	if want := "doctor, on the recorded machine: vm.zone_reclaim_mode=1: allocations reclaim their own node; fix: sysctl -w vm.zone_reclaim_mode=0"; h.Next != want || h.Finding == nil {
		t.Errorf("next %q\nwant %q", h.Next, want)
	}
	if !strings.HasPrefix(h.Verdict, "Memory management froze 1 thread of 1 process for 5.00ms in 10s, most of it node_reclaim (5.00ms)") {
		t.Errorf("verdict %q", h.Verdict)
	}
}

// The next step follows the verdict: where PSI counted memory stall in
// the windows of the spikes no stall covers, the verdict says memory is
// still the likely cause, and the next step must not send the reader
// outside memory management (a redis incident's report said both).
func TestNextStepForUncoveredSpikesFollowsPSI(t *testing.T) {
	r := quietReport()
	r.Summary.Threads[0].StallNs, r.Summary.Processes[0].StallNs = 5e6, 5e6
	r.Summary.Causes[stall.MemcgReclaim] = aggregate.CauseSummary{Count: 3, TotalNs: 5e6, MaxNs: 3e6}
	for _, c := range []struct {
		name        string
		explained   []stall.Cause
		psiNs       uint64
		wantNext    string
		unwantNext  string
		machineWide bool // PSI is the whole machine's
	}{
		{"memory stalled unseen", []stall.Cause{stall.MemcgReclaim}, 438e6,
			"; for the spikes no stall covers, memory management is still the likely cause", elsewhere, false},
		{"memory stalled unseen, nothing explained", nil, 438e6, "memory management is still the likely cause", elsewhere, false},
		{"PSI agrees it was not memory", []stall.Cause{stall.MemcgReclaim}, 1e6, "; for the spikes no stall covers, " + elsewhere, memoryUnseen, false},
		// Another process's memory stall is no reason to look at the target's.
		{"machine-wide PSI stalled", nil, 438e6, elsewhere, memoryUnseen, true},
	} {
		r.Correlation = &correlate.Result{Windows: 20, Spikes: make([]correlate.Spike, 8), Explained: c.explained, Uncovered: 1,
			UncoveredPressure: correlate.UncoveredPressure{Known: 1, SomeNs: c.psiNs, WindowNs: 1e9}, PressureOwn: !c.machineWide}
		next := r.Headline().Next
		if !strings.Contains(next, c.wantNext) || strings.Contains(next, c.unwantNext) {
			t.Errorf("%s: next %q\nwant it to say %q", c.name, next, c.wantNext)
		}
	}
}

// Every cause a headline can name (a timed one: the cause that explains
// the spikes, or the one that froze longest) has a next step of its own,
// and the doctor checks that can stand in for it are checks doctor runs:
// a new cause cannot leave NEXT empty, nor wait for a finding that no
// check makes.
func TestEveryCauseTheHeadlineNamesHasANextStep(t *testing.T) {
	known := map[string]bool{}
	for _, check := range doctor.Checks() {
		known[check] = true
	}
	for _, c := range stall.AllCauses() {
		for _, check := range c.Desc().Checks {
			if !known[check] {
				t.Errorf("%s names doctor check %q, which doctor does not run", c, check)
			}
		}
		if !c.Timed() {
			continue
		}
		r := quietReport()
		r.Correlation = &correlate.Result{Windows: 20, Spikes: make([]correlate.Spike, 1), Explained: []stall.Cause{c}}
		if h := r.Headline(); h.Next == "" {
			t.Errorf("the spikes are explained by %s, and the next step is empty", c)
		}
		for _, check := range c.Desc().Checks {
			r.Findings = []doctor.Finding{{Check: check, Severity: doctor.Warn, Title: "found " + check}}
			if h := r.Headline(); h.Next != "doctor, on the recorded machine: found "+check {
				t.Errorf("%s with a finding of %s: next %q", c, check, h.Next)
			}
		}
	}
}

// The next step for memcg_reclaim, and for memstall_wait of kind
// memory_high, names the target's memory cgroup with its limit, usage,
// page cache share and hits of the limit, and the file that sets the
// limit, on cgroup v1 and v2; read at neither end of the run, it says
// where to read them, never "the cgroup" alone. Another kind of
// memstall_wait has the advice of its kind.
func TestNextStepNamesTheMemoryCgroup(t *testing.T) {
	v1 := &memcg.Reading{Group: "memory/numatrace-e2e-redis", Limit: 160 << 20, High: memcg.Unlimited, Usage: 166723584,
		File: 115 << 20, Anon: 40 << 20, Failcnt: 1234}
	v2 := &memcg.Reading{Group: "system.slice/redis.service", V2: true, Limit: 256 << 20, High: 128 << 20, Usage: 134000640,
		File: 96 << 20, Anon: 32 << 20, Events: memcg.Events{High: 340}}
	explained := func(c stall.Cause, kind string) *Report {
		r := quietReport()
		r.Summary.Causes[c] = aggregate.CauseSummary{Count: 3, TotalNs: 5e6, MaxNs: 3e6}
		r.Correlation = &correlate.Result{Windows: 20, Spikes: make([]correlate.Spike, 3), Explained: []stall.Cause{c}}
		r.Correlation.Correlation[c] = &correlate.CauseCorrelation{Covered: 1, Reason: kind}
		return r
	}
	for _, c := range []struct {
		name  string
		cause stall.Cause
		kind  string
		cg    *memcg.Reading
		want  string
	}{
		{"v1 memcg_reclaim", stall.MemcgReclaim, "", v1,
			"the cgroup memory/numatrace-e2e-redis reached its limit (160 MiB; usage 159 MiB, 72% of it page cache, failcnt 1,234): " +
				"raise memory.limit_in_bytes, or cut what fills it (page cache counts against the limit)"},
		{"v2 memstall_wait (memory_high)", stall.MemstallWait, "memory_high", v2,
			"the cgroup system.slice/redis.service reached its memory.high (128 MiB; usage 128 MiB, 75% of it page cache, memory.events high 340): " +
				"the kernel throttled the threads over it: raise memory.high, or cut what fills the group (page cache counts)"},
		{"memstall_wait (thrashing)", stall.MemstallWait, "thrashing", v1,
			"the threads waited to read back pages evicted while still in use (thrashing)"},
		{"memcg_reclaim, a group with no limit", stall.MemcgReclaim, "", &memcg.Reading{Group: "memory/free", Limit: memcg.Unlimited, High: memcg.Unlimited, Usage: 1 << 30},
			"the cgroup memory/free has no memory limit (usage 1.0 GiB, 0% of it page cache, failcnt 0): no limit on it or above it"},
		{"memcg_reclaim, no group read", stall.MemcgReclaim, "", nil,
			"a memory cgroup reached its limit (numatrace read no memory cgroup for this target: `numatrace doctor -p PID` names a process's"},
		{"memstall_wait (memory_high), no group read", stall.MemstallWait, "memory_high", nil,
			"the kernel throttled the threads over their cgroup's memory.high (numatrace read no memory cgroup"},
	} {
		r := explained(c.cause, c.kind)
		r.MemoryCgroup = memcg.Span{End: c.cg}
		if next := r.Headline().Next; !strings.HasPrefix(next, c.want) {
			t.Errorf("%s: next\n%q\nwant\n%q", c.name, next, c.want)
		}
	}
}
