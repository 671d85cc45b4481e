// SPDX-License-Identifier: GPL-2.0
/*
 * Scheduler: task migrations (the hot path: counted in the kernel, never
 * streamed), thread exits (for names and process-exit handling), forks
 * (so --cgroup and --children follow new processes, and --pid watches its
 * descendants), and, only while a latency source
 * runs, the traced threads' run-queue wait: the usual cause of a latency
 * spike that memory management does not explain.
 */
#include "common.h"

/* task_cpu(p) read directly through the BTF-typed pointer: no helper call. */
static __always_inline __s32 task_cpu_direct(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return p->thread_info.cpu;
	return ((struct task_struct___cpu_in_task *)p)->cpu;
}

static __always_inline struct thread_counts *counts_of(__u32 tgid, __u32 tid, struct task_struct *p)
{
	struct thread_counts *c = bpf_map_lookup_elem(&thread_counts_map, &tid);

	if (c)
		return c;
	struct thread_counts zero = { .pid = tgid };

	comm_of(zero.comm, p);
	bpf_map_update_elem(&thread_counts_map, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&thread_counts_map, &tid);
}

/*
 * sched_migrate_task(struct task_struct *p, int dest_cpu), fired before p
 * moves: the hottest hook. The kernel counts every migration itself
 * (p->se.nr_migrations, read by migrations_dump), so only a move to another
 * node has anything to do here; on a one-node machine, nothing.
 */
SEC("tp_btf/sched_migrate_task")
int BPF_PROG(task_migrate, struct task_struct *p, int dest_cpu)
{
	if (!cfg_multi_node || node_of_cpu(task_cpu_direct(p)) == node_of_cpu(dest_cpu))
		return 0;
	__u32 tgid = p->tgid, tid = p->pid;

	if (!wanted(tgid, tid))
		return 0;
	struct thread_counts *c = counts_of(tgid, tid, p);

	/* set_task_cpu() runs under p's pi_lock or rq lock: one writer per thread. */
	if (c)
		c->cross_node++;
	return 0;
}

/* The fallback where task iterators cannot load: count every migration here. */
SEC("tp_btf/sched_migrate_task")
int BPF_PROG(task_migrate_count, struct task_struct *p, int dest_cpu)
{
	__u32 tgid = p->tgid, tid = p->pid;

	if (!wanted(tgid, tid))
		return 0;
	bool cross = cfg_multi_node && node_of_cpu(task_cpu_direct(p)) != node_of_cpu(dest_cpu);
	struct thread_counts *c = counts_of(tgid, tid, p);

	if (!c)
		return 0;
	c->migrations++;
	if (cross)
		c->cross_node++;
	return 0;
}

/* Every live wanted thread that has migrated: its count since fork. */
SEC("iter/task")
int migrations_dump(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;

	if (!t)
		return 0;
	__u32 tgid = t->tgid, tid = t->pid;
	__u64 n = t->se.nr_migrations;

	if (!n || !wanted(tgid, tid))
		return 0;
	struct migr_rec r = { .nr_migrations = n, .start_ns = t->start_time, .tid = tid, .pid = tgid };

	BPF_CORE_READ_STR_INTO(&r.comm, t, comm);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

/* Whether the exiting current thread is its process's last: the
 * tracepoint's own flag where it has one, else whether none is left. */
static __always_inline bool group_dead(struct bpf_raw_tracepoint_args *ctx, struct task_struct *t)
{
	if (cfg_exit_group_dead)
		return ctx->args[1] != 0;
	return BPF_CORE_READ(t, signal, live.counter) == 0;
}

/* A watched descendant's last thread exits: its pid may be reused by
 * anyone, so it leaves the set, counted if it stalled. */
static __always_inline void watched_exit(struct bpf_raw_tracepoint_args *ctx, __u32 tgid)
{
	__u8 *stalled = bpf_map_lookup_elem(&watched_tgids, &tgid);

	if (!stalled || !group_dead(ctx, (void *)bpf_get_current_task()))
		return;
	if (*stalled)
		counter_add(COUNTER_WATCHED_GONE, 1);
	bpf_map_delete_elem(&watched_tgids, &tgid);
}

/* sched_process_exit(struct task_struct *p, ...): runs in the exiting thread. */
SEC("raw_tp/sched_process_exit")
int thread_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tgid, tid;
	bool traced = current_wanted(&tgid, &tid);

	pendings_forget(tid); /* any thread: compaction notes every thread's attempts */
	if (!traced) {
		if (cfg_watch_children)
			watched_exit(ctx, tgid);
		return 0;
	}
	if (!cfg_task_storage) /* task storage goes with the thread */
		bpf_map_delete_elem(&runq_delay, &tid);
	struct task_struct *t = (void *)bpf_get_current_task();
	/* The iterator will not see this thread again: keep its count. This
	 * and the target set are the kernel's own state, kept also when the
	 * ring buffer is full and the exit cannot be streamed. */
	__u64 n = BPF_CORE_READ(t, se.nr_migrations);
	if (n && cfg_migr_iter) {
		struct thread_counts *c = counts_of(tgid, tid, t);

		if (c) {
			c->migrations = n;
			c->start_ns = BPF_CORE_READ(t, start_time);
		}
	}
	bool dead = group_dead(ctx, t);
	/* The process is gone: its pid may be reused by anyone. */
	if (dead && cfg_filter_mode == FILTER_TGIDS)
		bpf_map_delete_elem(&target_tgids, &tgid);
	struct event *e = event_reserve(tgid, tid, 0, bpf_ktime_get_ns(), 0, NULL);
	if (!e)
		return 0;
	e->kind = KIND_EXIT;
	if (dead)
		e->flags = FLAG_GROUP_DEAD;
	event_submit(e);
	return 0;
}

