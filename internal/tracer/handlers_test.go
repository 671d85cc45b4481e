//go:build linux

package tracer

// These tests drive the BPF handlers directly with BPF_PROG_TEST_RUN on
// their raw_tp programs: the stalls this one-node machine cannot produce
// (direct and node reclaim, direct compaction, NUMA migration and task
// moves) still go through the exact programs the tool attaches.

import (
	"fmt"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

const gfpKernel = 0xcc0

func twoNodes() *topology.Topology {
	return &topology.Topology{Nodes: []int{0, 1}, CPUNode: map[int]int{0: 0, 1: 1}, NodeMem: map[int]uint64{}}
}

func TestDirectReclaimHandler(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	run(t, tr, "direct_reclaim_begin", 3, gfpKernel)
	time.Sleep(2 * time.Millisecond)
	run(t, tr, "direct_reclaim_end", 42)

	evs := only(t, drain(t, tr, 300*time.Millisecond), stall.DirectReclaim)
	if len(evs) != 1 {
		t.Fatalf("got %d direct_reclaim events, want 1", len(evs))
	}
	e := evs[0]
	if e.TID != tid || e.Order != 3 || e.GFP != gfpKernel || e.Pages != 42 {
		t.Errorf("event %+v: want tid %d order 3 gfp %#x pages 42", e, tid, gfpKernel)
	}
	if e.DurNs < uint64(2*time.Millisecond) || e.DurNs > uint64(time.Second) {
		t.Errorf("duration %d ns, want >= 2ms", e.DurNs)
	}
	h := threadHist(t, tr, tid, stall.DirectReclaim)
	if h.Count != 1 || h.TotalNs != e.DurNs || h.MaxNs != e.DurNs || h.Slots[stall.SlotOf(e.DurNs)] != 1 {
		t.Errorf("histogram %+v does not hold exactly the one stall of %d ns", h, e.DurNs)
	}
	// The cause's exact total holds the same one stall, in the same bucket.
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if tot := snap.CauseTotals[stall.DirectReclaim]; tot == nil || *tot != *h {
		t.Errorf("direct_reclaim total %+v, want the thread's histogram %+v", tot, h)
	}
}

func TestEndWithoutBeginIsIgnored(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	run(t, tr, "memcg_reclaim_end", 5)
	if evs := only(t, drain(t, tr, 100*time.Millisecond), stall.MemcgReclaim); len(evs) != 0 {
		t.Fatalf("an end without a begin produced %d events", len(evs))
	}
	if h := threadHist(t, tr, tid, stall.MemcgReclaim); h.Count != 0 {
		t.Fatalf("an end without a begin counted %d stalls", h.Count)
	}
}

func TestNestedSoftlimitInsideDirectReclaim(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	// Soft-limit reclaim runs inside global reclaim; the two must not clobber.
	run(t, tr, "direct_reclaim_begin", 0, gfpKernel)
	run(t, tr, "memcg_softlimit_begin", 0, gfpKernel)
	time.Sleep(time.Millisecond)
	run(t, tr, "memcg_softlimit_end", 9)
	run(t, tr, "direct_reclaim_end", 10)

	evs := drain(t, tr, 300*time.Millisecond)
	dr, mr := only(t, evs, stall.DirectReclaim), only(t, evs, stall.MemcgReclaim)
	if len(dr) != 1 || len(mr) != 1 {
		t.Fatalf("got %d direct and %d memcg events, want 1 and 1", len(dr), len(mr))
	}
	if !mr[0].SoftLimit || mr[0].Pages != 9 || dr[0].Pages != 10 {
		t.Errorf("softlimit %+v direct %+v", mr[0], dr[0])
	}
	if dr[0].DurNs < mr[0].DurNs {
		t.Errorf("outer stall %d shorter than the nested one %d", dr[0].DurNs, mr[0].DurNs)
	}
	if !mr[0].Nested || dr[0].Nested {
		t.Errorf("nested flags: softlimit %v direct %v, want true and false", mr[0].Nested, dr[0].Nested)
	}
	if h := threadHist(t, tr, tid, stall.MemcgReclaim); h.NestedNs != h.TotalNs || h.TotalNs == 0 {
		t.Errorf("memcg histogram total %d nested %d: its time is inside direct reclaim", h.TotalNs, h.NestedNs)
	}
}

func TestNodeReclaimHandler(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	run(t, tr, "node_reclaim_begin", 1, 2, gfpKernel) // nid, order, gfp
	run(t, tr, "node_reclaim_end", 7)
	evs := only(t, drain(t, tr, 300*time.Millisecond), stall.NodeReclaim)
	if len(evs) != 1 || evs[0].Node != 1 || evs[0].Order != 2 || evs[0].Pages != 7 {
		t.Fatalf("node_reclaim events %+v, want one on node 1, order 2, 7 pages", evs)
	}
}

func TestDirectCompactionHandler(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	success := enumValue(t, "compact_result", "COMPACT_SUCCESS")
	complete := enumValue(t, "compact_result", "COMPACT_COMPLETE")
	before, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	// One attempt with two zone passes: the slices add up to the attempt.
	// A pass counts only if it begins within 10 ms of the attempt.
	realtime(t)
	start := time.Now()
	run(t, tr, "compact_attempt", 9, gfpKernel, 1) // order, gfp, prio
	run(t, tr, "compact_pass_begin")
	time.Sleep(time.Millisecond)
	run(t, tr, "compact_pass_end_cc", 0, 0, 0, 1, complete)
	run(t, tr, "compact_pass_begin")
	time.Sleep(time.Millisecond)
	run(t, tr, "compact_pass_end_cc", 0, 0, 0, 1, success)
	elapsed := uint64(time.Since(start))

	evs := only(t, drain(t, tr, 300*time.Millisecond), stall.Compaction)
	if len(evs) != 2 {
		t.Fatalf("got %d compaction events, want 2 (one per zone pass)", len(evs))
	}
	if evs[0].Status != "complete" || evs[1].Status != "success" || evs[0].Order != 9 {
		t.Errorf("events %+v", evs)
	}
	if evs[0].Pass != 1 || evs[1].Pass != 2 || evs[0].AttemptNs != evs[0].DurNs {
		t.Errorf("passes %d, %d; first attempt_ns %d dur %d", evs[0].Pass, evs[1].Pass, evs[0].AttemptNs, evs[0].DurNs)
	}
	sum := evs[0].DurNs + evs[1].DurNs
	if sum != evs[1].AttemptNs || sum < uint64(2*time.Millisecond) || sum > elapsed {
		t.Errorf("slices add to %d ns, attempt_ns %d; the attempt took %d ns and slept 2ms", sum, evs[1].AttemptNs, elapsed)
	}
	// The histogram holds one attempt of the whole length, in its bucket.
	h := threadHist(t, tr, tid, stall.Compaction)
	if h.Count != 1 || h.TotalNs != sum || h.MaxNs != sum {
		t.Errorf("histogram count %d total %d max %d, want 1 attempt of %d ns", h.Count, h.TotalNs, h.MaxNs, sum)
	}
	var inSlots uint64
	for _, c := range h.Slots {
		inSlots += c
	}
	if inSlots != 1 || h.Slots[stall.SlotOf(sum)] != 1 {
		t.Errorf("buckets hold %d stalls, want the attempt alone in slot %d", inSlots, stall.SlotOf(sum))
	}
	after, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if after.System.DirectCompactAttempts-before.System.DirectCompactAttempts < 1 {
		t.Error("direct compaction attempt not counted system-wide")
	}
	// The cause's exact total moved the attempt between buckets the same
	// way (only this thread is traced).
	if tot := after.CauseTotals[stall.Compaction]; tot == nil || *tot != *h {
		t.Errorf("compaction total %+v, want the thread's histogram %+v", tot, h)
	}
	if after.System.ProactivePasses != before.System.ProactivePasses {
		t.Error("direct passes were counted as proactive compaction")
	}
}

func TestStaleCompactionAttemptIsDropped(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	run(t, tr, "compact_attempt", 3, gfpKernel, 1)
	// Long after the allocation, the thread compacts through the sysctl.
	time.Sleep(20 * time.Millisecond)
	before, _ := tr.Snapshot()
	run(t, tr, "compact_pass_begin")
	run(t, tr, "compact_pass_end_cc", 0, 0, 0, 1, 5)
	after, _ := tr.Snapshot()
	if h := threadHist(t, tr, tid, stall.Compaction); h.Count != 0 {
		t.Fatalf("a pass 20ms after the attempt was charged as direct compaction: %+v", h)
	}
	if after.System.ProactivePasses-before.System.ProactivePasses != 1 {
		t.Fatal("the pass was not counted as proactive compaction")
	}
}

// Under a filter, another thread's direct compaction is neither charged nor
// mistaken for proactive compaction.
func TestUntracedThreadsDirectCompactionIsNotProactive(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid+1_000_000, nil)
	before, _ := tr.Snapshot()
	run(t, tr, "compact_attempt", 9, gfpKernel, 1)
	run(t, tr, "compact_pass_begin")
	run(t, tr, "compact_pass_end_cc", 0, 0, 0, 1, 5)
	after, _ := tr.Snapshot()
	if after.System.ProactivePasses != before.System.ProactivePasses {
		t.Fatal("an untraced thread's direct compaction was counted as proactive")
	}
	if h := threadHist(t, tr, tid, stall.Compaction); h.Count != 0 {
		t.Fatal("an untraced thread was charged")
	}
}

