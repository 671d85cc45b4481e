/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Maps and helpers shared by every numatrace BPF object. Each object
 * declares the same maps; the loader creates them once and hands the same
 * maps to every object, so all probes feed one ring buffer and one set of
 * histograms.
 */
#ifndef NUMATRACE_COMMON_H
#define NUMATRACE_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "numatrace.h"

#define MAX_CPUS 4096
#define PF_KTHREAD 0x00200000

/* Set by the loader before load; the verifier sees them as constants. */
const volatile __u32 cfg_filter_mode = FILTER_NONE;
const volatile __u32 cfg_filter_tid = 0;
/* FILTER_TGIDS with exactly one process that never grows (--pid): compared
 * directly, so the programs on every context switch turn every other
 * process away without a map lookup. The target's own events still look
 * it up in target_tgids, which it leaves when it exits: a process that
 * then gets its pid is not traced. */
const volatile __u32 cfg_filter_tgid = 0;
/* numatrace itself, left out of system-wide traces. */
const volatile __u32 cfg_self_tgid = 0;
/* --pid without --children: the target's descendants are watched, not
 * traced (watched_tgids): their stalls are only added up (child_totals). */
const volatile __u32 cfg_watch_children = 0;
/* --cgroup: the kernfs id (inode) of the target directory, 0 if none. */
const volatile __u64 cfg_target_cgroup = 0;
/* More than one NUMA node: only then can a migration cross nodes. */
const volatile __u32 cfg_multi_node = 0;
/* Migration totals come from the migrations iterator (task_migrate), not task_migrate_count. */
const volatile __u32 cfg_migr_iter = 0;
/* sched_process_exit passes group_dead (6.16+): the exiting thread's own
 * decrement of signal->live reached zero. Without it, live is read at the
 * tracepoint, where every thread that decremented before the last one's
 * decrement reads 0 too. */
const volatile __u32 cfg_exit_group_dead = 0;
/*
 * Waking the reader from inside a program costs microseconds on a VM (an
 * irq_work self-IPI), charged to the traced thread. Records are submitted
 * without a wakeup unless this much data is waiting; the reader polls.
 */
const volatile __u64 cfg_wakeup_bytes = 256 << 10;
/* A request timer runs: keep each traced thread's stall totals for it. */
const volatile __u32 cfg_request_stalls = 0;
/* ...and its task times (enum task_time) inside its stalls, for the
 * requests' budgets: the loader sets it with cfg_request_stalls. */
const volatile __u32 cfg_request_times = 0;
/* ...and the sched_switch program times each traced thread's I/O waits
 * (sched.bpf.c: io_wait), which TIME_IO reads: delay accounting's
 * blkio_delay is not kept right on kernels that dequeue a sleeping task
 * late (DELAY_DEQUEUE, 6.12+). Set with the run-queue job, where task
 * storage is. */
const volatile __u32 cfg_io_wait = 0;
/* ...and, with stacks on, takes the stacks of serving threads' long
 * sleeps inside requests (sched.bpf.c: wait_begin, wait_end). */
const volatile __u32 cfg_wait_stacks = 0;
/* The causes that are not memory management's (1 << cause each), left out
 * of a thread's freeze total: the loader sets it from the Go cause table
 * (stall.Descriptor.NotMemory), the one place that says so. */
const volatile __u32 cfg_not_memory = 0;
/* Stalls shorter than this are not stalls at all: neither counted nor streamed. */
const volatile __u64 cfg_min_stall_ns[CAUSE_MAX] = {};
/* Stalls shorter than this still land in the histograms but are not streamed. */
const volatile __u64 cfg_min_event_ns[CAUSE_MAX] = {};
/* Streamed stalls at least this long carry the stalled thread's kernel
 * and user stacks (struct stack_event); 0: no stacks (--stacks=false). */
const volatile __u64 cfg_stacks_min_ns = 0;
/* bpf_task_pt_regs is there (5.15+): read the word at the user stack pointer. */
const volatile __u32 cfg_task_regs = 0;
/* memstall_wait is on (the sched_switch program is picked by its jobs,
 * not told them: sched.bpf.c); throttles ask it for their nesting. */
