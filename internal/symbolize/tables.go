package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// allowance is what one file's tables may still take of memory as they
// are read: each reader asks before it allocates, so a file that claims
// a billion functions is refused in the header, not in the allocator.
// Some of it is given back (a section's bytes once its entries are
// copied out); what is kept at the end is the file's share of the
// symbolizer's budget.
type allowance struct {
	left, kept int64
}

// errOverBudget is a table too large for what the file may take.
var errOverBudget = errors.New("larger than the symbolizer's memory budget")

// take claims n bytes; false leaves the allowance as it was.
func (a *allowance) take(n int64) bool {
	if n < 0 || n > a.left {
		return false
	}
	a.left -= n
	a.kept += n
	return true
}

// give returns n bytes claimed for something that was not kept.
func (a *allowance) give(n int64) {
	a.left += n
	a.kept -= n
}

// sectionBytes reads sec's bytes as they are in the file, after checking
// them against the file's size and the allowance: a section header is
// the file's own claim, and a crafted one may claim any size. The bytes
// stay claimed until the caller gives them back.
func sectionBytes(r io.ReaderAt, fileSize int64, sec *elf.Section, a *allowance) ([]byte, error) {
	if sec.Type == elf.SHT_NOBITS || sec.Flags&elf.SHF_COMPRESSED != 0 {
		return nil, fmt.Errorf("%s: no bytes of its own", sec.Name)
	}
	size, off := sec.FileSize, sec.Offset
	if off > uint64(fileSize) || size > uint64(fileSize)-off {
		return nil, fmt.Errorf("%s: %d bytes at %d, past the end of the file", sec.Name, size, off)
	}
	if !a.take(int64(size)) {
		return nil, fmt.Errorf("%s: %d bytes: %w", sec.Name, size, errOverBudget)
	}
	b := make([]byte, size)
	if _, err := r.ReadAt(b, int64(off)); err != nil && !errors.Is(err, io.EOF) {
		a.give(int64(size))
		return nil, fmt.Errorf("%s: %w", sec.Name, err)
	}
	return b, nil
}

// What debug/elf makes of each section and program header it reads.
const (
	sectionHeaderBytes = 320
	progHeaderBytes    = 96
)

// headerCost is what debug/elf will take to read the file's headers, from
// the counts its ELF header gives (with the count of sections past
// 65,279 in the first section's header, as the format allows): a file of
// a million section headers is refused before they are read.
func headerCost(r io.ReaderAt) (int64, error) {
	var h [64]byte
	if _, err := r.ReadAt(h[:], 0); err != nil {
		return 0, fmt.Errorf("ELF header: %w", err)
	}
	le := binary.LittleEndian
	shoff, phnum, shnum := le.Uint64(h[0x28:]), int64(le.Uint16(h[0x38:])), int64(le.Uint16(h[0x3c:]))
	if shnum == 0 && shoff != 0 {
		var size [8]byte
		if _, err := r.ReadAt(size[:], int64(shoff)+0x20); err != nil {
			return 0, fmt.Errorf("section count: %w", err)
		}
		if n := le.Uint64(size[:]); n < 1<<40 {
			shnum = int64(n)
		} else {
			return 0, fmt.Errorf("%d sections: %w", n, errOverBudget)
		}
	}
	return shnum*sectionHeaderBytes + phnum*progHeaderBytes, nil
}
