package symbolize

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

// The programs the tests walk: main → read_the_file → leaf_read (and
// read_locked → leaf_read_locked, read_spilled → leaf_read_spilled), the
// leaves built without frame pointers as distribution libraries are. In
// "mixed" the program keeps frame pointers; in "nofp" nothing does.
type testBinary struct {
	path  string
	funcs map[string]elf.Symbol
	code  map[string][]byte
	loads []elf.ProgHeader
}

const testBuildID = "0123456789abcdef"

// buildC compiles testdata/prog.c with progFlags and testdata/leaf.c
// without frame pointers into a non-PIE executable, so that its
// addresses are those it runs at.
func buildC(t *testing.T, name string, progFlags ...string) *testBinary {
	return buildCLeaf(t, name, nil, progFlags...)
}

// buildCLeaf is buildC with more flags for leaf.c.
func buildCLeaf(t *testing.T, name string, leafFlags []string, progFlags ...string) *testBinary {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("the symbolizer's tests build C programs: %v", err)
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(append([]string{"-O2", "-c", "testdata/prog.c", "-o", filepath.Join(dir, "p.o")}, progFlags...)...)
	// -fno-ipa-ra: the leaves save what they keep across their calls,
	// as a library's functions do, not knowing what their callees use.
	run(append([]string{"-O2", "-fomit-frame-pointer", "-fno-ipa-ra", "-c", "testdata/leaf.c", "-o", filepath.Join(dir, "l.o")}, leafFlags...)...)
	out := filepath.Join(dir, name)
	run("-no-pie", "-Wl,--build-id=0x"+testBuildID, "-o", out, filepath.Join(dir, "p.o"), filepath.Join(dir, "l.o"))
	return readTestBinary(t, out)
}

func readTestBinary(t *testing.T, path string) *testBinary {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := &testBinary{path: path, funcs: map[string]elf.Symbol{}, code: map[string][]byte{}}
	syms, _ := f.Symbols()
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			b.funcs[s.Name] = s
		}
	}
	text := f.Section(".text")
	data, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range b.funcs {
		if s.Value >= text.Addr && s.Value+s.Size <= text.Addr+text.Size {
			b.code[name] = data[s.Value-text.Addr : s.Value-text.Addr+s.Size]
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			b.loads = append(b.loads, p.ProgHeader)
		}
	}
	return b
}

// fn is the address of function name plus off.
func (b *testBinary) fn(t *testing.T, name string, off uint64) uint64 {
	t.Helper()
	s, ok := b.funcs[name]
	if !ok {
		t.Fatalf("%s has no function %s", b.path, name)
	}
	return s.Value + off
}

// after is the return address of caller's call to callee: the address
// after its "call rel32".
func (b *testBinary) after(t *testing.T, caller, callee string) uint64 {
	t.Helper()
	code, start, target := b.code[caller], b.fn(t, caller, 0), b.fn(t, callee, 0)
	for i := 0; i+5 <= len(code); i++ {
		rel := int32(uint32(code[i+1]) | uint32(code[i+2])<<8 | uint32(code[i+3])<<16 | uint32(code[i+4])<<24)
		if next := start + uint64(i) + 5; code[i] == 0xe8 && uint64(int64(next)+int64(rel)) == target {
			return next
		}
	}
	t.Fatalf("%s has no call to %s", caller, callee)
	return 0
}

// syscallIn is the address after fn's syscall instruction: where a
// thread in the system call has its instruction pointer.
func (b *testBinary) syscallIn(t *testing.T, fn string) uint64 {
	t.Helper()
	code := b.code[fn]
	for i := 0; i+1 < len(code); i++ {
		if code[i] == 0x0f && code[i+1] == 0x05 {
			return b.fn(t, fn, uint64(i+2))
		}
	}
	t.Fatalf("%s makes no system call", fn)
	return 0
}

// raWord is which word from the stack pointer holds fn's return address
// while it is in its system call, as readelf reads fn's unwind table.
func (b *testBinary) raWord(t *testing.T, fn string) int {
	t.Helper()
	rows := readelfCFA(t, b.path)
	pc := b.syscallIn(t, fn)
	var cfa string
	for _, r := range rows {
		if r.loc <= pc && r.loc >= b.fn(t, fn, 0) {
			cfa = r.cfa
		}
	}
	var off int
	if _, err := fmt.Sscanf(cfa, "rsp+%d", &off); err != nil {
		t.Fatalf("%s at %#x: CFA %q, want rsp-based", fn, pc, cfa)
	}
	return off/8 - 1
}