const volatile __u32 cfg_memstall = 0;
/* Kernel text ranges of the memstall wait sites, [start, end) per
 * enum memstall_reason 1..MEMSTALL_SITES (index reason - 1), from
 * /proc/kallsyms; a zero range is a site this kernel does not have. */
const volatile __u64 cfg_memstall_site_start[MEMSTALL_SITES] = {};
const volatile __u64 cfg_memstall_site_end[MEMSTALL_SITES] = {};
/* The kernel's tick length (1e9 / CONFIG_HZ): dirty-throttle pauses come in jiffies. */
const volatile __u64 cfg_ns_per_jiffy = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hist_key);
	__type(value, struct hist);
} hists SEC(".maps");

/*
 * Every stall by cause, per CPU, as hists counts it per thread: an LRU
 * hash evicts its least recently used threads when full, and these
 * totals stay exact then. pid and comm stay empty.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CAUSE_MAX);
	__type(key, __u32);
	__type(value, struct hist);
} cause_totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct thread_counts);
} thread_counts_map SEC(".maps");

/* Begin timestamps of open stalls, per thread and slot. */
enum pending_slot {
	SLOT_DIRECT_RECLAIM = 0,
	SLOT_MEMCG_RECLAIM = 1,
	SLOT_MEMCG_SOFTLIMIT = 2,
	SLOT_NODE_RECLAIM = 3,
	SLOT_COMPACT_ATTEMPT = 4, /* set by try_to_compact_pages */
	SLOT_COMPACT_PASS = 5,    /* one zone's compaction pass */
	SLOT_MIGRATE = 6,
	SLOT_MMAP_LOCK = 7,
	SLOT_MEMSTALL = 8,        /* off CPU inside a PSI memory stall (memstall_wait) */
	SLOT_MAX = 9,
};

/* The slots of the causes timed from a begin to an end hook: a memory
 * stall that runs inside one of them is already that cause's time. */
#define TIMED_SLOTS ((1u << SLOT_MEMSTALL) - 1)

struct pending_key {
	__u32 tid;
	__u32 slot;
};

struct pending {
	__u64 start_ns;
	__u64 mark_ns; /* compaction: end of the attempt's previous pass */
	__u64 sum_ns;  /* compaction: the attempt's time so far */
	__u32 gfp;
	__s32 order;
	__s32 node;
	__s32 aux;     /* compaction priority; migrate mode */
	__u32 passes;  /* compaction: zone passes so far */
	__u32 who;     /* enum who: whose stall this is (compaction notes everyone's attempts) */
	__u64 times[TIME_MAX]; /* cfg_request_times: the thread's task times at start_ns */
};

/*
 * Open stalls live in the thread's own task storage where the kernel has
 * it for tracing programs (5.12+): a lookup in the task instead of a hash
 * insert, lookup and delete per stall, and nothing left behind when a
 * thread dies mid-stall. A slot is open while its start_ns is not zero.
 */
const volatile __u32 cfg_task_storage = 0;

struct task_pendings {
	/* runq_wait: the thread's run_delay as its last switch-in left it,
	 * plus one (0: not seen yet). Beside the slots, so a switch-in of a
	 * traced thread costs one lookup in the task, not one in a hash; and
	 * first, on the cache line of the storage's own header, which the
	 * lookup reads: every switch-in of a traced thread reads it. */
	__u64 run_delay_seen;
	/* cfg_io_wait: the runqueue clock as the thread went to sleep
	 * waiting for I/O (in_iowait), and its run_delay then; 0: it did
	 * not. Read as it gets a CPU back, beside run_delay_seen. */
	__u64 io_since;
	__u64 io_run_delay;
	/* A request timer read the thread's counters as a request ended in
	 * it (request.h: request_since): only such a thread's switch-ins
	 * note its time on a CPU (sched.bpf.c: cpu_in). */
	__u64 serves;
	/* cfg_wait_stacks: the runqueue clock as the thread went to sleep
	 * inside a request (0: it did not), its kind (enum wait_part), and,
	 * per kind, how many of its next sleeps of that kind take their
	 * stacks as they begin: WAIT_TRIES from its last long one (wait_end). */
	__u64 sleep_since;
	__u64 sleep_pcount; /* its sched_info.pcount then: a switch-in missed since moves it */
	__u32 sleep_part;
	__u8 wait_tries[2];
	__u16 _pad_tries;
	struct pending slot[SLOT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_pendings);
} task_pendings SEC(".maps");

