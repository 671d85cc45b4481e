package stackexport

import (
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// A run's profile adds, per thread and cause, the stall time its stacks
// do not cover as a sample without one: the profile's total is the
// kernel's exact total.
func TestRunSamplesCoverEveryStall(t *testing.T) {
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9})
	snap := &stall.Snapshot{}
	s := stall.NewStack(nil, []stall.Frame{{Func: "read_the_file", Module: "/bin/x"}}, "")
	th := snap.Thread(7, 7, "x")
	th.Hists[stall.MemcgReclaim] = &stall.Hist{}
	for _, d := range []uint64{3000, 4000, 500, 600} {
		th.Hists[stall.MemcgReclaim].Add(d)
	}
	th.Hists[stall.NUMATaskMove] = &stall.Hist{Count: 2} // counted, not timed
	for _, d := range []uint64{3000, 4000} {
		a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TID: 7, PID: 7, Comm: "x", DurNs: d, Stack: s})
	}
	sum := a.Summarize(snap)
	got := RunSamples(&sum)
	if len(got) != 2 {
		t.Fatalf("%d samples, want 2: %+v", len(got), got)
	}
	if got[0].Stack != s || got[0].Count != 2 || got[0].Ns != 7000 {
		t.Errorf("the stacked sample %+v", got[0])
	}
	if got[1].Stack != nil || got[1].Count != 2 || got[1].Ns != 1100 || got[1].Process != "x" {
		t.Errorf("the rest %+v, want 2 stalls of 1100 ns without a stack", got[1])
	}
}
