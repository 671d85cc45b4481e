// Package stall holds numatrace's domain types: what froze a thread, for how
// long, and the log2 histograms those stalls are summarised in. Every source
// of events (the live tracer, a replayed recording) produces these, and
// every front end learns about a cause from its descriptor here.
package stall

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Cause is what froze a thread. The numbering matches enum cause in
// bpf/numatrace.h; the tracer checks the two against each other when it
// loads, and its tests check them in CI.
type Cause uint8

const (
	DirectReclaim Cause = iota
	MemcgReclaim
	NodeReclaim
	Compaction
	NUMAMigration
	NUMATaskMove
	TaskMigration
	MmapLock
	RunqWait
	ReclaimThrottle
	DirtyThrottle
	MemstallWait
	NumCauses
)

// Descriptor is everything a front end needs to know about a cause. Adding
// a cause means adding its constant above and its descriptor below; no
// output, view or exporter has a list of its own, nor names a cause to
// treat it apart: each asks a property here.
type Descriptor struct {
	Name   string // JSON, the command line, recordings: "memcg_reclaim"
	Short  string // table headers and chart legends: "memcg"
	Letter byte   // marks the cause in charts without colour
	Colour string // ANSI colour of the cause in charts
	// Counted is how the cause's events are counted: by their durations
	// (a timed cause), or, for one that says where a thread went rather
	// than how long it waited, as moves or as migrations.
	Counted Counting
	// NotMemory marks a wait that is not memory management's (run-queue
	// wait): it is weighed against latency spikes like the stalls, but
	// left out of a thread's stall (freeze) time.
	NotMemory bool
	// Fields are the stall's details beyond who, when and how long, in
	// the order NDJSON and Perfetto print them.
	Fields []Field
	// Words describes one stall in a few words (the drill-down's recent
	// stalls); the CPU and nesting are added for every cause.
	Words func(*Event) []string
	// SubReason: the stall's Reason says what kind of wait it was
	// (memstall_wait's thrashing, reclaim_throttle's writeback), and a
	// verdict names it with the cause.
	SubReason bool
	// Advice is what to do about the cause when a report's headline
	// names it and doctor found nothing behind it. Every timed cause has
	// one: the headline names no other.
	Advice string
	// Checks are the doctor checks (doctor.Checks names them) whose
	// finding explains the cause, the first most telling; noChecks when
	// none does.
	Checks []string
	// KindAdvice is the Advice for a kind of wait (a SubReason cause's
	// Reason) that needs its own: memstall_wait's thrashing is not its
	// swap-in.
	KindAdvice map[string]string
	// AtLimit, where set, says the cause (or the kinds of it it names)
	// is the target's memory cgroup at its limit. When the run read the
	// group, the headline's next step names it with its figures, then
	// says this, with the file that sets the limit.
	AtLimit *LimitStep
}

// LimitStep is a cause's next step when its stalls are the target's
// memory cgroup at its limit.
type LimitStep struct {
	// Kinds are the kinds of wait that are the limit's; none: every
	// stall of the cause.
	Kinds []string
	// Do is what to do, given the file that sets the binding limit
	// ("memory.limit_in_bytes", "memory.max", "memory.high").
	Do func(knob string) string
}

// AdviceFor is the cause's advice for a kind of its waits ("" for none).
func (d *Descriptor) AdviceFor(kind string) string {
	if a, ok := d.KindAdvice[kind]; ok {
		return a
	}
	return d.Advice
}

// LimitFor is the cause's LimitStep when stalls of kind are its memory
// cgroup at its limit, nil when they are not.
func (d *Descriptor) LimitFor(kind string) *LimitStep {
	if d.AtLimit == nil || len(d.AtLimit.Kinds) > 0 && !slices.Contains(d.AtLimit.Kinds, kind) {
		return nil
	}
	return d.AtLimit
}

// unreadGroup is said where a cause is a memory cgroup at its limit and
// the run read no group (a system-wide run, an older recording).
const unreadGroup = "(numatrace read no memory cgroup for this target: `numatrace doctor -p PID` names a process's, with its limit, usage and page cache)"

// Counting is how a cause's events are counted.
type Counting uint8