// savedBPWord is which word from the stack pointer holds the rbp fn
// saved, while it is in its system call, as readelf reads its unwind
// table.
func (b *testBinary) savedBPWord(t *testing.T, fn string) int {
	t.Helper()
	pc := b.syscallIn(t, fn)
	var row cfaRow
	for _, r := range readelfCFA(t, b.path) {
		if r.loc <= pc && r.loc >= b.fn(t, fn, 0) {
			row = r
		}
	}
	var cfa, at int
	if _, err := fmt.Sscanf(row.cfa, "rsp+%d", &cfa); err != nil {
		t.Fatalf("%s: CFA %q", fn, row.cfa)
	}
	if _, err := fmt.Sscanf(row.rbp, "c%d", &at); err != nil {
		t.Fatalf("%s does not save rbp (%q): the test's leaf no longer does what it is for", fn, row.rbp)
	}
	return (cfa + at) / 8
}

// fakeProc is a /proc with one process, pid 42, running b: its maps and
// its exe.
func fakeProc(t *testing.T, b *testBinary) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var maps strings.Builder
	for _, p := range b.loads {
		perm := "r--p"
		if p.Flags&elf.PF_X != 0 {
			perm = "r-xp"
		}
		start := p.Vaddr &^ 0xfff
		off := p.Off &^ 0xfff
		end := (p.Vaddr + p.Memsz + 0xfff) &^ 0xfff
		fmt.Fprintf(&maps, "%x-%x %s %08x %s %s\n", start, end, perm, off, devIno(t, b.path), b.path)
	}
	maps.WriteString("7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n")
	if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(maps.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.path, filepath.Join(dir, "exe")); err != nil {
		t.Fatal(err)
	}
	// Its root is this machine's: its files are read through it, as a
	// real process's are.
	if err := os.Symlink("/", filepath.Join(dir, "root")); err != nil {
		t.Fatal(err)
	}
	return root
}

// devIno is a maps line's device and inode of the file at path.
func devIno(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	major, minor := (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff
	return fmt.Sprintf("%02x:%02x %d", major, minor, st.Ino)
}

// openELF reads the tables of the file at path, as the symbolizer does a
// mapped file, within the default budget's share.
func openELF(t *testing.T, path string) *elfFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := loadELF(f, DefaultBudget/fileShare)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(ef.close)
	return ef
}

func names(frames []stall.Frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.Name()
	}
	return out
}

