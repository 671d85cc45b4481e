// SPDX-License-Identifier: GPL-2.0
/*
 * Throttling: the kernel puts a thread to sleep for memory without
 * reclaiming anything itself.
 *
 * - reclaim_throttle(): reclaim waits for writeback, for isolated pages
 *   to come back, or for progress (5.16+). mm_vmscan_throttled fires as
 *   the wait ends and says how long it was.
 * - balance_dirty_pages(): a writer over its dirty limit pauses. The
 *   tracepoint fires just before the pause and says how long it will be.
 *
 * Both usually run inside another timed stall (reclaim, compaction): then
 * they are nested, counted in their own row but not added to the thread's
 * freeze time twice.
 */
#include "common.h"

/* Ends a throttle of the current thread that lasted dur and ends at end. */
static __always_inline struct event *throttle_stall(void *ctx, __u32 cause, __u64 end, __u64 dur, bool nested)
{
	__u32 tgid, tid;
	__u32 who = current_who(&tgid, &tid);

	if (!who || !dur || dur < cfg_min_stall_ns[cause])
		return NULL;
	if (who == WHO_CHILD) {
		child_count(tgid, cause, dur, true, nested);
		return NULL;
	}
	hist_add(tgid, tid, cause, dur, nested);
	if (!stream_wanted(cause, dur))
		return NULL;
	struct event *e = stall_reserve(ctx, tgid, tid, cause, end, dur, dur);

	if (e && nested)
		e->flags |= FLAG_NESTED;
	return e;
}

/*
 * Whether the current thread's wait that ended at now, dur long, is
 * already another stall's: one open in a timed slot, or a memstall_wait
 * that ended inside it (a throttle in a reclaim that began before attach).
 */
static __always_inline bool throttle_nested(__u32 tid, __u64 now, __u64 dur)
{
	if (any_open(tid, TIMED_SLOTS))
		return true;
	if (!cfg_memstall || !cfg_task_storage)
		return false;
	struct task_pendings *tp = task_slots(false);

	return tp && tp->slot[SLOT_MEMSTALL].mark_ns + dur >= now;
}

/* mm_vmscan_throttled(int nid, int usec_timeout, int usec_delayed, int reason) */
SEC("raw_tp/mm_vmscan_throttled")
int reclaim_throttled(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__s32 delayed = ctx->args[2];

	if (delayed <= 0)
		return 0;
	__u64 dur = (__u64)delayed * 1000;
	bool nested = throttle_nested((__u32)bpf_get_current_pid_tgid(), now, dur);
	struct event *e = throttle_stall(ctx, CAUSE_RECLAIM_THROTTLE, now, dur, nested);

	if (!e)
		return 0;
	e->node = ctx->args[0];
	e->reason = ctx->args[3]; /* enum vmscan_throttle_state */
	event_submit(e);
	return 0;
}

/*
 * A pause of pause jiffies starting now: the stall ends when the pause
 * does (the record's time is its end, as for every stall). paused is the
 * call's time so far, in jiffies, this pause included once it is over.
 */
static __always_inline int dirty_pause(void *ctx, long pause, __u64 dirty, __u64 limit, __u64 start_jiffies)
{
	__u64 now = bpf_ktime_get_ns();

	if (pause <= 0 || !cfg_ns_per_jiffy)
		return 0;
	__u64 dur = (__u64)pause * cfg_ns_per_jiffy;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct event *e = throttle_stall(ctx, CAUSE_DIRTY_THROTTLE, now + dur, dur, any_open(tid, TIMED_SLOTS));

	if (!e)
		return 0;
	e->pages = dirty;
	e->limit = limit;
	__u64 jiffies = bpf_jiffies64();

	if (start_jiffies && jiffies >= start_jiffies)
		e->total_ns = (jiffies - start_jiffies + pause) * cfg_ns_per_jiffy;
	event_submit(e);
	return 0;
}

/* balance_dirty_pages(wb, dtc, dirty_ratelimit, task_ratelimit, dirtied,
 * period, long pause, start_time): 6.10 on. */
SEC("raw_tp/balance_dirty_pages")
int dirty_throttled_dtc(struct bpf_raw_tracepoint_args *ctx)
{
	struct dirty_throttle_control *dtc = (void *)ctx->args[1];

	return dirty_pause(ctx, ctx->args[6], BPF_CORE_READ(dtc, dirty), BPF_CORE_READ(dtc, limit), ctx->args[7]);
}

/* balance_dirty_pages(wb, thresh, bg_thresh, dirty, bdi_thresh, bdi_dirty,
 * dirty_ratelimit, task_ratelimit, dirtied, period, long pause,
 * start_time): before 6.10. */
SEC("raw_tp/balance_dirty_pages")
int dirty_throttled_args(struct bpf_raw_tracepoint_args *ctx)
{
	return dirty_pause(ctx, ctx->args[10], ctx->args[3], ctx->args[1], ctx->args[11]);
}