const (
	// CountDurations: each event is a stall with a duration. Histograms,
	// freeze times, spikes' verdicts and the exporter's stall histogram
	// are of its time.
	CountDurations Counting = iota + 1
	// CountMoves: each event is a thread moved (or swapped) to another
	// node, taking no time: counted per thread, and exported as moves
	// (numatrace_numa_task_moves_total).
	CountMoves
	// CountMigrations: each is a thread changing CPU, which the kernel
	// counts exactly per thread (ThreadStats.Migrations, with the
	// cross-node share). The tables show that count in their MIGR and
	// X-NODE columns: a count of streamed events never exceeds it, and
	// a row with nothing else says only that a thread moved.
	CountMigrations
)

// noChecks says that no doctor check explains a cause; a nil Checks is a
// descriptor not filled in.
var noChecks = []string{}

// descriptors is indexed by Cause; TestDescriptorsComplete fails when an
// entry is missing or half filled.
var descriptors = [NumCauses]Descriptor{
	DirectReclaim: {Name: "direct_reclaim", Short: "direct", Letter: 'D', Colour: "9", Counted: CountDurations,
		Fields: fields(fieldOrder, fieldGFP, fieldPages), Words: reclaimWords,
		Advice: "the machine ran short of free memory and allocating threads reclaimed it themselves: find what fills memory, and run `numatrace doctor` on that machine (min_free_kbytes, watermark_scale_factor, hugepage reservations)",
		Checks: []string{"hugepage_starvation", "hugepage_reservation", "min_free_kbytes", "watermark_scale_factor", "node_pressure"}},
	MemcgReclaim: {Name: "memcg_reclaim", Short: "memcg", Letter: 'M', Colour: "11", Counted: CountDurations,
		Fields: fields(fieldOrder, fieldGFP, fieldPages, fieldCgroup, fieldSoftLimit), Words: reclaimWords,
		Advice: "a memory cgroup reached its limit " + unreadGroup + ": raise the limit (memory.max or memory.high on cgroup v2, " +
			"memory.limit_in_bytes on v1), or cut what fills it (page cache counts against the limit)",
		Checks: []string{"memory_cgroup", "container"},
		AtLimit: &LimitStep{Do: func(knob string) string {
			return "raise " + knob + ", or cut what fills it (page cache counts against the limit)"
		}}},
	NodeReclaim: {Name: "node_reclaim", Short: "node", Letter: 'N', Colour: "13", Counted: CountDurations,
		Fields: fields(fieldOrder, fieldGFP, fieldPages, fieldNode), Words: reclaimWords,
		Advice: "threads reclaimed their own node instead of using another node's free memory: check vm.zone_reclaim_mode with `numatrace doctor` (0 turns it off)",
		Checks: []string{"zone_reclaim_mode"}},
	Compaction: {Name: "compaction", Short: "compact", Letter: 'C', Colour: "14", Counted: CountDurations,
		Fields: fields(fieldOrder, fieldGFP, fieldPriority, fieldStatus, fieldPass, fieldAttempt), Words: compactionWords,
		Advice: "transparent huge page faults compacted memory synchronously: check /sys/kernel/mm/transparent_hugepage/defrag with `numatrace doctor` (defer or madvise, not always)",
		Checks: []string{"thp_defrag"}},
	NUMAMigration: {Name: "numa_migration", Short: "numa-mig", Letter: 'P', Colour: "12", Counted: CountDurations, // P: page migration
		Fields: fields(fieldPages, fieldReason, fieldMode), Words: migrationWords,
		Advice: "NUMA balancing moved the threads' pages between nodes: check the process's CPU and memory binding with `numatrace doctor --pid PID`",
		Checks: []string{"binding", "cross_node_alloc", "remote_memory", "interleave", "numa_balancing_thrash", "numa_balancing", "node_saturation"}},
	NUMATaskMove: {Name: "numa_task_move", Short: "numa-move", Letter: 'T', Colour: "10", Counted: CountMoves,
		Fields: fields(fieldMove, fieldSrcCPU, fieldDstCPU, fieldSrcNode, fieldDstNode, fieldOtherTID), Words: taskMoveWords,
		Advice: "NUMA balancing moved the threads between nodes: check the process's CPU and memory binding with `numatrace doctor --pid PID`",
		Checks: []string{"binding", "numa_balancing_thrash", "numa_balancing", "node_saturation"}},
	TaskMigration: {Name: "task_migration", Short: "migr", Letter: 't', Colour: "8", Counted: CountMigrations,
		Fields: fields(), Words: func(*Event) []string { return nil },
		Checks: []string{"binding", "node_saturation", "nic_irq_affinity"}},
	MmapLock: {Name: "mmap_lock", Short: "mmap", Letter: 'L', Colour: "15", Counted: CountDurations,
		Fields: fields(fieldWrite, fieldAcquired), Words: mmapLockWords,
		Advice: "threads waited for the process's mmap_lock behind another holder (khugepaged, mmap or munmap in another thread): the stacks show who; `numatrace doctor` checks THP",
		Checks: []string{"thp_defrag"}},
	RunqWait: {Name: "runq_wait", Short: "runq", Letter: 'Q', Colour: "208", Counted: CountDurations, NotMemory: true,
		Fields: fields(), Words: func(*Event) []string { return []string{"waited for a CPU"} },
		Advice: "the threads waited for a CPU, not for memory: look at CPU saturation and the target's CPU limits",
		Checks: noChecks},
	ReclaimThrottle: {Name: "reclaim_throttle", Short: "rthrottle", Letter: 'R', Colour: "3", Counted: CountDurations, SubReason: true,
		Fields: fields(fieldReason, fieldNode), Words: reclaimThrottleWords,
		Advice: "reclaim throttled the threads while writeback or isolation caught up: memory is nearly full; find what fills it",
		Checks: []string{"node_pressure", "min_free_kbytes"}},
	DirtyThrottle: {Name: "dirty_throttle", Short: "dirty", Letter: 'W', Colour: "5", Counted: CountDurations, // W: writeback
		Fields: fields(fieldDirty, fieldLimit, fieldAttempt), Words: dirtyThrottleWords,
		Advice: "writers were throttled for dirty pages: the disk cannot keep up with the writes (vm.dirty_ratio, vm.dirty_bytes)",
		Checks: noChecks},
	MemstallWait: {Name: "memstall_wait", Short: "memstall", Letter: 'S', Colour: "1", Counted: CountDurations, SubReason: true, // S: PSI memory stall
		Fields: fields(fieldReason), Words: func(e *Event) []string { return []string{"waited in a memory stall: " + e.Reason} },
		Advice: "the threads waited for memory (refaults of evicted pages, memory.high throttling): the working set does not fit; raise the limit or shrink it",
		KindAdvice: map[string]string{
			"thrashing": "the threads waited to read back pages evicted while still in use (thrashing): the working set does not fit " +
				"in the memory it has (its cgroup's limit, or the machine's); raise that or shrink the working set",
			"swap_in": "the threads waited for pages read back from swap: the working set does not fit in memory; " +
				"raise the memory it has (its cgroup's limit, or the machine's) or shrink the working set",
			"memory_high": "the kernel throttled the threads over their cgroup's memory.high " + unreadGroup +
				": raise memory.high, or cut what fills the group (page cache counts)",
		},
		Checks: []string{"memory_cgroup", "psi_memory"},
		AtLimit: &LimitStep{Kinds: []string{"memory_high"}, Do: func(knob string) string {
			return "the kernel throttled the threads over it: raise " + knob + ", or cut what fills the group (page cache counts)"
		}}},
}