func TestMigrationInsideCompactionIsNested(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	compaction := enumValue(t, "migrate_reason", "MR_COMPACTION")
	run(t, tr, "compact_attempt", 9, gfpKernel, 1)
	run(t, tr, "compact_pass_begin")
	run(t, tr, "migrate_start", 0, compaction)
	time.Sleep(time.Millisecond)
	run(t, tr, "migrate_end_r7", 32, 0, 0, 0, 0, 0, 0, compaction)
	run(t, tr, "compact_pass_end_cc", 0, 0, 0, 1, 5)
	evs := drain(t, tr, 300*time.Millisecond)
	mig := only(t, evs, stall.NUMAMigration)
	if len(mig) != 1 || !mig[0].Nested || mig[0].FreezeNs() != 0 {
		t.Fatalf("migration events %+v: want one, nested", mig)
	}
	h := threadHist(t, tr, tid, stall.NUMAMigration)
	if h.NestedNs != h.TotalNs || h.FreezeNs() != 0 {
		t.Fatalf("histogram total %d nested %d: the migration's time is compaction's", h.TotalNs, h.NestedNs)
	}
}

func TestCompactionOutsideAllocationIsNotCharged(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	before, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A pass with no try_to_compact_pages before it: sysctl or proactive.
	run(t, tr, "compact_pass_begin")
	run(t, tr, "compact_pass_end_cc", 0, 0, 0, 1, 5)
	after, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.System.ProactivePasses - before.System.ProactivePasses; got < 1 {
		t.Errorf("proactive passes grew by %d, want >= 1", got)
	}
	if h := threadHist(t, tr, tid, stall.Compaction); h.Count != 0 {
		t.Errorf("a pass outside an allocation was charged to the thread: %+v", h)
	}
}

