package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/testutil"
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

// A file someone else made at the path beforehand is refused (they could
// read what is written); one of ours that others could read is made 0600.
func TestCreateRefusesAnotherUsersFile(t *testing.T) {
	testutil.RequireRoot(t) // to make a file of another user
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs.ntr")
	if err := os.WriteFile(theirs, []byte("planted"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if f, err := Create(theirs); err == nil {
		f.Close()
		t.Fatal("another user's file was opened for writing")
	} else if !strings.Contains(err.Error(), "another user") {
		t.Errorf("error %q", err)
	}
	ours := filepath.Join(dir, "ours.ntr")
	os.WriteFile(ours, []byte("old"), 0o644)
	f, err := Create(ours)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, _ := os.Stat(ours); st.Mode().Perm() != Mode {
		t.Errorf("an older file of ours is %v, want %v", st.Mode().Perm(), os.FileMode(Mode))
	}
}

// Check refuses what Create refuses, before anything is created, and
// leaves what a link points at as it was; a free path and a file of ours
// pass.
func TestCheckRefusesWhatCreateRefuses(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	sym, hard := filepath.Join(dir, "sym"), filepath.Join(dir, "hard")
	if err := os.Symlink(victim, sym); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, hard); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{sym: sym + " is a symbolic link: not written through",
		hard: hard + " has 2 hard links: not written"} {
		if err := Check(path); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want %q...", path, err, want)
		}
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nothing"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := Check(dangling); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Check(a dangling link) = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nothing")); err == nil {
		t.Error("Check created the file a dangling link points at")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the link's target now holds %q", b)
	}
	os.Remove(hard)
	for _, path := range []string{filepath.Join(dir, "new"), victim} {
		if err := Check(path); err != nil {
			t.Errorf("Check(%s) = %v, want nil", path, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "new")); err == nil {
		t.Error("Check created the file")
	}
}
