//go:build linux

package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/symbolize"
)

// DefaultStacksMinNs is --stacks-min's default: a stall of a millisecond
// is worth a stack walk; the many short ones are not.
const DefaultStacksMinNs = 1_000_000

// StackEventSize is the size of a stall record that carries its stacks.
const StackEventSize = int(unsafe.Sizeof(typesStackEvent{}))

// haveTaskRegs reports whether raw tracepoint programs may read a task's
// user registers (bpf_task_pt_regs, 5.15+), which the leaf repair needs.
func haveTaskRegs() bool {
	return features.HaveProgramHelper(ebpf.RawTracepoint, asm.FnTaskPtRegs) == nil
}

// rawStacks is what a stall record carries of its stacks: the addresses
// as the kernel took them, innermost first, or why it could not.
type rawStacks struct {
	kernel, user       []uint64
	kernelErr, userErr error
	regs               symbolize.Regs
	exec               uint64 // the process's exec, as the kernel counts them
}

// stacksOf reads the stacks of a record Decode accepted, if it carries
// them. The slices point into raw: copy what is kept.
func stacksOf(raw []byte) (rawStacks, bool) {
	if len(raw) < StackEventSize {
		return rawStacks{}, false
	}
	r := (*typesStackEvent)(unsafe.Pointer(&raw[0]))
	if typesEventFlag(r.E.Flags)&typesEventFlagFLAG_STACKS == 0 {
		return rawStacks{}, false
	}
	var s rawStacks
	s.kernel, s.kernelErr = stackAddrs(r.Kernel[:], r.KernelLen)
	s.user, s.userErr = stackAddrs(r.User[:], r.UserLen)
	s.regs = symbolize.Regs{BP: r.UserBp, Stack: r.UserSp[:]}
	s.exec = r.ExecId
	return s, true
}

// stackAddrs is the part of buf that bpf_get_stack filled, n bytes (or
// a negative errno).
func stackAddrs(buf []uint64, n int32) ([]uint64, error) {
	if n < 0 {
		return nil, stackLoss(syscall.Errno(-n))
	}
	frames := min(int(n)/8, len(buf))
	return buf[:frames], nil
}

// stackLoss says why bpf_get_stack gave no stack.
func stackLoss(e syscall.Errno) error {
	switch {
	case errors.Is(e, syscall.EFAULT):
		return errors.New("not taken: the kernel could not walk it")
	case errors.Is(e, syscall.ENOENT):
		return errors.New("not taken: the thread has none")
	}
	return fmt.Errorf("not taken (%v)", e)
}

// stackReader turns the stacks of stall records into symbolized stacks,
// on the stream's goroutine: at record time, while the process and its
// files are still there to read. A stack seen again for the same process
// is found by its addresses and costs a hash.
type stackReader struct {
	kernel *symbolize.Kernel
	kerr   error // why kernel frames have no names
	user   *symbolize.User
	seed   maphash.Seed
	made   map[uint32]map[uint64][]madeStack // pid → hash of the addresses → stacks
	nMade  int
	// interned gives the events of every process that stalled in the
	// same place one *stall.Stack: a recording writes it once a block.
	interned map[string]*stall.Stack
}

// madeStack is a symbolized stack and the addresses it was made from.
type madeStack struct {
	kernel, user []uint64
	spWord       uint64
	stack        *stall.Stack
}

// Bounds on what the reader keeps: past them it starts afresh.
const (
	maxMadeStacks    = 1 << 16
	maxInternedStack = 1 << 16
)

func newStackReader() *stackReader {
	sr := &stackReader{user: symbolize.NewUser("/proc"), seed: maphash.MakeSeed(),
		made: map[uint32]map[uint64][]madeStack{}, interned: map[string]*stall.Stack{}}
	sr.kernel, sr.kerr = symbolize.LoadKernel("/proc/kallsyms")
	return sr
}

// stack is the symbolized stack of ev from what its record carries.
func (sr *stackReader) stack(ev *stall.Event, raw rawStacks) *stall.Stack {
	// The stack pointer's words are a thread's data, different from one
	// stall to the next: the first (where a leaf that pushed nothing
	// returns to) and rbp tell apart what they can change.
	spWord := raw.regs.BP
	if len(raw.regs.Stack) > 0 {
		spWord ^= raw.regs.Stack[0] * 31
	}
	h := sr.hash(ev.PID, raw.kernel, raw.user, spWord)
	byHash := sr.made[ev.PID]
	for _, m := range byHash[h] {
		if m.spWord == spWord && slices.Equal(m.kernel, raw.kernel) && slices.Equal(m.user, raw.user) {
			return m.stack
		}
	}
	s, pending := sr.symbolize(ev.PID, raw)
	if pending {
		return s // named better once its files are read: not kept
	}
	if sr.nMade >= maxMadeStacks {
		clear(sr.made)
		sr.nMade = 0
	}
	if byHash = sr.made[ev.PID]; byHash == nil {
		byHash = map[uint64][]madeStack{}
		sr.made[ev.PID] = byHash
	}
	byHash[h] = append(byHash[h], madeStack{kernel: slices.Clone(raw.kernel), user: slices.Clone(raw.user), spWord: spWord, stack: s})
	sr.nMade++
	return s
}

func (sr *stackReader) hash(pid uint32, kernel, user []uint64, spWord uint64) uint64 {
	var h maphash.Hash
	h.SetSeed(sr.seed)
	var b [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	word(uint64(pid)<<32 | uint64(len(kernel)))
	for _, a := range kernel {
		word(a)
	}
	word(uint64(len(user)))
	for _, a := range user {
		word(a)
	}
	word(spWord)
	return h.Sum64()
}

// symbolize names the frames of one stack, and interns the result;
// pending says a file's tables were still being read.
func (sr *stackReader) symbolize(pid uint32, raw rawStacks) (s *stall.Stack, pending bool) {
	var kernel, user []stall.Frame
	var notes []string
	switch {
	case raw.kernelErr != nil:
		notes = append(notes, "kernel stack "+raw.kernelErr.Error())
	case sr.kernel != nil:
		kernel = sr.kernel.Frames(raw.kernel)
	default:
		kernel = symbolize.TrimTracing(symbolize.KernelFrames(raw.kernel))
		notes = append(notes, fmt.Sprintf("kernel symbols unavailable (%v)", sr.kerr))
	}
	if raw.userErr != nil {
		notes = append(notes, "user stack "+raw.userErr.Error())
	} else {
		frames, note, p := sr.user.Frames(pid, raw.exec, raw.user, raw.regs)
		user, pending = frames, p
		if note != "" {
			notes = append(notes, note)
		}
	}
	note := ""
	for i, n := range notes {
		if i > 0 {
			note += "; "
		}
		note += n
	}
	s = stall.NewStack(kernel, user, note)
	if in, ok := sr.interned[s.Key()]; ok {
		return in, pending
	}
	if len(sr.interned) >= maxInternedStack {
		clear(sr.interned)
	}
	sr.interned[s.Key()] = s
	return s, pending
}

// close lets go of the files the user stacks were read from.
func (sr *stackReader) close() { sr.user.Close() }

// forget drops what was kept for a process that exited.
func (sr *stackReader) forget(pid uint32) {
	sr.user.Forget(pid)
	for _, ms := range sr.made[pid] {
		sr.nMade -= len(ms)
	}
	delete(sr.made, pid)
}