func TestWalkTrustsOnlyFramePointerFunctions(t *testing.T) {
	mixed := buildC(t, "mixed", "-fno-omit-frame-pointer")
	nofp := buildC(t, "nofp", "-fomit-frame-pointer")
	// The leaves without an unwind table (-fno-asynchronous-unwind-tables):
	// nothing says what they pushed.
	nocfi := buildCLeaf(t, "nocfi", []string{"-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, "-fno-omit-frame-pointer")
	for _, tc := range []struct {
		name      string
		b         *testBinary
		addrs     func(b *testBinary) []uint64
		sp        func(b *testBinary) []uint64 // the words at the stack pointer
		bp        uint64                       // rbp
		want      []string
		noteHas   string
		wholeNote bool // the note must be empty
	}{
		{
			// In a system call in the frameless leaf: rbp is still
			// read_the_file's frame, so the kernel's walk went on from
			// read_the_file's caller; read_the_file's own return address
			// is the word at the stack pointer.
			name: "leaf repaired from the stack pointer",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.fn(t, "leaf_read", 7), b.after(t, "main", "read_the_file")}
			},
			sp: func(b *testBinary) []uint64 {
				return []uint64{b.after(t, "read_the_file", "leaf_read"), 0x7ffc00001000}
			},
			want: []string{"leaf_read", "read_the_file", "main"}, wholeNote: true,
		},
		{
			// The same stack in a program without frame pointers: the
			// word at the stack pointer is read_the_file's return address
			// here too, but nothing past it can be told true.
			name: "no frame pointers: the instruction pointer alone",
			b:    nofp,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.fn(t, "leaf_read", 7), b.after(t, "main", "read_the_file")}
			},
			sp:      func(b *testBinary) []uint64 { return []uint64{b.after(t, "read_the_file", "leaf_read")} },
			want:    []string{"leaf_read"},
			noteHas: "nofp is built without frame pointers",
		},
		{
			name: "a word at the stack pointer that is no return address",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.fn(t, "leaf_read", 7), b.after(t, "main", "read_the_file")}
			},
			sp:      func(b *testBinary) []uint64 { return []uint64{b.fn(t, "read_the_file", 0)} },
			want:    []string{"leaf_read"},
			noteHas: "user stack cut at leaf_read in mixed: it keeps no frame pointer",
		},
		{
			name: "inside a framed function",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.after(t, "read_the_file", "leaf_read"), b.after(t, "main", "read_the_file")}
			},
			want: []string{"read_the_file", "main"}, wholeNote: true,
		},
		{
			// rbp pushed but not yet set: the return address is above it.
			name:  "inside the prologue",
			b:     mixed,
			addrs: func(b *testBinary) []uint64 { return []uint64{b.fn(t, "read_the_file", 1), 0xdead} },
			sp:    func(b *testBinary) []uint64 { return []uint64{0x7ffc00001000, b.after(t, "main", "read_the_file")} },
			bp:    0x7ffc00001000, // the caller's, as pushed
			want:  []string{"read_the_file", "main"},
			// The kernel's next frame, read through the caller's rbp,
			// is junk here: it is cut, and said.
			noteHas: "outside every mapped file",
		},
		{
			// A leaf that moved the stack pointer for its locals, as
			// glibc's read() in a threaded process: its unwind table
			// says which word is its return address, not the first
			// word, which holds a stale one here.
			name: "a leaf with locals, read by its unwind table",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.syscallIn(t, "leaf_read_spilled"), b.after(t, "main", "read_spilled")}
			},
			sp: func(b *testBinary) []uint64 {
				w := make([]uint64, 32)
				w[0] = b.after(t, "main", "read_the_file") // stale
				w[b.raWord(t, "leaf_read_spilled")] = b.after(t, "read_spilled", "leaf_read_spilled")
				return w
			},
			bp:   0x7ffc00002000,
			want: []string{"leaf_read_spilled", "read_spilled", "main"}, wholeNote: true,
		},
		{
			// A leaf that saved rbp and used it: its caller is known,
			// but the kernel's walk from rbp is junk past it.
			name: "a leaf that used rbp",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.syscallIn(t, "leaf_read_locked"), 0x7ffc00001234}
			},
			sp: func(b *testBinary) []uint64 {
				w := make([]uint64, 32)
				w[b.raWord(t, "leaf_read_locked")] = b.after(t, "read_locked", "leaf_read_locked")
				w[b.savedBPWord(t, "leaf_read_locked")] = 0x7ffc00002000 // the caller's rbp it saved
				return w
			},
			bp:      0x404040, // what it holds now
			want:    []string{"leaf_read_locked", "read_locked"},
			noteHas: "leaf_read_locked in mixed used rbp",
		},
		{
			// The same leaf with rbp back as it was saved: the walk goes on.
			name: "a leaf that saved rbp and left it",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.syscallIn(t, "leaf_read_locked"), b.after(t, "main", "read_locked")}
			},
			sp: func(b *testBinary) []uint64 {
				w := make([]uint64, 32)
				w[b.raWord(t, "leaf_read_locked")] = b.after(t, "read_locked", "leaf_read_locked")
				w[b.savedBPWord(t, "leaf_read_locked")] = 0x7ffc00002000
				return w
			},
			bp:   0x7ffc00002000,
			want: []string{"leaf_read_locked", "read_locked", "main"}, wholeNote: true,
		},
		{
			// With neither an unwind table nor a frame-pointer prologue,
			// a word at the stack pointer that looks like a return
			// address (a stale one here) is not taken for the caller's.
			name: "a leaf without an unwind table",
			b:    nocfi,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.syscallIn(t, "leaf_read_spilled"), b.after(t, "main", "read_spilled")}
			},
			sp: func(b *testBinary) []uint64 {
				w := make([]uint64, 32)
				w[0] = b.after(t, "main", "read_the_file") // stale
				return w
			},
			bp:      0x7ffc00002000,
			want:    []string{"leaf_read_spilled"},
			noteHas: "user stack cut at leaf_read_spilled in nocfi: it keeps no frame pointer",
		},
		{
			name: "a frame that is no return address",
			b:    mixed,
			addrs: func(b *testBinary) []uint64 {
				return []uint64{b.after(t, "read_the_file", "leaf_read"), b.fn(t, "main", 1)}
			},
			want:    []string{"read_the_file"},
			noteHas: "is not a return address",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := NewUser(fakeProc(t, tc.b))
			var regs Regs
			if tc.sp != nil {
				regs.Stack = tc.sp(tc.b)
			}
			if tc.bp != 0 {
				regs.BP = tc.bp
			}
			frames, note, _ := u.Frames(42, 0, tc.addrs(tc.b), regs)
			if got := names(frames); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("frames %v, want %v (note %q)", got, tc.want, note)
			}
			if tc.wholeNote && note != "" {
				t.Errorf("note %q, want none", note)
			}
			if !strings.Contains(note, tc.noteHas) {
				t.Errorf("note %q, want it to say %q", note, tc.noteHas)
			}
			for _, f := range frames {
				if f.Module != tc.b.path || f.BuildID != testBuildID {
					t.Errorf("frame %s: module %q build id %q, want %q and %q", f.Name(), f.Module, f.BuildID, tc.b.path, testBuildID)
				}
			}
		})
	}
}