/*
 * cgroup_attach_task(dst_cgrp, path, task, threadgroup): a process moved
 * into the --cgroup target (or a cgroup below it) is traced from its next
 * event on, not from the next rescan of cgroup.procs.
 */
SEC("raw_tp/cgroup_attach_task")
int follow_attach(struct bpf_raw_tracepoint_args *ctx)
{
	struct cgroup *cg = (void *)ctx->args[0];
	struct task_struct *task = (void *)ctx->args[2];
	__u8 one = 1;

	if (!cfg_target_cgroup)
		return 0;
	/* Up the cgroup tree through each cgroup's own css (kernfs_node's
	 * parent field was renamed in 6.13; the css parent is stable). */
	for (int depth = 0; depth < 32 && cg; depth++) {
		if (BPF_CORE_READ(cg, kn, id) == cfg_target_cgroup) {
			__u32 tgid = BPF_CORE_READ(task, tgid);

			if (bpf_map_update_elem(&target_tgids, &tgid, &one, BPF_ANY))
				counter_add(COUNTER_TARGETS_FULL, 1);
			return 0;
		}
		struct cgroup_subsys_state *parent = BPF_CORE_READ(cg, self.parent);

		if (!parent)
			return 0;
		cg = BPF_CORE_READ(parent, cgroup);
	}
	return 0;
}

/*
 * sched_process_fork(parent, child), in the forking thread before the
 * child first runs: a traced process's children are traced (--cgroup,
 * --children); with cfg_watch_children, the children of the target and
 * of its watched descendants are watched. A new thread is no new process.
 */
SEC("raw_tp/sched_process_fork")
int follow_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *child = (void *)ctx->args[1];
	__u32 ptgid = bpf_get_current_pid_tgid() >> 32;
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1, zero = 0;

	if (ctgid == ptgid)
		return 0;
	if (cfg_watch_children) {
		if (ptgid != cfg_filter_tgid && !bpf_map_lookup_elem(&watched_tgids, &ptgid))
			return 0;
		if (bpf_map_update_elem(&watched_tgids, &ctgid, &zero, BPF_ANY))
			counter_add(COUNTER_WATCHED_FULL, 1);
		return 0;
	}
	if (!bpf_map_lookup_elem(&target_tgids, &ptgid))
		return 0;
	if (bpf_map_update_elem(&target_tgids, &ctgid, &one, BPF_ANY))
		counter_add(COUNTER_TARGETS_FULL, 1);
	return 0;
}

/*
 * I/O waits (cfg_io_wait), the disk part of a request's budget, timed
 * here rather than read from delay accounting, which kernels with
 * DELAY_DEQUEUE (6.12+) keep wrong: a sleeping task dequeued late is
 * stamped in the context of whichever task dequeues it, and one woken
 * before that is not stamped at all (on 6.18, six in ten of a MariaDB's
 * reads from a throttled disk came short, and some counted as hours). A
 * traced thread that leaves its CPU asleep in io_schedule (in_iowait, and not
 * preempted) notes the runqueue clock and its run_delay; when it gets a
 * CPU back, its wait ran to its wakeup, when the scheduler queued it
 * (sched_info.last_queued, the clock runq_wait reads), less any time it
 * spent queued on another CPU before a migration (run_delay's gain): the
 * rest is runq_wait's. Waits in io_schedule are what delay accounting
 * calls block I/O, and what the kernel reports as iowait.
 */
