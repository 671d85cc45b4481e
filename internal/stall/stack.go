package stall

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"path/filepath"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// KernelModule is the Module of a frame in the kernel image itself.
const KernelModule = "[kernel]"

// Frame is one frame of a stack.
type Frame struct {
	Addr   uint64 // as captured: a kernel address, or a user virtual address
	Func   string // the function's name, demangled; "" when no symbol covers it
	Module string // KernelModule, "[ext4]" for a kernel module, or the mapped file's path
	// User frames: the file's GNU build id in hex ("" if it has none) and
	// the address's offset in the file, which another machine with the
	// same file reads the same.
	BuildID string
	Offset  uint64
}

// Name is the frame's function, or its file's name and the offset in it
// when no symbol covers it ("libc.so.6+0x2724a").
func (f Frame) Name() string {
	if f.Func != "" {
		return f.Func
	}
	if f.Module == "" {
		return "[unknown]"
	}
	if f.Module == KernelModule || strings.HasPrefix(f.Module, "[") {
		return f.Module + "+0x" + hexString(f.Addr)
	}
	return filepath.Base(f.Module) + "+0x" + hexString(f.Offset)
}

func hexString(v uint64) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var b [16]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[i:])
}

// Stack is where a thread stalled: its kernel and its user stack,
// innermost frame first, symbolized when the stall was seen (a process
// may be gone by the time anyone looks). Stacks are shared between the
// events that have the same one and never changed once made: make them
// with NewStack.
type Stack struct {
	Kernel []Frame
	User   []Frame
	// Note says why a stack is missing or short: not taken (no room in
	// the ring), a binary without frame pointers, a process gone before
	// its mappings were read.
	Note string

	key     string
	size    int
	leftOut bool
}

// MaxNameBytes bounds a frame's names and a stack's note (demangled C++
// templates run long): a stack keeps at most this much of each, so that
// a recording gives back what the live run showed.
const MaxNameBytes = 4096

// NewStack makes a stack of these frames, which it may change in place:
// names over MaxNameBytes are cut.
func NewStack(kernel, user []Frame, note string) *Stack {
	for _, frames := range [][]Frame{kernel, user} {
		for i := range frames {
			f := &frames[i]
			f.Func, f.Module, f.BuildID = cutName(f.Func), cutName(f.Module), cutName(f.BuildID)
		}
	}
	s := &Stack{Kernel: kernel, User: user, Note: cutName(note)}
	s.key = s.makeKey()
	s.size = s.makeSize()
	return s
}

// LeftOutStack is a stack without frames that stands for the stacks a
// bound left out, note saying which: the stalls that had them are
// counted under it, so their time still shows.
func LeftOutStack(note string) *Stack {
	s := NewStack(nil, nil, note)
	s.leftOut = true
	return s
}

// LeftOut says whether s stands for stacks a bound left out.
func (s *Stack) LeftOut() bool { return s != nil && s.leftOut }

// cutName keeps at most MaxNameBytes of s, whole runes only.
func cutName(s string) string {
	if len(s) <= MaxNameBytes {
		return s
	}
	s = s[:MaxNameBytes]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if r, n := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || n > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// Key names the stack for counting and deduplication: the same frames
// (by name and module) and note give the same key, wherever and whenever
// they were read. It is a digest, not the names: a table of stacks holds
// its keys, and a stack's names can run to megabytes. A nil stack's is "".
func (s *Stack) Key() string {
	if s == nil {
		return ""
	}
	if s.key != "" {
		return s.key
	}
	return s.makeKey()
}

func (s *Stack) makeKey() string {
	k := keyHash{h: sha256.New()}
	for _, f := range s.Kernel {
		k.field(f.Name())
	}
	k.field("") // where the kernel frames end: a name is never empty
	for _, f := range s.User {
		k.field(f.Name())
		k.field(f.Module)
	}
	k.field("")
	k.field(s.Note)
	return string(k.sum())
}

// keyHash hashes a stack's fields through a buffer, each after its
// length, so that no two lists of fields hash the same bytes.
type keyHash struct {
	h   hash.Hash
	buf [4096]byte
	n   int
}

func (k *keyHash) field(s string) {
	k.length(len(s))
	k.write(s)
}

func (k *keyHash) length(n int) {
	if len(k.buf)-k.n < binary.MaxVarintLen64 {
		k.flush()
	}
	k.n += len(binary.AppendUvarint(k.buf[k.n:k.n], uint64(n)))
}

func (k *keyHash) write(s string) {
	for len(s) > 0 {
		c := copy(k.buf[k.n:], s)
		k.n += c
		s = s[c:]
		if k.n == len(k.buf) {
			k.flush()
		}
	}
}

func (k *keyHash) flush() {
	k.h.Write(k.buf[:k.n])
	k.n = 0
}

func (k *keyHash) sum() []byte {
	k.flush()
	return k.h.Sum(nil)
}

// Size is about the most bytes the stack takes, held or written: its
// frames, their names (NameSize), its note and its key. What keeps stacks
// (a recording's reader, a table of them) is bounded by it, not by their
// number, and so is what the outputs write of them.
func (s *Stack) Size() int {
	if s == nil {
		return 0
	}
	if s.size != 0 {
		return s.size
	}
	return s.makeSize()
}

func (s *Stack) makeSize() int {
	text := NameSize(s.Note)
	for _, frames := range [][]Frame{s.Kernel, s.User} {
		for _, f := range frames {
			text += NameSize(f.Func) + NameSize(f.Module) + NameSize(f.BuildID)
		}
	}
	return StackSize(len(s.Kernel)+len(s.User), text)
}

// StackSize is the Size of a stack of frames whose names and note come
// to text by NameSize: for weighing a stack before making it.
func StackSize(frames, text int) int {
	return int(unsafe.Sizeof(Stack{})) + frames*int(unsafe.Sizeof(Frame{})) + text + sha256.Size
}

// NameSize is what a name weighs in a stack's Size: a byte for each of
// its bytes, but six for one an output may escape (a control character,
// <, >, &, a quote, a backslash, any byte past ASCII), as JSON's \u00XX
// does: a name of them is written six times its length.
func NameSize[T string | []byte](name T) int {
	n := len(name)
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' || c == '"' || c == '\\' {
			n += 5
		}
	}
	return n
}

// Empty says whether the stack has no frame at all.
func (s *Stack) Empty() bool { return s == nil || len(s.Kernel)+len(s.User) == 0 }

// Names are the stack's function names outermost first, as a call path
// reads: the user frames, then the kernel's.
func (s *Stack) Names() []string {
	names := make([]string, 0, len(s.User)+len(s.Kernel))
	for i := len(s.User) - 1; i >= 0; i-- {
		names = append(names, s.User[i].Name())
	}
	for i := len(s.Kernel) - 1; i >= 0; i-- {
		names = append(names, s.Kernel[i].Name())
	}
	return names
}

// Path is the stack as one line, outermost frame first. Past max frames
// (max >= 3) the middle is left out as "…", keeping where the thread came
// from and where it waited.
func (s *Stack) Path(max int) string {
	names := s.Names()
	if len(names) == 0 {
		return "(no frames)"
	}
	if max >= 3 && len(names) > max {
		head := max / 2
		tail := max - head - 1
		names = append(append(names[:head:head], "…"), names[len(names)-tail:]...)
	}
	return strings.Join(names, " → ")
}