/*
 * Where task storage is missing (5.10, 5.11), a plain preallocated hash,
 * not an LRU: entries live for one stall and are deleted at its end, and
 * LRU bookkeeping on that churn costs microseconds now and then, inside
 * the traced thread's stall.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pending_key);
	__type(value, struct pending);
} pendings SEC(".maps");

/* A new thread's stall totals, never written: global data, not a copy on
 * the stall programs' stacks, which have little room left. */
struct thread_stall thread_stall_zero;

/* Per-thread stall totals for requests timed in the kernel (cfg_request_stalls). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct thread_stall);
} thread_stalls SEC(".maps");

/* run_delay of each traced thread as its last switch-in left it
 * (runq_wait): what it gains beyond that before the next one is a wait
 * spent on another CPU's queue before a migration. Only where task
 * storage is missing: else it is task_pendings' run_delay_seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} runq_delay SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __s32);
} cpu_node SEC(".maps");

/* Processes to trace in FILTER_TGIDS mode. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} target_tgids SEC(".maps");

/*
 * The descendants of a --pid target, watched but not traced
 * (cfg_watch_children); the value is 1 once the process has stalled.
 * sched_process_fork adds a child of the target or of a watched process,
 * and the last thread's exit takes it out again (counting it in
 * COUNTER_WATCHED_GONE if it stalled).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} watched_tgids SEC(".maps");

/* The watched descendants' stalls by cause, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CAUSE_MAX);
	__type(key, __u32);
	__type(value, struct child_total);
} child_totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void counter_add(__u32 id, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &id);

	if (v)
		*v += n; /* per-CPU slot: no atomics needed */
}

static __always_inline bool wanted(__u32 tgid, __u32 tid)
{
	if (cfg_filter_mode == FILTER_NONE)
		return tgid != cfg_self_tgid;
	if (cfg_filter_mode == FILTER_TID)
		return tid == cfg_filter_tid;
	if (cfg_filter_tgid)
		return tgid == cfg_filter_tgid && bpf_map_lookup_elem(&target_tgids, &tgid);
	return bpf_map_lookup_elem(&target_tgids, &tgid) != NULL;
}

static __always_inline bool current_wanted(__u32 *tgid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();

	*tgid = id >> 32;
	*tid = (__u32)id;
	return wanted(*tgid, *tid);
}

/* Whose a stall is: the target's (traced), a watched descendant's (only
 * added up), or nobody's. */
enum who {
	WHO_NONE = 0,
	WHO_TARGET = 1,
	WHO_CHILD = 2,
};

static __always_inline __u32 who_of(__u32 tgid, __u32 tid)
{
	if (wanted(tgid, tid))
		return WHO_TARGET;
	if (cfg_watch_children && bpf_map_lookup_elem(&watched_tgids, &tgid))
		return WHO_CHILD;
	return WHO_NONE;
}

static __always_inline __u32 current_who(__u32 *tgid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();

	*tgid = id >> 32;
	*tid = (__u32)id;
	return who_of(*tgid, *tid);
}

/*
 * Counts a watched descendant's stall (or, for compaction, its attempt's
 * next slice: first only for the attempt's first) in the per-CPU totals,
 * and marks the process as one that stalled.
 */
static __always_inline void child_count(__u32 tgid, __u32 cause, __u64 add, bool first, bool nested)
{
	struct child_total *tot = bpf_map_lookup_elem(&child_totals, &cause);

	if (tot) {
		tot->count += first;
		tot->total_ns += add;
		if (nested)
			tot->nested_ns += add;
	}
	__u8 *stalled = bpf_map_lookup_elem(&watched_tgids, &tgid);

	if (stalled && !*stalled)
		*stalled = 1;
}

static __always_inline __s32 node_of_cpu(__s32 cpu)
{
	__u32 key = cpu;
	__s32 *node = bpf_map_lookup_elem(&cpu_node, &key);

	return node ? *node : -1;
}

