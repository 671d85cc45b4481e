package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateNewIsPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rec.ntr")
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != Mode {
		t.Fatalf("mode %v (%v), want %v", st.Mode().Perm(), err, os.FileMode(Mode))
	}
}

func TestCreateEmptiesAnExistingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rec.ntr")
	os.WriteFile(p, []byte("old contents"), 0o644)
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	f.Close()
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("contents %q, want new", b)
	}
}

// A link planted at the path is refused, and what it points at is left
// as it was.
func TestCreateRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	sym, hard := filepath.Join(dir, "sym.ntr"), filepath.Join(dir, "hard.ntr")
	if err := os.Symlink(victim, sym); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, hard); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{sym: "symbolic link", hard: "hard links"} {
		f, err := Create(path)
		if err == nil {
			f.Close()
			t.Errorf("%s: created", path)
		} else if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q: want one line naming the path and saying %q", path, err, want)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the link's target now holds %q", b)
	}
}