func TestNUMAMigrationHandler(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	misplaced := enumValue(t, "migrate_reason", "MR_NUMA_MISPLACED")
	async := enumValue(t, "migrate_mode", "MIGRATE_ASYNC")
	run(t, tr, "migrate_start", async, misplaced)
	time.Sleep(time.Millisecond)
	// This kernel's mm_migrate_pages has 8 arguments: reason is the 8th.
	run(t, tr, "migrate_end_r7", 512, 3, 0, 0, 0, 0, async, misplaced)
	evs := only(t, drain(t, tr, 300*time.Millisecond), stall.NUMAMigration)
	if len(evs) != 1 {
		t.Fatalf("got %d numa_migration events, want 1", len(evs))
	}
	if e := evs[0]; e.Pages != 512 || e.Reason != "numa_misplaced" || e.Mode != "async" || e.DurNs < uint64(time.Millisecond) {
		t.Errorf("event %+v", e)
	}
}

func TestNUMATaskMoveHandlers(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, twoNodes())
	// A NULL task is the current one (the kernel moves current on a fault).
	run(t, tr, "numa_move_task", 0, 0, 1)
	run(t, tr, "numa_swap_task", 0, 1, 0, 0)
	run(t, tr, "numa_stick_task", 0, 0, 0, ^uint64(0)) // dst_cpu -1: no target
	evs := only(t, drain(t, tr, 300*time.Millisecond), stall.NUMATaskMove)
	if len(evs) != 3 {
		t.Fatalf("got %d numa_task_move events, want 3: %+v", len(evs), evs)
	}
	move, swap, stick := evs[0], evs[1], evs[2]
	if move.TID != tid || move.Node != 0 || move.DstNode != 1 || move.Swap || move.Stick {
		t.Errorf("move %+v: want tid %d node 0 -> 1", move, tid)
	}
	if !swap.Swap || swap.Node != 1 || swap.DstNode != 0 {
		t.Errorf("swap %+v: want node 1 -> 0", swap)
	}
	if !stick.Stick || stick.DstNode != -1 {
		t.Errorf("stick %+v: want a failed move with no destination", stick)
	}
	if h := threadHist(t, tr, tid, stall.NUMATaskMove); h.Count != 3 || h.TotalNs != 0 {
		t.Errorf("histogram %+v: want 3 moves, no time", h)
	}
}