static __always_inline __u32 log2_slot(__u64 v)
{
	/* floor(log2(v)), 0 for 0 and 1, with no branch: the bits below the
	 * highest set one are set, and counted. The verifier then walks one
	 * path here, not one per bucket (a chain of compares made a stall's
	 * accounting cost 32 paths, and adding the per-cause totals doubled
	 * the attach time). */
	v |= 1;
	v |= v >> 1;
	v |= v >> 2;
	v |= v >> 4;
	v |= v >> 8;
	v |= v >> 16;
	v |= v >> 32;
	v -= (v >> 1) & 0x5555555555555555ULL;
	v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
	v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	__u32 r = ((v * 0x0101010101010101ULL) >> 56) - 1;

	return r < HIST_SLOTS ? r : HIST_SLOTS - 1;
}

/* Where hist_get makes a thread's new histogram before inserting it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hist_scratch SEC(".maps");

/* Fills comm from t, or from the current task when t is NULL. */
static __always_inline void comm_of(char *dst, struct task_struct *t)
{
	if (t)
		BPF_CORE_READ_STR_INTO((char(*)[COMM_LEN])dst, t, comm);
	else
		bpf_get_current_comm(dst, COMM_LEN);
}

/* The thread's histogram for cause, created on first use. */
static __always_inline struct hist *hist_get(__u32 tgid, __u32 tid, __u32 cause, struct task_struct *t)
{
	struct hist_key key = { .tid = tid, .cause = cause };
	struct hist *h = bpf_map_lookup_elem(&hists, &key);

	if (h)
		return h;
	/* Made in a per-CPU scratch value, not on the stack: the stall
	 * programs that call this have no room left for its 300 bytes. */
	__u32 zero_key = 0;
	struct hist *fresh = bpf_map_lookup_elem(&hist_scratch, &zero_key);

	if (!fresh)
		return NULL;
	__builtin_memset(fresh, 0, sizeof(*fresh));
	fresh->pid = tgid;
	comm_of(fresh->comm, t);
	/* Counted, so that what the LRU evicts is known: made less present. */
	if (!bpf_map_update_elem(&hists, &key, fresh, BPF_NOEXIST))
		counter_add(COUNTER_HIST_NEW, 1);
	return bpf_map_lookup_elem(&hists, &key);
}

/*
 * Counts a stall of thread tid (task t, or the current one when NULL)
 * growing from prev to now_total ns, in the thread's histogram and in the
 * cause's exact total: a new stall when first, else the same stall moved
 * to its new bucket.
 *
 * A thread's own stalls are serial, so only its histogram's bucket
 * counters need atomics (numa_task_move may touch another thread's
 * entry). The totals are this CPU's and need none; a stall that grows on
 * another CPU than it began on takes its old bucket's count from this
 * CPU's, which may wrap below zero, and the sum over CPUs is right.
 *
 * Each bucket is worked out once, for both.
 */
static __always_inline void stall_count(__u32 tgid, __u32 tid, __u32 cause, struct task_struct *t,
					__u64 prev, __u64 now_total, bool first, bool nested)
{
	struct hist *tot = bpf_map_lookup_elem(&cause_totals, &cause);

	if (!tot)
		return;
	struct hist *h = hist_get(tgid, tid, cause, t);
	__u64 add = now_total - prev;

	tot->count += first;
	tot->total_ns += add;
	if (nested)
		tot->nested_ns += add;
	if (now_total > tot->max_ns)
		tot->max_ns = now_total;
	if (h) {
		if (first)
			__sync_fetch_and_add(&h->count, 1);
		/* No time, no add: clang turns an atomic add of a constant
		 * zero into a fetch-add, which kernels before 5.12 reject. */
		if (add) {
			__sync_fetch_and_add(&h->total_ns, add);
			if (nested)
				__sync_fetch_and_add(&h->nested_ns, add);
		}
		if (now_total > h->max_ns)
			h->max_ns = now_total;
	}
	if (!first) {
		__u32 old = log2_slot(prev);

		if (old < HIST_SLOTS) {
			tot->slots[old]--;
			if (h && h->slots[old])
				__sync_fetch_and_add(&h->slots[old], -1);
		}
	}
	__u32 slot = log2_slot(now_total);

	if (slot < HIST_SLOTS) {
		tot->slots[slot]++;
		if (h)
			__sync_fetch_and_add(&h->slots[slot], 1);
	}
}