func TestFramesOffsetsAreFileOffsets(t *testing.T) {
	b := buildC(t, "mixed", "-fno-omit-frame-pointer")
	u := NewUser(fakeProc(t, b))
	addr := b.after(t, "main", "read_the_file")
	frames, _, _ := u.Frames(42, 0, []uint64{addr}, Regs{})
	f := frames[0]
	var want uint64
	for _, p := range b.loads {
		if addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			want = addr - p.Vaddr + p.Off
		}
	}
	if f.Offset != want || f.Addr != addr {
		t.Errorf("frame at %#x: offset %#x, want %#x", addr, f.Offset, want)
	}
}

func TestExitedProcessKeepsTheInstructionPointer(t *testing.T) {
	u := NewUser(t.TempDir())
	frames, note, _ := u.Frames(42, 0, []uint64{0x401000, 0x401100}, Regs{})
	if len(frames) != 1 || frames[0].Addr != 0x401000 || note != NoteExited {
		t.Errorf("frames %v note %q, want the instruction pointer alone and %q", frames, note, NoteExited)
	}
}

func TestFramePointersOfAFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    string
		want    bool
		keepsFP map[string]bool
	}{
		{"mixed", "-fno-omit-frame-pointer", true, map[string]bool{"main": true, "read_the_file": true, "leaf_read": false}},
		{"nofp", "-fomit-frame-pointer", false, map[string]bool{"main": false, "read_the_file": false, "leaf_read": false}},
	} {
		b := buildC(t, tc.name, tc.flag)
		ef := openELF(t, b.path)
		if ef.framePointers != tc.want || ef.buildID != testBuildID {
			t.Errorf("%s: frame pointers %v build id %q, want %v and %q", tc.name, ef.framePointers, ef.buildID, tc.want, testBuildID)
		}
		for fn, want := range tc.keepsFP {
			sym := ef.syms.find(b.fn(t, fn, 0))
			if sym == nil || sym.name != fn {
				t.Fatalf("%s: no symbol %s", tc.name, fn)
			}
			if _, got := ef.prologue(sym); got != want {
				t.Errorf("%s: %s keeps a frame pointer: %v, want %v", tc.name, fn, got, want)
			}
		}
	}
}

