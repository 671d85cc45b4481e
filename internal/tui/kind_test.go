package tui

import (
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// The view names memstall_wait with its kind of wait as the report does:
// the drill-down's histogram and stacks (each stack with its stalls'
// kind), and on Spikes the cause that covers a spike and where it
// stalled.
func TestViewNamesMemstallWaitsKind(t *testing.T) {
	s := NewStore(Info{Run: run.Description{Target: "pid 30 (thrash)", StartNs: 1, WindowNs: 1e9}}, liveWindowsForTest)
	st := viewStack()
	w := &aggregate.Window{Index: 0, StartNs: 1, EndNs: 1e9 + 1, Threads: map[uint32]*aggregate.ThreadWindow{}}
	tw := &aggregate.ThreadWindow{PID: 30, TID: 31, Comm: "thrash"}
	w.Threads[31] = tw
	for _, e := range []struct {
		kind string
		dur  uint64
		st   *stall.Stack
	}{{"thrashing", 4e6, st}, {"thrashing", 3e6, st}, {"swap_in", 1e6, nil}} {
		s.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.MemstallWait, Reason: e.kind, TsNs: 5e8, DurNs: e.dur,
			PID: 30, TID: 31, Comm: "thrash", Stack: e.st})
		tw.TotalNs += e.dur
		tw.ByCause[stall.MemstallWait].TotalNs += e.dur
		tw.ByCause[stall.MemstallWait].Count++
	}
	s.Window(w)
	s.Analysis(&correlate.Result{Conclusion: "Spikes explained by memstall_wait (thrashing).", Spikes: []correlate.Spike{{
		Index: 0, StartNs: 1, LatencyNs: 9e6, BaselineNs: 2e6, ExcessNs: 7e6, Verdict: "P99 9 ms: memstall_wait (thrashing) covers all of it",
		Causes: []correlate.CauseInSpike{{Cause: stall.MemstallWait, Reason: "thrashing", WorstTID: 31, Process: "thrash", Coverage: 1, Stack: st}}}}})

	thread := drive(t, NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }}), 80, 40, keyEnter).View()
	for _, want := range []string{"memstall_wait (thrashing): 3 stalls, total 8.00ms", "memstall_wait (thrashing): 7.00ms in stalls with stacks",
		"100% 7.00ms in 2 stalls of thrashing"} {
		if !strings.Contains(thread, want) {
			t.Errorf("the thread screen lacks %q:\n%s", want, thread)
		}
	}
	spikes := drive(t, NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }}), 100, 40, keyTab).View()
	for _, want := range []string{"where memstall_wait (thrashing) stalled (tid 31):", "memstall_wait (thrashing) 100% · thrash"} {
		if !strings.Contains(spikes, want) {
			t.Errorf("the Spikes screen lacks %q:\n%s", want, spikes)
		}
	}
}