/* Thread tid's entry in thread_stalls, made if it has none (NULL: the
 * map is full). */
static __always_inline struct thread_stall *thread_stall_entry(__u32 tid)
{
	struct thread_stall *ts = bpf_map_lookup_elem(&thread_stalls, &tid);

	if (ts)
		return ts;
	bpf_map_update_elem(&thread_stalls, &tid, &thread_stall_zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&thread_stalls, &tid);
}

/*
 * Task t's time on a CPU so far. The scheduler adds to sum_exec_runtime
 * at ticks and switches only: read while t runs, it can be a tick short
 * (4 ms at HZ=250), and a request of less, on a CPU throughout, would
 * read none. So for a running thread (running: t is current, or on a CPU
 * now) whose last switch-in the sched_switch program noted in ts, it is
 * what it had then plus the clock since. btf: t is a BTF pointer, whose
 * fields are plain loads, where a raw_tp or uprobe program's needs a
 * probe read each.
 */
static __always_inline __u64 task_cpu_ns(struct task_struct *t, const struct thread_stall *ts, bool btf, bool running)
{
	__u64 sum = btf ? t->se.sum_exec_runtime : BPF_CORE_READ(t, se.sum_exec_runtime);

	if (!running || !ts || !ts->cpu_in_ns)
		return sum;
	/* The scheduler counts t's runs as each begins: a snapshot of
	 * another run than this one is stale, and the clock since it
	 * counts time t was off a CPU. */
	__u64 pcount = btf ? t->sched_info.pcount : BPF_CORE_READ(t, sched_info.pcount);

	if (pcount != ts->cpu_in_pcount)
		return sum;
	__u64 now = bpf_ktime_get_ns(), in = ts->cpu_in_ns;
	__u64 fresh = ts->cpu_in_sum + (now > in ? now - in : 0);

	return fresh > sum ? fresh : sum;
}

/*
 * Reads task t's counters (enum task_time) into out; ts is its entry in
 * thread_stalls (NULL: none), running as task_cpu_ns's. The scheduler
 * adds to run_delay as a wait ends. Its I/O wait so far is the
 * sched_switch program's (cfg_io_wait), else delay accounting's, which
 * counts only with kernel.task_delayacct on (0 without it), and on
 * kernels with DELAY_DEQUEUE (6.12+) misses waits and adds stale ones: a
 * sleeping task dequeued late is stamped in whichever task's context
 * that happens. An I/O wait counts as the thread gets a CPU back.
 */
static __always_inline void task_counters(struct task_struct *t, const struct thread_stall *ts, bool btf, bool running,
					  __u64 *out)
{
	out[TIME_CPU] = task_cpu_ns(t, ts, btf, running);
	out[TIME_RUNQ] = btf ? t->sched_info.run_delay : BPF_CORE_READ(t, sched_info.run_delay);
	if (cfg_io_wait)
		out[TIME_IO] = ts ? ts->io_wait_ns : 0;
	else
		out[TIME_IO] = BPF_CORE_READ(t, delays, blkio_delay);
}

/* The current thread's counters into out, as a stall opens and closes. */
static __always_inline void current_times(__u64 *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	task_counters((struct task_struct *)bpf_get_current_task(), bpf_map_lookup_elem(&thread_stalls, &tid), false,
		      true, out);
}

/*
 * Adds stall time to the current thread's running totals, which a timed
 * request reads as it starts and ends; in (NULL: not known) is its task
 * times inside the stall. Only the thread itself writes its entry, so no
 * atomics are needed.
 */
