// SPDX-License-Identifier: GPL-2.0
/*
 * Requests timed on the target's own inbound TCP connections, with no
 * parsing and no preparation: an exchange starts when the first byte of a
 * request arrives at the socket (so time queued while the server was
 * frozen counts, as the client sees it) and ends when the last byte of
 * its response was sent: the socket's transmit clock, read as the last
 * write returns or as the next request arrives, whichever is first. Not
 * the write's return itself: a server thread held up after its send
 * (preempted, or its vCPU taken by the host) keeps the call from
 * returning while the client already has the reply, and on the same
 * machine the client may send again before it returns.
 *
 *   tcp_probe (a segment with data reaches an established socket): stamps
 *     the arrival of an idle or answered connection's request.
 *   sock_send_length (6.3+; before, sys_exit of the read/write family
 *     and accept, the fd mapped to its socket): makes a connection the
 *     target's (if its local port is one of the target's listening
 *     ports), notes the thread serving it, and emits the exchange so far
 *     as each write of the response returns. The server's reads need no
 *     hook: whether it has read what arrived is the socket's own
 *     copied_seq against rcv_nxt, read as the next bytes arrive. Not hooking sock_recv_length saves two program
 *     runs a request on loopback (the server's read and the client's),
 *     measured at 2% of a saturated redis with empty programs.
 *   inet_sock_set_state: a connection leaving ESTABLISHED is forgotten.
 *
 * The port is no owner: another user's server may listen on the same
 * port number at another address, and a process the target does not
 * follow may serve a connection it accepted. So a connection is the
 * target's only once one of the target's own threads has accepted, read
 * or written it (conn_own). Until then its requests are stamped as they
 * arrive, so that a first request that came before the accept is timed,
 * but nothing of it is emitted: an exchange that the next request's
 * arrival ends meanwhile is held, and goes out as the connection becomes
 * the target's (a stranger's never does).
 *
 * Each write of a response emits the exchange up to it, named by its
 * connection and start: user space keeps a connection's latest one and
 * hands it on once no write has extended it for a while, or the next
 * exchange begins, or the run ends. So the last exchange of a connection
 * that stays open is timed, and a connection that is idle for seconds
 * between requests files each exchange on time.
 * Pipelined requests are timed as one exchange; bytes that arrive once
 * the server has read all that came before, and before it wrote, mark the
 * exchange LAT_PIPELINED, so
 * that it is reported, not misread. Bytes that arrive once the server has
 * queued some of its response (its write_seq moved), before that write
 * returned, are the next request: the exchange ends there, and the
 * return of that write is its tail, not the next one's response. Not atomic: the softirq and the
 * serving thread may touch a connection at once on two CPUs; a lost race
 * misplaces one exchange's boundary, never a connection.
 */
#include "request.h"

/* x86_64 syscall numbers of the calls a server reads and writes a socket with. */
#define NR_READ 0
#define NR_WRITE 1
#define NR_READV 19
#define NR_WRITEV 20
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_SENDMSG 46
#define NR_RECVMSG 47
#define NR_ACCEPT 43
#define NR_ACCEPT4 288

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define AF_INET 2
#define TCPHDR_FIN 0x01
#define AF_INET6 10

enum sockreq_flag {
	CONN_PIPELINED = 2, /* bytes arrived after the server read the request, before a write */
	CONN_STALLS = 4,    /* stall_start is tid's totals at the arrival */
	CONN_TAIL = 8,      /* a write of the last exchange's response has yet to return */
	CONN_HELD_PIPELINED = 16, /* the held exchange carried pipelined bytes */
	CONN_TIMES = 32,    /* times_start is start_tid's task times at the arrival */
};

