package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
	"unsafe"
)

// symbol is one function: the addresses [start, end) in the ELF's
// virtual address space.
type symbol struct {
	start, end uint64
	name       string
	demangled  bool // name is already human-readable
}

// symbolBytes is what one symbol keeps in memory, besides its name.
const symbolBytes = int64(unsafe.Sizeof(symbol{}))

// symtab is sorted by start, one symbol per start.
type symtab []symbol

// find returns the symbol covering vaddr, or nil.
func (t symtab) find(vaddr uint64) *symbol {
	i := sort.Search(len(t), func(i int) bool { return t[i].start > vaddr }) - 1
	if i < 0 || vaddr >= t[i].end {
		return nil
	}
	return &t[i]
}

// elfSymSize is the size of one ELF64 symbol table entry.
const elfSymSize = 24

// candidate is a function symbol read from a table, before the names of
// one address are chosen between.
type candidate struct {
	symbol
	rank  int
	sized bool
}

// candidateBytes is what one candidate takes while the tables are read.
const candidateBytes = int64(unsafe.Sizeof(candidate{}))

// nameBytes is what a copied name takes: its bytes and their allocation.
func nameBytes(name string) int64 { return int64(len(name)) + 16 }

// elfSymbols reads the function symbols of .symtab and .dynsym. A table
// the allowance cannot hold is left out, and said in left.
func elfSymbols(e *elf.File, r io.ReaderAt, fileSize int64, a *allowance) (t symtab, left []string) {
	var all []candidate
	for _, name := range []string{".symtab", ".dynsym"} {
		sec := e.Section(name)
		if sec == nil {
			continue
		}
		var err error
		if all, err = tableSymbols(e, r, fileSize, sec, a, all); err != nil {
			left = append(left, err.Error())
		}
	}
	t = chooseSymbols(e, all, a)
	a.give(int64(cap(all)) * candidateBytes)
	return t, left
}

// tableSymbols adds the function entries of one symbol table to all,
// their names copied out of its string table; the table's bytes are
// given back. all grows by exactly what the table holds.
func tableSymbols(e *elf.File, r io.ReaderAt, fileSize int64, sec *elf.Section, a *allowance, all []candidate) ([]candidate, error) {
	if int(sec.Link) >= len(e.Sections) || sec.Link == 0 {
		return all, nil
	}
	data, err := sectionBytes(r, fileSize, sec, a)
	if err != nil {
		return all, err
	}
	defer a.give(int64(len(data)))
	strs, err := sectionBytes(r, fileSize, e.Sections[sec.Link], a)
	if err != nil {
		return all, err
	}
	defer a.give(int64(len(strs)))
	n := 0
	forEachFunction(data, func([]byte) { n++ })
	if !a.take(int64(len(all)+n) * candidateBytes) {
		return all, fmt.Errorf("%s: %d functions: %w", sec.Name, n, errOverBudget)
	}
	grown := make([]candidate, len(all), len(all)+n)
	copy(grown, all)
	a.give(int64(cap(all)) * candidateBytes)
	all = grown
	var over error
	forEachFunction(data, func(ent []byte) {
		name := cString(strs, uint64(binary.LittleEndian.Uint32(ent)))
		if name == "" || over != nil {
			return
		}
		if !a.take(nameBytes(name)) {
			over = fmt.Errorf("%s: names: %w", sec.Name, errOverBudget)
			return
		}
		info, shndx := ent[4], elf.SectionIndex(binary.LittleEndian.Uint16(ent[6:]))
		value, size := binary.LittleEndian.Uint64(ent[8:]), binary.LittleEndian.Uint64(ent[16:])
		c := candidate{symbol{start: value, end: value + size, name: strings.Clone(name)}, aliasRank(name, elf.SymBind(info>>4)), size > 0}
		if !c.sized || c.end < c.start {
			c.end, c.sized = sectionEnd(e, shndx, value), false
		}
		all = append(all, c)
	})
	return all, over
}

// forEachFunction calls f with each entry of a symbol table's bytes that
// is a defined function.
func forEachFunction(data []byte, f func(ent []byte)) {
	for off := elfSymSize; off+elfSymSize <= len(data); off += elfSymSize { // entry 0 is the null symbol
		ent := data[off : off+elfSymSize]
		typ := elf.SymType(ent[4] & 0xf)
		shndx := elf.SectionIndex(binary.LittleEndian.Uint16(ent[6:]))
		if (typ == elf.STT_FUNC || typ == elf.STT_GNU_IFUNC) && shndx != elf.SHN_UNDEF && binary.LittleEndian.Uint64(ent[8:]) != 0 {
			f(ent)
		}
	}
}

// cString is the NUL-terminated string at off of tab, "" if off is
// outside it. It points into tab.
func cString(tab []byte, off uint64) string {
	if off >= uint64(len(tab)) {
		return ""
	}
	s := tab[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return unsafe.String(unsafe.SliceData(s), len(s))
}

// chooseSymbols keeps one name per address, the sized and best ranked,
// and runs a symbol of unknown size up to the next one. The table is
// claimed from a; the names of the others are given back.
func chooseSymbols(e *elf.File, all []candidate, a *allowance) symtab {
	sort.SliceStable(all, func(i, j int) bool {
		x, y := all[i], all[j]
		if x.start != y.start {
			return x.start < y.start
		}
		if x.sized != y.sized {
			return x.sized
		}
		return x.rank < y.rank
	})
	kept := all[:0]
	for _, c := range all {
		if len(kept) > 0 && kept[len(kept)-1].start == c.start {
			a.give(nameBytes(c.name))
			continue
		}
		kept = append(kept, c)
	}
	if !a.take(int64(len(kept)) * symbolBytes) {
		for _, c := range kept {
			a.give(nameBytes(c.name))
		}
		return nil
	}
	t := make(symtab, len(kept))
	for i, c := range kept {
		t[i] = c.symbol
		if !c.sized && i+1 < len(kept) && kept[i+1].start < c.end {
			t[i].end = kept[i+1].start
		}
	}
	return t
}

// aliasRank orders the names of one address: "read" before "__read",
// global before weak before local.
func aliasRank(name string, b elf.SymBind) int {
	underscores := len(name) - len(strings.TrimLeft(name, "_"))
	bind := 2
	switch b {
	case elf.STB_GLOBAL:
		bind = 0
	case elf.STB_WEAK:
		bind = 1
	}
	return underscores*4 + bind
}

// sectionEnd bounds a symbol of unknown size by its section.
func sectionEnd(e *elf.File, shndx elf.SectionIndex, value uint64) uint64 {
	if int(shndx) < len(e.Sections) {
		sec := e.Sections[shndx]
		if value >= sec.Addr && value < sec.Addr+sec.Size {
			return sec.Addr + sec.Size
		}
	}
	return ^uint64(0)
}