func TestMmapLockHandler(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	// The lock's slow path ignores every lock but the thread's own
	// mmap_lock (whose address a test run cannot pass).
	runProg(t, loadVariant(t, tr, "mmap_lock", "mmap_contended"), 0x1234, 1<<2)
	time.Sleep(time.Millisecond)
	runProg(t, loadVariant(t, tr, "mmap_lock", "mmap_contention_end"), 0x1234, 0)
	start, end := loadVariant(t, tr, "mmap_lock", "mmap_lock_start"), loadVariant(t, tr, "mmap_lock", "mmap_lock_acquired_w1")
	from := monotonicNs()
	runProg(t, start, 0, 1)
	time.Sleep(time.Millisecond)
	runProg(t, end, 0, 1, 1)
	to := monotonicNs()
	// The thread's own real mmap_lock traffic shows up too, and on a busy
	// machine it can wait a few milliseconds (a CI run saw 6 ms): ours is
	// the one that waited a millisecond between our two calls.
	var long []stall.Event
	for _, e := range only(t, drain(t, tr, 300*time.Millisecond), stall.MmapLock) {
		if e.DurNs >= uint64(time.Millisecond) && e.TsNs-e.DurNs >= from && e.TsNs <= to {
			long = append(long, e)
		}
	}
	if len(long) != 1 || !long[0].Write || !long[0].Acquired || long[0].TID != tid {
		t.Fatalf("mmap_lock events of >= 1ms: %+v, want one write acquisition", long)
	}
}

func TestFilterDropsOtherThreads(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid+1_000_000, nil) // some other thread
	run(t, tr, "direct_reclaim_begin", 0, gfpKernel)
	run(t, tr, "direct_reclaim_end", 1)
	if evs := only(t, drain(t, tr, 100*time.Millisecond), stall.DirectReclaim); len(evs) != 0 {
		t.Fatalf("filtered thread produced %d events", len(evs))
	}
}

func TestMinEventKeepsHistogramExact(t *testing.T) {
	tid := lockedThread(t)
	testutil.RequireRoot(t)
	topo, _ := topology.Read("/sys")
	cfg := Config{Filter: FilterTID, TID: tid, Topology: topo}
	cfg.MinEventNs[stall.DirectReclaim] = uint64(time.Hour)
	tr, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for i := 0; i < 5; i++ {
		run(t, tr, "direct_reclaim_begin", 0, gfpKernel)
		run(t, tr, "direct_reclaim_end", 1)
	}
	if evs := only(t, drain(t, tr, 100*time.Millisecond), stall.DirectReclaim); len(evs) != 0 {
		t.Fatalf("stalls below --min-event were streamed: %d", len(evs))
	}
	if h := threadHist(t, tr, tid, stall.DirectReclaim); h.Count != 5 {
		t.Fatalf("histogram count %d, want 5", h.Count)
	}
}

