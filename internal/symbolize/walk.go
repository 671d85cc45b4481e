package symbolize

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
)

// userSpaceEnd is where x86-64 user addresses end; nothing past it is
// worth reading the maps again for.
const userSpaceEnd = 1 << 47

// walk symbolizes one stack of one process.
//
// The kernel took the stack by following rbp: frame 0 is the instruction
// pointer, each next one the return address saved above the frame rbp
// points at. That is true only through functions that keep a frame
// pointer, so a frame is kept only when the function of the frame before
// it sets up rbp (its prologue says so); past the first function that
// does not, the rest of the walk read whatever rbp held and is dropped.
// A leaf that keeps no frame pointer (a libc syscall wrapper) leaves rbp
// to its caller, so the walk skips the caller: its return address is
// then taken from the words at the stack pointer, when they hold one.
type walk struct {
	u      *User
	pid    uint32
	proc   *process
	reread bool // the maps were read again for this stack
	// deadline: files not read by then leave their frames unnamed.
	deadline time.Time
	partial  bool              // a file was still being read
	used     map[*elfFile]bool // the files of this stack, kept in the cache while it is walked
}

// located is an address with what is known of it.
type located struct {
	frame stall.Frame
	m     *mapping
	ef    *elfFile
	why   error   // why ef is nil where m is not
	fn    *symbol // the function holding the address, nil if none is known
	vaddr uint64  // the address looked up, in the ELF's own terms
}

func (w *walk) stack(addrs []uint64, regs Regs) ([]stall.Frame, string) {
	first := w.locate(addrs[0], false, true)
	frames := []stall.Frame{first.frame}
	if first.m == nil {
		return frames, fmt.Sprintf("user stack cut at %#x: outside every mapped file", addrs[0])
	}
	// Unless the leaf set up its frame, rbp is still its caller's, and
	// the walk went on from the caller's caller: the caller's own return
	// address is among the words at the stack pointer. The leaf's unwind
	// table says which word; without one, its prologue: the first before
	// the leaf pushed rbp, the one above it after.
	var ra int
	chained := true // the kernel's walk from rbp goes on from the caller
	if rule, ok := w.cfa(first); ok {
		if rule.reg == dwarfRBP {
			return w.follow(frames, first, addrs[1:])
		}
		if rule.off < 8 || rule.off%8 != 0 {
			return frames, w.cutNote(first)
		}
		ra = int(rule.off/8) - 1
		switch rule.rbp {
		case rbpSaved:
			// The leaf saved rbp and may have used it: the walk from it
			// is the caller's only if it still holds what was saved.
			saved := rule.off + rule.rbpOff
			chained = saved >= 0 && saved%8 == 0 && int(saved/8) < len(regs.Stack) &&
				regs.BP != 0 && regs.Stack[saved/8] == regs.BP
		case rbpLost:
			chained = false
		}
	} else {
		switch w.phase(first) {
		case phaseFramed:
			return w.follow(frames, first, addrs[1:])
		case phasePushed:
			ra = 1
		case phaseUnknown:
			// Neither a prologue nor an unwind table says what the leaf
			// pushed: a word from the stack could be any stale one. A Go
			// function without a frame pointer has no frame at all (Go
			// saves rbp in every function with one), so it pushed nothing.
			if !first.goFunction() {
				return frames, w.cutNote(first)
			}
		}
	}
	if ra >= len(regs.Stack) || regs.Stack[ra] == 0 {
		return frames, w.cutNote(first)
	}
	ret := w.locate(regs.Stack[ra], true, false)
	if !ret.afterCall() || !w.keepsFramePointer(ret) {
		return frames, w.cutNote(first)
	}
	frames = append(frames, ret.frame)
	if !chained {
		return frames, fmt.Sprintf("user stack cut after %s: %s used rbp, so the frames past its caller cannot be told",
			ret.where(), first.where())
	}
	rest := addrs[1:]
	if len(rest) > 0 && rest[0] == regs.Stack[ra] {
		rest = rest[1:]
	}
	return w.follow(frames, ret, rest)
}

// cfa is the unwind table's rule at l, an instruction pointer.
func (w *walk) cfa(l located) (cfaRule, bool) {
	if l.ef == nil || l.m == nil {
		return cfaRule{}, false
	}
	vaddr, ok := l.ef.vaddr(l.frame.Offset)
	if !ok {
		return cfaRule{}, false
	}
	return l.ef.cfaAt(vaddr)
}

// follow appends the frames of rest while each frame before keeps its
// frame pointer and each address is a return address.
func (w *walk) follow(frames []stall.Frame, prev located, rest []uint64) ([]stall.Frame, string) {
	for _, addr := range rest {
		if !w.keepsFramePointer(prev) {
			return frames, w.cutNote(prev)
		}
		loc := w.locate(addr, true, true)
		if loc.m == nil {
			return frames, fmt.Sprintf("user stack cut after %s: the next frame, %#x, is outside every mapped file", prev.where(), addr)
		}
		if entryPoints[loc.frame.Func] {
			// Where the stack began (a goroutine's return address is
			// runtime.goexit's first instruction, after no call).
			return append(frames, loc.frame), ""
		}
		if !loc.afterCall() {
			return frames, fmt.Sprintf("user stack cut after %s: the next frame, in %s, is not a return address", prev.where(), filepath.Base(loc.frame.Module))
		}
		frames = append(frames, loc.frame)
		prev = loc
	}
	return frames, ""
}