/* One connection's exchange in progress. */
struct sockreq_conn {
	__u64 start_ns; /* arrival of the request's first byte; 0: idle, or begun before we knew */
	__u64 end_ns;   /* return of the response's last write so far; 0: none yet */
	__u32 tid;      /* the thread that last read or wrote the socket */
	__u32 pid;      /* its process; 0: not the target's (yet), nothing is emitted */
	__u32 flags;    /* enum sockreq_flag */
	__u32 seq_start; /* the server's write_seq at the arrival */
	__u64 stall_start[CAUSE_MAX + 1]; /* tid's stall totals at the arrival */
	__u64 stall_ns[CAUSE_MAX + 1];    /* the exchange's stalls up to end_ns */
	__u64 stall_totals[CAUSE_MAX + 1]; /* the writer's totals at end_ns */
	__u64 emitted_sum; /* the sum of the totals in the connection's last record: LAT_PLAIN */
	__u32 stall_flags;                /* LAT_STALLS when stall_ns holds them */
	__u32 start_tid;                  /* whose totals stall_start are */
	/* An exchange the next request's arrival ended while pid was 0:
	 * emitted as the connection becomes the target's. held_end 0: none. */
	__u64 held_start;
	__u64 held_end;
	__u64 times_start[TIME_MAX];    /* start_tid's task times at the arrival (CONN_TIMES) */
	__u64 in_stall_start[TIME_MAX]; /* ...and their part inside its stalls */
	__u64 times_ns[TIME_MAX];       /* the exchange's task times up to end_ns (times_flags) */
	__u64 in_stall_ns[TIME_MAX];
	__u32 times_flags;              /* LAT_TIMES when times_ns holds them */
	__u32 _pad;
	/* tid's task_struct, as its thread last read or wrote the socket: its
	 * counters are read from it as a request arrives, in the softirq,
	 * where the current task is anyone's. An address, not a reference:
	 * each read checks it is still tid's (serving_task). */
	__u64 task;
};

/*
 * The serving thread tid's task, read through the address c keeps: NULL
 * if there is none, or it is no longer tid's (the thread exited, and its
 * task_struct, freed after an RCU grace period, was reused). No lookup of
 * the pid and no reference: a request's start reads a few of its fields
 * with probe reads, which fault safely, and is done.
 */
static __always_inline struct task_struct *serving_task(struct sockreq_conn *c, __u32 tid)
{
	struct task_struct *t = (struct task_struct *)c->task;

	if (!t || BPF_CORE_READ(t, pid) != (pid_t)tid)
		return NULL;
	return t;
}

/* The target's inbound connections, by socket. An LRU: a connection
 * whose close was missed must not keep its entry for ever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct sockreq_conn);
} conns SEC(".maps");

/* The local ports whose connections are timed: the target's listening
 * ports, or --latency-port; a bitmap, bit p%64 of word p/64 for port p
 * (host order). Set before attach. An array, so that its lookup is
 * inlined: every segment of every socket of the machine asks it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536 / 64);
	__type(key, __u32);
	__type(value, __u64);
} req_ports SEC(".maps");

static __always_inline bool port_timed(__u16 port)
{
	__u32 word = port / 64;
	__u64 *bits = bpf_map_lookup_elem(&req_ports, &word);

	return bits && (*bits & (1ULL << (port % 64)));
}

/*
 * Where every hook is tp_btf (the sock_*_length path), a connection's
 * state lives in the socket's own storage: a miss, which is every segment
 * of every other socket, is one load, not a hash lookup, and the state
 * goes with the socket. Otherwise (raw_tp, before 6.3) the conns hash.
 */
const volatile __u32 cfg_sk_storage = 0;

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sockreq_conn);
} conn_storage SEC(".maps");

static __always_inline struct sockreq_conn *conn_get(struct sock *sk)
{
	if (cfg_sk_storage)
		return bpf_sk_storage_get(&conn_storage, sk, 0, 0);
	__u64 key = (__u64)sk;

	return bpf_map_lookup_elem(&conns, &key);
}

