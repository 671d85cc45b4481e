package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// section is one section of a crafted ELF file.
type section struct {
	name  string
	typ   elf.SectionType
	addr  uint64
	data  []byte
	link  uint32
	claim uint64 // the size its header claims, if not its data's
}

// craftELF is an x86-64 ELF file of sections as given, their headers
// saying what the caller wants them to, true or not: what another
// process's file may be.
func craftELF(secs ...section) []byte {
	le := binary.LittleEndian
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	names := make([]uint32, len(secs)+1)
	for i, s := range secs {
		names[i] = uint32(shstr.Len())
		shstr.WriteString(s.name)
		shstr.WriteByte(0)
	}
	names[len(secs)] = uint32(shstr.Len())
	shstr.WriteString(".shstrtab\x00")
	all := append(append([]section(nil), secs...), section{name: ".shstrtab", typ: elf.SHT_STRTAB, data: shstr.Bytes()})
	body := bytes.NewBuffer(make([]byte, 64))
	offs := make([]uint64, len(all))
	for i, s := range all {
		for body.Len()%8 != 0 {
			body.WriteByte(0)
		}
		offs[i] = uint64(body.Len())
		body.Write(s.data)
	}
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := uint64(body.Len())
	body.Write(make([]byte, 64)) // the null section
	for i, s := range all {
		var sh [64]byte
		le.PutUint32(sh[0:], names[i])
		le.PutUint32(sh[4:], uint32(s.typ))
		if s.typ == elf.SHT_PROGBITS {
			le.PutUint64(sh[8:], uint64(elf.SHF_ALLOC))
		}
		le.PutUint64(sh[16:], s.addr)
		le.PutUint64(sh[24:], offs[i])
		size := uint64(len(s.data))
		if s.claim != 0 {
			size = s.claim
		}
		le.PutUint64(sh[32:], size)
		le.PutUint32(sh[40:], s.link)
		if s.typ == elf.SHT_SYMTAB || s.typ == elf.SHT_DYNSYM {
			le.PutUint64(sh[56:], elfSymSize)
		}
		le.PutUint64(sh[48:], 1)
		body.Write(sh[:])
	}
	b := body.Bytes()
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], uint16(elf.ET_DYN))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[40:], shoff)
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[58:], 64)
	le.PutUint16(b[60:], uint16(len(all)+1))
	le.PutUint16(b[62:], uint16(len(all)))
	return b
}

// pclntabClaiming is a Go 1.20 pclntab header that claims n functions,
// and size bytes in all.
func pclntabClaiming(n uint64, size int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, pclnGo120)
	b[6], b[7] = 1, 8
	binary.LittleEndian.PutUint64(b[8:], n)
	for i := 1; i < 8; i++ {
		binary.LittleEndian.PutUint64(b[8+8*i:], 80) // every table just past the header
	}
	return b
}

// dynsymOf is a .dynsym of n function symbols, all named "f" in the
// .dynstr it goes with.
func dynsymOf(n int) (syms, strs []byte) {
	syms = make([]byte, (n+1)*elfSymSize)
	for i := 1; i <= n; i++ {
		e := syms[i*elfSymSize:]
		binary.LittleEndian.PutUint32(e, 1)
		e[4] = byte(elf.STT_FUNC) | byte(elf.STB_GLOBAL)<<4
		binary.LittleEndian.PutUint16(e[6:], 1)
		binary.LittleEndian.PutUint64(e[8:], uint64(0x1000+16*i))
		binary.LittleEndian.PutUint64(e[16:], 16)
	}
	return syms, []byte("\x00f\x00")
}

// ehFrameOf is an .eh_frame of one CIE and n entries of 20 bytes each:
// the most entries its bytes can hold.
func ehFrameOf(n int) []byte {
	le := binary.LittleEndian
	var b bytes.Buffer
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0}
	var w [4]byte
	le.PutUint32(w[:], uint32(len(cie)))
	b.Write(w[:])
	b.Write(cie)
	for i := 0; i < n; i++ {
		at := uint32(b.Len())
		le.PutUint32(w[:], 16)
		b.Write(w[:])
		le.PutUint32(w[:], at+4) // back to the CIE at 0
		b.Write(w[:])
		le.PutUint32(w[:], uint32(16*i))
		b.Write(w[:])
		le.PutUint32(w[:], 16)
		b.Write(w[:])
		b.Write([]byte{0, 0, 0, 0})
	}
	return b.Bytes()
}

// allocatedBy is the bytes f allocates, transient ones too.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// loadCrafted reads the tables of a crafted file within limit bytes.
func loadCrafted(t testing.TB, b []byte, limit int64) (*elfFile, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crafted")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := loadELF(f, limit)
	if err != nil {
		f.Close()
		return nil, err
	}
	t.Cleanup(ef.close)
	return ef, nil
}

// A 4 KB .gopclntab that claims 2^30 functions (debug/gosym asked for
// about 96 GB for it, and the runtime's out-of-memory death took serve,
// attach and record down with it) is refused by its own size.
func TestCraftedPclntabIsRefusedBySize(t *testing.T) {
	b := craftELF(section{name: ".gopclntab", typ: elf.SHT_PROGBITS, data: pclntabClaiming(1<<30, 4096)})
	var ef *elfFile
	var err error
	n := allocatedBy(func() { ef, err = loadCrafted(t, b, DefaultBudget/fileShare) })
	if err != nil {
		t.Fatal(err)
	}
	if len(ef.goFuncs) != 0 || ef.left == "" {
		t.Errorf("%d Go functions, left %q: want none, and the table said to be left out", len(ef.goFuncs), ef.left)
	}
	if n > 8<<20 {
		t.Errorf("reading it allocated %d MiB", n>>20)
	}
	t.Logf("left: %s; allocated %d KiB", ef.left, n>>10)
}