static __always_inline void io_sleep(struct task_struct *prev)
{
	__u32 tgid = prev->tgid, tid = prev->pid;

	if (cfg_filter_tgid && tgid != cfg_filter_tgid)
		return;
	struct task_pendings *tp = bpf_task_storage_get(&task_pendings, prev, 0, 0);

	if (!tp || !tp->run_delay_seen) { /* as on_switch_jobs: its first switch-in passed the filter */
		if (!wanted(tgid, tid))
			return;
		tp = bpf_task_storage_get(&task_pendings, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!tp)
			return;
	}
	struct cfs_rq *cfs = prev->se.cfs_rq;

	tp->io_since = cfs ? cfs->rq->clock : 0;
	tp->io_run_delay = prev->sched_info.run_delay;
}

/* The wait io_sleep noted ends: the thread was woken at queued (the
 * runqueue clock), and its run_delay is delay before this switch adds. */
static __always_inline void io_wait(struct task_pendings *tp, __u32 tid, __u64 queued, __u64 delay)
{
	__u64 since = tp->io_since, migrated = delay > tp->io_run_delay ? delay - tp->io_run_delay : 0;
	__u64 ns = queued > since ? queued - since : 0;

	tp->io_since = 0;
	thread_io_add(tid, ns > migrated ? ns - migrated : 0);
}

/*
 * A traced thread that serves requests (request.h: serving_mark) gets a
 * CPU: its time on one so far, and when, for a request's counters read
 * while it runs (common.h: task_cpu_ns); any other thread's switch costs
 * a load of task_pendings.serves. It does not run until this switch is
 * done, so its entry has no other writer.
 */
static __always_inline void cpu_in(struct task_struct *next, __u32 tid)
{
	struct thread_stall *ts = thread_stall_entry(tid);

	if (!ts)
		return;
	ts->cpu_in_sum = next->se.sum_exec_runtime;
	ts->cpu_in_ns = bpf_ktime_get_ns();
	/* The run's count as it will read: the switch counts it after this
	 * tracepoint (sched_info_arrive). */
	ts->cpu_in_pcount = next->sched_info.pcount + 1;
}

/*
 * Run-queue wait without a program on wakeups: the scheduler already notes
 * when a task was queued (sched_info.last_queued, in its runqueue's clock,
 * for a woken and for a preempted task alike) and adds the wait to its
 * run_delay as the task gets the CPU, just after this tracepoint. So the
 * wait is that runqueue clock, already updated for this switch, minus
 * last_queued; plus whatever run_delay gained since the thread last got
 * a CPU, which is the part of the wait spent queued on another CPU before
 * a migration (a dequeue adds it to run_delay and restarts last_queued).
 * The total is /proc/PID/schedstat's figure. What run_delay will read once
 * this switch is done is known here, so it is kept for the next one, in
 * the thread's task storage (a hash where there is none): one lookup per
 * switch of a traced thread, and nothing on its switch-out but where it
 * goes to sleep for I/O (io_sleep).
 */
static __always_inline void runq_wait(struct task_struct *next, __u32 tgid, __u32 tid, bool storage,
				      struct task_pendings *tp)
{
	/* Plain loads (tp_btf): a probe read each would be a helper call. */
	__u64 queued = next->sched_info.last_queued;
	struct cfs_rq *cfs = next->se.cfs_rq;
	__u64 clock = cfs ? cfs->rq->clock : 0;
	__u64 dur = queued && clock > queued ? clock - queued : 0;
	__u64 delay = next->sched_info.run_delay;
	__u64 after = delay + dur; /* run_delay once the scheduler adds this wait */

