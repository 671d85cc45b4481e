package symbolize

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// maxNoteBytes bounds the notes read for a build id.
const maxNoteBytes = 1 << 16

// elfFile is what symbolizing needs of one mapped file, read once and
// shared by every process that maps it.
type elfFile struct {
	size    int64
	mtime   time.Time
	buildID string
	loads   []elf.ProgHeader // PT_LOAD, to turn file offsets into addresses
	syms    symtab           // .symtab and .dynsym functions
	goFuncs symtab           // from .gopclntab; empty if not Go
	isGo    bool
	// framePointers: most of the file's functions set up rbp (Go's
	// always do). Only what a note says depends on it: the walk asks
	// each function.
	framePointers bool
	code          *codeCache
	eh            *ehFrame // the unwind table, read when first asked for
}

// loadELF reads the file at path. A file that is not a readable ELF
// yields an error; corrupt contents never panic.
func loadELF(path string) (*elfFile, error) {
	f, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := parseELF(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	ef.size, ef.mtime = st.Size(), st.ModTime()
	return ef, nil
}

func parseELF(r io.ReaderAt) (ef *elfFile, err error) {
	defer func() {
		if p := recover(); p != nil {
			ef, err = nil, fmt.Errorf("corrupt ELF: %v", p)
		}
	}()
	e, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	ef = &elfFile{
		buildID: gnuBuildID(e),
		syms:    elfSymbols(e),
		isGo:    e.Section(".gopclntab") != nil || e.Section(".go.buildinfo") != nil,
		code:    newCodeCache(),
	}
	if e.Machine != elf.EM_X86_64 {
		// Frame-pointer prologues and call forms are read as x86-64's.
		return nil, fmt.Errorf("not an x86-64 file (%v)", e.Machine)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_LOAD {
			ef.loads = append(ef.loads, p.ProgHeader)
		}
	}
	if sec := e.Section(".eh_frame"); sec != nil && sec.Type != elf.SHT_NOBITS {
		ef.eh = &ehFrame{off: sec.Offset, addr: sec.Addr, size: sec.Size}
	}
	if ef.isGo {
		ef.goFuncs = goFuncs(e)
	}
	ef.framePointers = ef.isGo || ef.sampleFramePointers(r)
	return ef, nil
}

// vaddr turns a file offset into the address the ELF was linked at.
func (ef *elfFile) vaddr(off uint64) (uint64, bool) {
	for _, p := range ef.loads {
		if off >= p.Off && off-p.Off < p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// fileOffset is the inverse of vaddr.
func (ef *elfFile) fileOffset(vaddr uint64) (uint64, bool) {
	for _, p := range ef.loads {
		if vaddr >= p.Vaddr && vaddr-p.Vaddr < p.Filesz {
			return vaddr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// function returns the symbol covering vaddr, Go's first.
func (ef *elfFile) function(vaddr uint64) *symbol {
	if s := ef.goFuncs.find(vaddr); s != nil {
		return s
	}
	return ef.syms.find(vaddr)
}

// name is fn's name, demangled the first time it is asked for.
func (ef *elfFile) name(fn *symbol) string {
	if !fn.demangled {
		fn.name, fn.demangled = demangleName(fn.name), true
	}
	return fn.name
}

// gnuBuildID is the NT_GNU_BUILD_ID note in hex, "" if there is none.
func gnuBuildID(e *elf.File) string {
	for _, s := range e.Sections {
		if s.Type == elf.SHT_NOTE {
			if id := noteBuildID(s.Open(), e.ByteOrder); id != "" {
				return id
			}
		}
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_NOTE {
			if id := noteBuildID(p.Open(), e.ByteOrder); id != "" {
				return id
			}
		}
	}
	return ""
}

func noteBuildID(r io.Reader, order binary.ByteOrder) string {
	const ntGNUBuildID = 3
	data, err := io.ReadAll(io.LimitReader(r, maxNoteBytes))
	if err != nil {
		return ""
	}
	align4 := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(data) >= 12 {
		nameSize := uint64(order.Uint32(data[0:]))
		descSize := uint64(order.Uint32(data[4:]))
		typ := order.Uint32(data[8:])
		data = data[12:]
		if align4(nameSize) > uint64(len(data)) {
			return ""
		}
		name := data[:nameSize]
		data = data[align4(nameSize):]
		if descSize > uint64(len(data)) {
			return ""
		}
		desc := data[:descSize]
		if typ == ntGNUBuildID && bytes.Equal(name, []byte("GNU\x00")) {
			return hex.EncodeToString(desc)
		}
		data = data[min(align4(descSize), uint64(len(data))):]
	}
	return ""
}

// goFuncs reads the function table of a Go binary's pclntab, which
// stripping (-ldflags='-s -w') leaves in place.
func goFuncs(e *elf.File) symtab {
	sec := e.Section(".gopclntab")
	if sec == nil {
		return nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, goTextStart(e, data)))
	if err != nil {
		return nil
	}
	t := make(symtab, 0, len(tab.Funcs))
	for _, fn := range tab.Funcs {
		if fn.End > fn.Entry && (len(t) == 0 || fn.Entry > t[len(t)-1].start) {
			t = append(t, symbol{start: fn.Entry, end: fn.End, name: fn.Name, demangled: true})
		}
	}
	return t
}

// goTextStart is the address the pclntab's offsets count from:
// runtime.text when the symbol table is left, else the value the
// linker wrote in the pclntab header (Go 1.18+), else .text.
func goTextStart(e *elf.File, pclntab []byte) uint64 {
	if syms, err := e.Symbols(); err == nil {
		for _, s := range syms {
			if s.Name == "runtime.text" {
				return s.Value
			}
		}
	}
	if len(pclntab) >= 8 && (e.ByteOrder.Uint32(pclntab)|1) == 0xfffffff1 { // Go 1.18 and 1.20+ magics
		ptrSize := int(pclntab[7])
		at := 8 + 2*ptrSize
		if ptrSize == 8 && len(pclntab) >= at+8 {
			if v := e.ByteOrder.Uint64(pclntab[at:]); v != 0 {
				return v
			}
		}
	}
	if text := e.Section(".text"); text != nil {
		return text.Addr
	}
	return 0
}