func TestGoFunctionsStrippedOrNot(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	code, err := os.ReadFile("testdata/goprog.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, code, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ldflags string }{{"plain", ""}, {"stripped", "-s -w"}} {
		out := filepath.Join(dir, tc.name)
		cmd := exec.Command(goBin, "build", "-ldflags="+tc.ldflags, "-o", out, src)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0", "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		ef := openELF(t, out)
		var fn *symbol
		for i := range ef.goFuncs {
			if ef.goFuncs[i].name == "main.readTheFile" {
				fn = &ef.goFuncs[i]
			}
		}
		if !ef.isGo || fn == nil {
			t.Fatalf("%s: Go %v, main.readTheFile found %v", tc.name, ef.isGo, fn != nil)
		}
		if got := ef.function(fn.start + 4); got == nil || got.name != "main.readTheFile" {
			t.Errorf("%s: the function at main.readTheFile+4 is %v", tc.name, got)
		}
		if _, ok := ef.prologue(fn); !ok {
			t.Errorf("%s: main.readTheFile keeps no frame pointer", tc.name)
		}
	}
}

func TestKernelFramesWithoutTracing(t *testing.T) {
	kallsyms := strings.Join([]string{
		"ffffffff81000000 T _stext",
		"ffffffff81100000 T try_to_free_mem_cgroup_pages",
		"ffffffff81100800 t try_charge_memcg",
		"ffffffff81200000 T bpf_trace_run1",
		"ffffffff81200400 t __bpf_trace_mm_vmscan_memcg_reclaim_end",
		"ffffffff81300000 T bpf_get_stack_raw_tp",
		"ffffffff81400000 D some_data",
		"ffffffffc0a00000 t ext4_read\t[ext4]",
	}, "\n")
	k, err := parseKallsyms(strings.NewReader(kallsyms))
	if err != nil {
		t.Fatal(err)
	}
	// As a raw tracepoint's program takes it: the helper, the program
	// (JIT-ed, no symbol), the tracepoint's runner and stub, then the
	// code that stalled.
	frames := k.Frames([]uint64{0xffffffff81300010, 0xffffffffa0001234, 0xffffffff81200020, 0xffffffff81200410,
		0xffffffff81100010, 0xffffffff81100810, 0xffffffffc0a00010})
	want := []string{"try_to_free_mem_cgroup_pages", "try_charge_memcg", "ext4_read"}
	if got := names(frames); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("kernel frames %v, want %v", got, want)
	}
	if frames[2].Module != "[ext4]" || frames[0].Module != stall.KernelModule {
		t.Errorf("modules %q %q", frames[0].Module, frames[2].Module)
	}
	if _, err := parseKallsyms(strings.NewReader("0000000000000000 T _stext\n")); err == nil || !strings.Contains(err.Error(), "kptr_restrict") {
		t.Errorf("kallsyms with hidden addresses: %v, want the kptr_restrict hint", err)
	}
}

