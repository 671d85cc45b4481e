// Package stall holds numatrace's domain types: what froze a thread, for how
// long, and the log2 histograms those stalls are summarised in. Every source
// of events (the live tracer, a replayed recording) produces these, and
// every front end learns about a cause from its descriptor here.
package stall

import (
	"fmt"
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
// output, view or exporter has a list of its own.
type Descriptor struct {
	Name   string // JSON, the command line, recordings: "memcg_reclaim"
	Short  string // table headers and chart legends: "memcg"
	Letter byte   // marks the cause in charts without colour
	Colour string // ANSI colour of the cause in charts
	// Timed causes have a duration. Counted ones (numa_task_move,
	// task_migration) say where a thread went, not how long it waited.
	Timed bool
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
}

// descriptors is indexed by Cause; TestDescriptorsComplete fails when an
// entry is missing or half filled.
var descriptors = [NumCauses]Descriptor{
	DirectReclaim: {Name: "direct_reclaim", Short: "direct", Letter: 'D', Colour: "9", Timed: true,
		Fields: fields(fieldOrder, fieldGFP, fieldPages), Words: reclaimWords},
	MemcgReclaim: {Name: "memcg_reclaim", Short: "memcg", Letter: 'M', Colour: "11", Timed: true,
		Fields: fields(fieldOrder, fieldGFP, fieldPages, fieldCgroup, fieldSoftLimit), Words: reclaimWords},
	NodeReclaim: {Name: "node_reclaim", Short: "node", Letter: 'N', Colour: "13", Timed: true,
		Fields: fields(fieldOrder, fieldGFP, fieldPages, fieldNode), Words: reclaimWords},
	Compaction: {Name: "compaction", Short: "compact", Letter: 'C', Colour: "14", Timed: true,
		Fields: fields(fieldOrder, fieldGFP, fieldPriority, fieldStatus, fieldPass, fieldAttempt), Words: compactionWords},
	NUMAMigration: {Name: "numa_migration", Short: "numa-mig", Letter: 'P', Colour: "12", Timed: true, // P: page migration
		Fields: fields(fieldPages, fieldReason, fieldMode), Words: migrationWords},
	NUMATaskMove: {Name: "numa_task_move", Short: "numa-move", Letter: 'T', Colour: "10",
		Fields: fields(fieldMove, fieldSrcCPU, fieldDstCPU, fieldSrcNode, fieldDstNode, fieldOtherTID), Words: taskMoveWords},
	TaskMigration: {Name: "task_migration", Short: "migr", Letter: 't', Colour: "8",
		Fields: fields(), Words: func(*Event) []string { return nil }},
	MmapLock: {Name: "mmap_lock", Short: "mmap", Letter: 'L', Colour: "15", Timed: true,
		Fields: fields(fieldWrite, fieldAcquired), Words: mmapLockWords},
	RunqWait: {Name: "runq_wait", Short: "runq", Letter: 'Q', Colour: "208", Timed: true, NotMemory: true,
		Fields: fields(), Words: func(*Event) []string { return []string{"waited for a CPU"} }},
	ReclaimThrottle: {Name: "reclaim_throttle", Short: "rthrottle", Letter: 'R', Colour: "3", Timed: true, SubReason: true,
		Fields: fields(fieldReason, fieldNode), Words: reclaimThrottleWords},
	DirtyThrottle: {Name: "dirty_throttle", Short: "dirty", Letter: 'W', Colour: "5", Timed: true, // W: writeback
		Fields: fields(fieldDirty, fieldLimit, fieldAttempt), Words: dirtyThrottleWords},
	MemstallWait: {Name: "memstall_wait", Short: "memstall", Letter: 'S', Colour: "1", Timed: true, SubReason: true, // S: PSI memory stall
		Fields: fields(fieldReason), Words: func(e *Event) []string { return []string{"waited in a memory stall: " + e.Reason} }},
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
func (c Cause) Timed() bool { return c.Desc().Timed }

// Freezes says whether the cause's time is a thread's freeze time: a
// timed memory-management stall, not a wait of another kind (the run
// queue's). Every freeze total (an event's, a histogram's, a thread's,
// a request's, the descendants') asks this; the BPF side gets the same
// from the table.
func (c Cause) Freezes() bool { d := c.Desc(); return d.Timed && !d.NotMemory }

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
