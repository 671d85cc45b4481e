package record

import (
	"fmt"

	"github.com/numatrace/numatrace/internal/stall"
)

// leftOutStack is the stack of every stall whose own a reader left out
// (FORMAT.md §11.6): their time still shows, under a note saying why.
var leftOutStack = stall.LeftOutStack(fmt.Sprintf("stack left out: past the %d MiB of stacks numatrace reads of a recording (%d MiB a block)",
	maxFileStackBytes>>20, maxBlockStackBytes>>20))

// StacksLeftOut is what a reader's bounds on stacks left out.
type StacksLeftOut struct {
	Stacks int // stack records (each block declares its own)
	Frames int // their frames
	Stalls int // stalls that had one: leftOutStack is theirs instead
}

// add counts a stack record of frames left out.
func (l *StacksLeftOut) add(frames int) {
	l.Stacks++
	l.Frames += frames
}

// String says how many, and why, in a line.
func (l StacksLeftOut) String() string { return "stacks left out" + l.detail() }

func (l StacksLeftOut) detail() string {
	return fmt.Sprintf(": %d stack records (%d frames), past the %d MiB of stacks numatrace reads of a recording "+
		"(%d MiB a block); the %d stalls that had one are counted under a stack that says so",
		l.Stacks, l.Frames, maxFileStackBytes>>20, maxBlockStackBytes>>20, l.Stalls)
}

// stackKeeper keeps the stacks a reader hands out: each once, however
// many blocks declare it, and maxFileStackBytes of them in all. It sees
// the events in file order, so what it keeps does not depend on the
// blocks decoded ahead.
type stackKeeper struct {
	kept  map[string]*stall.Stack // by key
	bytes int                     // their Size
	block map[*stall.Stack]*stall.Stack
	left  StacksLeftOut
}

// newBlock forgets the last block's stacks: a block's own are only its.
func (k *stackKeeper) newBlock() { clear(k.block) }

// keep is the stack to hand out for an event's s.
func (k *stackKeeper) keep(s *stall.Stack) *stall.Stack {
	got, ok := k.block[s]
	if !ok {
		got = k.intern(s)
		if k.block == nil {
			k.block = map[*stall.Stack]*stall.Stack{}
		}
		k.block[s] = got
	}
	if got == leftOutStack {
		k.left.Stalls++
	}
	return got
}

// intern is the stack kept for s's key, s if there is room for it, or
// leftOutStack.
func (k *stackKeeper) intern(s *stall.Stack) *stall.Stack {
	if s == leftOutStack { // its block's were past their bound: counted there
		return s
	}
	if kept, ok := k.kept[s.Key()]; ok {
		return kept
	}
	if k.bytes+s.Size() > maxFileStackBytes {
		k.left.add(len(s.Kernel) + len(s.User))
		return leftOutStack
	}
	if k.kept == nil {
		k.kept = map[string]*stall.Stack{}
	}
	k.kept[s.Key()] = s
	k.bytes += s.Size()
	return s
}