func TestDemangle(t *testing.T) {
	for in, want := range map[string]string{
		"_ZN2db5Cache3getEi": "db::Cache::get(int)",
		"read_the_file":      "read_the_file",
		"_Zbogus":            "_Zbogus",
	} {
		if got := demangleName(in); got != want {
			t.Errorf("demangle(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCallBefore(t *testing.T) {
	for _, tc := range []struct {
		code []byte
		want bool
	}{
		{[]byte{0, 0, 0xe8, 1, 2, 3, 4}, true},           // call rel32
		{[]byte{0, 0, 0, 0, 0, 0xff, 0xd0}, true},        // call *%rax
		{[]byte{0, 0, 0, 0xff, 0x50, 0x08, 0x90}, false}, // call *8(%rax) then a nop
		{[]byte{0, 0, 0, 0, 0xff, 0x50, 0x08}, true},     // call *8(%rax)
		{[]byte{0xff, 0x15, 1, 2, 3, 4, 5}, false},       // the last byte is not the call's
		{[]byte{0, 0xff, 0x15, 1, 2, 3, 4}, true},        // call *rel32(%rip)
		{[]byte{0, 0, 0, 0, 0, 0xff, 0xe0}, false},       // jmp *%rax
	} {
		if got := endsWithCall(tc.code); got != tc.want {
			t.Errorf("endsWithCall(% x) = %v, want %v", tc.code, got, tc.want)
		}
	}
}

// A mapping's path may name a FIFO by the time it is read (a process can
// swap its files): reading it neither blocks nor fails the stack.
func TestAFIFOIsNotRead(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "42")
	os.MkdirAll(dir, 0o755)
	os.Symlink("/", filepath.Join(dir, "root"))
	line := fmt.Sprintf("400000-401000 r-xp 00000000 %s %s\n", devIno(t, fifo), fifo)
	os.WriteFile(filepath.Join(dir, "maps"), []byte(line), 0o644)
	done := make(chan string, 1)
	go func() {
		_, note, _ := NewUser(root).Frames(42, 0, []uint64{0x400010}, Regs{})
		done <- note
	}()
	select {
	case note := <-done:
		if !strings.Contains(note, "not a regular file") {
			t.Errorf("note %q, want it to say the file is not a regular one", note)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
}

// cfaRow is one row of `readelf --debug-dump=frames-interp`: from loc
// on, the CFA ("rsp+40", "exp") and where rbp is ("c-32", "u").
type cfaRow struct {
	loc      uint64
	cfa, rbp string
}

// readelfCFA is every row of binutils' own reading of path's unwind
// table: the reference the table's reader is held to.
func readelfCFA(t *testing.T, path string) []cfaRow {
	t.Helper()
	// readelf exits 1 on some files it reads whole (Debian's libc): its
	// output is what counts.
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", path).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("readelf: %v", err)
	}
	var rows []cfaRow
	var cols []string
	inFDE := false
	for _, line := range strings.Split(string(out), "\n") {
		// "r10 (r10)" is one column, a register and its name.
		f := slices.DeleteFunc(strings.Fields(line), func(s string) bool { return strings.HasPrefix(s, "(") })
		switch {
		case len(f) > 3 && (f[3] == "FDE" || f[3] == "CIE"):
			inFDE = f[3] == "FDE"
		case len(f) > 0 && f[0] == "LOC" && inFDE:
			cols = f
		case len(f) >= 2 && len(f[0]) == 16 && cols != nil:
			var loc uint64
			if _, err := fmt.Sscanf(f[0], "%x", &loc); err != nil {
				continue
			}
			r := cfaRow{loc: loc, cfa: f[1], rbp: "u"}
			for i, c := range cols {
				if c == "rbp" && i < len(f) {
					r.rbp = f[i]
				}
			}
			rows = append(rows, r)
		case len(f) == 0:
			cols = nil
		}
	}
	return rows
}

// The unwind table's reader agrees with readelf on every row of a test
// program's and of the machine's libc (thousands of functions, written
// by another compiler and hand-written assembly): where the CFA is, and
// whether and where rbp was saved.
func TestUnwindTableAgreesWithReadelf(t *testing.T) {
	mixed := buildC(t, "mixed", "-fno-omit-frame-pointer")
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	for _, path := range []string{mixed.path, libc} {
		ef := openELF(t, path)
		rows := readelfCFA(t, path)
		checked := 0
		for _, r := range rows {
			rule, ok := ef.cfaAt(r.loc)
			want, wantOK := r.cfa, strings.HasPrefix(r.cfa, "rsp+") || strings.HasPrefix(r.cfa, "rbp+")
			if ok != wantOK {
				t.Errorf("%s at %#x: rule found %v (%+v), readelf's CFA %q", filepath.Base(path), r.loc, ok, rule, r.cfa)
				continue
			}
			if !ok {
				continue
			}
			got := fmt.Sprintf("rsp+%d", rule.off)
			if rule.reg == dwarfRBP {
				got = fmt.Sprintf("rbp+%d", rule.off)
			}
			gotRBP := "u"
			switch rule.rbp {
			case rbpSaved:
				gotRBP = fmt.Sprintf("c%d", rule.rbpOff)
			case rbpLost:
				gotRBP = "elsewhere"
			}
			wantRBP := r.rbp
			if wantRBP != "u" && !strings.HasPrefix(wantRBP, "c") {
				wantRBP = "elsewhere" // in a register ("r10") or at an expression
			}
			if got != want || gotRBP != wantRBP {
				t.Errorf("%s at %#x: CFA %s, rbp %s; readelf: %s, %s", filepath.Base(path), r.loc, got, gotRBP, want, wantRBP)
			}
			checked++
		}
		if checked < 10 {
			t.Errorf("%s: %d rows checked", path, checked)
		}
		t.Logf("%s: %d rows agree with readelf", filepath.Base(path), checked)
	}
}

// startProg runs b with a pipe for its standard input: it waits in
// read_the_file's read until the pipe closes.
func startProg(t *testing.T, b *testBinary) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command(b.path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Its maps hold the program once exec has loaded it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid)); strings.Contains(string(m), b.path) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the program never mapped itself")
		}
	}
	return cmd, func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }
}

