//go:build linux

package tracer

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/numatrace/numatrace/internal/stall"
)

// variant is one compiled program for a tracepoint, and the kernel
// signature it was written for.
type variant struct {
	program string
	nargs   int            // required argument count, 0 = any
	names   map[int]string // argument names it reads, checked when the kernel's BTF names them
}

// hook is one tracepoint and the program variants that can serve it.
type hook struct {
	tracepoint string
	variants   []variant
}

// ProbeName names a probe: --causes and --no-causes take it (SkipProbes),
// Config.Skip is keyed by it, and the reports list it.
type ProbeName string

// The probes' names; probeDefs defines each.
const (
	probeDirectReclaim         ProbeName = "direct_reclaim"
	probeMemcgReclaim          ProbeName = "memcg_reclaim"
	probeMemcgSoftlimitReclaim ProbeName = "memcg_softlimit_reclaim"
	probeNodeReclaim           ProbeName = "node_reclaim"
	probeCompaction            ProbeName = "compaction"
	probeNumaMigration         ProbeName = "numa_migration"
	probeNumaTaskMove          ProbeName = "numa_task_move"
	probeTaskMigration         ProbeName = "task_migration"
	probeMmapLock              ProbeName = "mmap_lock"
	probeRunqWait              ProbeName = "runq_wait"
	probeReclaimThrottle       ProbeName = "reclaim_throttle"
	probeDirtyThrottle         ProbeName = "dirty_throttle"
	probeMemstallWait          ProbeName = "memstall_wait"
	probeKswapdWakeup          ProbeName = "kswapd_wakeup"
	probeKhugepagedCollapse    ProbeName = "khugepaged_collapse"
	probeThreadExit            ProbeName = "thread_exit"
	probeFollowForks           ProbeName = "follow_forks"
	probeCgroupMoves           ProbeName = "cgroup_moves"
)

// probeDef is a unit that loads and attaches on its own: if any of its
// hooks cannot, the whole probe is reported unavailable and the others go on.
type probeDef struct {
	name   ProbeName
	cause  *stall.Cause // the stall cause it feeds (feeds), nil for system-wide counters
	object string       // the BPF file its programs are in: "reclaim" for bpf/reclaim.bpf.c
	hooks  []hook
	// slots are the pending slots (enum pending_slot, bpf/common.h) its
	// begin programs open and its end programs close. A probe of a timed
	// cause with a begin and an end hook needs one of its own:
	// TestEveryBeginEndProbeHasItsSlot.
	slots       []typesPendingSlot
	description string
	cgroupOnly  bool // attached only when following a cgroup
	forksOnly   bool // attached only when following (or watching) new processes
	latencyOnly bool // attached only with a latency source
	// requires, if set, says why this kernel cannot feed the probe.
	requires func(kspec *btf.Spec) error
	// taskStorage: the probe keeps its state in task storage only (5.12+).
	taskStorage bool
	// fallback feeds the same cause where this probe's hooks are not in
	// the kernel (or when Config.MmapLockVia asks for it).
	fallback *probeDef
}

// feeds is the stall cause a probe feeds.
func feeds(c stall.Cause) *stall.Cause { return &c }

// status is the probe's status before it is opened.
func (d *probeDef) status() stall.ProbeStatus {
	st := stall.ProbeStatus{Name: string(d.name), Description: d.description}
	if d.cause != nil {
		st.Cause, st.Feeds = *d.cause, true
	}
	return st
}

func one(program string, nargs int, names map[int]string) []variant {
	return []variant{{program: program, nargs: nargs, names: names}}
}

// switchHook is sched_switch's one program, which serves runq_wait and
// memstall_wait both (cfg_runq, cfg_memstall): attached once for either.
var switchHook = hook{"sched_switch", []variant{ // prev_state came fourth in 5.18; the program reads the first three
	{program: schedProgOnSwitch, nargs: 4}, {program: schedProgOnSwitch, nargs: 3}}}

