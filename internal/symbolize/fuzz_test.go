package symbolize

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// seedFile is a file of this machine's that the fuzzers start from: the
// files a symbolizer meets are other processes' and may be made to hurt it.
func seedFile(f *testing.F, path string) []byte {
	f.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatalf("seed: %v", err)
	}
	return b
}

// FuzzUnwindTable: any .eh_frame bytes give a table or an error, and any
// address a rule or none; never a panic or a loop.
func FuzzUnwindTable(f *testing.F) {
	ef, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		f.Fatalf("seed: %v", err)
	}
	sec := ef.Section(".eh_frame")
	data, err := sec.Data()
	ef.Close()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:min(len(data), 4096)], uint64(sec.Addr), uint64(0x27290))
	f.Add(data[:min(len(data), 512)], uint64(sec.Addr), uint64(0x26006))
	f.Fuzz(func(t *testing.T, data []byte, addr, pc uint64) {
		tab, err := parseEHFrame(data, addr, nil)
		if err != nil {
			return
		}
		for _, e := range tab.fdes {
			execCFA(&e, e.start+(pc%16))
		}
		tab.rule(pc)
	})
}

// FuzzParseELF: any bytes are an ELF file's or an error, never a panic.
func FuzzParseELF(f *testing.F) {
	f.Add(seedFile(f, "/bin/true"))
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ef, err := parseELF(bytes.NewReader(b), int64(len(b)), &allowance{left: 64 << 20}); err == nil {
			ef.function(0x401000)
		}
	})
}

// FuzzPclntab: any .gopclntab bytes give functions or an error, within
// the allowance: never a panic, and never more kept than allowed.
func FuzzPclntab(f *testing.F) {
	ef, err := elf.Open("/proc/self/exe") // the test binary is a Go program
	if err != nil {
		f.Fatalf("seed: %v", err)
	}
	data, err := ef.Section(".gopclntab").Data()
	ef.Close()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:min(len(data), 1<<16)], uint64(0x401000))
	f.Add(pclntabClaiming(1<<30, 4096), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, text uint64) {
		const limit = 1 << 20
		a := &allowance{left: limit}
		tab, err := parsePclntab(data, text, a)
		if a.kept > limit || (err == nil && int64(len(tab))*symbolBytes > limit) {
			t.Fatalf("kept %d bytes, %d functions, of a limit of %d", a.kept, len(tab), limit)
		}
		for i := 1; i < len(tab); i++ {
			if tab[i].start <= tab[i-1].start || tab[i].end <= tab[i].start {
				t.Fatalf("functions out of order: %+v then %+v", tab[i-1], tab[i])
			}
		}
	})
}

// FuzzDynsym: any .dynsym and .dynstr give symbols or an error, within
// the allowance, sorted, one per address.
func FuzzDynsym(f *testing.F) {
	syms, strs := dynsymOf(8)
	f.Add(syms, strs, uint64(0))
	f.Add(syms[:30], []byte("f"), uint64(1<<40))
	f.Fuzz(func(t *testing.T, syms, strs []byte, claim uint64) {
		const limit = 1 << 20
		b := craftELF(section{name: ".dynstr", typ: elf.SHT_STRTAB, data: strs},
			section{name: ".dynsym", typ: elf.SHT_DYNSYM, data: syms, link: 1, claim: claim})
		a := &allowance{left: limit}
		ef, err := parseELF(bytes.NewReader(b), int64(len(b)), a)
		if a.kept > limit {
			t.Fatalf("kept %d bytes of a limit of %d", a.kept, limit)
		}
		if err != nil {
			return
		}
		for i := 1; i < len(ef.syms); i++ {
			if ef.syms[i].start <= ef.syms[i-1].start {
				t.Fatalf("symbols out of order at %d", i)
			}
		}
	})
}

// FuzzUserBudget: whatever files a process maps, the symbolizer keeps
// their tables within its budget, and names frames or says why not.
func FuzzUserBudget(f *testing.F) {
	syms, strs := dynsymOf(64)
	f.Add(ehFrameOf(64), syms, strs, pclntabClaiming(16, 4096), uint8(3))
	f.Add([]byte{}, []byte{}, []byte{}, []byte{}, uint8(1))
	f.Fuzz(func(t *testing.T, eh, syms, strs, pcln []byte, copies uint8) {
		b := craftELF(section{name: ".dynstr", typ: elf.SHT_STRTAB, data: strs},
			section{name: ".dynsym", typ: elf.SHT_DYNSYM, data: syms, link: 1},
			section{name: ".eh_frame", typ: elf.SHT_PROGBITS, data: eh},
			section{name: ".gopclntab", typ: elf.SHT_PROGBITS, data: pcln})
		root := t.TempDir()
		dir := filepath.Join(root, "42")
		os.MkdirAll(dir, 0o755)
		os.Symlink("/", filepath.Join(dir, "root"))
		var maps strings.Builder
		n := int(copies%8) + 1
		for i := range n {
			p := filepath.Join(root, fmt.Sprintf("f%d", i))
			os.WriteFile(p, b, 0o755)
			fmt.Fprintf(&maps, "%x-%x r-xp 00000000 %s %s\n", 0x10000000*(i+1), 0x10000000*(i+1)+0x10000, devIno(t, p), p)
		}
		os.WriteFile(filepath.Join(dir, "maps"), []byte(maps.String()), 0o644)
		const budget = 1 << 20
		u := NewUserBudget(root, budget)
		defer u.Close()
		u.wait = 5 * time.Second
		for i := range n {
			frames, _, _ := u.Frames(42, 0, []uint64{uint64(0x10000000*(i+1) + 0x1010)}, Regs{})
			if len(frames) != 1 || frames[0].Module == "" {
				t.Fatalf("file %d: frames %+v", i, frames)
			}
			if u.files.used > budget {
				t.Fatalf("after file %d: %d bytes kept of a budget of %d", i, u.files.used, budget)
			}
		}
	})
}
