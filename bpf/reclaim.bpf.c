// SPDX-License-Identifier: GPL-2.0
/*
 * Reclaim stalls: direct reclaim, memcg (cgroup limit) reclaim and its
 * soft-limit pair, and node-local reclaim (vm.zone_reclaim_mode=1).
 * Each begin/end pair in the same thread is one stall. Argument positions
 * of these tracepoints have been stable since 4.x.
 */
#include "common.h"

static __always_inline int reclaim_begin(__u32 slot, __s32 order, __u32 gfp, __s32 node)
{
	__u64 now = bpf_ktime_get_ns(); /* first: our own work is not the stall */
	__u32 tgid, tid;
	__u32 who = current_who(&tgid, &tid);

	if (!who)
		return 0;
	struct pending p = {
		.start_ns = now,
		.order = order,
		.gfp = gfp,
		.node = node,
		.who = who,
	};
	pending_start(tid, slot, &p, true);
	return 0;
}

static __always_inline int reclaim_end(void *ctx, __u32 slot, __u32 cause, __u32 flags, __u64 reclaimed)
{
	__u64 now = bpf_ktime_get_ns();
	struct pending p;
	/* Soft-limit reclaim runs inside global direct reclaim. */
	bool nested = slot == SLOT_MEMCG_SOFTLIMIT &&
		      is_open((__u32)bpf_get_current_pid_tgid(), SLOT_DIRECT_RECLAIM);
	struct event *e = stall_close(ctx, slot, cause, &p, nested, now);

	if (!e)
		return 0;
	e->order = p.order;
	e->gfp = p.gfp;
	e->node = p.node;
	e->pages = reclaimed;
	e->flags |= flags;
	event_submit(e);
	return 0;
}

/* mm_vmscan_direct_reclaim_begin(int order, gfp_t gfp_flags) */
SEC("raw_tp/mm_vmscan_direct_reclaim_begin")
int direct_reclaim_begin(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_begin(SLOT_DIRECT_RECLAIM, ctx->args[0], ctx->args[1], -1);
}

/* mm_vmscan_direct_reclaim_end(unsigned long nr_reclaimed) */
SEC("raw_tp/mm_vmscan_direct_reclaim_end")
int direct_reclaim_end(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_end(ctx, SLOT_DIRECT_RECLAIM, CAUSE_DIRECT_RECLAIM, 0, ctx->args[0]);
}

SEC("raw_tp/mm_vmscan_memcg_reclaim_begin")
int memcg_reclaim_begin(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_begin(SLOT_MEMCG_RECLAIM, ctx->args[0], ctx->args[1], -1);
}

SEC("raw_tp/mm_vmscan_memcg_reclaim_end")
int memcg_reclaim_end(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_end(ctx, SLOT_MEMCG_RECLAIM, CAUSE_MEMCG_RECLAIM, 0, ctx->args[0]);
}

SEC("raw_tp/mm_vmscan_memcg_softlimit_reclaim_begin")
int memcg_softlimit_begin(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_begin(SLOT_MEMCG_SOFTLIMIT, ctx->args[0], ctx->args[1], -1);
}

SEC("raw_tp/mm_vmscan_memcg_softlimit_reclaim_end")
int memcg_softlimit_end(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_end(ctx, SLOT_MEMCG_SOFTLIMIT, CAUSE_MEMCG_RECLAIM, FLAG_SOFTLIMIT, ctx->args[0]);
}

/* mm_vmscan_node_reclaim_begin(int nid, int order, gfp_t gfp_flags) */
SEC("raw_tp/mm_vmscan_node_reclaim_begin")
int node_reclaim_begin(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_begin(SLOT_NODE_RECLAIM, ctx->args[1], ctx->args[2], ctx->args[0]);
}

SEC("raw_tp/mm_vmscan_node_reclaim_end")
int node_reclaim_end(struct bpf_raw_tracepoint_args *ctx)
{
	return reclaim_end(ctx, SLOT_NODE_RECLAIM, CAUSE_NODE_RECLAIM, 0, ctx->args[0]);
}

/* mm_vmscan_wakeup_kswapd(int nid, int zid, int order, gfp_t gfp_flags): system-wide. */
SEC("raw_tp/mm_vmscan_wakeup_kswapd")
int kswapd_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	counter_add(COUNTER_KSWAPD_WAKEUPS, 1);
	return 0;
}
