//go:build linux

package tracer

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSeccompFiltered(t *testing.T) {
	dir := t.TempDir()
	for status, want := range map[string]bool{
		"Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n": true,
		"Name:\tx\nSeccomp:\t0\n":                      false,
		"Name:\tx\n":                                   false,
	} {
		p := filepath.Join(dir, "status")
		if err := os.WriteFile(p, []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := seccompFiltered(p); got != want {
			t.Errorf("%q: %v, want %v", status, got, want)
		}
	}
	if seccompFiltered(filepath.Join(dir, "missing")) {
		t.Error("a missing status file reads as filtered")
	}
}