// probeDefs lists every probe numatrace knows, in display order.
var probeDefs = []probeDef{
	{name: probeDirectReclaim, cause: feeds(stall.DirectReclaim), object: "reclaim",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_DIRECT_RECLAIM},
		description: "global direct reclaim in the allocating thread",
		hooks: []hook{
			{"mm_vmscan_direct_reclaim_begin", one(reclaimProgDirectReclaimBegin, 2, nil)},
			{"mm_vmscan_direct_reclaim_end", one(reclaimProgDirectReclaimEnd, 1, nil)},
		}},
	{name: probeMemcgReclaim, cause: feeds(stall.MemcgReclaim), object: "reclaim",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_MEMCG_RECLAIM},
		description: "reclaim forced by a cgroup memory limit",
		hooks: []hook{
			{"mm_vmscan_memcg_reclaim_begin", one(reclaimProgMemcgReclaimBegin, 2, nil)},
			{"mm_vmscan_memcg_reclaim_end", one(reclaimProgMemcgReclaimEnd, 1, nil)},
		}},
	{name: probeMemcgSoftlimitReclaim, cause: feeds(stall.MemcgReclaim), object: "reclaim",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_MEMCG_SOFTLIMIT},
		description: "memcg soft-limit reclaim (counted as memcg_reclaim)",
		hooks: []hook{
			{"mm_vmscan_memcg_softlimit_reclaim_begin", one(reclaimProgMemcgSoftlimitBegin, 2, nil)},
			{"mm_vmscan_memcg_softlimit_reclaim_end", one(reclaimProgMemcgSoftlimitEnd, 1, nil)},
		}},
	{name: probeNodeReclaim, cause: feeds(stall.NodeReclaim), object: "reclaim",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_NODE_RECLAIM},
		description: "node-local reclaim (vm.zone_reclaim_mode != 0)",
		hooks: []hook{
			{"mm_vmscan_node_reclaim_begin", one(reclaimProgNodeReclaimBegin, 3, map[int]string{0: "nid", 1: "order"})},
			{"mm_vmscan_node_reclaim_end", one(reclaimProgNodeReclaimEnd, 1, nil)},
		}},
	{name: probeCompaction, cause: feeds(stall.Compaction), object: "compaction",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_COMPACT_ATTEMPT, typesPendingSlotSLOT_COMPACT_PASS},
		description: "direct compaction in the allocating thread; kcompactd and proactive passes counted system-wide",
		hooks: []hook{
			{"mm_compaction_try_to_compact_pages", one(compactionProgCompactAttempt, 3, map[int]string{0: "order", 2: "prio"})},
			{"mm_compaction_begin", one(compactionProgCompactPassBegin, 0, nil)},
			{"mm_compaction_end", []variant{
				{program: compactionProgCompactPassEndCc, nargs: 5, names: map[int]string{0: "cc", 4: "status"}},
				{program: compactionProgCompactPassEndPfn, nargs: 6, names: map[int]string{5: "status"}},
			}},
		}},
	{name: probeNumaMigration, cause: feeds(stall.NUMAMigration), object: "numa",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_MIGRATE},
		description: "page migration (NUMA balancing, compaction, mbind, ...) in the migrating thread",
		hooks: []hook{
			{"mm_migrate_pages_start", one(numaProgMigrateStart, 2, map[int]string{0: "mode", 1: "reason"})},
			{"mm_migrate_pages", []variant{
				{program: numaProgMigrateEndR7, nargs: 8, names: map[int]string{0: "succeeded", 6: "mode", 7: "reason"}},
				{program: numaProgMigrateEndR6, nargs: 7, names: map[int]string{0: "succeeded", 5: "mode", 6: "reason"}},
			}},
		}},
	{name: probeNumaTaskMove, cause: feeds(stall.NUMATaskMove), object: "numa",
		description: "NUMA balancing moved (or swapped, or failed to move) a task between nodes",
		hooks: []hook{
			{"sched_move_numa", one(numaProgNumaMoveTask, 3, map[int]string{1: "src_cpu", 2: "dst_cpu"})},
			{"sched_swap_numa", one(numaProgNumaSwapTask, 4, nil)},
			{"sched_stick_numa", one(numaProgNumaStickTask, 4, nil)},
		}},
	{name: probeTaskMigration, cause: feeds(stall.TaskMigration), object: "sched",
		description: "a thread changed CPU; counted per thread with the cross-node share",
		hooks: []hook{
			{"sched_migrate_task", one(schedProgTaskMigrate, 2, map[int]string{0: "p", 1: "dest_cpu"})},
		}},
	{name: probeMmapLock, cause: feeds(stall.MmapLock), object: "mmap_lock",
		slots:       []typesPendingSlot{typesPendingSlotSLOT_MMAP_LOCK},
		description: "wait to take the process's mmap_lock, from the lock's slow path: only contended acquisitions run a program",
		hooks: []hook{
			{"contention_begin", one(mmaplockProgMmapContended, 2, map[int]string{0: "lock", 1: "flags"})},
			{"contention_end", one(mmaplockProgMmapContentionEnd, 2, map[int]string{0: "lock", 1: "ret"})},
		},
		// 5.12 to 5.18: every acquisition runs two programs.
		fallback: &probeDef{name: probeMmapLock, cause: feeds(stall.MmapLock), object: "mmap_lock",
			slots:       []typesPendingSlot{typesPendingSlotSLOT_MMAP_LOCK},
			description: "wait to take the process's mmap_lock, from the mmap_lock tracepoints: every acquisition runs two programs (no lock:contention_* here)",
			hooks: []hook{
				{"mmap_lock_start_locking", one(mmaplockProgMmapLockStart, 0, nil)},
				{"mmap_lock_acquire_returned", []variant{
					{program: mmaplockProgMmapLockAcquiredW1, nargs: 3, names: map[int]string{1: "write", 2: "success"}},
					{program: mmaplockProgMmapLockAcquiredW2, nargs: 4, names: map[int]string{2: "write", 3: "success"}},
				}},
			}}},
	{name: probeRunqWait, cause: feeds(stall.RunqWait), object: "sched", latencyOnly: true,
		description: "time a traced thread waited for a CPU once woken or preempted, from the scheduler's own run-queue times (only with a latency source and a target)",
		requires:    schedInfoOn,
		hooks:       []hook{switchHook}},
	{name: probeReclaimThrottle, cause: feeds(stall.ReclaimThrottle), object: "throttle",
		description: "reclaim waiting for writeback, isolated pages or progress (reclaim_throttle, 5.16+), as long as the kernel says it waited",
		hooks: []hook{{"mm_vmscan_throttled", one(throttleProgReclaimThrottled, 4,
			map[int]string{2: "usec_delayed", 3: "reason"})}}},
	{name: probeDirtyThrottle, cause: feeds(stall.DirtyThrottle), object: "throttle",
		description: "a writer paused over its dirty-page limit (balance_dirty_pages), for the pause the kernel set",
		requires:    func(*btf.Spec) error { _, err := nsPerJiffy(); return err },
		hooks: []hook{{"balance_dirty_pages", []variant{
			{program: throttleProgDirtyThrottledDtc, nargs: 8, names: map[int]string{1: "dtc", 6: "pause", 7: "start_time"}},
			{program: throttleProgDirtyThrottledArgs, nargs: 12, names: map[int]string{1: "thresh", 3: "dirty", 10: "pause", 11: "start_time"}},
		}}}},
	{name: probeMemstallWait, cause: feeds(stall.MemstallWait), object: "sched", taskStorage: true,
		slots:       []typesPendingSlot{typesPendingSlotSLOT_MEMSTALL},
		description: "time a traced thread spent off CPU inside a PSI memory stall that no other cause times: thrashing, memory.high, swap-in, other",
		requires:    memstallReady,
		hooks:       []hook{switchHook}},
	{name: probeKswapdWakeup, object: "reclaim",
		description: "kswapd wakeups, system-wide",
		hooks:       []hook{{"mm_vmscan_wakeup_kswapd", one(reclaimProgKswapdWakeup, 0, nil)}}},
	{name: probeKhugepagedCollapse, object: "mmap_lock",
		description: "khugepaged huge-page collapses, system-wide",
		hooks:       []hook{{"mm_collapse_huge_page", one(mmaplockProgKhugepagedCollapse, 3, map[int]string{2: "status"})}}},
	{name: probeThreadExit, object: "sched",
		description: "thread exits: keeps names and notices the target exiting",
		hooks:       []hook{{"sched_process_exit", one(schedProgThreadExit, 0, nil)}}},
	{name: probeFollowForks, object: "sched", forksOnly: true,
		description: "follows new processes of a --cgroup or --children target as they fork; with --pid alone, watches the target's descendants",
		hooks:       []hook{{"sched_process_fork", one(schedProgFollowFork, 2, nil)}}},
	{name: probeCgroupMoves, object: "sched", cgroupOnly: true,
		description: "follows processes moved into a --cgroup target",
		hooks:       []hook{{"cgroup_attach_task", one(schedProgFollowAttach, 4, map[int]string{0: "dst_cgrp", 2: "task"})}}},
}

