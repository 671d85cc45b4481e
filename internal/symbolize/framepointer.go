package symbolize

import (
	"bytes"
	"io"
)

const (
	// fpSamples bounds the functions read to decide whether a file is
	// built with frame pointers (for the note that says it is not).
	fpSamples = 2000
	// fpMinSize skips stubs and thunks too small to have a prologue.
	fpMinSize = 16
	// prologueWindow is how far into a function its prologue is looked
	// for: Go checks the stack bound first, and gcc may shrink-wrap an
	// early return before it.
	prologueWindow = 48
	// maxCodeMemo bounds the code facts remembered per file.
	maxCodeMemo = 1024
)

// A function keeps a frame pointer when it copies the stack pointer to
// rbp: "mov %rsp,%rbp" in either encoding. It pushes the caller's rbp
// first, though gcc may schedule other instructions in between.
var movSPToBP = [][]byte{{0x48, 0x89, 0xe5}, {0x48, 0x8b, 0xec}}

const (
	pushBP      = 0x55
	movSPToBPSz = 3
)

// framePrologue finds the frame setup in a function's first bytes: the
// offsets of "push %rbp" and of the "mov %rsp,%rbp" after it, or ok
// false.
func framePrologue(code []byte) (push, mov int, ok bool) {
	mov = -1
	for _, pat := range movSPToBP {
		if i := bytes.Index(code, pat); i >= 0 && (mov < 0 || i < mov) {
			mov = i
		}
	}
	if mov < 0 {
		return 0, 0, false
	}
	push = bytes.LastIndexByte(code[:mov], pushBP)
	if push < 0 {
		return 0, 0, false
	}
	return push, mov, true
}

// startupCode are the C runtime's own functions, in every executable
// whatever it was built with: they say nothing of how the program was.
var startupCode = map[string]bool{
	"_start": true, "_init": true, "_fini": true, "deregister_tm_clones": true, "register_tm_clones": true,
	"__do_global_dtors_aux": true, "frame_dummy": true, "__libc_csu_init": true, "__libc_csu_fini": true,
	"_dl_relocate_static_pie": true,
}

// sampleFramePointers tells whether most of a file's own functions (up
// to fpSamples of them) start by setting up a frame pointer.
func (ef *elfFile) sampleFramePointers(r io.ReaderAt) bool {
	var fns []symbol
	for _, s := range ef.syms {
		if s.end-s.start >= fpMinSize && !startupCode[s.name] {
			fns = append(fns, s)
		}
	}
	step := max(1, len(fns)/fpSamples)
	hits, sampled := 0, 0
	code := make([]byte, prologueWindow)
	for i := 0; i < len(fns); i += step {
		off, ok := ef.fileOffset(fns[i].start)
		if !ok {
			continue
		}
		n, _ := r.ReadAt(code[:min(uint64(len(code)), fns[i].end-fns[i].start)], int64(off))
		if n == 0 {
			continue
		}
		sampled++
		if _, _, ok := framePrologue(code[:n]); ok {
			hits++
		}
	}
	return sampled > 0 && hits*2 >= sampled
}

// framePhase is where an instruction pointer stands relative to its
// function's frame setup, which decides what rbp and [rsp] hold.
type framePhase int

const (
	phaseUnknown framePhase = iota // no symbol, or no prologue: rbp is not the function's
	phaseEntry                     // before the prologue: rbp is the caller's
	phasePushed                    // rbp pushed, not yet set
	phaseFramed                    // rbp is this function's frame
)

// prologue is where fn sets up its frame pointer, read from the file's
// code; ok is false when it does not (then fn keeps no frame pointer), or
// when its code cannot be read (not remembered: it may be next time).
func (ef *elfFile) prologue(fn *symbol) (p prologueAt, ok bool) {
	if p, ok := ef.code.prologues[fn.start]; ok {
		return p, p.mov >= 0
	}
	p = prologueAt{push: -1, mov: -1}
	if off, ok := ef.fileOffset(fn.start); ok {
		code, err := ef.readCode(off, int(min(uint64(prologueWindow), fn.end-fn.start)))
		if err != nil {
			return p, false
		}
		if push, mov, ok := framePrologue(code); ok {
			p = prologueAt{push: push, mov: mov}
		}
	}
	remember(ef.code.prologues, fn.start, p)
	return p, p.mov >= 0
}

// prologueAt are the offsets of a function's "push %rbp" and "mov
// %rsp,%rbp"; -1 when it has none.
type prologueAt struct{ push, mov int }

// callBefore tells whether the bytes ending at file offset off are a
// call instruction, as they are before a return address.
func (ef *elfFile) callBefore(off uint64) bool {
	if is, ok := ef.code.calls[off]; ok {
		return is
	}
	is := false
	if off >= maxCallLen {
		code, err := ef.readCode(off-maxCallLen, maxCallLen)
		if err != nil {
			return false
		}
		is = len(code) == maxCallLen && endsWithCall(code)
	}
	remember(ef.code.calls, off, is)
	return is
}

// maxCallLen is the longest call form recognized: ff /2 with a SIB
// byte and a 32-bit displacement.
const maxCallLen = 7

// endsWithCall recognizes "e8 rel32" and the indirect "ff /2" forms
// (register, memory, rip-relative) ending at the end of code.
func endsWithCall(code []byte) bool {
	n := len(code)
	if n >= 5 && code[n-5] == 0xe8 {
		return true
	}
	for size := 2; size <= n; size++ {
		if code[n-size] == 0xff && indirectCallLen(code[n-size+1:]) == size {
			return true
		}
	}
	return false
}

// indirectCallLen is the length of "ff /2" given the bytes after ff, or
// 0 if they are not its operand.
func indirectCallLen(operand []byte) int {
	if len(operand) == 0 {
		return 0
	}
	modrm := operand[0]
	mod, reg, rm := modrm>>6, (modrm>>3)&7, modrm&7
	if reg != 2 {
		return 0
	}
	size := 2 // ff and modrm
	if mod != 3 && rm == 4 {
		if len(operand) < 2 {
			return 0
		}
		size++ // SIB
		if mod == 0 && operand[1]&7 == 5 {
			size += 4
		}
	}
	switch mod {
	case 0:
		if rm == 5 {
			size += 4 // rip-relative
		}
	case 1:
		size++
	case 2:
		size += 4
	}
	return size
}

// codeCache remembers what was read of a file's code, so that a stack
// seen again reads nothing.
type codeCache struct {
	prologues map[uint64]prologueAt // function vaddr -> its frame setup
	calls     map[uint64]bool       // return address file offset -> preceded by a call
}

func newCodeCache() *codeCache {
	return &codeCache{prologues: make(map[uint64]prologueAt), calls: make(map[uint64]bool)}
}

// remember stores a fact, forgetting all once there are too many.
func remember[V any](m map[uint64]V, key uint64, val V) {
	if len(m) >= maxCodeMemo {
		clear(m)
	}
	m[key] = val
}
