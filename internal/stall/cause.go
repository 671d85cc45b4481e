// Package stall holds numatrace's domain types: what froze a thread, for how
// long, and the log2 histograms those stalls are summarised in. Every source
// of events (the live tracer, later a replayed recording) produces these.
package stall

import "fmt"

// Cause is what froze a thread. The numbering matches enum cause in
// bpf/numatrace.h; the tracer checks that at init.
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
	NumCauses
)

var causeNames = [NumCauses]string{
	DirectReclaim: "direct_reclaim",
	MemcgReclaim:  "memcg_reclaim",
	NodeReclaim:   "node_reclaim",
	Compaction:    "compaction",
	NUMAMigration: "numa_migration",
	NUMATaskMove:  "numa_task_move",
	TaskMigration: "task_migration",
	MmapLock:      "mmap_lock",
}

// String returns the cause's name as used in JSON and on the command line.
func (c Cause) String() string {
	if c < NumCauses {
		return causeNames[c]
	}
	return fmt.Sprintf("cause(%d)", uint8(c))
}

// ParseCause maps a cause name back to its Cause.
func ParseCause(name string) (Cause, error) {
	for i, n := range causeNames {
		if n == name {
			return Cause(i), nil
		}
	}
	return 0, fmt.Errorf("unknown cause %q", name)
}

// Timed reports whether the cause has a duration. numa_task_move and
// task_migration are counts: they say where a thread went, not how long it
// waited.
func (c Cause) Timed() bool {
	return c != NUMATaskMove && c != TaskMigration
}

// AllCauses lists every cause in order.
func AllCauses() []Cause {
	out := make([]Cause, NumCauses)
	for i := range out {
		out[i] = Cause(i)
	}
	return out
}
