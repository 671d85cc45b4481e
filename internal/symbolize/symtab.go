package symbolize

import (
	"debug/elf"
	"sort"
	"strings"
)

// symbol is one function: the addresses [start, end) in the ELF's
// virtual address space.
type symbol struct {
	start, end uint64
	name       string
	demangled  bool // name is already human-readable
}

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

// maxSymtabBytes bounds the symbol table read of one file (about 10
// million symbols): a larger .symtab is passed over for .dynsym, rather
// than hold up the stream for seconds and gigabytes.
const maxSymtabBytes = 256 << 20

// elfSymbols reads the function symbols of .symtab and .dynsym.
func elfSymbols(e *elf.File) symtab {
	type candidate struct {
		symbol
		rank  int
		sized bool
	}
	var all []candidate
	var reads []func() ([]elf.Symbol, error)
	if sec := e.Section(".symtab"); sec != nil && sec.Size <= maxSymtabBytes {
		reads = append(reads, e.Symbols)
	}
	reads = append(reads, e.DynamicSymbols)
	for _, read := range reads {
		syms, _ := read() // a missing table is no error here
		for _, s := range syms {
			typ := elf.ST_TYPE(s.Info)
			if (typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC) || s.Section == elf.SHN_UNDEF || s.Value == 0 || s.Name == "" {
				continue
			}
			c := candidate{symbol{start: s.Value, end: s.Value + s.Size, name: s.Name}, aliasRank(s), s.Size > 0}
			if !c.sized || c.end < c.start {
				c.end, c.sized = sectionEnd(e, s), false
			}
			all = append(all, c)
		}
	}
	// Of the names of one address, the sized and best ranked wins.
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.start != b.start {
			return a.start < b.start
		}
		if a.sized != b.sized {
			return a.sized
		}
		return a.rank < b.rank
	})
	var t symtab
	var sized []bool
	for _, c := range all {
		if len(t) > 0 && t[len(t)-1].start == c.start {
			continue
		}
		t = append(t, c.symbol)
		sized = append(sized, c.sized)
	}
	// A symbol of unknown size runs up to the next one.
	for i := range t {
		if !sized[i] && i+1 < len(t) && t[i+1].start < t[i].end {
			t[i].end = t[i+1].start
		}
	}
	return t
}

// aliasRank orders the names of one address: "read" before "__read",
// global before weak before local.
func aliasRank(s elf.Symbol) int {
	underscores := len(s.Name) - len(strings.TrimLeft(s.Name, "_"))
	bind := 2
	switch elf.ST_BIND(s.Info) {
	case elf.STB_GLOBAL:
		bind = 0
	case elf.STB_WEAK:
		bind = 1
	}
	return underscores*4 + bind
}

// sectionEnd bounds a symbol of unknown size by its section.
func sectionEnd(e *elf.File, s elf.Symbol) uint64 {
	if int(s.Section) < len(e.Sections) {
		sec := e.Sections[s.Section]
		if s.Value >= sec.Addr && s.Value < sec.Addr+sec.Size {
			return sec.Addr + sec.Size
		}
	}
	return ^uint64(0)
}
