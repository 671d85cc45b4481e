package tracer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --btf that is not a regular file, or too large for a kernel's BTF, is
// refused before it is read: /dev/zero would be read forever.
func TestBTFFileIsChecked(t *testing.T) {
	big := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxBTFFile + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]string{"/dev/zero": "not a regular file", big: "more than a kernel's BTF", "/nonexistent": "no such file"} {
		_, err := loadKernelBTF(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v: want an error naming it and saying %q", path, err, want)
		}
	}
}
