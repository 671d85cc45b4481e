/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every struct and enum shared between the BPF programs and Go lives here.
 * bpf2go generates the Go side with -type; never mirror these by hand.
 * Structs are padded explicitly so C and Go agree without packing.
 */
#ifndef NUMATRACE_H
#define NUMATRACE_H

/* What froze a thread. The Go names are in internal/stall. */
enum cause {
	CAUSE_DIRECT_RECLAIM = 0,
	CAUSE_MEMCG_RECLAIM = 1,
	CAUSE_NODE_RECLAIM = 2,
	CAUSE_COMPACTION = 3,
	CAUSE_NUMA_MIGRATION = 4,
	CAUSE_NUMA_TASK_MOVE = 5,
	CAUSE_TASK_MIGRATION = 6,
	CAUSE_MMAP_LOCK = 7,
	CAUSE_RUNQ_WAIT = 8, /* not memory: waiting for a CPU (only with a latency source) */
	CAUSE_RECLAIM_THROTTLE = 9, /* reclaim_throttle(): reclaim waiting on writeback, isolation, progress */
	CAUSE_DIRTY_THROTTLE = 10,  /* balance_dirty_pages() paused a writer over the dirty limit */
	CAUSE_MEMSTALL_WAIT = 11,   /* off CPU inside a PSI memory stall no other cause times */
	CAUSE_MAX = 12,
};

/* What a memstall_wait waited in (event.reason), told from the kernel
 * stack at the switch-out: the innermost known wait site, by priority. */
enum memstall_reason {
	MEMSTALL_OTHER = 0,
	MEMSTALL_THRASHING = 1,   /* a refault of a recently evicted page (folio_wait_bit_common) */
	MEMSTALL_MEMORY_HIGH = 2, /* throttled over memory.high (mem_cgroup_handle_over_high) */
	MEMSTALL_SWAP_IN = 3,     /* reading a workingset page back from swap (swap_read_folio) */
	MEMSTALL_SITES = 3,       /* the sites the loader names: reasons 1..3 */
};

/* What a ring-buffer record is. */
enum event_kind {
	KIND_STALL = 0,
	KIND_EXIT = 1, /* a traced thread exited; carries its last comm */
	/* A serving thread slept at least cfg_stacks_min_ns inside a request,
	 * off CPU for no memory stall (sched.bpf.c: wait_end): reason is enum
	 * wait_part, and FLAG_STACKS says its stacks follow. */
	KIND_WAIT = 2,
};

/* What a KIND_WAIT waited for: the budget's parts off CPU. */
enum wait_part {
	WAIT_DISK = 0,  /* asleep in io_schedule (in_iowait): disk_io */
	WAIT_OTHER = 1, /* any other sleep: a lock, another thread, a timer, the network: other_wait */
};

/* Bits in event.flags. */
enum event_flag {
	FLAG_SOFTLIMIT = 1,   /* memcg_reclaim: the soft-limit pair */
	FLAG_WRITE = 2,       /* mmap_lock: write lock */
	FLAG_SUCCESS = 4,     /* mmap_lock: acquired */
	FLAG_SWAP = 8,        /* numa_task_move: sched_swap_numa */
	FLAG_STICK = 16,      /* numa_task_move: sched_stick_numa (move failed) */
	FLAG_GROUP_DEAD = 32, /* exit: last thread of the process */
	FLAG_NESTED = 64,     /* ran inside another open stall of the thread (not added twice) */
	FLAG_STACKS = 128,    /* the record is a struct stack_event: the thread's stacks follow */
};

/* System-wide per-CPU counters (index into the counters map). */
enum counter_id {
	COUNTER_LOST_EVENTS = 0,       /* ring-buffer reserve failures */
	COUNTER_KSWAPD_WAKEUPS = 1,
	COUNTER_KHUGEPAGED_COLLAPSES = 2,
	COUNTER_KHUGEPAGED_COLLAPSED_OK = 3,
	COUNTER_KCOMPACTD_PASSES = 4,  /* compaction by kcompactd */
	COUNTER_KCOMPACTD_NS = 5,
	COUNTER_PROACTIVE_PASSES = 6,  /* compaction outside an allocation (sysctl, proactive) */
	COUNTER_PROACTIVE_NS = 7,
	COUNTER_DIRECT_COMPACT_ATTEMPTS = 8,
	COUNTER_TARGETS_FULL = 9,      /* a followed process did not fit in target_tgids */
	COUNTER_HIST_NEW = 10,         /* thread x cause histograms made: less those in the map, evicted */
	COUNTER_WATCHED_GONE = 11,     /* watched descendants that stalled and have exited */
	COUNTER_WATCHED_FULL = 12,     /* a descendant did not fit in watched_tgids */
	COUNTER_STACKS_TAKEN = 13,     /* streamed stalls at or over cfg_stacks_min_ns: their stacks were asked for */
	COUNTER_KSTACK_LOST = 14,      /* ... whose kernel stack was not taken (no room in the ring, or the walk failed) */
	COUNTER_USTACK_LOST = 15,      /* ... whose user stack was not taken (no room, or the kernel could not walk it) */
	COUNTER_MAX = 16,
};