// infrastructure probes keep the others working: never skipped.
var infrastructure = map[ProbeName]bool{probeThreadExit: true, probeFollowForks: true, probeCgroupMoves: true}

// SkipProbes turns --causes ONLY or --no-causes LIST into the probes not
// to attach. A name is a probe's or a cause's (a cause names every probe
// that feeds it).
func SkipProbes(only, without string) (map[ProbeName]bool, error) {
	if only == "" && without == "" {
		return nil, nil
	}
	list, flag := only, "--causes"
	if only == "" {
		list, flag = without, "--no-causes"
	}
	named := map[ProbeName]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("%s: an empty name in %q", flag, list)
		}
		found := false
		for _, d := range probeDefs {
			if !infrastructure[d.name] && (string(d.name) == n || (d.cause != nil && d.cause.String() == n)) {
				named[d.name], found = true, true
			}
		}
		if !found {
			var names []string
			for _, d := range probeDefs {
				if !infrastructure[d.name] {
					names = append(names, string(d.name))
				}
			}
			return nil, fmt.Errorf("%s: no probe or cause %q (probes: %s)", flag, n, strings.Join(names, ", "))
		}
	}
	skip := map[ProbeName]bool{}
	for _, d := range probeDefs {
		if infrastructure[d.name] {
			continue
		}
		if named[d.name] == (only == "") {
			skip[d.name] = true
		}
	}
	return skip, nil
}

// pick chooses the program variant matching the kernel's signature.
func (h hook) pick(sig *signature) (string, error) {
	for _, v := range h.variants {
		if v.nargs != 0 && v.nargs != len(sig.types) {
			continue
		}
		if sig.named() && !namesMatch(sig.names, v.names) {
			continue
		}
		if v.nargs == 0 && len(v.names) > 0 && !sig.named() {
			continue
		}
		return v.program, nil
	}
	return "", fmt.Errorf("no program for %s%s", h.tracepoint, sig)
}

func namesMatch(have []string, want map[int]string) bool {
	for i, n := range want {
		if i >= len(have) || have[i] != n {
			return false
		}
	}
	return true
}