func TestLostEventsCountedAndTotalsStayExact(t *testing.T) {
	tid := lockedThread(t)
	testutil.RequireRoot(t)
	topo, _ := topology.Read("/sys")
	// One page of ring buffer holds a few dozen records; nobody reads it.
	tr, err := Open(Config{Filter: FilterTID, TID: tid, Topology: topo, RingBufBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const stalls = 300
	for i := 0; i < stalls; i++ {
		run(t, tr, "direct_reclaim_begin", 0, gfpKernel)
		run(t, tr, "direct_reclaim_end", 1)
	}
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	streamed := uint64(len(drain(t, tr, 100*time.Millisecond)))
	if snap.LostEvents == 0 || snap.LostEvents+streamed < stalls {
		t.Fatalf("lost %d + streamed %d < %d stalls: drops went uncounted", snap.LostEvents, streamed, stalls)
	}
	var perCPU uint64
	for _, n := range snap.LostPerCPU {
		perCPU += n
	}
	if perCPU != snap.LostEvents {
		t.Errorf("per-CPU losses add to %d, total %d", perCPU, snap.LostEvents)
	}
	if h := snap.Threads[tid].Hists[stall.DirectReclaim]; h == nil || h.Count != stalls {
		t.Fatalf("histogram %+v: want exactly %d stalls despite the drops", h, stalls)
	}
}

// The variants for older kernels' signatures read the right arguments.
func TestOlderKernelVariants(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	misplaced := enumValue(t, "migrate_reason", "MR_NUMA_MISPLACED")
	success := enumValue(t, "compact_result", "COMPACT_SUCCESS")

	// 6.1: mm_migrate_pages(succeeded, failed, thp_succeeded, thp_failed, thp_split, mode, reason)
	r6 := loadVariant(t, tr, "numa", "migrate_end_r6")
	run(t, tr, "migrate_start", 0, misplaced)
	runProg(t, r6, 77, 1, 0, 0, 0, 0, misplaced)

	// Older: mm_compaction_end(zone_start, migrate_pfn, free_pfn, zone_end, sync, status)
	pfn := loadVariant(t, tr, "compaction", "compact_pass_end_pfn")
	run(t, tr, "compact_attempt", 4, gfpKernel, 1)
	run(t, tr, "compact_pass_begin")
	runProg(t, pfn, 0, 0, 0, 0, 1, success)

	// Older: mmap_lock_acquire_returned(mm, memcg_path, write, success)
	w2 := loadVariant(t, tr, "mmap_lock", "mmap_lock_acquired_w2")
	runProg(t, loadVariant(t, tr, "mmap_lock", "mmap_lock_start"), 0, 0, 1)
	time.Sleep(2 * time.Millisecond)
	runProg(t, w2, 0, 0, 1, 1)

	evs := drain(t, tr, 300*time.Millisecond)
	if m := only(t, evs, stall.NUMAMigration); len(m) != 1 || m[0].Pages != 77 || m[0].Reason != "numa_misplaced" {
		t.Errorf("r6 migration events %+v", m)
	}
	if c := only(t, evs, stall.Compaction); len(c) != 1 || c[0].Status != "success" || c[0].Order != 4 {
		t.Errorf("pfn compaction events %+v", c)
	}
	var long []stall.Event
	for _, e := range only(t, evs, stall.MmapLock) {
		if e.DurNs >= uint64(2*time.Millisecond) {
			long = append(long, e)
		}
	}
	if len(long) != 1 || !long[0].Write || !long[0].Acquired {
		t.Errorf("w2 mmap_lock events %+v, want one write acquisition", long)
	}
}

// Where open stalls are kept depends on the kernel: task storage from
// 5.12, the pendings hash before. Every handler test again on the hash.
func TestHandlersOnHashFallback(t *testing.T) {
	err := haveTaskStorage()
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("no task storage for tracing programs here (%v): nothing to compare the hash with", err))
	tr := openForThread(t, lockedThread(t), nil)
	if !tr.taskStorage || !hasFeature(tr, "task_storage", true) {
		t.Fatal("open stalls are not in task storage on a kernel that has it")
	}
	hashFallback = true
	defer func() { hashFallback = false }()
	tr = openForThread(t, lockedThread(t), nil)
	if tr.taskStorage || !hasFeature(tr, "task_storage", false) {
		t.Fatal("asked for the hash, but open stalls are in task storage")
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"DirectReclaim", TestDirectReclaimHandler},
		{"EndWithoutBegin", TestEndWithoutBeginIsIgnored},
		{"NestedSoftlimit", TestNestedSoftlimitInsideDirectReclaim},
		{"NodeReclaim", TestNodeReclaimHandler},
		{"DirectCompaction", TestDirectCompactionHandler},
		{"StaleCompactionAttempt", TestStaleCompactionAttemptIsDropped},
		{"UntracedCompaction", TestUntracedThreadsDirectCompactionIsNotProactive},
		{"MigrationInsideCompaction", TestMigrationInsideCompactionIsNested},
		{"CompactionOutsideAllocation", TestCompactionOutsideAllocationIsNotCharged},
		{"NUMAMigration", TestNUMAMigrationHandler},
		{"MmapLock", TestMmapLockHandler},
		{"OlderKernelVariants", TestOlderKernelVariants},
		{"FilterDropsOtherThreads", TestFilterDropsOtherThreads},
		{"MinEventKeepsHistogramExact", TestMinEventKeepsHistogramExact},
		{"NUMATaskMove", TestNUMATaskMoveHandlers},
		{"ExitForgetsOpenStalls", exitForgetsOpenStalls},
		{"ExitTakesGroupDeadFromTheKernel", exitTakesGroupDeadFromTheKernel},
	} {
		t.Run(tc.name, tc.fn)
	}
}

