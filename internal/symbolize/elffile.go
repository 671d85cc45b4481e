package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

const (
	// maxNoteBytes bounds the notes read for a build id.
	maxNoteBytes = 1 << 16
	// maxNoteSections bounds how many note sections are looked in: a
	// crafted file may have 65,535 that all claim the same bytes.
	maxNoteSections = 16
)

// elfFile is what symbolizing needs of one mapped file, read once and
// shared by every process that maps it. The file is held open, so that
// the code and tables read later are the mapped file's even once every
// process that mapped it has exited or the name is someone else's.
type elfFile struct {
	f       *os.File // nil once closed, or for a file that could not be read
	bytes   int64    // what its tables keep in memory, its share of the budget
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
	eh            *unwindTable // .eh_frame; nil if none, or left out
	// left says which of its tables were left out and why ("" if
	// none): a frame that misses a name or a caller because of it says so.
	left string
}

// loadELF reads what symbolizing needs of the open file f, taking at
// most limit bytes of memory for its tables. A file that is not a
// readable ELF yields an error; corrupt contents never panic.
func loadELF(f *os.File, limit int64) (*elfFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", f.Name())
	}
	a := &allowance{left: limit}
	ef, err := parseELF(f, st.Size(), a)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	ef.f, ef.bytes = f, a.kept
	return ef, nil
}

// parseELF reads an ELF file of size bytes from r within the allowance.
func parseELF(r io.ReaderAt, size int64, a *allowance) (ef *elfFile, err error) {
	defer func() {
		if p := recover(); p != nil {
			ef, err = nil, fmt.Errorf("corrupt ELF: %v", p)
		}
	}()
	headers, err := headerCost(r)
	if err != nil {
		return nil, err
	}
	if !a.take(headers) {
		return nil, fmt.Errorf("its headers: %w", errOverBudget)
	}
	defer a.give(headers)
	e, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	if e.Machine != elf.EM_X86_64 || e.Class != elf.ELFCLASS64 || e.Data != elf.ELFDATA2LSB {
		// Frame-pointer prologues and call forms are read as x86-64's.
		return nil, fmt.Errorf("not an x86-64 file (%v)", e.Machine)
	}
	ef = &elfFile{buildID: gnuBuildID(e), code: newCodeCache()}
	for _, p := range e.Progs {
		if p.Type == elf.PT_LOAD {
			ef.loads = append(ef.loads, p.ProgHeader)
		}
	}
	var left []string
	ef.syms, left = elfSymbols(e, r, size, a)
	ef.isGo = e.Section(".gopclntab") != nil || e.Section(".go.buildinfo") != nil
	if ef.isGo {
		var err error
		if ef.goFuncs, err = goFuncs(e, r, size, a, ef.syms); err != nil {
			left = append(left, err.Error())
		}
	}
	if ef.eh, err = readUnwindTable(e, r, size, a); err != nil {
		left = append(left, err.Error())
	}
	if len(left) > 0 {
		ef.left = "left out: " + strings.Join(left, "; ")
	}
	ef.framePointers = ef.isGo || ef.sampleFramePointers(r)
	return ef, nil
}

// overBudget says whether a table was left out for the memory budget.
func (ef *elfFile) overBudget() bool {
	return strings.Contains(ef.left, errOverBudget.Error())
}

// close lets go of the file; its tables stay, its code can no longer
// be read.
func (ef *elfFile) close() {
	if ef.f != nil {
		ef.f.Close()
		ef.f = nil
	}
}

// readCode reads n bytes of its code at file offset off; nil if it
// cannot.
func (ef *elfFile) readCode(off uint64, n int) ([]byte, error) {
	if ef.f == nil {
		return nil, errors.New("closed")
	}
	code := make([]byte, n)
	read, err := ef.f.ReadAt(code, int64(off)) // a short read near the end is fine
	if read == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	return code[:read], nil
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
	seen := 0
	for _, s := range e.Sections {
		if s.Type == elf.SHT_NOTE && seen < maxNoteSections {
			seen++
			if id := noteBuildID(s.Open(), e.ByteOrder); id != "" {
				return id
			}
		}
	}
	seen = 0
	for _, p := range e.Progs {
		if p.Type == elf.PT_NOTE && seen < maxNoteSections {
			seen++
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