static __always_inline void thread_stall_add(__u32 tid, __u32 cause, __u64 ns, bool nested, const __u64 *in)
{
	if (!cfg_request_stalls || cause >= CAUSE_MAX || !ns)
		return;
	struct thread_stall *ts = thread_stall_entry(tid);

	if (!ts)
		return;
	ts->ns[cause] += ns;
	if (!nested && !(cfg_not_memory & (1u << cause))) { /* the freeze total is memory management's */
		ts->ns[CAUSE_MAX] += ns;
		if (in) {
#pragma unroll
			for (int i = 0; i < TIME_MAX; i++)
				ts->in_stall[i] += in[i];
		}
	}
}

/*
 * Adds an I/O wait of thread tid, which is getting a CPU back (the
 * sched_switch program runs in the thread that leaves): it does not run
 * until the switch is done, so its entry has no other writer.
 */
static __always_inline void thread_io_add(__u32 tid, __u64 ns)
{
	if (!cfg_io_wait || !ns)
		return;
	struct thread_stall *ts = thread_stall_entry(tid);

	if (!ts)
		return;
	ts->io_wait_ns += ns;
}

/* Adds one whole stall of the current thread; in as thread_stall_add's. */
static __always_inline void hist_add_in(__u32 tgid, __u32 tid, __u32 cause, __u64 dur, bool nested, const __u64 *in)
{
	stall_count(tgid, tid, cause, NULL, 0, dur, true, nested);
	thread_stall_add(tid, cause, dur, nested, in);
}

/* Adds one whole stall of the current thread, known at one point. */
static __always_inline void hist_add(__u32 tgid, __u32 tid, __u32 cause, __u64 dur, bool nested)
{
	hist_add_in(tgid, tid, cause, dur, nested, NULL);
}

/*
 * The kernfs id of t's memory cgroup (t NULL: the current task's), the
 * hierarchy memcg reclaim is charged in, v1 or v2; 0 without one.
 */
static __always_inline __u64 memcg_id(struct task_struct *t)
{
	int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);

	if (id < 0 || id >= CGROUP_SUBSYS_COUNT)
		return 0;
	if (!t && cfg_task_storage) {
		/* Set only where bpf_get_current_task_btf loads too (the
		 * loader probes both): five plain loads, not five probe reads. */
		struct task_struct *bt = bpf_get_current_task_btf();

		return bt->cgroups->subsys[id]->cgroup->kn->id;
	}
	if (!t)
		t = (void *)bpf_get_current_task();
	return BPF_CORE_READ(t, cgroups, subsys[id], cgroup, kn, id);
}

/* Submits a record, waking the reader only when enough data waits. */
static __always_inline void event_submit(struct event *e)
{
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(e, waiting >= cfg_wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* Fills in a reserved stall record of thread tid, task t (NULL: the
 * current one, which the caller fills comm for otherwise). */
static __always_inline void event_init(struct event *e, __u32 tgid, __u32 tid, __u32 cause,
				       __u64 now, __u64 dur, struct task_struct *t)
{
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = KIND_STALL;
	e->ts_ns = now;
	e->dur_ns = dur;
	e->pid = tgid;
	e->tid = tid;
	e->cause = cause;
	e->node = -1;
	e->dst_node = -1;
	e->src_cpu = -1;
	e->dst_cpu = -1;
	e->cpu = bpf_get_smp_processor_id();
	/* Taken now: a process that has gone before serve looks it up in
	 * /proc is still labelled with its cgroup. */
	e->cgroup_id = memcg_id(t);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* Reserves a stall record for thread tid, task t (NULL: the current
 * one, which the caller fills comm for otherwise); counts a loss on failure. */
static __always_inline struct event *event_reserve(__u32 tgid, __u32 tid, __u32 cause,
						   __u64 now, __u64 dur, struct task_struct *t)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		counter_add(COUNTER_LOST_EVENTS, 1);
		return NULL;
	}
	event_init(e, tgid, tid, cause, now, dur, t);
	return e;
}

/*
 * Takes the current thread's kernel and user stacks, its user rbp and the
 * words at its user stack pointer into se; for a stall (not a wait, whose
 * stacks the record itself shows), counting those not taken. Out of line, so that the stall
 * programs keep one copy of it beside their own path, which a stall under
 * the threshold runs alone.
 */
static __noinline void stacks_take(void *ctx, struct stack_event *se, bool stall)
{
	se->kernel_len = bpf_get_stack(ctx, se->kernel, sizeof(se->kernel), 0);
	if (se->kernel_len <= 0 && stall)
		counter_add(COUNTER_KSTACK_LOST, 1);
	se->user_len = bpf_get_stack(ctx, se->user, sizeof(se->user), BPF_F_USER_STACK);
	if (se->user_len <= 0 && stall)
		counter_add(COUNTER_USTACK_LOST, 1);
	se->user_bp = 0;
	se->exec_id = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), self_exec_id);
	if (cfg_task_regs && se->user_len > 0) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		__u64 sp = BPF_CORE_READ(regs, sp); /* x86-64: the one target vmlinux.h is for */

		se->user_bp = BPF_CORE_READ(regs, bp);
		/* A failed read leaves the words zeroed; near the top of the
		 * stack, the first alone may still be there. */
		if (bpf_probe_read_user(se->user_sp, sizeof(se->user_sp), (void *)sp))
			bpf_probe_read_user(se->user_sp, sizeof(se->user_sp[0]), (void *)sp);
	} else {
		__builtin_memset(se->user_sp, 0, sizeof(se->user_sp));
	}
}

