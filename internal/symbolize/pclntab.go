package symbolize

import (
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The pclntab's magic numbers, by the Go release that wrote it.
const (
	pclnGo12  = 0xfffffffb
	pclnGo116 = 0xfffffffa
	pclnGo118 = 0xfffffff0
	pclnGo120 = 0xfffffff1
)

// goFuncs reads the function table of a Go binary's pclntab, which
// stripping (-ldflags='-s -w') leaves in place. Every count and offset in
// it is checked against the section's bytes before anything is made of
// it: debug/gosym believes the header, and a 4 KB section that claims
// 2^30 functions had it ask for 96 GB. syms are the file's ELF symbols,
// for runtime.text where the table does not give its text's start.
func goFuncs(e *elf.File, r io.ReaderAt, fileSize int64, a *allowance, syms symtab) (symtab, error) {
	sec := e.Section(".gopclntab")
	if sec == nil {
		return nil, nil
	}
	data, err := sectionBytes(r, fileSize, sec, a)
	if err != nil {
		return nil, err
	}
	defer a.give(int64(len(data)))
	text := uint64(0)
	if s := e.Section(".text"); s != nil {
		text = s.Addr
	}
	for _, s := range syms {
		if s.name == "runtime.text" {
			text = s.start
		}
	}
	return parsePclntab(data, text, a)
}

// parsePclntab reads the functions of pclntab bytes whose text starts at
// text, unless the table says where (1.18+, where the linker wrote it).
func parsePclntab(data []byte, text uint64, a *allowance) (symtab, error) {
	if len(data) < 16 || data[4] != 0 || data[5] != 0 || data[7] != 8 {
		return nil, errors.New(".gopclntab: not a 64-bit Go table")
	}
	p := pcln{data: data}
	switch binary.LittleEndian.Uint32(data) {
	case pclnGo118, pclnGo120:
		if t := p.word(2); t != 0 { // 0 in a PIE file, relocated at load
			text = t
		}
		return p.read(functab{base: text, field: 4}, p.word(0), p.word(3), p.word(7), 4, a)
	case pclnGo116:
		return p.read(functab{field: 8}, p.word(0), p.word(2), p.word(6), 8, a)
	case pclnGo12:
		return funcsGo12(data, a)
	}
	return nil, errors.New(".gopclntab: unknown version")
}

// pcln reads a pclntab's header words and tables, each checked against
// the bytes there are.
type pcln struct {
	data []byte
	err  error
}

// word is the header's i-th pointer-sized word after the magic.
func (p *pcln) word(i int) uint64 {
	at := 8 + 8*i
	if at+8 > len(p.data) {
		p.err = errors.New(".gopclntab: header cut short")
		return 0
	}
	return binary.LittleEndian.Uint64(p.data[at:])
}

// tail is the table at off to the section's end.
func (p *pcln) tail(off uint64) []byte {
	if off > uint64(len(p.data)) {
		p.err = fmt.Errorf(".gopclntab: a table at %d, past its end", off)
		return nil
	}
	return p.data[off:]
}

// functab is a function table: pairs of fields (an entry's address, its
// _func's offset from the table), then one field, the end of the text.
// 1.18+'s fields are 32-bit offsets from base; 1.16's are addresses.
type functab struct {
	tab   []byte
	base  uint64
	field uint64
}

func (f functab) at(i uint64) uint64 {
	if f.field == 4 {
		return f.base + uint64(binary.LittleEndian.Uint32(f.tab[i*f.field:]))
	}
	return binary.LittleEndian.Uint64(f.tab[i*f.field:])
}

// read reads n functions of the table at tabOff, named from the name
// table at namesOff; a _func holds its name's offset at nameAt.
func (p *pcln) read(f functab, n, namesOff, tabOff, nameAt uint64, a *allowance) (symtab, error) {
	names, tab := p.tail(namesOff), p.tail(tabOff)
	if p.err != nil {
		return nil, p.err
	}
	if n == 0 || n > uint64(len(tab))/(2*f.field) || (2*n+1)*f.field > uint64(len(tab)) {
		return nil, fmt.Errorf(".gopclntab: %d functions in %d bytes of table", n, len(tab))
	}
	if !a.take(int64(n) * symbolBytes) {
		return nil, fmt.Errorf(".gopclntab: %d functions: %w", n, errOverBudget)
	}
	f.tab = tab
	t := make(symtab, 0, n)
	for i := uint64(0); i < n; i++ {
		start, end, off := f.at(2*i), f.at(2*i+2), f.at(2*i+1)
		if f.field == 4 {
			off -= f.base // an offset, not an address
		}
		if end <= start || (len(t) > 0 && start <= t[len(t)-1].start) || off > uint64(len(tab))-nameAt-4 {
			continue
		}
		name := cString(names, uint64(binary.LittleEndian.Uint32(tab[off+nameAt:])))
		if !a.take(int64(len(name))) {
			return t, fmt.Errorf(".gopclntab: names: %w", errOverBudget)
		}
		t = append(t, symbol{start: start, end: end, name: strings.Clone(name), demangled: true})
	}
	return t, nil
}

// funcsGo12 reads Go 1.2 to 1.15's table with debug/gosym, after checking
// its count against the bytes it claims.
func funcsGo12(data []byte, a *allowance) (symtab, error) {
	n := binary.LittleEndian.Uint64(data[8:])
	if n == 0 || n > uint64(len(data)-16)/16 {
		return nil, fmt.Errorf(".gopclntab: %d functions in %d bytes", n, len(data))
	}
	// debug/gosym makes a Func and a Sym of each: about 200 bytes.
	if !a.take(int64(n) * 200) {
		return nil, fmt.Errorf(".gopclntab: %d functions: %w", n, errOverBudget)
	}
	defer a.give(int64(n) * 200)
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, 0))
	if err != nil {
		return nil, err
	}
	if !a.take(int64(len(tab.Funcs)) * symbolBytes) {
		return nil, fmt.Errorf(".gopclntab: %d functions: %w", len(tab.Funcs), errOverBudget)
	}
	t := make(symtab, 0, len(tab.Funcs))
	for _, fn := range tab.Funcs {
		if fn.End > fn.Entry && (len(t) == 0 || fn.Entry > t[len(t)-1].start) && a.take(int64(len(fn.Name))) {
			t = append(t, symbol{start: fn.Entry, end: fn.End, name: fn.Name, demangled: true})
		}
	}
	return t, nil
}
