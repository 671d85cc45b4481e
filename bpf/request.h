/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every kernel-side request timer shares: one ring buffer of
 * lat_sample records, and the serving thread's stall totals (thread_stalls,
 * common.h) read as a request starts and as it ends, their difference
 * being the request's stall breakdown.
 */
#ifndef NUMATRACE_REQUEST_H
#define NUMATRACE_REQUEST_H

#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} lat_events SEC(".maps");

/*
 * At a request's start: thread tid's stall totals into snap and, with t
 * (its task; NULL not to read them), its task counters (task_counters:
 * btf and running as its) into times and their part inside its stalls
 * into in. Zeros where it has no entry in thread_stalls: it has not
 * stalled. One lookup of that entry an end.
 */
static __always_inline void request_start(__u32 tid, struct task_struct *t, bool btf, bool running, __u64 *snap,
					  __u64 *times, __u64 *in)
{
	struct thread_stall *ts = cfg_request_stalls ? bpf_map_lookup_elem(&thread_stalls, &tid) : NULL;

	if (ts) {
		__builtin_memcpy(snap, ts->ns, sizeof(ts->ns));
		ts->req_begun++;
	} else
		__builtin_memset(snap, 0, sizeof(ts->ns));
	if (!t)
		return;
	task_counters(t, ts, btf, running, times);
#pragma unroll
	for (int i = 0; i < TIME_MAX; i++)
		in[i] = ts ? ts->in_stall[i] : 0;
}

/* What a request's end reads: out of what its start read (request_start),
 * into its record's fields. times (NULL: not read at the start, or no
 * task at the end) and the rest of the times go together. */
struct request_end {
	const __u64 *snap;   /* stall totals at the start */
	__u64 *delta;        /* the stalls since */
	__u64 *totals;       /* the stall totals now (NULL: not wanted) */
	const __u64 *times;  /* task counters at the start */
	const __u64 *in;     /* their part inside stalls at the start */
	__u64 *d;            /* the task counters' growth since */
	__u64 *d_in;         /* ...and of their part inside stalls */
	bool current;        /* the end is in the serving thread (serving_mark) */
};

/*
 * Marks the current thread tid, whose entry is ts (NULL: none yet), as
 * serving requests, once: from then on its switch-ins note its time on a
 * CPU (sched.bpf.c: cpu_in), which no other thread's do. It notes them
 * now too, as if it had just got the CPU: a thread under load may serve
 * many requests before it next does.
 */
static __always_inline struct thread_stall *serving_mark(__u32 tid, struct thread_stall *ts)
{
	if (!cfg_request_times || !cfg_task_storage || (ts && ts->serving))
		return ts;
	struct task_pendings *tp = task_slots(true);

	if (!ts)
		ts = thread_stall_entry(tid);
	if (!tp || !ts)
		return ts;
	tp->serves = 1;
	ts->serving = 1;
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();

	ts->cpu_in_sum = BPF_CORE_READ(cur, se.sum_exec_runtime);
	ts->cpu_in_ns = bpf_ktime_get_ns();
	ts->cpu_in_pcount = BPF_CORE_READ(cur, sched_info.pcount);
	return ts;
}

/*
 * At a request's end: thread tid's stalls since the start into e->delta
 * (its totals into e->totals) and, with t and e->times, its task counters'
 * growth into e->d and e->d_in. One lookup of its entry. Returns
 * LAT_STALLS, or 0 when the totals went back (the LRU evicted the
 * thread's entry and it began again) and the breakdown is unknown; with
 * LAT_TIMES where the counters were read.
 */
static __always_inline __u32 request_since(__u32 tid, struct task_struct *t, bool btf, bool running,
					    const struct request_end *e)
{
	struct thread_stall *ts = bpf_map_lookup_elem(&thread_stalls, &tid);

	if (e->current)
		ts = serving_mark(tid, ts);
	if (ts)
		ts->req_ended = ts->req_begun;
	__u32 flags = LAT_STALLS; /* no entry yet: the thread has not stalled */

#pragma unroll
	for (int i = 0; i <= CAUSE_MAX; i++) {
		__u64 now_ns = ts ? ts->ns[i] : 0;

		if (ts && now_ns < e->snap[i])
			flags = 0;
		e->delta[i] = ts && now_ns >= e->snap[i] ? now_ns - e->snap[i] : 0;
		if (e->totals)
			e->totals[i] = now_ns;
	}
	if (!t)
		return flags;
	if (!e->times)
		return flags;
	__u64 now[TIME_MAX];

	task_counters(t, ts, btf, running, now);
#pragma unroll
	for (int i = 0; i < TIME_MAX; i++) {
		__u64 in_now = ts ? ts->in_stall[i] : 0;

		e->d[i] = now[i] > e->times[i] ? now[i] - e->times[i] : 0;
		e->d_in[i] = in_now > e->in[i] ? in_now - e->in[i] : 0;
	}
	return flags | LAT_TIMES;
}

/* Submits a sample; as event_submit, waking the reader only when much waits. */
static __always_inline void lat_submit(struct lat_sample *s)
{
	__u64 waiting = bpf_ringbuf_query(&lat_events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(s, waiting >= (512 << 10) ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

#endif
