package output

import (
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// The report is the run's description, the end's counts and note, the
// kernel's totals and the analysis, each where the text and JSON read it.
func TestReportFromTheRunAndItsEnd(t *testing.T) {
	d := run.Description{Target: "pid 100 (db)", Kernel: "6.18.0",
		Probes: []stall.ProbeStatus{{Name: "memcg_reclaim", Attached: true}, {Name: "mmap_lock", Error: "no"}}}
	d.MinEventNs[stall.MmapLock] = 10_000
	end := run.End{DurationNs: 5e8, Events: 1, LateEvents: 2, Windows: 3, Note: "target pid 100 (db) exited",
		Latency: &latency.Account{Samples: 4}, BadRecords: 5}
	sum := aggregate.Summary{Threads: []aggregate.ThreadSummary{{TID: 11}}}
	c := &correlate.Result{Windows: 3}
	rep := NewReport(d, end, sum, c, 7)
	if rep.Target != d.Target || rep.Kernel != "6.18.0" || len(rep.Probes) != 2 || rep.TopThreads != 7 ||
		rep.DurationNs != 5e8 || rep.Events != 1 || rep.LateEvents != 2 || rep.Windows != 3 || rep.Note != end.Note ||
		rep.BadRecords != 5 || rep.Latency != end.Latency || rep.Correlation != c || len(rep.Summary.Threads) != 1 {
		t.Errorf("report %+v", rep)
	}
	if rep.MinEventNs != d.MinEventNs {
		t.Errorf("thresholds %v", rep.MinEventNs)
	}
}
