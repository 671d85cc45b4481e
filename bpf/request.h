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

/* Copies thread tid's stall totals so far into snap (zeros: it has not stalled). */
static __always_inline void stalls_snapshot(__u32 tid, __u64 *snap)
{
	struct thread_stall *ts = cfg_request_stalls ? bpf_map_lookup_elem(&thread_stalls, &tid) : NULL;

	if (ts)
		__builtin_memcpy(snap, ts->ns, sizeof(ts->ns));
	else
		__builtin_memset(snap, 0, sizeof(ts->ns));
}

/*
 * Fills delta with what thread tid stalled since its totals were snap, and
 * totals (unless NULL) with its totals now. Returns LAT_STALLS, or 0 when
 * the totals went back (the LRU evicted the thread's entry and it began
 * again) and the breakdown is unknown.
 */
static __always_inline __u32 stalls_since(__u32 tid, const __u64 *snap, __u64 *delta, __u64 *totals)
{
	struct thread_stall *ts = bpf_map_lookup_elem(&thread_stalls, &tid);
	__u32 flags = LAT_STALLS; /* no entry yet: the thread has not stalled */

#pragma unroll
	for (int i = 0; i <= CAUSE_MAX; i++) {
		__u64 now_ns = ts ? ts->ns[i] : 0;

		if (ts && now_ns < snap[i])
			flags = 0;
		delta[i] = ts && now_ns >= snap[i] ? now_ns - snap[i] : 0;
		if (totals)
			totals[i] = now_ns;
	}
	return flags;
}

/* Copies thread tid's task times inside its stalls so far into in. */
static __always_inline void in_stall_snapshot(__u32 tid, __u64 *in)
{
	struct thread_stall *ts = bpf_map_lookup_elem(&thread_stalls, &tid);

	if (ts)
		__builtin_memcpy(in, ts->in_stall, sizeof(ts->in_stall));
	else
		__builtin_memset(in, 0, sizeof(ts->in_stall));
}

/*
 * The request's task times: what thread tid, whose times are now, spent
 * since they were times and its part inside stalls was in, into d and
 * d_in. Returns LAT_TIMES.
 */
static __always_inline __u32 times_since(__u32 tid, const __u64 *now, const __u64 *times, const __u64 *in,
					 __u64 *d, __u64 *d_in)
{
	struct thread_stall *ts = bpf_map_lookup_elem(&thread_stalls, &tid);

#pragma unroll
	for (int i = 0; i < TIME_MAX; i++) {
		__u64 in_now = ts ? ts->in_stall[i] : 0;

		d[i] = now[i] > times[i] ? now[i] - times[i] : 0;
		d_in[i] = in_now > in[i] ? in_now - in[i] : 0;
	}
	return LAT_TIMES;
}

/* Submits a sample; as event_submit, waking the reader only when much waits. */
static __always_inline void lat_submit(struct lat_sample *s)
{
	__u64 waiting = bpf_ringbuf_query(&lat_events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(s, waiting >= (512 << 10) ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

#endif
