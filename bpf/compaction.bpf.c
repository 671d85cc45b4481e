// SPDX-License-Identifier: GPL-2.0
/*
 * Compaction. Only direct compaction, inside an allocation, is a stall of
 * the allocating thread:
 *   try_to_compact_pages (in the allocating task) opens an attempt;
 *   each mm_compaction_begin/end pass in that task closes one slice of it.
 * A slice runs from the end of the previous slice (or the attempt's start)
 * to the pass's end, so the slices of an attempt add up to its whole time.
 * Each slice is streamed as it closes; the histogram counts the attempt
 * once and moves it to a longer bucket as its slices add up.
 * Passes by kcompactd, and proactive or sysctl compaction, are counted
 * system-wide and never charged to a thread.
 *
 * No tracepoint marks the end of an attempt. A pass belongs to the
 * thread's attempt only if it begins within ATTEMPT_GAP_NS of the attempt's
 * last mark: between the zones of one attempt only a few checks run.
 *
 * mm_compaction_end changed shape: newer kernels pass the compact_control
 * first and the status fifth; older ones pass pfns and the status sixth.
 * The loader picks the variant that matches the kernel's BTF.
 */
#include "common.h"

#define ATTEMPT_GAP_NS (10 * 1000 * 1000ULL)

/* mm_compaction_try_to_compact_pages(int order, gfp_t gfp_mask, int prio) */
SEC("raw_tp/mm_compaction_try_to_compact_pages")
int compact_attempt(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tgid, tid;

	counter_add(COUNTER_DIRECT_COMPACT_ATTEMPTS, 1);
	/* Recorded for every thread, so a pass can always be told direct. */
	__u32 who = current_who(&tgid, &tid);
	struct pending p = {
		.start_ns = now,
		.mark_ns = now,
		.order = ctx->args[0],
		.gfp = ctx->args[1],
		.aux = ctx->args[2],
		.node = -1,
		.who = who,
	};
	pending_start(tid, SLOT_COMPACT_ATTEMPT, &p, who != WHO_NONE);
	return 0;
}

SEC("raw_tp/mm_compaction_begin")
int compact_pass_begin(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending p = { .start_ns = now, .node = -1 };
	struct pending *attempt = pending_get(tid, SLOT_COMPACT_ATTEMPT);

	if (attempt && now - attempt->mark_ns > ATTEMPT_GAP_NS)
		pending_drop(tid, SLOT_COMPACT_ATTEMPT); /* an earlier allocation's */
	pending_start(tid, SLOT_COMPACT_PASS, &p, false);
	return 0;
}

static __always_inline void count_background_pass(__u64 dur)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	bool kthread = BPF_CORE_READ(t, flags) & PF_KTHREAD;

	counter_add(kthread ? COUNTER_KCOMPACTD_PASSES : COUNTER_PROACTIVE_PASSES, 1);
	counter_add(kthread ? COUNTER_KCOMPACTD_NS : COUNTER_PROACTIVE_NS, dur);
}

/* is_direct: 1 direct, 0 not direct, -1 unknown (older kernels). */
static __always_inline int compact_pass_end(void *ctx, int is_direct, __s32 status)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct pending pass;

	if (!pending_take(tid, SLOT_COMPACT_PASS, &pass))
		return 0;

	struct pending *attempt = pending_get(tid, SLOT_COMPACT_ATTEMPT);

	if (attempt && is_direct == 0) {
		pending_drop(tid, SLOT_COMPACT_ATTEMPT); /* stale: this pass is not an allocation's */
		attempt = NULL;
	}
	if (!attempt) {
		/* A direct pass with no attempt began before numatrace attached. */
		if (is_direct != 1)
			count_background_pass(now - pass.start_ns);
		return 0;
	}

	__u64 slice = now - attempt->mark_ns;
	__u64 prev = attempt->sum_ns;

	attempt->mark_ns = now;
	attempt->sum_ns = prev + slice;
	attempt->passes++;
	if (attempt->who == WHO_CHILD)
		child_count(tgid, CAUSE_COMPACTION, slice, attempt->passes == 1, false);
	if (attempt->who != WHO_TARGET)
		return 0;
	stall_count(tgid, tid, CAUSE_COMPACTION, NULL, prev, prev + slice, attempt->passes == 1, false);
	thread_stall_add(tid, CAUSE_COMPACTION, slice, false, NULL);
	if (!stream_wanted(CAUSE_COMPACTION, slice))
		return 0;
	/* Stacks once the attempt so far is long enough: a long attempt of
	 * short passes has them too. */
	struct event *e = stall_reserve(ctx, tgid, tid, CAUSE_COMPACTION, now, slice, prev + slice);
	if (!e)
		return 0;
	e->order = attempt->order;
	e->gfp = attempt->gfp;
	e->mode = attempt->aux;
	e->status = status;
	e->total_ns = prev + slice;
	e->pass = attempt->passes;
	event_submit(e);
	return 0;
}

/* mm_compaction_end(struct compact_control *cc, unsigned long zone_start,
 *                   unsigned long zone_end, bool sync, int status) */
SEC("raw_tp/mm_compaction_end")
int compact_pass_end_cc(struct bpf_raw_tracepoint_args *ctx)
{
	struct compact_control *cc = (void *)ctx->args[0];
	bool direct;

	/* An unreadable cc leaves the attempt heuristic to decide. */
	if (bpf_core_read(&direct, sizeof(direct), &cc->direct_compaction))
		return compact_pass_end(ctx, -1, ctx->args[4]);
	return compact_pass_end(ctx, direct ? 1 : 0, ctx->args[4]);
}

/* mm_compaction_end(unsigned long zone_start, unsigned long migrate_pfn,
 *                   unsigned long free_pfn, unsigned long zone_end, bool sync, int status) */
SEC("raw_tp/mm_compaction_end")
int compact_pass_end_pfn(struct bpf_raw_tracepoint_args *ctx)
{
	return compact_pass_end(ctx, -1, ctx->args[5]);
}