/*
 * Reserves the record of a stall of the current thread, which stalled
 * dur: a struct stack_event with its kernel and user stacks when
 * stack_ns (the stall, or a compaction attempt so far) reaches
 * cfg_stacks_min_ns. ctx is the program's, which every caller runs in
 * the stalled thread at the stall's end, still inside the code path
 * that stalled. A stall under the threshold costs one compare more.
 */
static __always_inline struct event *stall_reserve(void *ctx, __u32 tgid, __u32 tid, __u32 cause,
						   __u64 now, __u64 dur, __u64 stack_ns)
{
	struct stack_event *se = NULL;
	struct event *e;

	if (cfg_stacks_min_ns && stack_ns >= cfg_stacks_min_ns) {
		counter_add(COUNTER_STACKS_TAKEN, 1);
		se = bpf_ringbuf_reserve(&events, sizeof(*se), 0);
		if (!se) {
			/* No room for the stacks; the stall alone may still fit. */
			counter_add(COUNTER_KSTACK_LOST, 1);
			counter_add(COUNTER_USTACK_LOST, 1);
		}
	}
	if (se) {
		e = &se->e;
	} else {
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			counter_add(COUNTER_LOST_EVENTS, 1);
			return NULL;
		}
	}
	/* One copy of the record's filling for both sizes. */
	event_init(e, tgid, tid, cause, now, dur, NULL);
	if (se) {
		se->e.flags = FLAG_STACKS;
		stacks_take(ctx, se, true);
	}
	return e;
}

static __always_inline bool stream_wanted(__u32 cause, __u64 dur)
{
	if (cause >= CAUSE_MAX)
		return false;
	return dur >= cfg_min_event_ns[cause];
}

