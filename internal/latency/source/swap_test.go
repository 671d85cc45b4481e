package source

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/testutil"
)

// What the user who owns a log's directory (the service's user: here
// nobody) puts at its name at rotation is read only if it is a regular
// file: a link to a file only root may read is not followed (its lines
// were counted as samples, and one was quoted on stderr), nor one to
// /dev/zero (read for ever, with no word), and a FIFO is not read. Each
// is said once; reading goes on in the old file, and a regular file that
// takes the name later is read.
func TestFollowRefusesWhatIsSwappedInAtRotation(t *testing.T) {
	testutil.RequireRoot(t) // to be nobody, and to have a file nobody may not read
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("RT4SECRET_api_key=hunter2\n1000 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, swap, said string }{
		{"a link to a root-only file", `ln -s ` + secret + ` "$1"`, "was replaced by a symbolic link: not followed"},
		{"a link to /dev/zero", `ln -s /dev/zero "$1"`, "was replaced by a symbolic link: not followed"},
		{"a FIFO", `mkfifo -m 666 "$1"`, "was replaced by a named pipe: not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := nobodysDir(t)
			path := filepath.Join(dir, "lat.log")
			appendLines(t, path, 0, 100)
			f := startFollow(t, path)
			if n := f.waitFor(100); n != 100 {
				t.Fatalf("read %d of the first 100", n)
			}
			asNobody(t, `mv "$1" "$1.1" && `+tc.swap, path)
			f.waitUntil(t, "a word on the new file", func() bool { return len(f.notices)+len(f.bad) > 0 || len(f.got) > 100 })
			f.mu.Lock()
			got, bad, notices := len(f.got), fmt.Sprint(f.bad), fmt.Sprint(f.notices)
			f.mu.Unlock()
			if got != 100 || bad != "[]" || !strings.Contains(notices, path+" "+tc.said) || strings.Contains(notices, "hunter2") {
				t.Fatalf("%d samples, bad %s, notices %s: want the 100 of the old file, and %q said", got, bad, notices, tc.said)
			}
			// A regular file takes the name: it is read.
			asNobody(t, `rm "$1" && printf '2000 1\n2001 1\n' > "$1"`, path)
			if n := f.waitFor(102); n != 102 {
				t.Fatalf("read %d samples once a regular file took the name, want 102", n)
			}
			f.stop(t)
			if len(f.notices) != 2 {
				t.Errorf("notices %v: want the refusal said once, then the rotation", f.notices)
			}
		})
	}
}

// A device named as the latency file is refused at once, in one line
// naming it, before anything is read: /dev/zero was read for ever. So is
// a link to one.
func TestFollowRefusesADevice(t *testing.T) {
	link := filepath.Join(t.TempDir(), "lat.log")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/zero", link} {
		if err := (Config{File: path}).Check(); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "character device") {
			t.Errorf("Check of --latency-file %s: %v, want it refused", path, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		read := 0
		err := Follow(ctx, path, func(string) (uint64, uint64, error) { read++; return 0, 0, nil }, latency.Clock{},
			func(latency.Sample) {}, func(error) { read++ }, nil)
		late := ctx.Err()
		cancel()
		if late != nil || err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "character device") ||
			strings.Contains(err.Error(), "\n") || read != 0 {
			t.Errorf("Follow(%s) = %v (%v), %d lines read: want one line refusing it at once", path, err, late, read)
		}
	}
}

// A link the user names is followed to the log, and the log is followed
// across its rotation.
func TestFollowALinkTheUserNames(t *testing.T) {
	dir := t.TempDir()
	log, link := filepath.Join(dir, "app.log"), filepath.Join(dir, "current")
	appendLines(t, log, 0, 10)
	if err := os.Symlink("app.log", link); err != nil {
		t.Fatal(err)
	}
	f := startFollow(t, link)
	if n := f.waitFor(10); n != 10 {
		t.Fatalf("read %d of 10", n)
	}
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	appendLines(t, log, 100, 110)
	if n := f.waitFor(20); n != 20 {
		t.Fatalf("read %d samples across the rotation, want 20", n)
	}
	f.stop(t)
	if len(f.bad) != 0 || len(f.notices) != 1 || !strings.Contains(f.notices[0].Error(), "rotated") {
		t.Errorf("bad %v, notices %v: want the rotation said", f.bad, f.notices)
	}
}

// waitUntil waits up to 5 s for cond, which it calls holding f.mu.
func (f *follow) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for %s", what)
		}
	}
}

// nobodysDir is a directory of nobody's, as a service's log directory is
// its user's.
func nobodysDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nobodys-logs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asNobody runs the shell script as nobody, with path as $1.
func asNobody(t *testing.T, script, path string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as nobody: %s: %v: %s", script, err, out)
	}
}
