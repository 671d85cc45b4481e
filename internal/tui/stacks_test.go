package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

func viewStack() *stall.Stack {
	k := []stall.Frame{{Func: "try_to_free_mem_cgroup_pages", Module: stall.KernelModule}, {Func: "try_charge_memcg", Module: stall.KernelModule},
		{Func: "filemap_read", Module: stall.KernelModule}, {Func: "vfs_read", Module: stall.KernelModule},
		{Func: "ksys_read", Module: stall.KernelModule}, {Func: "do_syscall_64", Module: stall.KernelModule}}
	u := []stall.Frame{{Func: "read", Module: "/lib/libc.so.6"}, {Func: "readQueryFromClient", Module: "/bin/redis-server"},
		{Func: "aeProcessEvents", Module: "/bin/redis-server"}, {Func: "main", Module: "/bin/redis-server"}}
	return stall.NewStack(k, u, "")
}

// The thread screen lists where the thread's stalls that carried stacks
// stalled, and Spikes where the stall that covers the selected spike did,
// each path fitted to the terminal.
func TestViewShowsStacks(t *testing.T) {
	s := NewStore(Info{Run: run.Description{Target: "pid 10 (redis-server)", StartNs: 1, WindowNs: 1e9}}, liveWindowsForTest)
	st := viewStack()
	w := &aggregate.Window{Index: 0, StartNs: 1, EndNs: 1e9 + 1, Threads: map[uint32]*aggregate.ThreadWindow{}}
	tw := &aggregate.ThreadWindow{PID: 10, TID: 11, Comm: "redis-server"}
	w.Threads[11] = tw
	for _, d := range []uint64{4e6, 3e6} {
		ev := &stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 5e8, DurNs: d, PID: 10, TID: 11, Comm: "redis-server", Stack: st}
		s.Stall(ev)
		tw.TotalNs += d
		tw.ByCause[stall.MemcgReclaim].TotalNs += d
		tw.ByCause[stall.MemcgReclaim].Count++
	}
	s.Window(w)
	s.Snapshot(&stall.Snapshot{System: stall.SystemStats{StacksTaken: 2, UserStacksLost: 1}})
	s.Analysis(&correlate.Result{Conclusion: "Spikes explained by memcg_reclaim.", Spikes: []correlate.Spike{{
		Index: 0, StartNs: 1, LatencyNs: 9e6, BaselineNs: 2e6, ExcessNs: 7e6, Verdict: "P99 9 ms: memcg_reclaim covers all of it",
		Causes: []correlate.CauseInSpike{{Cause: stall.MemcgReclaim, WorstTID: 11, Coverage: 1, Stack: st}}}}})

	m := drive(t, NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }}), 80, 40, keyEnter)
	thread := m.View()
	for _, want := range []string{"STACKS", "memcg_reclaim: 7.00ms in stalls with stacks", "100% 7.00ms in 2 stalls",
		"user   main → aeProcessEvents → readQueryFromClient → read", "kernel ksys_read → vfs_read → … → try_to_free_mem_cgroup_pages"} {
		if !strings.Contains(thread, want) {
			t.Errorf("the thread screen lacks %q:\n%s", want, thread)
		}
	}
	m = drive(t, NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }}), 80, 40, keyTab)
	spikes := m.View()
	for _, want := range []string{"where memcg_reclaim stalled (tid 11):", "user   main → aeProcessEvents → readQueryFromClient → read"} {
		if !strings.Contains(spikes, want) {
			t.Errorf("the Spikes screen lacks %q:\n%s", want, spikes)
		}
	}
	m = drive(t, NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }}), 80, 40, keyTab, keyTab)
	system := m.View()
	if want := "2 stalls took their stacks; not taken: 0 kernel, 1 user"; !strings.Contains(system, want) {
		t.Errorf("the System screen lacks %q:\n%s", want, system)
	}
	for _, v := range []string{thread, spikes, system} {
		for _, l := range strings.Split(v, "\n") {
			if ansi.StringWidth(l) > 80 {
				t.Errorf("a line wider than the terminal: %q", l)
			}
		}
	}
}
