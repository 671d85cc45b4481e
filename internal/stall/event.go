package stall

// Kind says what an Event is.
type Kind uint8

const (
	KindStall Kind = iota // a closed stall (or a NUMA task move)
	KindExit              // a traced thread exited
	// KindWait is a serving thread's sleep inside a request, off CPU for
	// no memory stall, at least --stacks-min long: Reason names its part
	// of the budget (disk_io, other_wait), and Stack is where it slept
	// where the tracer took it (the thread's earlier sleep of that kind
	// ran long too). Only the stack tables count it: the budget has the
	// time from the thread's own counters.
	KindWait
)

// Event is one closed stall or thread exit, as it left the kernel.
// Fields that do not apply to the cause are zero (or -1 for nodes and CPUs).
type Event struct {
	Kind     Kind
	Cause    Cause
	TsNs     uint64 // CLOCK_MONOTONIC at the end of the stall
	DurNs    uint64
	PID      uint32
	TID      uint32
	Comm     string
	CPU      uint32
	Order    int32
	GFP      uint32
	Pages    uint64
	CgroupID uint64
	Node     int32 // node_reclaim: the node; numa_task_move: source node
	DstNode  int32
	SrcCPU   int32
	DstCPU   int32
	// Reason: numa_migration's migrate reason (numa_misplaced, compaction,
	// ...); reclaim_throttle's (writeback, isolated, noprogress,
	// congested); memstall_wait's wait site (MemstallReasons).
	Reason   string
	Mode     string // numa_migration: migrate mode; compaction: priority
	Status   string // compaction: outcome of the pass (compact_result)
	OtherTID uint32 // numa_task_move swap/stick: the other task
	// Compaction streams one slice per zone pass: Pass counts from 1, and
	// AttemptNs is the attempt's time so far, this slice included.
	Pass      uint32
	AttemptNs uint64
	// Limit is dirty_throttle's dirty limit in pages (Pages is the dirty count).
	Limit uint64

	SoftLimit bool // memcg_reclaim from the soft-limit pair
	Write     bool // mmap_lock: write lock
	Acquired  bool // mmap_lock: the lock was taken
	Swap      bool // numa_task_move: a swap with OtherTID
	Stick     bool // numa_task_move: the move failed and the task stayed
	GroupDead bool // exit: the last thread of the process
	Nested    bool // ran inside another open stall of the thread, which already counts this time

	// Stack is where the thread stalled, for a stall at least --stacks-min
	// long; nil for shorter ones, or with --stacks=false. Shared: never
	// change it.
	Stack *Stack
}

// Counts reports whether the event starts a new stall (a compaction
// attempt's later passes only add time to it).
func (e *Event) Counts() bool { return e.Cause != Compaction || e.Pass <= 1 }

// WaitKind is the stall's kind of wait where its cause has kinds
// (SubReason: memstall_wait's thrashing, reclaim_throttle's writeback),
// "" for any other cause: numa_migration's Reason is why pages moved,
// not a kind of the wait.
func (e *Event) WaitKind() string {
	if !e.Cause.Desc().SubReason {
		return ""
	}
	return e.Reason
}

// LongestNs is the stall's length so far: a compaction attempt's whole
// time, else the event's own.
func (e *Event) LongestNs() uint64 { return max(e.DurNs, e.AttemptNs) }

// FreezeNs is the time the event adds to the thread's total freeze: none
// for a stall nested inside another one, which already counts it.
func (e *Event) FreezeNs() uint64 {
	if e.Nested || !e.Cause.Freezes() {
		return 0
	}
	return e.DurNs
}

// RequestStall is the stall time inside one timed request, in the thread
// that served it: per cause, and the freeze time over all causes (a stall
// nested in another counted once).
type RequestStall struct {
	ByCause  [NumCauses]uint64
	FreezeNs uint64
	// Times are the thread's own counters inside the request, where the
	// timer read them at both ends (HasTimes): what the budget splits
	// the rest of its time by.
	Times    TaskTimes
	HasTimes bool
	// WaitNs is the part of the request's time before it reached the
	// server, counted from when its connection's schedule had it due;
	// WaitCoveredNs the part of that wait the exchanges it waited behind
	// cover, whose stalls and counters it took on (pacing.go).
	WaitNs, WaitCoveredNs uint64
}

// Budget is where the request of latNs went in the thread that served it
// (NewBudget); st may be nil.
func (st *RequestStall) Budget(latNs uint64) Budget {
	if st == nil || !st.HasTimes {
		return NewBudget(latNs, st, nil)
	}
	return NewBudget(latNs, st, &st.Times)
}