/* The current thread's slots in task storage; create makes them. */
static __always_inline struct task_pendings *task_slots(bool create)
{
	return bpf_task_storage_get(&task_pendings, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/*
 * The current thread's open stall in slot, or NULL. tid is the current
 * thread's: only the hash fallback needs it.
 */
static __always_inline struct pending *pending_get(__u32 tid, __u32 slot)
{
	if (slot >= SLOT_MAX)
		return NULL;
	if (cfg_task_storage) {
		struct task_pendings *tp = task_slots(false);

		if (!tp || !tp->slot[slot].start_ns)
			return NULL;
		return &tp->slot[slot];
	}
	struct pending_key key = { .tid = tid, .slot = slot };

	return bpf_map_lookup_elem(&pendings, &key);
}

/* Forgets the current thread's open stall in slot. */
static __always_inline void pending_drop(__u32 tid, __u32 slot)
{
	if (slot >= SLOT_MAX)
		return;
	if (cfg_task_storage) {
		struct task_pendings *tp = task_slots(false);

		if (tp)
			tp->slot[slot].start_ns = 0;
		return;
	}
	struct pending_key key = { .tid = tid, .slot = slot };

	bpf_map_delete_elem(&pendings, &key);
}

/*
 * Opens a stall of the current thread in slot. traced: the thread passes
 * the filter (or is a watched descendant's), so a stall that cannot be
 * opened (no memory for its slots, or a full hash) is a lost event;
 * compaction also notes untraced threads' attempts, whose loss is nobody's.
 */
static __always_inline void pending_start(__u32 tid, __u32 slot, struct pending *p, bool traced)
{
	if (slot >= SLOT_MAX)
		return;
	if (cfg_request_times && traced)
		current_times(p->times);
	if (cfg_task_storage) {
		struct task_pendings *tp = task_slots(true);

		if (tp)
			tp->slot[slot] = *p;
		else if (traced)
			counter_add(COUNTER_LOST_EVENTS, 1);
		return;
	}
	struct pending_key key = { .tid = tid, .slot = slot };

	if (bpf_map_update_elem(&pendings, &key, p, BPF_ANY) && traced)
		counter_add(COUNTER_LOST_EVENTS, 1);
}

/* Takes the current thread's open stall in slot out into *out. */
static __always_inline bool pending_take(__u32 tid, __u32 slot, struct pending *out)
{
	struct pending *p = pending_get(tid, slot);

	if (!p)
		return false;
	*out = *p;
	if (cfg_task_storage)
		p->start_ns = 0; /* closed, through the pointer already at hand */
	else
		pending_drop(tid, slot);
	return true;
}

/* Forgets every open stall of a thread that exits: in the hash they would
 * stay until the map is full (task storage goes with the thread). */
static __always_inline void pendings_forget(__u32 tid)
{
	if (cfg_task_storage)
		return;
#pragma unroll
	for (__u32 slot = 0; slot < SLOT_MAX; slot++)
		pending_drop(tid, slot);
}

/* Whether the current thread has a stall open in any slot of mask
 * (1 << slot each): one lookup in task storage for them all. */
static __always_inline bool any_open(__u32 tid, __u32 mask)
{
	if (cfg_task_storage) {
		struct task_pendings *tp = task_slots(false);

		if (!tp)
			return false;
#pragma unroll
		for (__u32 slot = 0; slot < SLOT_MAX; slot++)
			if ((mask & (1u << slot)) && tp->slot[slot].start_ns)
				return true;
		return false;
	}
#pragma unroll
	for (__u32 slot = 0; slot < SLOT_MAX; slot++)
		if ((mask & (1u << slot)) && pending_get(tid, slot))
			return true;
	return false;
}

/*
 * Closes the current thread's open stall in slot at now (read first thing
 * in the program, so our own work stays outside the stall): counts it in the exact
 * histogram and, when it is long enough to stream, returns a reserved
 * record (with the thread's stacks, when it is long enough for those:
 * stall_reserve) for the caller to fill in and submit. *p receives the
 * begin state.
 */
static __always_inline struct event *stall_close(void *ctx, __u32 slot, __u32 cause, struct pending *p,
						 bool nested, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

	if (!pending_take(tid, slot, p))
		return NULL;
	__u64 dur = now - p->start_ns;

	if (cause < CAUSE_MAX && dur < cfg_min_stall_ns[cause])
		return NULL;
	if (p->who == WHO_CHILD) {
		child_count(tgid, cause, dur, true, nested);
		return NULL;
	}
	__u64 in[TIME_MAX], *inp = NULL;

	if (cfg_request_times && !nested) {
		current_times(in);
#pragma unroll
		for (int i = 0; i < TIME_MAX; i++)
			in[i] = in[i] > p->times[i] ? in[i] - p->times[i] : 0;
		inp = in;
	}
	hist_add_in(tgid, tid, cause, dur, nested, inp);
	if (!stream_wanted(cause, dur))
		return NULL;
	struct event *e = stall_reserve(ctx, tgid, tid, cause, now, dur, dur);

	if (e && nested)
		e->flags |= FLAG_NESTED;
	return e;
}

/* Whether the current thread has a stall open in slot. */
static __always_inline bool is_open(__u32 tid, __u32 slot)
{
	return pending_get(tid, slot) != NULL;
}

/* task_struct::cpu, where kernels keep it outside thread_info. */
struct task_struct___cpu_in_task {
	unsigned int cpu;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

#endif
