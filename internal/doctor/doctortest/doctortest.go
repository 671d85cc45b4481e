// Package doctortest builds doctor's fixture machines for tests: a copy of
// a healthy two-socket server's /proc and /sys (testdata/machines/base)
// with one incident's files laid over it, taken twice a second apart.
package doctortest

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Dir is where the fixture machines are.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "machines")
}

// Names lists the fixture machines other than base.
func Names(t testing.TB) []string {
	ents, err := os.ReadDir(Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != "base" {
			out = append(out, e.Name())
		}
	}
	return out
}

// Machine returns the two copies of machine name ("" for the healthy
// base): root, as first read, and later, a second on.
func Machine(t testing.TB, name string) (root, later string) {
	t.Helper()
	root, later = t.TempDir(), t.TempDir()
	for _, c := range []struct{ dst, when string }{{root, "now"}, {later, "later"}} {
		copyTree(t, filepath.Join(Dir(), "base", c.when), c.dst)
		if name != "" {
			src := filepath.Join(Dir(), name, c.when)
			if _, err := os.Stat(src); err != nil {
				t.Fatalf("no fixture machine %q: %v", name, err)
			}
			copyTree(t, src, c.dst)
		}
	}
	return root, later
}

// copyTree copies src over dst; a file named X.absent removes X (and the
// directories it leaves empty).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Name() == ".keep":
			return nil
		case strings.HasSuffix(rel, ".absent"):
			gone := strings.TrimSuffix(target, ".absent")
			if err := os.Remove(gone); err != nil {
				return err
			}
			for dir := filepath.Dir(gone); dir != dst; dir = filepath.Dir(dir) {
				if os.Remove(dir) != nil { // not empty
					break
				}
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
