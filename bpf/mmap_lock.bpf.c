// SPDX-License-Identifier: GPL-2.0
/*
 * mmap_lock waits (from the lock's slow path where the kernel has
 * lock:contention_*, else from mmap_lock_start_locking to
 * mmap_lock_acquire_returned in the same thread) and khugepaged collapses,
 * which take the mmap_lock for write and are a classic cause of those waits.
 *
 * Older kernels pass a memcg path as the second argument; the loader picks
 * the acquire_returned variant that matches the kernel's BTF.
 */
#include "common.h"

SEC("raw_tp/mmap_lock_start_locking")
int mmap_lock_start(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tgid, tid;
	__u32 who = current_who(&tgid, &tid);

	if (!who)
		return 0;
	struct pending p = { .start_ns = now, .node = -1, .who = who };

	pending_start(tid, SLOT_MMAP_LOCK, &p, true);
	return 0;
}

static __always_inline int mmap_lock_acquired(void *ctx, bool write, bool success)
{
	__u64 now = bpf_ktime_get_ns();
	struct pending p;
	struct event *e = stall_close(ctx, SLOT_MMAP_LOCK, CAUSE_MMAP_LOCK, &p, false, now);

	if (!e)
		return 0;
	e->flags |= (write ? FLAG_WRITE : 0) | (success ? FLAG_SUCCESS : 0);
	event_submit(e);
	return 0;
}

/* mmap_lock_acquire_returned(struct mm_struct *mm, bool write, bool success) */
SEC("raw_tp/mmap_lock_acquire_returned")
int mmap_lock_acquired_w1(struct bpf_raw_tracepoint_args *ctx)
{
	return mmap_lock_acquired(ctx, ctx->args[1], ctx->args[2]);
}

/* mmap_lock_acquire_returned(mm, const char *memcg_path, bool write, bool success) */
SEC("raw_tp/mmap_lock_acquire_returned")
int mmap_lock_acquired_w2(struct bpf_raw_tracepoint_args *ctx)
{
	return mmap_lock_acquired(ctx, ctx->args[2], ctx->args[3]);
}

/*
 * The same waits from the lock's slow path (5.19+). lock:contention_begin
 * and contention_end fire only when a lock is contended, for every kind of
 * kernel lock; the wait is the mmap_lock's when the lock is the current
 * task's own mm->mmap_lock. An acquisition that does not wait runs no
 * program at all, where the mmap_lock tracepoints run two on every one.
 * Not in this wait, where the tracepoints count it: a writer's optimistic
 * spin on a running owner, the path before the task queues, and waits on
 * another process's mmap_lock (/proc/PID/maps, process_vm_readv).
 */
/* include/trace/events/lock.h */
#define LCB_F_SPIN (1U << 0)
#define LCB_F_WRITE (1U << 2)
#define LCB_F_PERCPU (1U << 4)
#define LCB_F_MUTEX (1U << 5)

static __always_inline bool own_mmap_lock(void *lock)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct mm_struct *mm = BPF_CORE_READ(t, mm);

	return mm && lock == (void *)mm + bpf_core_field_offset(struct mm_struct, mmap_lock);
}

/* contention_begin(void *lock, unsigned int flags) */
SEC("raw_tp/contention_begin")
int mmap_contended(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tgid, tid;

	/* Every contended lock on the machine comes here: spinlocks, mutexes
	 * and percpu rwsems leave at once on their flags (an rwsem has only
	 * READ or WRITE), the rest on the filter, before current->mm is read. */
	if ((__u32)ctx->args[1] & (LCB_F_SPIN | LCB_F_MUTEX | LCB_F_PERCPU))
		return 0;
	__u32 who = current_who(&tgid, &tid);

	if (!who || !own_mmap_lock((void *)ctx->args[0]))
		return 0;
	struct pending p = { .start_ns = now, .node = -1, .aux = (__u32)ctx->args[1], .who = who };

	pending_start(tid, SLOT_MMAP_LOCK, &p, true);
	return 0;
}

/* contention_end(void *lock, int ret) */
SEC("raw_tp/contention_end")
int mmap_contention_end(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	/* Only a thread with a wait open reads its mm. */
	if (!is_open((__u32)bpf_get_current_pid_tgid(), SLOT_MMAP_LOCK) || !own_mmap_lock((void *)ctx->args[0]))
		return 0;
	struct pending p;
	struct event *e = stall_close(ctx, SLOT_MMAP_LOCK, CAUSE_MMAP_LOCK, &p, false, now);

	if (!e)
		return 0;
	e->flags |= (p.aux & LCB_F_WRITE ? FLAG_WRITE : 0) | ((int)ctx->args[1] == 0 ? FLAG_SUCCESS : 0);
	event_submit(e);
	return 0;
}

/* mm_collapse_huge_page(struct mm_struct *mm, int isolated, int status): system-wide. */
SEC("raw_tp/mm_collapse_huge_page")
int khugepaged_collapse(struct bpf_raw_tracepoint_args *ctx)
{
	counter_add(COUNTER_KHUGEPAGED_COLLAPSES, 1);
	if ((int)ctx->args[2] == bpf_core_enum_value(enum scan_result, SCAN_SUCCEED))
		counter_add(COUNTER_KHUGEPAGED_COLLAPSED_OK, 1);
	return 0;
}
