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

// The thread screen lists where the thread slept inside its requests
// (its waits), as the report's WAITS do; a thread with waits alone is no
// row of the view, as it is none of the report's tables.
func TestViewShowsWaits(t *testing.T) {
	s := NewStore(Info{Run: run.Description{Target: "pid 10 (lockserver)", StartNs: 1, WindowNs: 1e9}}, liveWindowsForTest)
	w := &aggregate.Window{Index: 0, StartNs: 1, EndNs: 1e9 + 1, Threads: map[uint32]*aggregate.ThreadWindow{}}
	tw := &aggregate.ThreadWindow{PID: 10, TID: 11, Comm: "lockserver"}
	w.Threads[11] = tw
	s.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.RunqWait, TsNs: 5e8, DurNs: 2e6, PID: 10, TID: 11, Comm: "lockserver"})
	tw.TotalNs += 2e6
	tw.ByCause[stall.RunqWait].TotalNs += 2e6
	tw.ByCause[stall.RunqWait].Count++
	lock := stall.NewStack([]stall.Frame{{Func: "futex_wait", Module: stall.KernelModule}, {Func: "__x64_sys_futex", Module: stall.KernelModule}},
		[]stall.Frame{{Func: "__lll_lock_wait", Module: "/lib/libc.so.6"}, {Func: "serve", Module: "/bin/lockserver"}}, "")
	for _, d := range []uint64{3e6, 2e6} {
		s.Stall(&stall.Event{Kind: stall.KindWait, Reason: "other_wait", TsNs: 5e8, DurNs: d, PID: 10, TID: 11, Comm: "lockserver", Stack: lock})
	}
	s.Stall(&stall.Event{Kind: stall.KindWait, Reason: "other_wait", TsNs: 5e8, DurNs: 9e6, PID: 10, TID: 12, Comm: "waiter", Stack: lock})
	s.Window(w)
	if f := s.Frame(); len(f.Rows) != 1 || f.Rows[0].TID != 11 {
		t.Errorf("the view's rows %+v; want tid 11's alone", f.Rows)
	}
	m := drive(t, NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }}), 80, 60, keyEnter)
	thread := m.View()
	for _, want := range []string{"WAITS", "other_wait: 5.00ms in 2 waits, 5.00ms with stacks", "100% 5.00ms in 2 waits",
		"user   serve → __lll_lock_wait", "kernel __x64_sys_futex → futex_wait"} {
		if !strings.Contains(thread, want) {
			t.Errorf("the thread screen lacks %q:\n%s", want, thread)
		}
	}
}
