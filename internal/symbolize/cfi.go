package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"unsafe"
)

// The unwind table (.eh_frame) says, for every instruction of a function,
// where its caller's frame is: the canonical frame address (CFA) as a
// register plus an offset, and where the registers it saved are. numatrace
// reads it for the one frame a frame-pointer walk cannot see, the leaf the
// thread stalled in: a libc wrapper that moved the stack pointer (glibc's
// read() in a multi-threaded process keeps 0x28 bytes of locals) has its
// return address at CFA-8, among the words taken at the stack pointer.

// x86-64 DWARF register numbers.
const (
	dwarfRBP = 6
	dwarfRSP = 7
)

// cfaRule is where the caller's frame is at one instruction.
type cfaRule struct {
	reg int   // the CFA's register: dwarfRSP, dwarfRBP, or -1 (an expression)
	off int64 // the CFA is reg + off
	rbp rbpRule
	// rbpOff: with rbpSaved, the caller's rbp is at CFA + rbpOff.
	rbpOff int64
}

// rbpRule is where the caller's rbp is.
type rbpRule uint8

const (
	rbpSame  rbpRule = iota // still in rbp: the function has not touched it
	rbpSaved                // saved at CFA + rbpOff; the register may have been used since
	rbpLost                 // elsewhere (another register, an expression): rbp is not the caller's
)

// fde is one function's entry in the unwind table.
type fde struct {
	start, end uint64 // addresses covered
	cie        *cie
	insns      []byte
}

type cie struct {
	codeAlign uint64
	dataAlign int64
	ptrEnc    byte
	insns     []byte
}

// What an entry keeps in memory besides the section's bytes, which its
// instructions point into.
const (
	fdeBytes = int64(unsafe.Sizeof(fde{}))
	cieBytes = int64(unsafe.Sizeof(cie{})) + 64 // and its place in the map
)

// unwindTable is a file's .eh_frame, its entries sorted by address.
type unwindTable struct {
	fdes []fde
}

// cfaAt is the unwind rule at vaddr, false when the file has no entry
// for it.
func (ef *elfFile) cfaAt(vaddr uint64) (cfaRule, bool) {
	if ef.eh == nil {
		return cfaRule{}, false
	}
	return ef.eh.rule(vaddr)
}

// readUnwindTable reads the file's .eh_frame, within the allowance: its
// bytes are kept, as the entries point into them.
func readUnwindTable(e *elf.File, r io.ReaderAt, fileSize int64, a *allowance) (*unwindTable, error) {
	sec := e.Section(".eh_frame")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	data, err := sectionBytes(r, fileSize, sec, a)
	if err != nil {
		return nil, err
	}
	t, err := parseEHFrame(data, sec.Addr, a)
	if err != nil {
		a.give(int64(len(data)))
	}
	return t, err
}

// parseEHFrame reads every entry of an .eh_frame section loaded at addr.
// A malformed entry ends the table there: what came before is kept. The
// entries are claimed from a (nil: no bound); past it the table is
// refused.
func parseEHFrame(data []byte, addr uint64, a *allowance) (t *unwindTable, err error) {
	claimed := int64(0)
	claim := func(n int64) bool {
		if a == nil {
			return true
		}
		if !a.take(n) {
			return false
		}
		claimed += n
		return true
	}
	defer func() {
		if recover() != nil {
			t, err = nil, errors.New("corrupt .eh_frame")
		}
		if err != nil && a != nil {
			a.give(claimed)
		}
	}()
	t = &unwindTable{}
	cies := map[uint64]*cie{}
	for off := uint64(0); off+4 <= uint64(len(data)); {
		length := uint64(binary.LittleEndian.Uint32(data[off:]))
		hdr := uint64(4)
		if length == 0xffffffff {
			if off+12 > uint64(len(data)) {
				break
			}
			length, hdr = binary.LittleEndian.Uint64(data[off+4:]), 12
		}
		if length == 0 {
			break // the terminator
		}
		body := off + hdr
		end := body + length
		if end > uint64(len(data)) || end < body || length < 4 {
			break
		}
		id := uint64(binary.LittleEndian.Uint32(data[body:]))
		if id == 0 {
			if c, ok := parseCIE(data[body+4 : end]); ok {
				if !claim(cieBytes) {
					return nil, fmt.Errorf(".eh_frame: %w", errOverBudget)
				}
				cies[off] = c
			}
		} else if cieOff := body - id; id <= body {
			c, ok := cies[cieOff]
			if !ok {
				if !claim(cieBytes) {
					return nil, fmt.Errorf(".eh_frame: %w", errOverBudget)
				}
				c, ok = cieAt(data, cieOff)
				cies[cieOff] = c
			}
			if ok && c != nil {
				if e, ok := parseFDE(data[body+4:end], addr+body+4, c); ok {
					if !claim(fdeBytes) {
						return nil, fmt.Errorf(".eh_frame: %w", errOverBudget)
					}
					t.fdes = append(t.fdes, e)
				}
			}
		}
		off = end
	}
	sort.Slice(t.fdes, func(i, j int) bool { return t.fdes[i].start < t.fdes[j].start })
	return t, nil
}

