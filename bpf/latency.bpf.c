// SPDX-License-Identifier: GPL-2.0
/*
 * Request latency from uprobes on the service's request-handling
 * function, measured in the kernel and streamed as one sample per request
 * with the stall time of the serving thread inside it.
 *
 * C, C++, Rust: a uprobe at the entry and a uretprobe, keyed by thread.
 * Go: uretprobes rewrite the return address, which Go's moving stacks do
 * not survive, so the loader puts a uprobe on each return instruction
 * instead; a goroutine can move between threads, so requests are keyed by
 * the goroutine (its g, in R14 on amd64). Goroutines share threads, so a
 * thread's stall while a request waits need not be that request's: a Go
 * request carries no stall breakdown.
 */
#include "request.h"

struct timed_req {
	__u64 start_ns;
	__u32 tid;
	__u32 _pad;
	__u64 stall_ns[CAUSE_MAX + 1]; /* the thread's totals at the start */
	__u64 times[TIME_MAX];         /* cfg_request_times: its task times at the start */
	__u64 in_stall[TIME_MAX];      /* ...and their part inside its stalls */
};

/*
 * A plain preallocated hash: an LRU's bookkeeping costs hundreds of ns a
 * request. Every request's entry is deleted at its return; one that never
 * returns (a Go panic) stays, and a full map stops timing new requests,
 * which the loss count shows.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct timed_req);
} req_start SEC(".maps");

static __always_inline void request_begin(__u64 key, __u32 tid, __u64 now)
{
	struct timed_req r = { .start_ns = now, .tid = tid };

	request_start(tid, cfg_request_times ? (struct task_struct *)bpf_get_current_task() : NULL, false, true,
		      r.stall_ns, r.times, r.in_stall);
	if (bpf_map_update_elem(&req_start, &key, &r, BPF_ANY))
		counter_add(COUNTER_LOST_EVENTS, 1); /* full: this request goes untimed */
}

/* breakdown: keep the request's stall breakdown (same thread, not Go). */
static __always_inline void request_end(__u64 key, __u64 now, bool breakdown)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct timed_req *r = bpf_map_lookup_elem(&req_start, &key);

	if (!r)
		return;
	struct lat_sample *s = bpf_ringbuf_reserve(&lat_events, sizeof(*s), 0);
	if (!s) {
		counter_add(COUNTER_LOST_EVENTS, 1);
		bpf_map_delete_elem(&req_start, &key);
		return;
	}
	s->ts_ns = now;
	s->lat_ns = now - r->start_ns;
	s->pid = id >> 32;
	s->tid = tid;
	s->flags = 0;
	s->_pad = 0;
	s->conn = 0; /* no connection: each call is whole as it returns */
	if (breakdown && cfg_request_stalls && r->tid == tid) {
		struct request_end e = { .snap = r->stall_ns, .delta = s->stall_ns,
					 .times = cfg_request_times ? r->times : NULL, .in = r->in_stall,
					 .d = s->times_ns, .d_in = s->in_stall_ns, .current = true };

		s->flags = request_since(tid, (struct task_struct *)bpf_get_current_task(), false, true, &e);
	} else {
		__builtin_memset(s->stall_ns, 0, sizeof(s->stall_ns));
	}
	if (!(s->flags & LAT_TIMES)) {
		__builtin_memset(s->times_ns, 0, sizeof(s->times_ns));
		__builtin_memset(s->in_stall_ns, 0, sizeof(s->in_stall_ns));
	}
	__builtin_memset(s->totals_ns, 0, sizeof(s->totals_ns)); /* sockreq's only */
	lat_submit(s);
	bpf_map_delete_elem(&req_start, &key);
}

SEC("uprobe")
int request_enter(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	request_begin(tid, tid, now);
	return 0;
}

SEC("uretprobe")
int request_exit(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	request_end((__u32)bpf_get_current_pid_tgid(), now, true);
	return 0;
}

/* Go on amd64: the running goroutine's g is in R14 (ABIInternal). */
SEC("uprobe")
int request_enter_go(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	request_begin(ctx->r14, (__u32)bpf_get_current_pid_tgid(), now);
	return 0;
}

/* On each return instruction of the Go function. */
SEC("uprobe")
int request_exit_go(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	request_end(ctx->r14, now, false);
	return 0;
}