// where names a located frame for a note.
func (l located) where() string {
	if l.m == nil {
		return fmt.Sprintf("%#x", l.frame.Addr)
	}
	return l.frame.Name() + " in " + filepath.Base(l.frame.Module)
}

// entryPoints are where a process's or a thread's stack begins: a walk
// that ends at one is whole.
var entryPoints = map[string]bool{
	"__libc_start_call_main": true, "__libc_start_main": true, "__libc_start_main_impl": true,
	"_start": true, "start_thread": true, "clone": true, "clone3": true, "__clone": true, "__clone3": true,
	"runtime.goexit": true, "runtime.goexit.abi0": true, "runtime.rt0_go": true, "runtime.mstart": true,
	"runtime.mstart.abi0": true,
}

// cutNote says why a walk stopped at l, "" when it reached where stacks
// begin.
func (w *walk) cutNote(l located) string {
	if entryPoints[l.frame.Func] {
		return ""
	}
	exe := w.exeFile()
	noFP := exe != nil && !exe.framePointers
	if noFP && exe == l.ef {
		return fmt.Sprintf("user stack cut at %s: %s is built without frame pointers (-fno-omit-frame-pointer gives whole stacks)",
			l.where(), filepath.Base(w.proc.exe))
	}
	var why string
	switch {
	case errors.Is(l.why, errStillReading):
		why = errStillReading.Error()
	case l.ef == nil && l.why != nil:
		why = "its file cannot be read as the one mapped (" + l.why.Error() + ")"
	case l.ef == nil:
		why = "its file cannot be read"
	case l.fn == nil && l.ef.left != "":
		why = "no symbol says where its function starts (" + l.ef.left + ")"
	case l.fn == nil:
		why = "no symbol says where its function starts"
	default:
		why = "it keeps no frame pointer"
	}
	if noFP {
		why += fmt.Sprintf(", and %s is built without frame pointers (-fno-omit-frame-pointer gives whole stacks)", filepath.Base(w.proc.exe))
	}
	return fmt.Sprintf("user stack cut at %s: %s", l.where(), why)
}

// keepsFramePointer tells whether l's function links its frame into the
// rbp chain: the walk past it is true.
func (w *walk) keepsFramePointer(l located) bool {
	if l.fn == nil {
		return false
	}
	_, ok := l.ef.prologue(l.fn)
	return ok
}

// phase is where the instruction pointer l stands in its function's
// frame setup.
func (w *walk) phase(l located) framePhase {
	if l.fn == nil {
		return phaseUnknown
	}
	p, ok := l.ef.prologue(l.fn)
	if !ok {
		return phaseUnknown
	}
	switch d := l.vaddr - l.fn.start; {
	case d <= uint64(p.push):
		return phaseEntry
	case d < uint64(p.mov+movSPToBPSz):
		return phasePushed
	default:
		return phaseFramed
	}
}

// goFunction says whether l is in a Go function, by its pclntab.
func (l located) goFunction() bool {
	return l.ef != nil && l.ef.isGo && l.ef.goFuncs.find(l.vaddr) != nil
}

// afterCall tells whether l is right after a call instruction, as a
// return address is.
func (l located) afterCall() bool {
	return l.ef != nil && l.ef.callBefore(l.frame.Offset)
}

// exeFile is the process's main executable, nil if it is not known.
func (w *walk) exeFile() *elfFile {
	for _, m := range w.proc.maps {
		if m.path == w.proc.exe {
			ef, _ := w.file(m)
			return ef
		}
	}
	return nil
}

// locate symbolizes addr. A return address is looked up one byte back,
// inside the call, as the call may end its function.
func (w *walk) locate(addr uint64, isReturn, mayReread bool) located {
	l := located{frame: stall.Frame{Addr: addr}}
	m := w.mapping(addr, mayReread)
	if m == nil {
		return l
	}
	l.m = m
	l.frame.Module = m.path
	l.frame.Offset = m.fileOffset(addr)
	l.ef, l.why = w.file(m)
	if l.ef == nil {
		return l
	}
	l.frame.BuildID = l.ef.buildID
	off := l.frame.Offset
	if isReturn && off > 0 {
		off--
	}
	vaddr, ok := l.ef.vaddr(off)
	if !ok {
		return l
	}
	l.vaddr = vaddr
	if fn := l.ef.function(vaddr); fn != nil {
		l.fn = fn
		l.frame.Func = l.ef.name(fn)
	}
	return l
}

// mapping finds the mapping of addr, reading the maps again when none
// holds it (the process may have mapped a new file), once per stack and
// at most once every rereadEvery per process: code made at run time lies
// outside every file however often they are read.
func (w *walk) mapping(addr uint64, mayReread bool) *mapping {
	m := findMapping(w.proc.maps, addr)
	now := w.u.now()
	if m != nil || !mayReread || w.reread || addr == 0 || addr >= userSpaceEnd ||
		(!w.proc.rereadAt.IsZero() && now.Sub(w.proc.rereadAt) < rereadEvery) {
		return m
	}
	w.reread = true
	w.proc.rereadAt = now
	p, err := w.u.readProcess(w.pid)
	if err != nil {
		return nil
	}
	p.exec, p.rereadAt = w.proc.exec, now
	w.u.procs.put(w.pid, p)
	w.proc = p
	return findMapping(p.maps, addr)
}