// cieAt parses the CIE at off, which an FDE named before it was seen.
func cieAt(data []byte, off uint64) (*cie, bool) {
	if off+8 > uint64(len(data)) {
		return nil, false
	}
	length := uint64(binary.LittleEndian.Uint32(data[off:]))
	if length == 0xffffffff || off+4+length > uint64(len(data)) || binary.LittleEndian.Uint32(data[off+4:]) != 0 {
		return nil, false
	}
	return parseCIE(data[off+8 : off+4+length])
}

// reader reads DWARF's encodings from a byte slice; a read past the end
// panics, which parseEHFrame turns into an error.
type reader struct {
	b []byte
	i int
}

func (r *reader) byte() byte { v := r.b[r.i]; r.i++; return v }

func (r *reader) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	var c byte
	for {
		c = r.byte()
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			break
		}
	}
	if shift < 64 && c&0x40 != 0 {
		v |= -1 << shift
	}
	return v
}

func (r *reader) fixed(n int) uint64 {
	var v uint64
	for k := 0; k < n; k++ {
		v |= uint64(r.byte()) << (8 * k)
	}
	return v
}

// pointer reads a pointer in encoding enc; pc is the address of the
// byte it starts at (for pc-relative ones).
func (r *reader) pointer(enc byte, pc uint64) (uint64, bool) {
	if enc == 0xff { // omitted
		return 0, true
	}
	var v uint64
	switch enc & 0x0f {
	case 0x00:
		v = r.fixed(8)
	case 0x01:
		v = r.uleb()
	case 0x02:
		v = r.fixed(2)
	case 0x03:
		v = r.fixed(4)
	case 0x04:
		v = r.fixed(8)
	case 0x09:
		v = uint64(r.sleb())
	case 0x0a:
		v = uint64(int64(int16(r.fixed(2))))
	case 0x0b:
		v = uint64(int64(int32(r.fixed(4))))
	case 0x0c:
		v = r.fixed(8)
	default:
		return 0, false
	}
	switch enc & 0x70 {
	case 0x00:
	case 0x10: // pc-relative
		v += pc
	default:
		return 0, false // relative to what this reader does not know
	}
	if enc&0x80 != 0 {
		return 0, false // indirect
	}
	return v, true
}

func parseCIE(b []byte) (*cie, bool) {
	r := &reader{b: b}
	version := r.byte()
	if version != 1 && version != 3 && version != 4 {
		return nil, false
	}
	aug := []byte{}
	for c := r.byte(); c != 0; c = r.byte() {
		aug = append(aug, c)
	}
	if version == 4 {
		r.byte() // address size
		r.byte() // segment size
	}
	c := &cie{ptrEnc: 0}
	if len(aug) >= 2 && aug[0] == 'e' && aug[1] == 'h' {
		r.fixed(8)
		aug = aug[2:]
	}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		r.byte()
	} else {
		r.uleb()
	}
	if len(aug) > 0 && aug[0] == 'z' {
		n := int(r.uleb())
		data := &reader{b: r.b[r.i : r.i+n]}
		r.i += n
		for _, a := range aug[1:] {
			switch a {
			case 'R':
				c.ptrEnc = data.byte()
			case 'P':
				enc := data.byte()
				if _, ok := data.pointer(enc&0x7f, 0); !ok {
					return nil, false
				}
			case 'L':
				data.byte()
			case 'S', 'B':
			default:
				return nil, false
			}
		}
	} else if len(aug) > 0 {
		return nil, false
	}
	c.insns = r.b[r.i:]
	return c, true
}

// parseFDE reads an FDE's body after its CIE pointer; pc is the address
// the body starts at.
func parseFDE(b []byte, pc uint64, c *cie) (fde, bool) {
	r := &reader{b: b}
	start, ok := r.pointer(c.ptrEnc, pc)
	if !ok {
		return fde{}, false
	}
	size, ok := r.pointer(c.ptrEnc&0x0f, 0)
	if !ok {
		return fde{}, false
	}
	n := int(r.uleb()) // augmentation data ('z' CIEs, which every one here is)
	r.i += n
	if r.i > len(b) {
		return fde{}, false
	}
	return fde{start: start, end: start + size, cie: c, insns: b[r.i:]}, true
}