	if (storage) {
		if (tp) {
			__u64 seen = tp->run_delay_seen;

			if (seen && delay > seen - 1)
				dur += delay - (seen - 1);
			tp->run_delay_seen = after + 1;
			if (cfg_io_wait && tp->io_since)
				io_wait(tp, tid, queued, delay);
		}
	} else {
		__u64 *seen = bpf_map_lookup_elem(&runq_delay, &tid);

		if (seen) {
			if (delay > *seen)
				dur += delay - *seen;
			*seen = after;
		} else {
			bpf_map_update_elem(&runq_delay, &tid, &after, BPF_ANY);
		}
	}
	if (!dur || dur < cfg_min_stall_ns[CAUSE_RUNQ_WAIT])
		return;
	stall_count(tgid, tid, CAUSE_RUNQ_WAIT, next, 0, dur, true, false);
	thread_stall_add(tid, CAUSE_RUNQ_WAIT, dur, false, NULL);
	if (!stream_wanted(CAUSE_RUNQ_WAIT, dur))
		return;
	struct event *e = event_reserve(tgid, tid, CAUSE_RUNQ_WAIT, bpf_ktime_get_ns(), dur, next);
	if (!e)
		return;
	comm_of(e->comm, next);
	event_submit(e);
}

/*
 * Whether t is inside a PSI memory stall: its TSK_MEMSTALL flag, which
 * PSI keeps equal to in_memstall (the bit psi_memstall_enter sets) for a
 * task on a run queue or on a CPU. psi_sched_switch has just written
 * prev's and next's psi_flags, so the word is in cache, where in_memstall
 * is on a line the switch may not have touched: this test is on every
 * switch. memstall_wait runs only where PSI is on, which keeps the flags.
 */
static __always_inline bool in_memstall(struct task_struct *t)
{
	return t->psi_flags & (1u << bpf_core_enum_value(enum psi_task_count, NR_MEMSTALL));
}

#define MEMSTALL_FRAMES 24

/* The stack memstall_reason reads: off the BPF stack, which the run-queue
 * path beside it nearly fills. */
struct memstall_ips {
	__u64 ip[MEMSTALL_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct memstall_ips);
} memstall_scratch SEC(".maps");

/*
 * What the current thread, about to sleep in a memory stall, waits in:
 * the wait site of highest priority on its kernel stack (memory.high
 * throttling, then swap-in, then thrashing), else other. Runs only on a
 * switch-out inside a memory stall, where the stall is worth the walk.
 */
static __noinline __u32 memstall_reason(void *ctx)
{
	__u32 zero = 0, found = 0;
	struct memstall_ips *st = bpf_map_lookup_elem(&memstall_scratch, &zero);

	if (!st)
		return MEMSTALL_OTHER;
	__u64 *ips = st->ip;
	long n = bpf_get_stack(ctx, ips, sizeof(st->ip), 0);

	if (n <= 0)
		return MEMSTALL_OTHER;
	n /= sizeof(__u64);
	for (int i = 0; i < MEMSTALL_FRAMES; i++) {
		if (i >= n)
			break;
		for (int s = 0; s < MEMSTALL_SITES; s++)
			if (ips[i] >= cfg_memstall_site_start[s] && ips[i] < cfg_memstall_site_end[s])
				found |= 1u << (s + 1);
	}
	if (found & (1u << MEMSTALL_MEMORY_HIGH))
		return MEMSTALL_MEMORY_HIGH;
	if (found & (1u << MEMSTALL_SWAP_IN))
		return MEMSTALL_SWAP_IN;
	if (found & (1u << MEMSTALL_THRASHING))
		return MEMSTALL_THRASHING;
	return MEMSTALL_OTHER;
}

/*
 * prev leaves the CPU inside a PSI memory stall (it runs this, as
 * current): its memstall_wait opens, unless a timed cause already has
 * the thread (reclaim sleeps inside its own memory stall), which times
 * this wait itself. The nesting rule: a memory stall is timed by the
 * innermost cause numatrace has a begin for; memstall_wait only where
 * there is none.
 */
static __always_inline void memstall_out(void *ctx, struct task_struct *prev, __u64 now)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	__u32 who = who_of(tgid, tid);

	if (!who)
		return;
	struct task_pendings *tp = bpf_task_storage_get(&task_pendings, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!tp) {
		counter_add(COUNTER_LOST_EVENTS, 1);
		return;
	}
	struct pending *p = &tp->slot[SLOT_MEMSTALL];

	/* Still open at a switch-out: the thread has run since, so its
	 * switch-in went unseen, and the wait's end with it. Kept, it would
	 * stretch over the thread's running time (and any reclaim in it):
	 * it is lost, and counted. */
	if (p->start_ns) {
		p->start_ns = 0;
		counter_add(COUNTER_LOST_EVENTS, 1);
	}
#pragma unroll
	for (__u32 slot = 0; slot < SLOT_MEMSTALL; slot++)
		if (tp->slot[slot].start_ns)
			return;
	p->start_ns = now;
	p->who = who;
	p->aux = memstall_reason(ctx);
}

