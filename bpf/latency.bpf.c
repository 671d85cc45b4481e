// SPDX-License-Identifier: GPL-2.0
/*
 * Request latency from a uprobe and uretprobe on the service's
 * request-handling function: measured per thread, in the kernel, and
 * streamed as one sample per request.
 */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} req_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} lat_events SEC(".maps");

SEC("uprobe")
int request_enter(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&req_start, &tid, &now, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int request_exit(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 *start = bpf_map_lookup_elem(&req_start, &tid);

	if (!start)
		return 0;
	struct lat_sample *s = bpf_ringbuf_reserve(&lat_events, sizeof(*s), 0);
	if (s) {
		s->ts_ns = now;
		s->lat_ns = now - *start;
		s->pid = id >> 32;
		s->tid = tid;
		bpf_ringbuf_submit(s, 0);
	} else {
		counter_add(COUNTER_LOST_EVENTS, 1);
	}
	bpf_map_delete_elem(&req_start, &tid);
	return 0;
}
