//go:build linux

package tracer

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/numatrace/numatrace/internal/testutil"
)

// A Go function's return instructions are found by decoding it: every
// offset is a RET, and the probe points are inside the function.
func TestGoReturns(t *testing.T) {
	testutil.RequireArch(t, "amd64", "the decoder reads amd64 code")
	bin := filepath.Join(t.TempDir(), "goserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/numatrace/testdata/goserver").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !isGo(f) {
		t.Fatal("a Go binary not taken for one")
	}
	rets, err := goReturns(f, "main.handle")
	if err != nil || len(rets) == 0 {
		t.Fatalf("returns %v, %v", rets, err)
	}
	syms, _ := f.Symbols()
	var fn elf.Symbol
	for _, s := range syms {
		if s.Name == "main.handle" {
			fn = s
		}
	}
	code, err := funcBytes(f, &fn)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range rets {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Op != x86asm.RET || off >= fn.Size {
			t.Errorf("offset %#x: %v %v", off, inst, err)
		}
	}
	if _, err := goReturns(f, "main.nosuch"); err == nil {
		t.Error("a missing function has returns")
	}
}