/*
 * next gets the CPU back, still inside its memory stall: the wait that
 * began at its switch-out ends now. Recorded in next's name (this runs in
 * the thread that leaves).
 */
static __always_inline void memstall_in(struct task_struct *next, __u64 now)
{
	struct task_pendings *tp = bpf_task_storage_get(&task_pendings, next, 0, 0);

	if (!tp)
		return;
	struct pending *p = &tp->slot[SLOT_MEMSTALL];
	__u64 start = p->start_ns;

	if (!start)
		return;
	p->start_ns = 0;
	p->mark_ns = now; /* a throttle that ends inside it is nested (throttle.bpf.c) */
	__u64 dur = now - start;
	__u32 tgid = next->tgid, tid = next->pid;

	if (dur < cfg_min_stall_ns[CAUSE_MEMSTALL_WAIT])
		return;
	if (p->who == WHO_CHILD) {
		child_count(tgid, CAUSE_MEMSTALL_WAIT, dur, true, false);
		return;
	}
	stall_count(tgid, tid, CAUSE_MEMSTALL_WAIT, next, 0, dur, true, false);
	/* next's request totals: it does not run until this switch is done. */
	thread_stall_add(tid, CAUSE_MEMSTALL_WAIT, dur, false, NULL);
	if (!stream_wanted(CAUSE_MEMSTALL_WAIT, dur))
		return;
	struct event *e = event_reserve(tgid, tid, CAUSE_MEMSTALL_WAIT, now, dur, next);

	if (!e)
		return;
	comm_of(e->comm, next);
	e->reason = p->aux;
	event_submit(e);
}

/*
 * The stacks of a serving thread's long sleeps inside requests
 * (cfg_wait_stacks): disk reads, lock waits, sleeps, the network, the
 * budget's disk_io and other_wait. A sleep's length is known only as the
 * thread gets a CPU back, when the sleeping thread's user stack can no
 * longer be read (it is not current). So a sleep of a kind that ran past
 * cfg_stacks_min_ns arms the thread: its next WAIT_TRIES sleeps of that
 * kind take their stacks as they begin, here, and each goes out with
 * them if it runs long too (and arms the thread again). At most
 * WAIT_TRIES captures per long sleep; the first long sleep of each kind
 * in a thread, and one after WAIT_TRIES short ones, goes out without
 * stacks, and is counted so.
 */
#define WAIT_TRIES 4

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct stack_event); /* e.ts_ns: the sleep_since it was taken at */
} wait_stacks SEC(".maps");

/* prev, current, leaves its CPU not preempted: it goes to sleep. */
static __always_inline void wait_begin(void *ctx, struct task_struct *prev, bool io)
{
	if (cfg_filter_tgid && prev->tgid != cfg_filter_tgid)
		return;
	struct task_pendings *tp = bpf_task_storage_get(&task_pendings, prev, 0, 0);

	if (!tp || !tp->serves)
		return;
	/* A sleep inside a memory stall, or in a timed stall (an mmap_lock
	 * wait), is that stall's: its cause has the time, and its stacks. */
	if (in_memstall(prev))
		return;
#pragma unroll
	for (__u32 slot = 0; slot < SLOT_MEMSTALL; slot++)
		if (tp->slot[slot].start_ns)
			return;
	__u32 tid = prev->pid;
	struct thread_stall *ts = bpf_map_lookup_elem(&thread_stalls, &tid);

	if (!ts || ts->req_begun == ts->req_ended)
		return; /* between requests: waiting for the next one */
	struct cfs_rq *cfs = prev->se.cfs_rq;
	__u64 since = cfs ? cfs->rq->clock : 0;
	__u32 part = io ? WAIT_DISK : WAIT_OTHER;

	tp->sleep_since = since;
	tp->sleep_pcount = prev->sched_info.pcount;
	tp->sleep_part = part;
	if (!since || !tp->wait_tries[part])
		return;
	tp->wait_tries[part]--;
	struct stack_event *ws = bpf_task_storage_get(&wait_stacks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!ws)
		return;
	stacks_take(ctx, ws, false);
	ws->e.ts_ns = since;
}

/*
 * next gets a CPU back after a sleep wait_begin noted: it slept until it
 * was queued (the runqueue clock runq_wait reads). A long one arms its
 * kind, and goes out, with the stacks its beginning took if it did.
 */