// Desc returns the cause's descriptor; an unknown cause gets a bare one.
func (c Cause) Desc() *Descriptor {
	if c < NumCauses {
		return &descriptors[c]
	}
	return &Descriptor{Name: fmt.Sprintf("cause(%d)", uint8(c)), Short: "?", Letter: '?',
		Fields: fields(), Words: func(*Event) []string { return nil }}
}

// String returns the cause's name as used in JSON and on the command line.
func (c Cause) String() string { return c.Desc().Name }

// ParseCause maps a cause name back to its Cause.
func ParseCause(name string) (Cause, error) {
	for i := range descriptors {
		if descriptors[i].Name == name {
			return Cause(i), nil
		}
	}
	return 0, fmt.Errorf("unknown cause %q", name)
}

// Label names the cause with a stall's kind of wait where the cause has
// kinds: "memstall_wait (thrashing)".
func (c Cause) Label(reason string) string {
	if reason == "" || !c.Desc().SubReason {
		return c.String()
	}
	return c.String() + " (" + reason + ")"
}

// Timed reports whether the cause has a duration.
func (c Cause) Timed() bool { return c.Desc().Counted == CountDurations }

// CountsMigrations reports whether the cause's count is a thread's CPU
// changes, which the kernel keeps exactly per thread (CountMigrations).
func (c Cause) CountsMigrations() bool { return c.Desc().Counted == CountMigrations }

// Freezes says whether the cause's time is a thread's freeze time: a
// timed memory-management stall, not a wait of another kind (the run
// queue's). Every freeze total (an event's, a histogram's, a thread's,
// a request's, the descendants') asks this; the BPF side gets the same
// from the table.
func (c Cause) Freezes() bool { return c.Timed() && !c.Desc().NotMemory }

