//go:build linux

package tracer

// A --pid target's descendants: watched without --children (their
// stalls only added up, for the report's hint), traced with it.

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

// openWatching traces process target alone and watches its descendants.
func openWatching(t *testing.T, target uint32, noTaskStorage bool) *Tracer {
	t.Helper()
	testutil.RequireRoot(t)
	topo, err := topology.Read("/sys")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{target}, WatchChildren: true, Topology: topo,
		noTaskStorage: noTaskStorage})
	if err != nil {
		t.Fatalf("open tracer: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// A watched descendant's stalls go through the same programs as a
// target's, but land in the descendants' totals only: no histogram, no
// record, and the process counts once as one that stalled.
func TestWatchedDescendantStallsAreOnlyCounted(t *testing.T) {
	for _, hash := range []bool{false, true} {
		name := "task storage"
		if hash {
			name = "hash fallback"
		}
		t.Run(name, func(t *testing.T) {
			tid := lockedThread(t)
			// A target that never stalls; the test process is watched.
			idle := exec.Command("sleep", "60")
			if err := idle.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { idle.Process.Kill(); idle.Wait() })
			tr := openWatching(t, uint32(idle.Process.Pid), hash)
			if added, err := tr.AddDescendants([]uint32{uint32(os.Getpid())}); err != nil || len(added) != 1 {
				t.Fatalf("AddDescendants: %v added, %v", added, err)
			}
			for range 2 {
				run(t, tr, "memcg_reclaim_begin", 0, gfpKernel)
				time.Sleep(2 * time.Millisecond)
				run(t, tr, "memcg_reclaim_end", 7)
			}
			// One compaction attempt of two zone passes: one stall.
			run(t, tr, "compact_attempt", 9, gfpKernel, 1)
			for range 2 {
				run(t, tr, "compact_pass_begin")
				time.Sleep(time.Millisecond)
				run(t, tr, "compact_pass_end_cc", 0, 0, 0, 0, 0)
			}
			if evs := drain(t, tr, 200*time.Millisecond); len(evs) != 0 {
				t.Errorf("a watched descendant's stalls were streamed: %+v", evs)
			}
			snap, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if th := snap.Threads[tid]; th != nil && len(th.Hists) > 0 {
				t.Errorf("a watched descendant's thread has histograms: %+v", th.Hists)
			}
			if len(snap.CauseTotals) != 0 {
				t.Errorf("a watched descendant's stalls are in the target's totals: %+v", snap.CauseTotals)
			}
			d := snap.Descendants
			if d == nil {
				t.Fatal("no descendants in the snapshot")
			}
			m, c := d.Causes[stall.MemcgReclaim], d.Causes[stall.Compaction]
			if d.Stalled != 1 || len(d.Causes) != 2 || m.Count != 2 || m.TotalNs < uint64(4*time.Millisecond) ||
				c.Count != 1 || c.TotalNs < uint64(2*time.Millisecond) || d.FreezeNs() != m.TotalNs+c.TotalNs {
				t.Errorf("descendants %+v: want one process, 2 memcg_reclaim stalls of 2ms or more, one compaction attempt of 2ms or more", d)
			}
		})
	}
}

// Without --children the kernel watches the target's children and
// grandchildren as they fork, counts a process that stalled once, and
// forgets each as it exits (pids get reused).
func TestWatchChildrenFollowsForksInKernel(t *testing.T) {
	self := uint32(os.Getpid())
	tr := openWatching(t, self, false)
	// Started after attach: the shell is the test's child, and cat,
	// which it forks, its grandchild.
	wl := testutil.StartMemcgWorkload(t, "numatrace-test-watch", false)
	shell := uint32(wl.PID())
	var stalled uint8
	if err := tr.maps.WatchedTgids.Lookup(shell, &stalled); err != nil {
		t.Fatalf("the shell forked after attach is not watched: %v", err)
	}
	wl.Release(t)

	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range snap.Threads {
		if th.PID != self {
			t.Errorf("thread %d of process %d (%s) traced under --pid %d", th.TID, th.PID, th.Comm, self)
		}
	}
	d := snap.Descendants
	// Three reads of 400 MiB in 64 MiB: hundreds of reclaims, all cat's.
	if d == nil || d.Stalled != 1 || d.Causes[stall.MemcgReclaim].Count < 150 {
		t.Fatalf("descendants %+v: want one process (cat) with its memcg reclaim", d)
	}
	// Both have exited: neither is watched any more, and cat is counted
	// as a process that stalled and went.
	var pid uint32
	for it := tr.maps.WatchedTgids.Iterate(); it.Next(&pid, &stalled); {
		t.Errorf("exited process %d still watched", pid)
	}
	c, err := tr.counters()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.sum(typesCounterIdCOUNTER_WATCHED_GONE); n != 1 {
		t.Errorf("%d watched processes counted as gone after stalling, want 1 (cat)", n)
	}
	t.Logf("cat, a grandchild: %d memcg_reclaim stalls, %d ns", d.Causes[stall.MemcgReclaim].Count, d.Causes[stall.MemcgReclaim].TotalNs)
}

// AddDescendants adds to the set the kernel follows forks from, and says
// which it did not hold yet: the walk of /proc at attach repeats until
// none is; DropDescendants takes out those that exited meanwhile.
func TestAddDescendantsReturnsOnlyNewOnes(t *testing.T) {
	testutil.RequireRoot(t)
	topo, _ := topology.Read("/sys")
	for _, cfg := range []Config{
		{Filter: FilterPIDs, PIDs: []uint32{1}, FollowForks: true, Topology: topo},
		{Filter: FilterPIDs, PIDs: []uint32{1}, WatchChildren: true, Topology: topo},
	} {
		tr, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		set := tr.maps.WatchedTgids
		if cfg.FollowForks {
			set = tr.maps.TargetTgids
		}
		if added, err := tr.AddDescendants([]uint32{4194305, 4194306}); !reflect.DeepEqual(added, []uint32{4194305, 4194306}) || err != nil {
			t.Errorf("%+v: first add: %v, %v; want both new", cfg, added, err)
		}
		if added, err := tr.AddDescendants([]uint32{4194306, 4194307}); !reflect.DeepEqual(added, []uint32{4194307}) || err != nil {
			t.Errorf("%+v: second add: %v, %v; want 4194307 new", cfg, added, err)
		}
		if err := tr.DropDescendants([]uint32{4194306, 4194308}); err != nil {
			t.Errorf("drop: %v", err)
		}
		var keys []uint32
		var k uint32
		var v uint8
		for it := set.Iterate(); it.Next(&k, &v); {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := []uint32{4194305, 4194307}
		if cfg.FollowForks {
			want = []uint32{1, 4194305, 4194307}
			if pids, err := tr.TargetPIDs(); err != nil || len(pids) != 3 {
				t.Errorf("TargetPIDs %v, %v", pids, err)
			}
		}
		if !slices.Equal(keys, want) {
			t.Errorf("%+v: set %v, want %v", cfg, keys, want)
		}
		tr.Close()
	}
}