static __always_inline void wait_end(struct task_struct *next, struct task_pendings *tp, __u32 tgid, __u32 tid)
{
	__u64 since = tp->sleep_since, queued = next->sched_info.last_queued;
	__u32 part = tp->sleep_part;

	tp->sleep_since = 0;
	/* A switch-in the program missed (its run count moved) leaves no
	 * telling how long this sleep was. */
	if (!since || next->sched_info.pcount != tp->sleep_pcount)
		return;
	if (queued <= since || queued - since < cfg_stacks_min_ns)
		return;
	__u64 dur = queued - since, now = bpf_ktime_get_ns();

	tp->wait_tries[part & 1] = WAIT_TRIES;
	struct stack_event *ws = bpf_task_storage_get(&wait_stacks, next, 0, 0);
	struct event *e;

	if (ws && ws->e.ts_ns == since) {
		struct stack_event *se = bpf_ringbuf_reserve(&events, sizeof(*se), 0);

		ws->e.ts_ns = 0;
		if (!se) {
			counter_add(COUNTER_LOST_EVENTS, 1);
			return;
		}
		bpf_probe_read_kernel(se, sizeof(*se), ws);
		event_init(&se->e, tgid, tid, 0, now, dur, next);
		se->e.flags = FLAG_STACKS;
		e = &se->e;
	} else {
		e = event_reserve(tgid, tid, 0, now, dur, next);
		if (!e)
			return;
	}
	e->kind = KIND_WAIT;
	e->reason = part;
	comm_of(e->comm, next);
	event_submit(e);
}

/*
 * Every context switch: one program for the jobs that need it, so the
 * hottest hook runs one program, built once per set of jobs so that no
 * switch reads which jobs are on. On this hook each cache line the
 * scheduler has not just touched costs 25-40 ns (make bench), a load of
 * a global among them; prev's and next's psi_flags it has. So a thread
 * that is not in a memory stall costs memstall_wait two loads of those.
 */
static __always_inline int on_switch_jobs(void *ctx, bool preempt, struct task_struct *prev,
					  struct task_struct *next, bool memstall, bool runq)
{
	if (memstall) {
		/* Only a thread whose memstall_wait opened has one to close:
		 * the switch-in looks for it without the filter. */
		if (in_memstall(prev))
			memstall_out(ctx, prev, bpf_ktime_get_ns());
		if (in_memstall(next))
			memstall_in(next, bpf_ktime_get_ns());
	}
	if (!runq)
		return 0;
	/* in_iowait is set only inside io_schedule: a switch there that is
	 * no preemption is the thread going to sleep for its I/O. */
	if (cfg_io_wait && !preempt) {
		bool io = BPF_CORE_READ_BITFIELD(prev, in_iowait);

		if (io)
			io_sleep(prev);
		if (cfg_wait_stacks)
			wait_begin(ctx, prev, io);
	}
	__u32 tid = next->pid;
	__u32 tgid = next->tgid;

	/* The filter first: this runs on every switch of every thread. For
	 * any other thread than a --pid target's it is a compare. */
	if (cfg_filter_tgid && tgid != cfg_filter_tgid)
		return 0;
	/* memstall_wait runs only with task storage: no need to ask. */
	bool storage = memstall || cfg_task_storage;
	struct task_pendings *tp = NULL;

	/* A thread the filter passed has its run_delay in its task storage,
	 * which runq_wait reads anyway, and passes again (a process leaves
	 * the targets only as it exits): no look-up of its process. */
	if (storage)
		tp = bpf_task_storage_get(&task_pendings, next, 0, 0);
	if (!tp || !tp->run_delay_seen) {
		if (!wanted(tgid, tid))
			return 0;
		if (storage)
			tp = bpf_task_storage_get(&task_pendings, next, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	}
	runq_wait(next, tgid, tid, storage, tp);
	if (cfg_request_times && tp && tp->serves) {
		cpu_in(next, tid);
		if (cfg_wait_stacks)
			wait_end(next, tp, tgid, tid);
	}
	return 0;
}

/* Both jobs: memstall_wait and, with a latency source, runq_wait. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch_jobs(ctx, preempt, prev, next, true, true);
}

/* memstall_wait alone: every trace without a latency source. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_ms, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch_jobs(ctx, preempt, prev, next, true, false);
}

/* runq_wait alone: where memstall_wait cannot run, or is left out. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_rq, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch_jobs(ctx, preempt, prev, next, false, true);
}