// The stall records of a process are read after it has stalled: by then
// it may have exited, as a short program does right after its last
// page fault. Its files were opened with its first stack, and the walk
// of a later one reads them still: the fresh-host failure of
// TestStacksOfRealStalls, where page-fault stacks of programs that had
// exited were cut at their leaf ("it keeps no frame pointer"), because
// the code was read again by a path through the dead process's root.
func TestStackOfAnExitedProcessIsWhole(t *testing.T) {
	b := buildC(t, "mixed", "-fno-omit-frame-pointer")
	cmd, exit := startProg(t, b)
	pid := uint32(cmd.Process.Pid)
	u := NewUser("/proc")
	defer u.Close()
	// A stack while it runs: its maps and files are read.
	frames, note, _ := u.Frames(pid, 0, []uint64{b.syscallIn(t, "leaf_read"), b.after(t, "main", "read_the_file")},
		Regs{Stack: []uint64{b.after(t, "read_the_file", "leaf_read")}})
	if got := names(frames); strings.Join(got, ",") != "leaf_read,read_the_file,main" || note != "" {
		t.Fatalf("the live process's stack: %v, note %q", got, note)
	}
	exit()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Fatalf("pid %d is still there: %v", pid, err)
	}
	// Then one through functions the first did not pass, as a page fault
	// in touch_the_heap after the reads in read_the_file.
	frames, note, _ = u.Frames(pid, 0, []uint64{b.after(t, "read_locked", "leaf_read_locked"), b.after(t, "main", "read_locked")}, Regs{})
	if got := names(frames); strings.Join(got, ",") != "read_locked,main" || note != "" {
		t.Errorf("the exited process's stack: %v, note %q; want read_locked,main and no note", got, note)
	}
}

