// SPDX-License-Identifier: GPL-2.0
/*
 * NUMA: page migration (timed from mm_migrate_pages_start to mm_migrate_pages
 * in the migrating task) and NUMA-balancing task moves, counted per thread
 * with their source and destination nodes.
 *
 * mm_migrate_pages gained arguments over time; the reason is its last one.
 * The loader picks the variant whose reason position matches the kernel.
 */
#include "common.h"

/* mm_migrate_pages_start(enum migrate_mode mode, int reason) */
SEC("raw_tp/mm_migrate_pages_start")
int migrate_start(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tgid, tid;
	__u32 who = current_who(&tgid, &tid);

	if (!who)
		return 0;
	struct pending p = {
		.start_ns = now,
		.aux = ctx->args[0],
		.node = ctx->args[1],
		.who = who,
	};
	pending_start(tid, SLOT_MIGRATE, &p, true);
	return 0;
}

static __always_inline int migrate_end(void *ctx, __u64 succeeded, __s32 mode, __s32 reason)
{
	__u64 now = bpf_ktime_get_ns();
	struct pending p;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	/* Compaction and reclaim (demotion) migrate pages inside their own stall. */
	bool nested = any_open(tid, 1u << SLOT_COMPACT_PASS | 1u << SLOT_DIRECT_RECLAIM |
					    1u << SLOT_MEMCG_RECLAIM | 1u << SLOT_NODE_RECLAIM);
	struct event *e = stall_close(ctx, SLOT_MIGRATE, CAUSE_NUMA_MIGRATION, &p, nested, now);

	if (!e)
		return 0;
	e->pages = succeeded;
	e->mode = mode;
	e->reason = reason;
	event_submit(e);
	return 0;
}

/* (succeeded, failed, thp_succeeded, thp_failed, thp_split, large_folio_split, mode, reason) */
SEC("raw_tp/mm_migrate_pages")
int migrate_end_r7(struct bpf_raw_tracepoint_args *ctx)
{
	return migrate_end(ctx, ctx->args[0], ctx->args[6], ctx->args[7]);
}

/* (succeeded, failed, thp_succeeded, thp_failed, thp_split, mode, reason) */
SEC("raw_tp/mm_migrate_pages")
int migrate_end_r6(struct bpf_raw_tracepoint_args *ctx)
{
	return migrate_end(ctx, ctx->args[0], ctx->args[5], ctx->args[6]);
}

/*
 * One NUMA task move of t from src_cpu to dst_cpu. The kernel always names
 * the moving task; a NULL one is taken as the current task, which is what
 * NUMA balancing moves (and what BPF_PROG_TEST_RUN can pass).
 */
static __always_inline void numa_move(struct task_struct *t, __s32 src_cpu, __s32 dst_cpu,
				      __u32 flags, struct task_struct *other)
{
	if (!t)
		t = (void *)bpf_get_current_task();
	__u32 tgid = BPF_CORE_READ(t, tgid);
	__u32 tid = BPF_CORE_READ(t, pid);

	if (!wanted(tgid, tid))
		return;
	__u64 now = bpf_ktime_get_ns();
	stall_count(tgid, tid, CAUSE_NUMA_TASK_MOVE, t, 0, 0, true, false); /* a move takes no time */
	struct event *e = event_reserve(tgid, tid, CAUSE_NUMA_TASK_MOVE, now, 0, t);
	if (!e)
		return;
	BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	e->src_cpu = src_cpu;
	e->dst_cpu = dst_cpu;
	e->node = src_cpu >= 0 ? node_of_cpu(src_cpu) : -1;
	e->dst_node = dst_cpu >= 0 ? node_of_cpu(dst_cpu) : -1;
	e->flags = flags;
	if (other)
		e->other_tid = BPF_CORE_READ(other, pid);
	event_submit(e);
}

/* sched_move_numa(struct task_struct *tsk, int src_cpu, int dst_cpu) */
SEC("raw_tp/sched_move_numa")
int numa_move_task(struct bpf_raw_tracepoint_args *ctx)
{
	numa_move((void *)ctx->args[0], ctx->args[1], ctx->args[2], 0, NULL);
	return 0;
}

/* sched_swap_numa(src_tsk, src_cpu, dst_tsk, dst_cpu): both tasks move. */
SEC("raw_tp/sched_swap_numa")
int numa_swap_task(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *src = (void *)ctx->args[0], *dst = (void *)ctx->args[2];

	numa_move(src, ctx->args[1], ctx->args[3], FLAG_SWAP, dst);
	if (dst)
		numa_move(dst, ctx->args[3], ctx->args[1], FLAG_SWAP, src);
	return 0;
}

/* sched_stick_numa(src_tsk, src_cpu, dst_tsk, dst_cpu): a move that failed. */
SEC("raw_tp/sched_stick_numa")
int numa_stick_task(struct bpf_raw_tracepoint_args *ctx)
{
	numa_move((void *)ctx->args[0], ctx->args[1], ctx->args[3], FLAG_STICK,
		  (void *)ctx->args[2]);
	return 0;
}