/* Filter modes, set in .rodata before load. */
enum filter_mode {
	FILTER_NONE = 0,
	FILTER_TGIDS = 1, /* --pid, --cgroup: the target_tgids map */
	FILTER_TID = 2,   /* --tid */
};

#define HIST_SLOTS 40 /* log2(ns): slot i holds [2^i, 2^(i+1)) ns, up to ~18 min */
#define COMM_LEN 16

/* One closed stall, or a thread exit. ts_ns is CLOCK_MONOTONIC at the end. */
struct event {
	__u64 ts_ns;
	__u64 dur_ns;
	__u64 pages;     /* reclaimed, or migrated successfully */
	__u64 cgroup_id; /* kernfs id of the thread's memory cgroup (v1 or v2) */
	__u64 total_ns;  /* compaction: the attempt's time so far, this pass included */
	__u32 kind;      /* enum event_kind */
	__u32 cause;     /* enum cause */
	__u32 pid;
	__u32 tid;
	__u32 gfp;
	__u32 flags;     /* enum event_flag */
	__s32 order;
	__s32 node;      /* node_reclaim: node; numa_task_move: source node */
	__s32 dst_node;
	__s32 src_cpu;
	__s32 dst_cpu;
	__s32 reason;    /* numa_migration: enum migrate_reason */
	__s32 mode;      /* numa_migration: migrate_mode; compaction: priority */
	__s32 status;    /* compaction: compact_result */
	__u32 other_tid; /* numa_task_move swap/stick: the other task */
	__u32 cpu;       /* CPU the event was seen on */
	__u32 pass;      /* compaction: zone pass number within the attempt, from 1 */
	__u32 _pad;
	__u64 limit;     /* dirty_throttle: the dirty limit in pages (pages holds the dirty count) */
	char comm[COMM_LEN];
};

#define STACK_DEPTH 127 /* the kernel's default perf_event_max_stack */
#define USER_SP_WORDS 32

/*
 * A stall long enough to carry its stacks (cfg_stacks_min_ns, FLAG_STACKS
 * in e.flags): the event, then the stalled thread's kernel and user
 * stacks, innermost first, as bpf_get_stack took them at the stall's end,
 * inside the code path that stalled. Each stall has its own copy, so no
 * stack is ever lost to another's slot or a full map; user space
 * deduplicates them.
 */
struct stack_event {
	struct event e;
	__s32 kernel_len;   /* bytes of kernel[] filled, or a negative errno */
	__s32 user_len;     /* bytes of user[] filled, or a negative errno */
	/* The user registers' rbp, which the frame-pointer walk started from,
	 * and the words at the user stack pointer (all 0 if not read): where a
	 * leaf that keeps no frame pointer (a libc syscall wrapper) returns
	 * to is among them, and the walk skips it; where the leaf's unwind
	 * table puts it, user space reads it. */
	__u64 user_bp;
	/* The process's exec (task_struct's self_exec_id): user space reads
	 * its mappings again for a stack of a later exec than it read them in. */
	__u64 exec_id;
	__u64 user_sp[USER_SP_WORDS];
	__u64 kernel[STACK_DEPTH];
	__u64 user[STACK_DEPTH];
};

struct hist_key {
	__u32 tid;
	__u32 cause;
};

/*
 * Exact per-thread, per-cause totals: they survive ring-buffer drops.
 * For compaction one count is one attempt, however many zone passes it took.
 */
struct hist {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	__u64 nested_ns; /* part of total_ns spent inside another cause's stall */
	__u32 pid;
	__u32 _pad;
	char comm[COMM_LEN];
	__u64 slots[HIST_SLOTS];
};

/* task_migration is too hot to stream; it is counted here per thread. */
/*
 * Per-thread migration counts. With the migrations iterator, migrations is
 * the thread's own se.nr_migrations, copied when it exits (start_ns tells
 * a reused tid apart); without it, the running count.
 */
struct thread_counts {
	__u64 migrations;
	__u64 cross_node;
	__u64 start_ns;
	__u32 pid;
	__u32 _pad;
	char comm[COMM_LEN];
};

/* One live thread's migration count, as the migrations iterator writes it. */
struct migr_rec {
	__u64 nr_migrations; /* task->se.nr_migrations: every CPU change since fork */
	__u64 start_ns;      /* task->start_time */
	__u32 tid;
	__u32 pid;
	char comm[COMM_LEN];
};

/*
 * What the untraced descendants of a --pid target stalled, by cause
 * (cfg_watch_children): only added up, never streamed, so the report
 * can say that the work is in the children. Like struct hist, one count
 * per stall (per compaction attempt).
 */