// writeMaps makes the maps of fake pid 42 under root those of b.
func writeMaps(t *testing.T, root string, b *testBinary, extra ...string) {
	t.Helper()
	var maps strings.Builder
	for _, p := range b.loads {
		perm := "r--p"
		if p.Flags&elf.PF_X != 0 {
			perm = "r-xp"
		}
		fmt.Fprintf(&maps, "%x-%x %s %08x %s %s\n", p.Vaddr&^0xfff, (p.Vaddr+p.Memsz+0xfff)&^0xfff, perm, p.Off&^0xfff, devIno(t, b.path), b.path)
	}
	for _, l := range extra {
		maps.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join(root, "42", "maps"), []byte(maps.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A process that execs keeps its pid and changes every mapping: a stack
// of the new exec is named from the new program, not from the maps
// kept of the old one.
func TestMapsAreReadAgainAfterExec(t *testing.T) {
	before := buildC(t, "before", "-fno-omit-frame-pointer")
	after := buildC(t, "after", "-fno-omit-frame-pointer")
	root := fakeProc(t, before)
	u := NewUser(root)
	defer u.Close()
	stack := func(b *testBinary, exec uint64) []stall.Frame {
		frames, note, _ := u.Frames(42, exec, []uint64{b.after(t, "read_locked", "leaf_read_locked"), b.after(t, "main", "read_locked")}, Regs{})
		if note != "" {
			t.Errorf("note %q", note)
		}
		return frames
	}
	if f := stack(before, 7); len(f) != 2 || f[0].Module != before.path {
		t.Fatalf("before the exec: %+v", f)
	}
	writeMaps(t, root, after)
	for _, f := range stack(after, 8) {
		if f.Module != after.path || f.BuildID != testBuildID {
			t.Errorf("after the exec, frame %s is of %s, want %s", f.Name(), f.Module, after.path)
		}
	}
}

// Code made at run time (a JIT's) lies in no file however often the maps
// are read: a process's maps are read again for it at most once a
// second, not for every stack (60,000 mappings read for each stack cost
// seconds of CPU a second).
func TestMapsAreReadAgainAtMostOnceASecond(t *testing.T) {
	b := buildC(t, "mixed", "-fno-omit-frame-pointer")
	root := fakeProc(t, b)
	u := NewUser(root)
	defer u.Close()
	now := time.Unix(1000, 0)
	u.now = func() time.Time { return now }
	const jit = 0x7f0000001000
	leaf := func() string {
		frames, _, _ := u.Frames(42, 0, []uint64{jit}, Regs{})
		return frames[0].Module
	}
	if m := leaf(); m != "" {
		t.Fatalf("run-time code named after %q", m)
	}
	// A file mapped there since: the next stack, at once, does not read
	// the maps again; one a second later does.
	writeMaps(t, root, b, fmt.Sprintf("7f0000000000-7f0000002000 r-xp 00000000 %s %s", devIno(t, b.path), b.path))
	if m := leaf(); m != "" {
		t.Errorf("the maps were read again at once")
	}
	now = now.Add(rereadEvery)
	if m := leaf(); m != b.path {
		t.Errorf("a second later, the leaf is in %q, want %s", m, b.path)
	}
}

// A process of an unprivileged user maps its program; once numatrace has
// read its maps, it puts a link to a root-only program at that path (a
// library upgraded by rename changes the file at the path the same way):
// the frames are named from the file it mapped, through map_files, never
// from the file the path names now. Where map_files cannot be read (no
// CAP_SYS_ADMIN, as in the DaemonSet), the file at the path is not the
// one mapped: no names rather than its.
func TestAPathSwappedAfterMappingIsNotRead(t *testing.T) {
	testutil.RequireRoot(t)
	theirs := buildC(t, "theirs", "-fno-omit-frame-pointer")
	secret := buildC(t, "secret", "-fno-omit-frame-pointer", "-Dread_locked=root_only_secret")
	if err := os.Chmod(secret.path, 0o700); err != nil {
		t.Fatal(err)
	}
	// The program in a directory of nobody's, run as nobody.
	home := filepath.Join(testutil.SharedTempDir(t), "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	prog := filepath.Join(home, "prog")
	if b, err := os.ReadFile(theirs.path); err != nil || os.WriteFile(prog, b, 0o755) != nil {
		t.Fatal(err)
	}
	os.Chown(prog, 65534, 65534)
	cmd := exec.Command(prog)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	var maps []byte
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(string(maps), prog); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program never mapped itself")
		}
		maps, _ = os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	}
	// nobody swaps the path, after its maps were read.
	swap := exec.Command("sh", "-c", `mv "$1" "$1.old" && ln -s "$2" "$1"`, "sh", prog, secret.path)
	swap.SysProcAttr = cmd.SysProcAttr
	if out, err := swap.CombinedOutput(); err != nil {
		t.Fatalf("swap: %v\n%s", err, out)
	}
	addrs := []uint64{theirs.after(t, "read_locked", "leaf_read_locked"), theirs.after(t, "main", "read_locked")}
	// A /proc that holds the maps as they were read, and the process's
	// own root and map_files.
	proc := func(withMapFiles bool) *User {
		fake := t.TempDir()
		dir := filepath.Join(fake, "42")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "maps"), maps, 0o644)
		os.Symlink(fmt.Sprintf("/proc/%d/root", pid), filepath.Join(dir, "root"))
		if withMapFiles {
			os.Symlink(fmt.Sprintf("/proc/%d/map_files", pid), filepath.Join(dir, "map_files"))
		}
		u := NewUser(fake)
		t.Cleanup(u.Close)
		return u
	}

	frames, note, _ := proc(true).Frames(42, 0, addrs, Regs{})
	if got := strings.Join(names(frames), ","); got != "read_locked,main" || note != "" {
		t.Errorf("with map_files: %s, note %q; want read_locked,main from the file mapped", got, note)
	}
	frames, note, _ = proc(false).Frames(42, 0, addrs, Regs{})
	for _, f := range frames {
		if f.Func != "" || f.BuildID != "" {
			t.Errorf("without map_files, frame %q (build id %q) was read from the file the path names now", f.Func, f.BuildID)
		}
	}
	if !strings.Contains(note, "not the file mapped") {
		t.Errorf("note %q: want it to say the file at the path is not the one mapped", note)
	}
}