// AllCauses lists every cause in order.
func AllCauses() []Cause {
	out := make([]Cause, NumCauses)
	for i := range out {
		out[i] = Cause(i)
	}
	return out
}

// Describe is one stall in a few words: the cause's details, its CPU,
// and whether it ran inside another stall.
func (e *Event) Describe() string {
	p := e.Cause.Desc().Words(e)
	p = append(p, fmt.Sprintf("cpu %d", e.CPU))
	if e.Nested {
		p = append(p, "nested")
	}
	return strings.Join(p, ", ")
}

// pages is "1 page" or "n pages".
func pages(n uint64) string {
	if n == 1 {
		return "1 page"
	}
	return fmt.Sprintf("%d pages", n)
}

func reclaimWords(e *Event) []string {
	p := []string{fmt.Sprintf("order %d", e.Order)}
	if e.Pages > 0 {
		p = append(p, "reclaimed "+pages(e.Pages))
	}
	if e.Cause == NodeReclaim {
		p = append(p, fmt.Sprintf("node %d", e.Node))
	}
	return p
}

func compactionWords(e *Event) []string {
	p := []string{fmt.Sprintf("order %d pass %d", e.Order, e.Pass)}
	if e.Status != "" {
		p = append(p, e.Status)
	}
	if e.Mode != "" {
		p = append(p, e.Mode)
	}
	return p
}

func migrationWords(e *Event) []string {
	p := []string{pages(e.Pages)}
	if e.Reason != "" {
		p = append(p, e.Reason)
	}
	if e.Node >= 0 && e.DstNode >= 0 {
		p = append(p, fmt.Sprintf("node %d→%d", e.Node, e.DstNode))
	}
	return p
}

func taskMoveWords(e *Event) []string {
	p := []string{fmt.Sprintf("cpu %d→%d node %d→%d", e.SrcCPU, e.DstCPU, e.Node, e.DstNode)}
	if e.Swap {
		p = append(p, fmt.Sprintf("swap with %d", e.OtherTID))
	}
	if e.Stick {
		p = append(p, "stuck")
	}
	return p
}

func reclaimThrottleWords(e *Event) []string {
	p := []string{"reclaim throttled"}
	if e.Reason != "" {
		p[0] += " on " + e.Reason
	}
	if e.Node >= 0 {
		p = append(p, fmt.Sprintf("node %d", e.Node))
	}
	return p
}

func dirtyThrottleWords(e *Event) []string {
	p := []string{fmt.Sprintf("paused over the dirty limit: %d of %d pages dirty", e.Pages, e.Limit)}
	if e.AttemptNs > e.DurNs {
		p = append(p, fmt.Sprintf("%s paused in this write so far", time.Duration(e.AttemptNs)))
	}
	return p
}

func mmapLockWords(e *Event) []string {
	p := []string{"read"}
	if e.Write {
		p[0] = "write"
	}
	if !e.Acquired {
		p = append(p, "failed")
	}
	return p
}

// ParseDurations reads per-cause thresholds: "10us" for every cause, or
// "mmap_lock=10us,compaction=0"; a bare duration sets every cause and a
// named one after it overrides that cause.
func ParseDurations(s string) ([NumCauses]uint64, error) {
	var out [NumCauses]uint64
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, hasName := strings.Cut(part, "=")
		if !hasName {
			val = name
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil || d < 0 {
			return out, fmt.Errorf("bad duration %q", val)
		}
		if !hasName {
			for i := range out {
				out[i] = uint64(d)
			}
			continue
		}
		c, err := ParseCause(strings.TrimSpace(name))
		if err != nil {
			return out, err
		}
		out[c] = uint64(d)
	}
	return out, nil
}

// MemstallReasons names what a memstall_wait waited in, indexed as enum
// memstall_reason in bpf/numatrace.h (the tracer's tests hold the two
// together): a refault of a page evicted while still in use (thrashing),
// memory.high throttling, a read back from swap, or another site.
var MemstallReasons = [...]string{"other", "thrashing", "memory_high", "swap_in"}

// MemstallReason names a memstall_wait's wait site as the kernel side
// numbers it.
func MemstallReason(v int32) string {
	if v >= 0 && int(v) < len(MemstallReasons) {
		return MemstallReasons[v]
	}
	return fmt.Sprintf("site(%d)", v)
}
