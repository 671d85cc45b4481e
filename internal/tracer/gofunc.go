//go:build linux

package tracer

import (
	"debug/elf"
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// isGo reports whether f is a Go program: it carries Go's build info or
// its line table.
func isGo(f *elf.File) bool {
	return f.Section(".go.buildinfo") != nil || f.Section(".gopclntab") != nil
}

// goReturns finds the return instructions of a Go function, as offsets
// from its start: a uretprobe would rewrite the return address on a
// goroutine's stack, which Go moves and unwinds, so numatrace probes each
// RET instead. Only amd64 code is decoded.
func goReturns(f *elf.File, symbol string) ([]uint64, error) {
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("timing Go function %s needs an amd64 binary, not %s", symbol, f.Machine)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("read symbols: %w", err)
	}
	var fn *elf.Symbol
	for i := range syms {
		if syms[i].Name == symbol && elf.ST_TYPE(syms[i].Info) == elf.STT_FUNC {
			fn = &syms[i]
			break
		}
	}
	if fn == nil || fn.Size == 0 {
		return nil, fmt.Errorf("no function %s in the binary", symbol)
	}
	code, err := funcBytes(f, fn)
	if err != nil {
		return nil, err
	}
	var rets []uint64
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return nil, fmt.Errorf("decode %s at +%#x: %w", symbol, off, err)
		}
		if inst.Op == x86asm.RET {
			rets = append(rets, uint64(off))
		}
		off += inst.Len
	}
	if len(rets) == 0 {
		return nil, fmt.Errorf("%s has no return instruction (it may never return)", symbol)
	}
	return rets, nil
}

// funcBytes is the machine code of fn, from the section that holds it.
func funcBytes(f *elf.File, fn *elf.Symbol) ([]byte, error) {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || fn.Value < s.Addr || fn.Value+fn.Size > s.Addr+s.Size {
			continue
		}
		code := make([]byte, fn.Size)
		if _, err := s.ReadAt(code, int64(fn.Value-s.Addr)); err != nil {
			return nil, fmt.Errorf("read %s: %w", fn.Name, err)
		}
		return code, nil
	}
	return nil, errors.New("the function's code is in no section")
}