// rule runs vaddr's entry's instructions up to vaddr.
func (t *unwindTable) rule(vaddr uint64) (cfaRule, bool) {
	i := sort.Search(len(t.fdes), func(i int) bool { return t.fdes[i].start > vaddr }) - 1
	if i < 0 || vaddr >= t.fdes[i].end {
		return cfaRule{}, false
	}
	e := &t.fdes[i]
	return execCFA(e, vaddr)
}

// execCFA runs the CIE's initial instructions and the FDE's up to pc.
func execCFA(e *fde, pc uint64) (rule cfaRule, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	c := e.cie
	var initial cfaRule
	var stack []cfaRule
	loc := e.start
	run := func(insns []byte, isCIE bool) bool {
		r := &reader{b: insns}
		for r.i < len(r.b) {
			op := r.byte()
			advance := uint64(0)
			switch op >> 6 {
			case 1: // advance_loc
				advance = uint64(op&0x3f) * c.codeAlign
			case 2: // offset
				off := int64(r.uleb()) * c.dataAlign
				if op&0x3f == dwarfRBP {
					rule.rbp, rule.rbpOff = rbpSaved, off
				}
			case 3: // restore
				if op&0x3f == dwarfRBP {
					rule.rbp, rule.rbpOff = initial.rbp, initial.rbpOff
				}
			}
			if op>>6 != 0 {
				if advance > 0 && !isCIE {
					if loc+advance > pc {
						return true
					}
					loc += advance
				}
				continue
			}
			switch op {
			case 0x00: // nop
			case 0x01: // set_loc
				v, ok := r.pointer(c.ptrEnc, 0)
				if !ok {
					return false
				}
				if v > pc {
					return true
				}
				loc = v
			case 0x02:
				advance = r.fixed(1) * c.codeAlign
			case 0x03:
				advance = r.fixed(2) * c.codeAlign
			case 0x04:
				advance = r.fixed(4) * c.codeAlign
			case 0x05, 0x11: // offset_extended, offset_extended_sf
				reg := r.uleb()
				var off int64
				if op == 0x05 {
					off = int64(r.uleb()) * c.dataAlign
				} else {
					off = r.sleb() * c.dataAlign
				}
				if reg == dwarfRBP {
					rule.rbp, rule.rbpOff = rbpSaved, off
				}
			case 0x14, 0x15: // val_offset, val_offset_sf: a value, not where rbp is
				reg := r.uleb()
				if op == 0x14 {
					r.uleb()
				} else {
					r.sleb()
				}
				if reg == dwarfRBP {
					rule.rbp = rbpLost
				}
			case 0x06: // restore_extended
				if r.uleb() == dwarfRBP {
					rule.rbp, rule.rbpOff = initial.rbp, initial.rbpOff
				}
			case 0x07: // undefined
				if r.uleb() == dwarfRBP {
					rule.rbp = rbpLost
				}
			case 0x08: // same_value
				if r.uleb() == dwarfRBP {
					rule.rbp = rbpSame
				}
			case 0x09: // register: rbp's value is in another register
				reg := r.uleb()
				r.uleb()
				if reg == dwarfRBP {
					rule.rbp = rbpLost
				}
			case 0x0a: // remember_state
				stack = append(stack, rule)
			case 0x0b: // restore_state
				if len(stack) == 0 {
					return false
				}
				rule, stack = stack[len(stack)-1], stack[:len(stack)-1]
			case 0x0c: // def_cfa
				rule.reg, rule.off = int(r.uleb()), int64(r.uleb())
			case 0x12: // def_cfa_sf
				rule.reg, rule.off = int(r.uleb()), r.sleb()*c.dataAlign
			case 0x0d: // def_cfa_register
				rule.reg = int(r.uleb())
			case 0x0e: // def_cfa_offset
				rule.off = int64(r.uleb())
			case 0x13: // def_cfa_offset_sf
				rule.off = r.sleb() * c.dataAlign
			case 0x0f: // def_cfa_expression
				n := int(r.uleb())
				r.i += n
				rule.reg = -1
			case 0x10, 0x16: // expression, val_expression
				reg := r.uleb()
				n := int(r.uleb())
				r.i += n
				if reg == dwarfRBP {
					rule.rbp = rbpLost // where an expression says: not read here
				}
			case 0x2e: // GNU_args_size
				r.uleb()
			case 0x2f: // GNU_negative_offset_extended
				reg := r.uleb()
				off := -int64(r.uleb()) * c.dataAlign
				if reg == dwarfRBP {
					rule.rbp, rule.rbpOff = rbpSaved, off
				}
			default:
				return false
			}
			if advance > 0 && !isCIE {
				if loc+advance > pc {
					return true
				}
				loc += advance
			}
		}
		return true
	}
	if !run(c.insns, true) {
		return cfaRule{}, false
	}
	initial = rule
	if !run(e.insns, false) {
		return cfaRule{}, false
	}
	return rule, rule.reg == dwarfRSP || rule.reg == dwarfRBP
}