func hasFeature(tr *Tracer, name string, available bool) bool {
	for _, f := range tr.Features() {
		if f.Name == name {
			return f.Available == available
		}
	}
	return false
}

// On the hash, a thread that exits mid-stall leaves no entry behind (task
// storage goes with the thread by itself).
func exitForgetsOpenStalls(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	key := reclaimPendingKey{Tid: tid, Slot: 0} // SLOT_DIRECT_RECLAIM
	var p reclaimPending
	run(t, tr, "direct_reclaim_begin", 0, gfpKernel)
	if err := tr.maps.Pendings.Lookup(&key, &p); err != nil {
		t.Fatalf("the open stall is not in the hash: %v", err)
	}
	run(t, tr, "thread_exit", 0, 0) // p (unused: the current thread exits), group_dead
	if err := tr.maps.Pendings.Lookup(&key, &p); err == nil {
		t.Fatal("the exited thread's open stall is still in the hash")
	}
}

// The exit that ends a process is the one the kernel flags group_dead
// (the thread whose decrement of signal->live reached zero), not every
// exit that reads live at 0 after it: when a process dies at once, the
// threads that decremented before the last one read 0 too, and taking
// the first of them ended the target while its siblings still ran
// (numatrace 2,024 mmap_lock acquisitions, bpftrace 2,026, in CI). The
// test thread's process is alive, so only the flag can say dead.
func exitTakesGroupDeadFromTheKernel(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	testutil.RequireFeature(t, tr.exitGroupDead, "sched_process_exit has no group_dead argument (6.16+)")
	for _, dead := range []uint64{0, 1} {
		run(t, tr, "thread_exit", 0, dead)
		var exits []stall.Event
		for _, ev := range drain(t, tr, 200*time.Millisecond) {
			if ev.Kind == stall.KindExit && ev.TID == tid {
				exits = append(exits, ev)
			}
		}
		if len(exits) != 1 || exits[0].GroupDead != (dead == 1) {
			t.Errorf("group_dead=%d: exits %+v; want one, GroupDead %v", dead, exits, dead == 1)
		}
	}
}
