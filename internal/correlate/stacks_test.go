package correlate

import (
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

// A spike names where its covering cause's worst-hit thread stalled:
// that thread's stack, not another thread's longer-lived one.
func TestSpikeNamesTheWorstThreadsStack(t *testing.T) {
	lat, ws := build(40, map[uint64]uint64{20: 41 * ms}, map[uint64]uint64{20: 38 * ms})
	worst := stall.NewStack(nil, []stall.Frame{{Func: "readQueryFromClient", Module: "/bin/redis"}}, "")
	other := stall.NewStack(nil, []stall.Frame{{Func: "bio", Module: "/bin/redis"}}, "")
	w := ws[20]
	tw := w.Threads[1234].ByCause[stall.MemcgReclaim]
	tw.Stack, tw.StackNs = worst, 5*ms
	w.Threads[1234].ByCause[stall.MemcgReclaim] = tw
	o := w.Threads[1235].ByCause[stall.MemcgReclaim]
	o.Stack, o.StackNs = other, 9*ms
	w.Threads[1235].ByCause[stall.MemcgReclaim] = o
	c := w.Causes[stall.MemcgReclaim]
	c.Stack, c.StackNs = other, 9*ms
	w.Causes[stall.MemcgReclaim] = c
	r := analyze(lat, ws, Config{StartNs: 1e9})
	if len(r.Spikes) != 1 {
		t.Fatalf("spikes %+v", r.Spikes)
	}
	top := r.Spikes[0].Causes[0]
	if top.Cause != stall.MemcgReclaim || top.WorstTID != 1234 || top.Stack != worst {
		t.Errorf("the covering cause %s, worst tid %d, stack %v; want memcg_reclaim, 1234 and its stack", top.Cause, top.WorstTID, top.Stack)
	}
	// Without the worst thread's own, the window's stack stands in.
	tw.Stack = nil
	w.Threads[1234].ByCause[stall.MemcgReclaim] = tw
	r = analyze(lat, ws, Config{StartNs: 1e9})
	if s := r.Spikes[0].Causes[0].Stack; s != other {
		t.Errorf("stack %v, want the window's", s)
	}
}
