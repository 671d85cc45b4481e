// SPDX-License-Identifier: GPL-2.0
/*
 * Scheduler: task migrations (the hot path: counted in the kernel, never
 * streamed), thread exits (for names and process-exit handling) and forks
 * (so --cgroup follows new processes).
 */
#include "common.h"

/* sched_migrate_task(struct task_struct *p, int dest_cpu), fired before p moves. */
SEC("tp_btf/sched_migrate_task")
int BPF_PROG(task_migrate, struct task_struct *p, int dest_cpu)
{
	__u32 tgid = p->tgid, tid = p->pid;

	if (!wanted(tgid, tid))
		return 0;
	bool cross = node_of_cpu(task_cpu_of(p)) != node_of_cpu(dest_cpu);
	struct thread_counts *c = bpf_map_lookup_elem(&thread_counts_map, &tid);

	if (!c) {
		struct thread_counts zero = { .pid = tgid };

		BPF_CORE_READ_STR_INTO(&zero.comm, p, comm);
		bpf_map_update_elem(&thread_counts_map, &tid, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&thread_counts_map, &tid);
		if (!c)
			return 0;
	}
	__sync_fetch_and_add(&c->migrations, 1);
	if (cross)
		__sync_fetch_and_add(&c->cross_node, 1);
	return 0;
}

/* sched_process_exit(struct task_struct *p, ...): runs in the exiting thread. */
SEC("raw_tp/sched_process_exit")
int thread_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tgid, tid;

	if (!current_wanted(&tgid, &tid))
		return 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		counter_add(COUNTER_LOST_EVENTS, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = KIND_EXIT;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	struct task_struct *t = (void *)bpf_get_current_task();
	if (BPF_CORE_READ(t, signal, live.counter) == 0)
		e->flags = FLAG_GROUP_DEAD;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* sched_process_fork(parent, child): a traced process's children are traced. */
SEC("raw_tp/sched_process_fork")
int follow_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *child = (void *)ctx->args[1];
	__u32 ptgid = bpf_get_current_pid_tgid() >> 32;
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (ctgid == ptgid || !bpf_map_lookup_elem(&target_tgids, &ptgid))
		return 0;
	bpf_map_update_elem(&target_tgids, &ctgid, &one, BPF_ANY);
	return 0;
}