struct child_total {
	__u64 count;
	__u64 total_ns;
	__u64 nested_ns; /* part of total_ns inside another of the child's stalls */
};

/*
 * A thread's time as the kernel counts it for every task: on a CPU
 * (se.sum_exec_runtime), runnable and waiting for one (sched_info.run_delay),
 * and waiting for block I/O: asleep in io_schedule (in_iowait), timed by
 * the sched_switch program where it runs (cfg_io_wait: thread_stall's
 * io_wait_ns), else delay accounting's blkio_delay (kernel.task_delayacct).
 * A timed request reads them at its two ends: with its stalls, where its
 * time went.
 */
enum task_time {
	TIME_CPU = 0,
	TIME_RUNQ = 1,
	TIME_IO = 2,
	TIME_MAX = 3,
};

/*
 * A traced thread's stall time so far, per cause, kept only while a
 * request timer runs (cfg_request_stalls). Slot CAUSE_MAX is the freeze
 * time: a stall nested in another counted once. in_stall is its task
 * times (enum task_time) inside that freeze time: reclaim runs on a CPU,
 * waits for one and for I/O, and a request's budget counts that time once,
 * as the stall's.
 */
struct thread_stall {
	__u64 ns[CAUSE_MAX + 1];
	__u64 in_stall[TIME_MAX];
	/* cfg_io_wait: the thread's I/O wait so far (TIME_IO), each wait
	 * added as the thread gets a CPU back (sched.bpf.c: io_wait) */
	__u64 io_wait_ns;
	/* A thread that serves requests, with the sched_switch program: its
	 * sum_exec_runtime and the clock as it last got a CPU (sched.bpf.c:
	 * cpu_in) or was marked serving (request.h: serving_mark), from
	 * which its time on one is read while it runs; the scheduler adds to
	 * sum_exec_runtime only at ticks and switches. */
	__u64 cpu_in_sum;
	__u64 cpu_in_ns;
	/* ...and its sched_info.pcount in that run: a reading in another run
	 * (a switch-in the program missed) must not add the time since */
	__u64 cpu_in_pcount;
	__u64 serving; /* its task_pendings.serves is set */
	/* Requests begun on the thread (request_start), and that count as a
	 * request last ended on it (request_since): it is inside a request
	 * while they differ, and only then are its sleeps' stacks taken
	 * (sched.bpf.c: wait_begin). A request that never ends is forgotten
	 * at the next one that does. */
	__u64 req_begun;
	__u64 req_ended;
};

/* Bits in lat_sample.flags. */
enum lat_flag {
	LAT_STALLS = 1, /* stall_ns holds the request's stalls (it ended on the thread it began on) */
	LAT_PIPELINED = 2, /* socket exchanges: more bytes arrived after the server read and before it wrote */
	/* sockreq: the record ends before stall_ns (LAT_HEAD_SIZE bytes): the
	 * exchange stalled not at all, and the thread's totals are what they
	 * were at the connection's record before. Most exchanges: a quarter
	 * of the ring's bytes and of the cache lines the reader pulls over. */
	LAT_PLAIN = 4,
	/* times_ns holds the serving thread's task times inside the request
	 * (it ended on the thread it began on, and the kernel let them be
	 * read at both ends), and in_stall_ns (unless LAT_PLAIN) the part of
	 * them inside its stalls. */
	LAT_TIMES = 8,
};

/* One request timed in the kernel: by the latency uprobes, or on a socket (sockreq). */
struct lat_sample {
	__u64 ts_ns; /* CLOCK_MONOTONIC when the request returned */
	__u64 lat_ns;
	__u32 pid;
	__u32 tid;
	__u32 flags; /* enum lat_flag */
	__u32 _pad;
	/* sockreq: the connection (its socket's address), 0 for the uprobes.
	 * Every write of a response emits the exchange so far; user space
	 * keeps a connection's latest until it is whole (same conn, same
	 * start: a later write of the same response replaces it). */
	__u64 conn;
	/* With LAT_TIMES: the serving thread's task times inside the request
	 * (enum task_time). In the head: a request that stalled not at all
	 * has them too. */
	__u64 times_ns[TIME_MAX];
	__u64 stall_ns[CAUSE_MAX + 1]; /* the thread's stall time inside the request; [CAUSE_MAX] freeze */
	/* sockreq, with LAT_STALLS: the thread's stall totals at ts_ns. Against
	 * the connection's exchange before, they say what the thread stalled
	 * while the connection was idle (a paced client's late request). */
	__u64 totals_ns[CAUSE_MAX + 1];
	/* With LAT_TIMES: the part of times_ns inside the request's stalls
	 * (their freeze time), counted there and not again. */
	__u64 in_stall_ns[TIME_MAX];
};

#define LAT_HEAD_SIZE __builtin_offsetof(struct lat_sample, stall_ns)

#endif
