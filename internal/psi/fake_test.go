package psi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/numatrace/numatrace/internal/hostfs"
)

// fakeRoot is a copy of a machine holding files (name → content; a name
// ending in "/" is an empty directory), opened as a hostfs root.
func fakeRoot(t *testing.T, files map[string]string) (*hostfs.Root, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir
}

// liveRoot is this machine's "/".
func liveRoot(t *testing.T) *hostfs.Root {
	t.Helper()
	root, err := hostfs.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// pressure is a PSI file with these totals in microseconds.
func pressure(someUs, fullUs string) string {
	return "some avg10=0.12 avg60=0.05 avg300=0.01 total=" + someUs + "\n" +
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=" + fullUs + "\n"
}
