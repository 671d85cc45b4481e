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
#include "bpf_helpers.h"
#include "bpf_core_read.h"
#include "bpf_tracing.h"
#include "numatrace.h"

#define MAX_CPUS 4096
#define PF_KTHREAD 0x00200000

/* Set by the loader before load; the verifier sees them as constants. */
const volatile __u32 cfg_filter_mode = FILTER_NONE;
const volatile __u32 cfg_filter_tid = 0;
/*
 * Waking the reader from inside a program costs microseconds on a VM (an
 * irq_work self-IPI), charged to the traced thread. Records are submitted
 * without a wakeup unless this much data is waiting; the reader polls.
 */
const volatile __u64 cfg_wakeup_bytes = 256 << 10;
/* Stalls shorter than this still land in the histograms but are not streamed. */
const volatile __u64 cfg_min_event_ns[CAUSE_MAX] = {};

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
};

struct pending_key {
	__u32 tid;
	__u32 slot;
};

struct pending {
	__u64 start_ns;
	__u32 gfp;
	__s32 order;
	__s32 node;
	__s32 aux; /* compaction priority */
	__u64 mark_ns; /* compaction: end of the previous pass in this attempt */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pending_key);
	__type(value, struct pending);
} pendings SEC(".maps");

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
		return true;
	if (cfg_filter_mode == FILTER_TID)
		return tid == cfg_filter_tid;
	return bpf_map_lookup_elem(&target_tgids, &tgid) != NULL;
}

static __always_inline bool current_wanted(__u32 *tgid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();

	*tgid = id >> 32;
	*tid = (__u32)id;
	return wanted(*tgid, *tid);
}

static __always_inline __s32 node_of_cpu(__s32 cpu)
{
	__u32 key = cpu;
	__s32 *node = bpf_map_lookup_elem(&cpu_node, &key);

	return node ? *node : -1;
}

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0;

	/* floor(log2(v)), branch-light, for v < 2^64 */
#pragma unroll
	for (int shift = 32; shift > 0; shift >>= 1) {
		if (v >= (1ULL << shift)) {
			v >>= shift;
			r += shift;
		}
	}
	return r < HIST_SLOTS ? r : HIST_SLOTS - 1;
}

/* Adds one stall to the thread's exact histogram. comm is the thread's. */
static __always_inline void hist_add(__u32 tgid, __u32 tid, __u32 cause, __u64 dur)
{
	struct hist_key key = { .tid = tid, .cause = cause };
	struct hist *h = bpf_map_lookup_elem(&hists, &key);

	if (!h) {
		struct hist zero = { .pid = tgid };

		bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		bpf_map_update_elem(&hists, &key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &key);
		if (!h)
			return;
	}
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->total_ns, dur);
	if (dur > h->max_ns)
		h->max_ns = dur; /* one thread's stalls are serial: no race that matters */
	__u32 slot = log2_slot(dur);
	if (slot < HIST_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
}

/* Submits a record, waking the reader only when enough data waits. */
static __always_inline void event_submit(struct event *e)
{
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(e, waiting >= cfg_wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* Reserves a stall record for the current thread; counts a loss on failure. */
static __always_inline struct event *event_reserve(__u32 tgid, __u32 tid, __u32 cause,
						   __u64 now, __u64 dur)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		counter_add(COUNTER_LOST_EVENTS, 1);
		return NULL;
	}
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
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

static __always_inline bool stream_wanted(__u32 cause, __u64 dur)
{
	if (cause >= CAUSE_MAX)
		return false;
	return dur >= cfg_min_event_ns[cause];
}

static __always_inline void pending_start(__u32 tid, __u32 slot, struct pending *p)
{
	struct pending_key key = { .tid = tid, .slot = slot };

	bpf_map_update_elem(&pendings, &key, p, BPF_ANY);
}

/* Takes the open stall for (tid, slot) out of the map into *out. */
static __always_inline bool pending_take(__u32 tid, __u32 slot, struct pending *out)
{
	struct pending_key key = { .tid = tid, .slot = slot };
	struct pending *p = bpf_map_lookup_elem(&pendings, &key);

	if (!p)
		return false;
	*out = *p;
	bpf_map_delete_elem(&pendings, &key);
	return true;
}

/*
 * Closes the current thread's open stall in slot: counts it in the exact
 * histogram and, when it is long enough to stream, returns a reserved
 * record for the caller to fill in and submit. *p receives the begin state.
 */
static __always_inline struct event *stall_close(__u32 slot, __u32 cause, struct pending *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

	if (!pending_take(tid, slot, p))
		return NULL;
	__u64 now = bpf_ktime_get_ns();
	__u64 dur = now - p->start_ns;

	hist_add(tgid, tid, cause, dur);
	if (!stream_wanted(cause, dur))
		return NULL;
	return event_reserve(tgid, tid, cause, now, dur);
}

/* task_struct::cpu, where kernels keep it outside thread_info. */
struct task_struct___cpu_in_task {
	unsigned int cpu;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

#endif
