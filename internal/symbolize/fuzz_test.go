package symbolize

import (
	"bytes"
	"debug/elf"
	"os"
	"testing"
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
		tab, err := parseEHFrame(data, addr)
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
		if ef, err := parseELF(bytes.NewReader(b)); err == nil {
			ef.function(0x401000)
		}
	})
}
