package stall

import "fmt"

// Time is one of the times the kernel keeps for every thread, which a
// request timed in the kernel reads at its two ends. The numbering
// matches enum task_time in bpf/numatrace.h (the tracer's tests check).
type Time uint8

const (
	TimeCPU  Time = iota // on a CPU (se.sum_exec_runtime)
	TimeRunq             // runnable, waiting for a CPU (sched_info.run_delay)
	TimeIO               // waiting for block I/O (delay accounting's blkio_delay)
	NumTimes
)

// TaskTimes is what the serving thread's own counters say of a request:
// its times inside the request, and the part of each inside its memory
// stalls (reclaim runs on a CPU, and waits for one and for I/O): that
// part is the stalls', counted once.
type TaskTimes struct {
	Ns        [NumTimes]uint64
	InStallNs [NumTimes]uint64
}

// Part is a share of a request's time in the thread that served it. The
// causes are parts (memory management's stalls, and runq_wait: waiting
// for a CPU), then the time no cause names.
type Part uint8

const (
	// PartOnCPU is the thread running on a CPU, outside any stall.
	PartOnCPU Part = Part(NumCauses) + iota
	// PartDiskIO is the thread waiting for block I/O, outside any stall.
	PartDiskIO
	// PartOtherWait is the rest of the thread's time off a CPU: locks,
	// futexes, sleeps, waiting on another thread or on the network.
	PartOtherWait
	// PartHeldUp is time before the request reached the server, counted
	// from when its connection's schedule had it due, that no exchange it
	// waited behind covers: the client's, which no server-side timer sees
	// (the part behind a slow exchange is split as that one was).
	PartHeldUp
	// PartUnsplit is time that could not be split: the thread's counters
	// were not read at both ends (a request handed between threads, a
	// source or kernel that does not read them).
	PartUnsplit
	NumParts
)

// PartOf is cause c's part.
func PartOf(c Cause) Part { return Part(c) }

// Cause is the part's cause, ok false for the parts no cause names.
func (p Part) Cause() (Cause, bool) { return Cause(p), p < Part(NumCauses) }

// partNames are the parts no cause names, by Part - NumCauses: their
// names, their words, and what to do when one holds the slow requests'
// time (a cause's part has its descriptor's Advice).
var partNames = [NumParts - Part(NumCauses)]struct{ name, words, advice string }{
	{"on_cpu", "on CPU", "the serving threads ran on a CPU: profile them (perf top -p PID, or numatrace's stacks) and look at what the requests compute"},
	{"disk_io", "disk I/O wait", "the serving threads waited for block I/O: look at the device (iostat -x: utilisation, await) and at what the requests read (a cache or buffer pool too small for the working set); " +
		"the report's WAITS say which code path read"},
	{"other_wait", "waiting off CPU on a lock, a sleep, another thread or the network (other_wait)",
		"the serving threads waited off a CPU on a lock, another thread, a sleep or the network; " +
			"where they slept says which: the report's WAITS (where numatrace timed the requests) or `perf record -e sched:sched_switch -g -p PID`, a futex under a lock's function is a lock"},
	{"held_up", "held up before reaching the server, outside the exchange before it (held_up)",
		"requests were due before they reached the server and waited outside any exchange on their connection: the client sent them late (its timer, its CPU, its queue), which no server-side timer sees"},
	{"unsplit", "not split (the thread's counters were not read at both ends)",
		"the requests' time was not split: time them on a kernel with sock_send_length (6.3+), or with --latency-uprobe on the request handler"},
}

// Advice is what to do when the part holds the slow requests' time.
func (p Part) Advice() string {
	if c, ok := p.Cause(); ok {
		return c.Desc().Advice
	}
	if p < NumParts {
		return partNames[p-Part(NumCauses)].advice
	}
	return ""
}

// String is the part's name in JSON and recordings: its cause's, or its own.
func (p Part) String() string {
	if c, ok := p.Cause(); ok {
		return c.String()
	}
	if p < NumParts {
		return partNames[p-Part(NumCauses)].name
	}
	return fmt.Sprintf("part(%d)", uint8(p))
}