// Tables larger than a file's share of the budget are left out and said,
// and what reading them takes stays within that share: a 64 MiB
// .eh_frame of the smallest entries took 1.2 GB, and a .dynsym of a
// million one-letter functions has no bound of its own.
func TestLargeTablesStayWithinTheFileShare(t *testing.T) {
	const limit = 16 << 20
	syms, strs := dynsymOf(400_000) // 9.6 MB
	for _, tc := range []struct {
		name string
		secs []section
	}{
		{".eh_frame", []section{{name: ".eh_frame", typ: elf.SHT_PROGBITS, data: ehFrameOf(700_000)}}}, // 14 MB
		{".dynsym", []section{{name: ".dynstr", typ: elf.SHT_STRTAB, data: strs}, {name: ".dynsym", typ: elf.SHT_DYNSYM, data: syms, link: 1}}},
		{".gopclntab", []section{{name: ".gopclntab", typ: elf.SHT_PROGBITS, data: pclntabClaiming(1<<20, 9<<20)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := craftELF(tc.secs...)
			var ef *elfFile
			var err error
			n := allocatedBy(func() { ef, err = loadCrafted(t, b, limit) })
			if err != nil {
				t.Fatal(err)
			}
			if !ef.overBudget() || ef.bytes > limit {
				t.Errorf("kept %d bytes of a %d limit, left %q: want the table left out, and said", ef.bytes, limit, ef.left)
			}
			if n > 3*limit {
				t.Errorf("reading it allocated %d MiB for a limit of %d MiB", n>>20, limit>>20)
			}
			t.Logf("%s: kept %d KiB, allocated %d MiB; %s", tc.name, ef.bytes>>10, n>>20, ef.left)
		})
	}
}

// A file's tables are read off the goroutine that asks for a stack,
// which waits for them no longer than its bound: a stack made meanwhile
// keeps its frames' files and offsets, says why they have no names, and
// is not final; one made once they are read has the names.
func TestFilesAreReadOffTheStacksGoroutine(t *testing.T) {
	b := buildC(t, "mixed", "-fno-omit-frame-pointer")
	u := NewUser(fakeProc(t, b))
	defer u.Close()
	u.wait = 10 * time.Millisecond
	u.parsing <- struct{}{} // another file's reading holds the parser
	addrs := []uint64{b.after(t, "read_locked", "leaf_read_locked"), b.after(t, "main", "read_locked")}
	frames, note, pending := u.Frames(42, 0, addrs, Regs{})
	if !pending || len(frames) != 1 || frames[0].Func != "" || frames[0].Module != b.path || frames[0].Offset == 0 ||
		!strings.Contains(note, "still being read") {
		t.Errorf("while the file is read: frames %+v note %q pending %v; want the leaf's file and offset, the note, pending", frames, note, pending)
	}
	<-u.parsing
	for deadline := time.Now().Add(10 * time.Second); pending; {
		if time.Now().After(deadline) {
			t.Fatal("the file was never read")
		}
		frames, note, pending = u.Frames(42, 0, addrs, Regs{})
	}
	if got := strings.Join(names(frames), ","); got != "read_locked,main" || note != "" {
		t.Errorf("once read: %s, note %q", got, note)
	}
}

// The files' tables together stay within the budget: past it the least
// recently used are let go (and closed), and a stack in one of them reads
// it again.
func TestFilesStayWithinTheBudget(t *testing.T) {
	b := buildC(t, "mixed", "-fno-omit-frame-pointer")
	const n = 12
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	os.MkdirAll(dir, 0o755)
	os.Symlink("/", filepath.Join(dir, "root"))
	code, _ := os.ReadFile(b.path)
	var maps strings.Builder
	var paths []string
	for i := range n {
		// Copies of one program, each a file of its own, mapped apart.
		p := filepath.Join(root, fmt.Sprintf("copy%d", i))
		os.WriteFile(p, code, 0o755)
		paths = append(paths, p)
		fmt.Fprintf(&maps, "%x-%x r-xp 00000000 %s %s\n", 0x10000000*(i+1), 0x10000000*(i+1)+0x100000, devIno(t, p), p)
	}
	os.WriteFile(filepath.Join(dir, "maps"), []byte(maps.String()), 0o644)
	one := openELF(t, b.path).cost()
	u := NewUserBudget(root, 4*one)
	defer u.Close()
	for i := range n {
		frames, _, _ := u.Frames(42, 0, []uint64{uint64(0x10000000*(i+1)) + b.after(t, "main", "read_locked") - b.loads[0].Vaddr}, Regs{})
		if frames[0].Module != paths[i] {
			t.Fatalf("copy %d: frame in %q", i, frames[0].Module)
		}
		if u.files.used > u.files.budget {
			t.Errorf("after copy %d: %d bytes kept of a budget of %d", i, u.files.used, u.files.budget)
		}
	}
	if got := u.files.order.Len(); got != 4 {
		t.Errorf("%d files kept, want the 4 the budget holds", got)
	}
}
