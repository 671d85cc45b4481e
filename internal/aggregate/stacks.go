package aggregate

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/numatrace/numatrace/internal/stall"
)

// StackSample is one stack's stalls in one thread, for one cause: a row
// of the report's stacks, a pprof sample, a folded line.
type StackSample struct {
	Cause   stall.Cause
	Kind    string // the stalls' kind of wait, where the cause has kinds (stall.Event.WaitKind)
	PID     uint32
	TID     uint32
	Comm    string // the thread's name
	Process string // the process's name
	Count   uint64 // stalls
	Ns      uint64 // their time
	Stack   *stall.Stack
}

// StackTable counts the stalls that carry a stack, and their time, per
// cause, thread and stack. The report, the view and the exports all
// count with it. Not safe for concurrent use.
//
// Its rows' stacks come to MaxStackTableBytes at most, each row's counted
// (every output writes a row's stack whole): past that, a stall that
// would make a new row is counted in its thread's row for the cause under
// a stack that says it was left out.
type StackTable struct {
	// Unstacked counts the stalls without a stack too, in a row with a
	// nil Stack per cause and thread: a profile of every streamed stall.
	Unstacked bool
	// Waits: the table counts waits (stall.KindWait), each under its
	// part of the budget (Kind) and its stack, or none, and no stalls.
	Waits bool
	rows  map[stackRowKey]*StackSample
	bytes int // the Size of the rows' stacks
}

// MaxStackTableBytes bounds the Size of a table's rows' stacks: some
// thousands of rows of real stacks, and what a recording crafted with a
// stack of megabytes in each of a thousand threads makes the report's
// JSON and the folded stacks write.
const MaxStackTableBytes = 32 << 20

// tableLeftOut is the stack of the stalls whose own a full table left out.
var tableLeftOut = stall.LeftOutStack(fmt.Sprintf("stack left out: past the %d MiB of stacks numatrace counts stalls by",
	MaxStackTableBytes>>20))

type stackRowKey struct {
	cause stall.Cause
	kind  string
	tid   uint32
	stack string
}

// Add counts ev if it carries a stack (or if the table is Unstacked and
// ev is a timed stall).
func (t *StackTable) Add(ev *stall.Event) {
	switch {
	case t.Waits:
		if ev.Kind != stall.KindWait {
			return
		}
	case ev.Kind != stall.KindStall || ev.Stack == nil && !(t.Unstacked && ev.Cause.Timed()):
		return
	}
	if t.rows == nil {
		t.rows = map[stackRowKey]*StackSample{}
	}
	r := t.row(ev)
	if ev.Comm != "" {
		r.Comm = ev.Comm
	}
	if ev.Counts() {
		r.Count++
	}
	r.Ns += ev.DurNs
}

// row is ev's row, made if there is room for its stack, else its
// thread's for the cause under tableLeftOut.
func (t *StackTable) row(ev *stall.Event) *StackSample {
	k := stackRowKey{cause: ev.Cause, kind: ev.WaitKind(), tid: ev.TID, stack: ev.Stack.Key()}
	if ev.Kind == stall.KindWait {
		k.cause, k.kind = 0, ev.Reason
	}
	if r := t.rows[k]; r != nil {
		return r
	}
	s := ev.Stack
	if size := s.Size(); !s.LeftOut() && size > 0 {
		if t.bytes+size > MaxStackTableBytes {
			s, k.stack = tableLeftOut, tableLeftOut.Key()
			if r := t.rows[k]; r != nil {
				return r
			}
		} else {
			t.bytes += size
		}
	}
	r := &StackSample{Cause: k.cause, Kind: k.kind, PID: ev.PID, TID: ev.TID, Stack: s}
	t.rows[k] = r
	return r
}

// Len is the number of rows.
func (t *StackTable) Len() int { return len(t.rows) }

// Reset forgets every row.
func (t *StackTable) Reset() {
	clear(t.rows)
	t.bytes = 0
}

// AppendRows appends every row to dst, in no order and unnamed: a copy
// to work on once the table may change again.
func (t *StackTable) AppendRows(dst []StackSample) []StackSample {
	for _, r := range t.rows {
		dst = append(dst, *r)
	}
	return dst
}

// Samples is every row, the most stall time first (ties in a fixed
// order), each process named by name (nil: left empty).
func (t *StackTable) Samples(name func(pid uint32) string) []StackSample {
	out := make([]StackSample, 0, len(t.rows))
	for _, r := range t.rows {
		s := *r
		if name != nil {
			s.Process = name(s.PID)
		}
		out = append(out, s)
	}
	SortStackSamples(out)
	return out
}

// SortStackSamples orders samples the most stall time first, ties in a
// fixed order.
func SortStackSamples(out []StackSample) {
	slices.SortFunc(out, func(a, b StackSample) int {
		return cmp.Or(cmp.Compare(b.Ns, a.Ns), cmp.Compare(a.Cause, b.Cause), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.TID, b.TID), cmp.Compare(a.Stack.Key(), b.Stack.Key()))
	})
}

// StacksLeftOut counts the stalls of samples counted under a stack that
// a bound left out (a table's, or a recording reader's), and their time.
func StacksLeftOut(samples []StackSample) StallCount {
	var n StallCount
	for _, s := range samples {
		if s.Stack.LeftOut() {
			n.Count += s.Count
			n.TotalNs += s.Ns
		}
	}
	return n
}

// TopStacks are the stacks of thread tid's stalls of cause c, the most
// time first, at most n of them, and the time of all its stalls that
// carry one. samples must be sorted as Samples sorts them.
func TopStacks(samples []StackSample, tid uint32, c stall.Cause, n int) (top []StackSample, totalNs uint64) {
	for _, s := range samples {
		if s.TID != tid || s.Cause != c {
			continue
		}
		totalNs += s.Ns
		if len(top) < n {
			top = append(top, s)
		}
	}
	return top, totalNs
}