/* A zeroed connection state, never written: what a new one starts from
 * in the hash (a copy on the stack would not fit beside the rest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sockreq_conn);
} conn_blank SEC(".maps");

/* Makes sk's state, zeroed, if it has none; returns it. */
static __always_inline struct sockreq_conn *conn_make(struct sock *sk)
{
	if (cfg_sk_storage)
		return bpf_sk_storage_get(&conn_storage, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	__u64 key = (__u64)sk;
	__u32 zero = 0;
	struct sockreq_conn *blank = bpf_map_lookup_elem(&conn_blank, &zero);

	if (!blank)
		return NULL;
	bpf_map_update_elem(&conns, &key, blank, BPF_NOEXIST);
	return bpf_map_lookup_elem(&conns, &key);
}

static __always_inline void conn_forget(struct sock *sk)
{
	if (cfg_sk_storage) {
		bpf_sk_storage_delete(&conn_storage, sk);
		return;
	}
	__u64 key = (__u64)sk;

	bpf_map_delete_elem(&conns, &key);
}

/* Reserves a record: the head alone (LAT_PLAIN) or the whole of it. */
static __always_inline struct lat_sample *lat_reserve(bool plain)
{
	struct lat_sample *s = plain ? bpf_ringbuf_reserve(&lat_events, LAT_HEAD_SIZE, 0) :
				       bpf_ringbuf_reserve(&lat_events, sizeof(*s), 0);

	if (!s)
		counter_add(COUNTER_LOST_EVENTS, 1);
	return s;
}

/* Emits c's exchange from start to end, the return of tid's write of its
 * response; pipelined: it carried pipelined requests. start and end are
 * the caller's own reads: the softirq may begin the next exchange
 * meanwhile (zeroing c->end_ns, moving c->start_ns), and a record read
 * from c then had time 0 and a latency of minus the next start (1 to 28
 * records in 10 s of redis-benchmark with one connection). */
static __always_inline void exchange_emit(struct sock *sk, struct sockreq_conn *c, __u64 start, __u64 end, __u32 tid,
					  bool pipelined)
{
	__u64 lat = end - start, stalled = 0, sum = 0;

#pragma unroll
	for (int i = 0; i <= CAUSE_MAX; i++) {
		stalled |= c->stall_ns[i];
		sum += c->stall_totals[i];
	}
	bool plain = c->stall_flags && !stalled && sum == c->emitted_sum;
	struct lat_sample *s = lat_reserve(plain);

	if (!s)
		return;
	s->ts_ns = end;
	s->lat_ns = lat;
	s->pid = c->pid;
	s->tid = tid;
	s->flags = c->stall_flags | (pipelined ? LAT_PIPELINED : 0) | (plain ? LAT_PLAIN : 0);
	s->_pad = 0;
	s->conn = (__u64)sk;
	s->flags |= c->times_flags;
#pragma unroll
	for (int i = 0; i < TIME_MAX; i++)
		s->times_ns[i] = c->times_flags ? c->times_ns[i] : 0;
	if (!plain) {
		/* A stall is added to the totals as it ends: one that began
		 * before the request arrived is counted whole. No more than the
		 * request's own time can have been inside it. */
#pragma unroll
		for (int i = 0; i <= CAUSE_MAX; i++) {
			s->stall_ns[i] = c->stall_ns[i] < lat ? c->stall_ns[i] : lat;
			s->totals_ns[i] = c->stall_flags ? c->stall_totals[i] : 0;
		}
#pragma unroll
		for (int i = 0; i < TIME_MAX; i++)
			s->in_stall_ns[i] = c->times_flags ? c->in_stall_ns[i] : 0;
	}
	c->emitted_sum = c->stall_flags ? sum : 0;
	lat_submit(s);
}

/* A request's first byte has arrived at c; seq is the server's write_seq.
 * btf: the program is tp_btf, which can look the serving thread up. */
static __always_inline void exchange_begin(struct sockreq_conn *c, __u64 now, __u32 seq, bool btf)
{
	c->start_ns = now;
	c->seq_start = seq;
	c->end_ns = 0;
	c->stall_flags = 0;
	c->times_flags = 0;
	c->flags = 0;
	if (c->tid && cfg_request_stalls) {
		c->start_tid = c->tid;
		c->flags = CONN_STALLS;
		struct task_struct *t = cfg_request_times ? serving_task(c, c->tid) : NULL;

		request_start(c->tid, t, false, t && BPF_CORE_READ(t, on_cpu), c->stall_start, c->times_start,
			      c->in_stall_start);
		if (t)
			c->flags |= CONN_TIMES;
	}
}

/*
 * sk as the tcp_sock it is. btf (a tp_btf argument): one helper call, and
 * its fields are then plain loads, where raw_tp reads each with a probe
 * read, a helper call a field (four to five an exchange). A literal at
 * each call, as for arrival. NULL if sk is no TCP socket.
 */
static __always_inline struct tcp_sock *tcp_of(struct sock *sk, bool btf)
{
	return btf ? bpf_skc_to_tcp_sock(sk) : (struct tcp_sock *)sk;
}

#define TCP_FIELD(btf, tp, field) ((btf) ? (tp)->field : BPF_CORE_READ(tp, field))

/*
 * When sk last sent, if all it was given has gone out since start: the
 * clock TCP refreshes as it transmits (and as it receives, which is later
 * still, and no later than now). Otherwise now: data still queued goes
 * out later, and now is the best bound there is.
 */
static __always_inline __u64 sent_at(struct sock *sk, __u64 start, __u64 now, bool btf)
{
	struct tcp_sock *tp = tcp_of(sk, btf);

	if (!tp || !bpf_core_field_exists(tp->tcp_clock_cache))
		return now;
	__u32 queued = TCP_FIELD(btf, tp, write_seq), sent = TCP_FIELD(btf, tp, snd_nxt);
	__u64 clock = TCP_FIELD(btf, tp, tcp_clock_cache);

	return queued == sent && clock > start && clock < now ? clock : now;
}

/* c's exchange ends: its response's latest write, by tid, returned (or
 * the next request arrived) at now. current: tid is the current thread
 * (its write returning), not the softirq's. */
static __always_inline void exchange_end(struct sock *sk, struct sockreq_conn *c, __u32 tid, __u64 now, bool btf,
					 bool current)
{
	/* One read: the other CPU's arrival may move it (exchange_emit). */
	__u64 start = *(volatile __u64 *)&c->start_ns;

	if (!start || now <= start)
		return; /* that arrival began an exchange after this write */
	__u64 end = sent_at(sk, start, now, btf);

	c->end_ns = end;
	c->stall_flags = 0;
	c->times_flags = 0;
	if ((c->flags & CONN_STALLS) && c->start_tid == tid) {
		struct request_end e = { .snap = c->stall_start, .delta = c->stall_ns, .totals = c->stall_totals,
					 .times = c->times_start, .in = c->in_stall_start,
					 .d = c->times_ns, .d_in = c->in_stall_ns };
		__u32 flags = 0;

		e.current = current;
		if (!(c->flags & CONN_TIMES)) {
			e.times = NULL;
			flags = request_since(tid, NULL, btf, false, &e);
		} else if (current && btf) {
			flags = request_since(tid, bpf_get_current_task_btf(), true, true, &e);
		} else if (current) {
			flags = request_since(tid, (struct task_struct *)bpf_get_current_task(), false, true, &e);
		} else { /* the softirq ends it: the writer's task as it kept it */
			struct task_struct *t = serving_task(c, tid);

			flags = request_since(tid, t, false, t && BPF_CORE_READ(t, on_cpu), &e);
		}
		c->stall_flags = flags & LAT_STALLS;
		c->times_flags = flags & LAT_TIMES;
	}
	exchange_emit(sk, c, start, end, tid, c->flags & CONN_PIPELINED);
}

/* As exchange_end, at the next request's arrival, for a connection that
 * is not yet the target's (pid 0): its exchange is held, not emitted.
 * Returns CONN_HELD_PIPELINED if it carried pipelined bytes, for the
 * flags of the exchange that begins. No serving thread has touched it:
 * the softirq alone writes it, and it has no stalls to read. */
static __always_inline __u32 exchange_hold(struct sock *sk, struct sockreq_conn *c, __u64 now, bool btf)
{
	__u64 start = c->start_ns;

	c->held_start = start;
	c->held_end = sent_at(sk, start, now, btf);
	return c->flags & CONN_PIPELINED ? CONN_HELD_PIPELINED : 0;
}

/*
 * btf: the hook is tp_btf, whose arguments may be read directly; raw_tp's
 * need a probe read. A literal at each call, so only one branch is built.
 * The port is asked first: most segments are of sockets not timed (the
 * client's side of each exchange, above all), and that is one load.
 */
static __always_inline void arrival(struct sock *sk, const struct sk_buff *skb, bool btf)
{
	__u16 port = btf ? sk->__sk_common.skc_num : BPF_CORE_READ(sk, __sk_common.skc_num);

	if (!port_timed(port))
		return;
	if (btf) {
		/* TCP has filled the segment's control block (tcp_v4_fill_cb,
		 * tcp_v6_fill_cb) before it is handed to the socket: its
		 * sequence span is the payload, and a FIN's one. */
		const struct tcp_skb_cb *cb = (const void *)skb->cb;

		if (cb->end_seq - cb->seq <= (cb->tcp_flags & TCPHDR_FIN ? 1 : 0))
			return; /* an ACK, or a FIN, no data */
	} else {
		/* skb->data is at the TCP header here: the payload is what follows it. */
		unsigned char *th = BPF_CORE_READ(skb, data);
		__u32 len = BPF_CORE_READ(skb, len);
		__u8 doff = 0;

		bpf_probe_read_kernel(&doff, 1, th + 12);
		if (len <= (__u32)(doff >> 4) * 4)
			return; /* an ACK, no data */
	}
	struct tcp_sock *tp = tcp_of(sk, btf);

	if (!tp)
		return;
	struct sockreq_conn *c = conn_get(sk);
	__u64 now = bpf_ktime_get_ns();
	__u32 seq = TCP_FIELD(btf, tp, write_seq);

	if (!c) {
		/* New, or accepted before we attached and its server has not
		 * read or written it since: frozen, as likely as not, in the
		 * incident the user attached for. Its request is timed from
		 * now; the connection is the target's (pid, tid) from its
		 * first accept, read or write by one of the target's threads. */
		c = conn_make(sk);
		if (!c)
			return;
	}
	if (c->end_ns) {
		exchange_begin(c, now, seq, btf); /* the next request: the last one's response was whole */
	} else if (c->start_ns && seq != c->seq_start && now > c->start_ns && (c->pid || !c->held_end)) {
		/* The response is on its way and its write has not returned:
		 * the client has it, or this would not be its next request.
		 * Held if the connection is not the target's yet (its first
		 * write is returning): one such exchange at most. */
		__u32 held = 0;

		if (c->pid)
			exchange_end(sk, c, c->tid, now, btf, false);
		else
			held = exchange_hold(sk, c, now, btf);
		exchange_begin(c, now, seq, btf);
		c->flags |= CONN_TAIL | held;
	} else if (c->start_ns) {
		/* More of the request, unless the server has read all that
		 * came before this segment (tcp_probe runs before it is queued):
		 * then it is the next request, sent before the reply. */
		if (TCP_FIELD(btf, tp, copied_seq) == TCP_FIELD(btf, tp, rcv_nxt))
			c->flags |= CONN_PIPELINED;
	} else {
		exchange_begin(c, now, seq, btf);
	}
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(sockreq_arrival_btf, struct sock *sk, const struct sk_buff *skb)
{
	arrival(sk, skb, true);
	return 0;
}

SEC("raw_tp/tcp_probe")
int BPF_PROG(sockreq_arrival, struct sock *sk, const struct sk_buff *skb)
{
	arrival(sk, skb, false);
	return 0;
}

/* The socket behind the current task's fd, or NULL. */
static __always_inline struct sock *fd_sock(__u64 fd)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;

	bpf_probe_read_kernel(&f, sizeof(f), fds + fd);
	if (!f || (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return NULL;
	struct socket *so = BPF_CORE_READ(f, private_data);

	return so ? BPF_CORE_READ(so, sk) : NULL;
}

/* c for sk, made if sk is an inbound connection of a timed port. */
static __always_inline struct sockreq_conn *conn_learn(struct sock *sk)
{
	struct sockreq_conn *c = conn_get(sk);

	if (c)
		return c;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	__u16 port = BPF_CORE_READ(sk, __sk_common.skc_num);

	if ((family != AF_INET && family != AF_INET6) || !port_timed(port))
		return NULL;
	/* An exchange already under way began before we knew of it: it is
	 * not timed (its start_ns stays 0 until the next request). */
	return conn_make(sk);
}

/*
 * c is the target's: tid, a thread of the target's process tgid, has
 * accepted, read or written it. The exchange held while it was nobody's
 * goes out now, as the writer's (the write returning is most likely its
 * tail: CONN_TAIL).
 */
static __always_inline void conn_own(struct sock *sk, struct sockreq_conn *c, __u32 tgid, __u32 tid)
{
	c->tid = tid;
	c->task = bpf_get_current_task();
	c->pid = tgid;
	__u64 end = c->held_end;

	if (!end)
		return;
	c->held_end = 0;
	exchange_emit(sk, c, c->held_start, end, tid, c->flags & CONN_HELD_PIPELINED);
	c->flags &= ~CONN_HELD_PIPELINED;
}

/* The serving thread (the current one) read (or wrote, write) sk at now. */
static __always_inline void socket_io(struct sock *sk, __u32 tgid, __u32 tid, bool write, __u64 now, bool btf)
{
	struct sockreq_conn *c = conn_learn(sk);

	if (!c)
		return;
	conn_own(sk, c, tgid, tid);
	if (!c->start_ns || !write)
		return;
	if (c->flags & CONN_TAIL) {
		c->flags &= ~CONN_TAIL; /* the last exchange's write: ended at the arrival */
		return;
	}
	if (now <= c->start_ns)
		return;
	exchange_end(sk, c, tid, now, btf, true);
}

/*
 * 6.3+: the socket layer's own tracepoint, as sock_sendmsg returns. It
 * runs only for socket calls, and hands over the socket: no syscall tracepoint (which puts every syscall of every
 * process on the slow path) and no walk of the fd table.
 */
SEC("tp_btf/sock_send_length")
int BPF_PROG(sockreq_send, struct sock *sk, int ret, int flags)
{
	__u32 tgid, tid;

	if (ret > 0 && current_wanted(&tgid, &tid))
		socket_io(sk, tgid, tid, true, bpf_ktime_get_ns(), true);
	return 0;
}

/* Before 6.3: every syscall's return, the read/write family's kept. */
SEC("raw_tp/sys_exit")
int BPF_PROG(sockreq_syscall, struct pt_regs *regs, long ret)
{
	__u32 tgid, tid;

	if (ret <= 0 || !current_wanted(&tgid, &tid))
		return 0;
	long nr = BPF_CORE_READ(regs, orig_ax);
	__u64 fd = BPF_CORE_READ(regs, di);
	bool write;

	switch (nr) {
	case NR_ACCEPT: case NR_ACCEPT4: { /* the target's from its accept */
		struct sock *born = fd_sock(ret);
		struct sockreq_conn *c = born ? conn_learn(born) : NULL;

		if (c)
			conn_own(born, c, tgid, tid);
		return 0;
	}
	case NR_READ: case NR_READV: case NR_RECVFROM: case NR_RECVMSG:
		write = false;
		break;
	case NR_WRITE: case NR_WRITEV: case NR_SENDTO: case NR_SENDMSG:
		write = true;
		break;
	default:
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	struct sock *sk = fd_sock(fd);

	if (sk)
		socket_io(sk, tgid, tid, write, now, false);
	return 0;
}

#define TCP_ESTABLISHED 1

/* Not a connection's birth: whose it is cannot be told there, in the
 * softirq, and its first request's arrival makes its state anyway. */
static __always_inline void state_change(struct sock *sk, int oldstate, int newstate)
{
	if (oldstate == TCP_ESTABLISHED && conn_get(sk))
		conn_forget(sk); /* its last exchange went out with its last write */
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(sockreq_state_btf, const struct sock *sk, int oldstate, int newstate)
{
	state_change((struct sock *)sk, oldstate, newstate);
	return 0;
}

SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(sockreq_state, const struct sock *sk, int oldstate, int newstate)
{
	state_change((struct sock *)sk, oldstate, newstate);
	return 0;
}
