package outfile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A FIFO at the path, with no reader: Create refuses it at once, in one
// line naming the path, rather than waiting in open() for a reader that
// may never come (a flight recorder's dump held the session up). Check
// refuses it too.
func TestCreateRefusesAFIFOWithoutBlocking(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rec.ntr")
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
	err := createWithin(t, p, 2*time.Second)
	wantRefused(t, err, p, "named pipe")
	if err := Check(p); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("Check(a FIFO) = %v, want it refused", err)
	}
}

// A FIFO that nobody planted in a shared directory and reads from: Create
// refuses it, and what would have been written never reaches the reader.
func TestCreateRefusesAFIFOThatAnotherUserReads(t *testing.T) {
	testutil.RequireRoot(t) // to be nobody
	dir := sharedDir(t)
	p := filepath.Join(dir, "rec.ntr")
	// <> opens the FIFO at once (for reading and writing): nobody is its
	// reader from then on, and cat prints what comes.
	reader := exec.Command("sh", "-c", `mkfifo -m 666 "$1" && exec cat <>"$1"`, "sh", p)
	reader.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	reader.Stdout = w
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { reader.Process.Kill(); reader.Wait() }()
	waitOpenBy(t, reader.Process.Pid, p)
	f, err := Create(p)
	if err == nil {
		f.WriteString("root's recording\n")
		f.Close()
		out.SetReadDeadline(time.Now().Add(2 * time.Second))
		got := make([]byte, 64)
		n, _ := out.Read(got)
		t.Errorf("nobody read %q", got[:n])
	}
	wantRefused(t, err, p, "named pipe")
}

// A device at the path is refused too: a recording is a regular file.
func TestCreateRefusesADevice(t *testing.T) {
	f, err := Create("/dev/null")
	if err == nil {
		f.Close()
	}
	wantRefused(t, err, "/dev/null", "character device")
	if err := Check("/dev/null"); err == nil || !strings.Contains(err.Error(), "character device") {
		t.Errorf("Check(/dev/null) = %v, want it refused", err)
	}
}

// createWithin runs Create(path), failing the test if it has not returned
// within d; a Create still blocked is let go by a reader opened then.
func createWithin(t *testing.T, path string, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := Create(path)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-done
			r.Close()
		}
		t.Fatalf("Create(%s) still waited after %s", path, d)
		return nil
	}
}

// wantRefused fails unless err is one line that names path and says what.
func wantRefused(t *testing.T, err error, path, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s (a %s) was opened for writing", path, what)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, what) || strings.Contains(msg, "\n") {
		t.Errorf("error %q: want one line naming %s and saying %q", msg, path, what)
	}
}

// sharedDir is a directory any user may create files in, as /tmp is.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "outfile-shared")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitOpenBy waits until process pid has path open.
func waitOpenBy(t *testing.T, pid int, path string) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if l, _ := os.Readlink(filepath.Join(fds, e.Name())); l == path {
				return
			}
		}
	}
	t.Fatalf("process %d never opened %s", pid, path)
}