// Words is the part in a few words for people: the cause's name, or what
// the time was.
func (p Part) Words() string {
	if c, ok := p.Cause(); ok {
		if c == RunqWait {
			return "waiting for a CPU (runq_wait)"
		}
		return c.String()
	}
	if p < NumParts {
		return partNames[p-Part(NumCauses)].words
	}
	return p.String()
}

// ParsePart maps a part's name back to its Part.
func ParsePart(name string) (Part, bool) {
	for p := Part(0); p < NumParts; p++ {
		if p.String() == name {
			return p, true
		}
	}
	return 0, false
}

// Budget is where a request's time went in the thread that served it:
// its parts sum to the request's duration.
type Budget [NumParts]uint64

// NewBudget splits a request of latNs in its serving thread: its memory
// stalls (st, nil if not known) first, then from the thread's counters
// (tt, nil if not read at both ends) its wait for a CPU, its time on one
// and its wait for I/O, each outside the stalls; what is left was spent
// off a CPU otherwise. Counters that claim more than the request had
// (a CPU's tick not yet counted at the start, a wait begun before it) are
// cut in proportion, so the parts always sum to latNs.
func NewBudget(latNs uint64, st *RequestStall, tt *TaskTimes) Budget {
	var b Budget
	if st == nil {
		b[PartUnsplit] = latNs
		return b
	}
	memory := b.addStalls(latNs, st)
	left := latNs - memory
	// Before it reached the server, outside the exchanges it waited
	// behind (whose stalls and counters it took on): held up.
	b[PartHeldUp] = min(st.WaitNs-min(st.WaitCoveredNs, st.WaitNs), left)
	left -= b[PartHeldUp]
	if tt == nil {
		runq := min(st.ByCause[RunqWait], left) // the run-queue probe's, if it ran
		b[PartOf(RunqWait)] = runq
		b[PartUnsplit] = left - runq
		return b
	}
	outside := func(t Time) uint64 { return tt.Ns[t] - min(tt.InStallNs[t], tt.Ns[t]) }
	runq, cpu, io := outside(TimeRunq), outside(TimeCPU), outside(TimeIO)
	if sum := runq + cpu + io; sum > left {
		runq, cpu = share(runq, sum, left), share(cpu, sum, left)
		io = left - runq - cpu
	}
	b[PartOf(RunqWait)], b[PartOnCPU], b[PartDiskIO] = runq, cpu, io
	b[PartOtherWait] = left - runq - cpu - io
	return b
}

// addStalls puts the request's memory stalls in b, each cause's share of
// their freeze time (a stall nested in another counted once), and returns
// that time, at most latNs.
func (b *Budget) addStalls(latNs uint64, st *RequestStall) uint64 {
	freeze := min(st.FreezeNs, latNs)
	var sum uint64
	for c := range NumCauses {
		if c.Freezes() {
			sum += st.ByCause[c]
		}
	}
	if sum == 0 || freeze == 0 {
		return 0
	}
	given := uint64(0)
	last := Cause(0)
	for c := range NumCauses {
		if c.Freezes() && st.ByCause[c] > 0 {
			b[PartOf(c)] = share(st.ByCause[c], sum, freeze)
			given += b[PartOf(c)]
			last = c
		}
	}
	b[PartOf(last)] += freeze - given // what rounding left over
	return freeze
}

// share is part's share of whole, scaled to of: part*of/whole without
// overflow for any sizes a request has.
func share(part, whole, of uint64) uint64 {
	if whole == 0 {
		return 0
	}
	return uint64(float64(part) / float64(whole) * float64(of))
}

// Total is the sum of the parts.
func (b *Budget) Total() uint64 {
	var t uint64
	for _, ns := range b {
		t += ns
	}
	return t
}

// Add adds o's parts to b's.
func (b *Budget) Add(o *Budget) {
	for i := range b {
		b[i] += o[i]
	}
}
