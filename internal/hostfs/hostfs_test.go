package hostfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

const secret = "root:$6$SECRET-HASH:19000:0:99999:7:::\n"

// tree is a copy of a machine with a secret beside it, outside the copy.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	top := t.TempDir()
	root, outside = filepath.Join(top, "copy"), filepath.Join(top, "shadow")
	for p, c := range map[string]string{
		"proc/vmstat":      "numa_hit 1\n",
		"proc/meminfo.all": "MemTotal: 1 kB\n",
		"sys/online":       "0-3\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

// openers are the two ways names are resolved: openat2 where the kernel
// has it (this one does), and os.Root where it does not.
func openers(t *testing.T, root string) map[string]*Root {
	t.Helper()
	at2, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := at2.o.(*at2Opener); !ok {
		t.Fatalf("this kernel (6.x) has openat2, yet Open chose %T", at2.o)
	}
	o, err := newRootOpener(root)
	if err != nil {
		t.Fatal(err)
	}
	r := &Root{dir: root, o: o}
	t.Cleanup(func() { at2.Close(); r.Close() })
	return map[string]*Root{"openat2": at2, "os.Root": r}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// No name leads out of the copy: not an absolute symlink, not "..".
func TestSymlinksStayInTheCopy(t *testing.T) {
	root, outside := tree(t)
	symlink(t, outside, filepath.Join(root, "sys/abs"))
	symlink(t, "../../../../../../../../../../.."+outside, filepath.Join(root, "sys/rel"))
	symlink(t, "/proc/meminfo.all", filepath.Join(root, "sys/inside")) // absolute, into the copy
	for name, r := range openers(t, root) {
		for _, file := range []string{"sys/abs", "sys/rel", "../shadow", "/../shadow"} {
			b, err := r.ReadFile(file)
			if err == nil || strings.Contains(err.Error(), "SECRET") || len(b) > 0 {
				t.Errorf("%s: %s read %q (err %v): it left the copy", name, file, b, err)
			}
			if err != nil && !strings.Contains(err.Error(), root) {
				t.Errorf("%s: %s: error %q does not name the path read", name, file, err)
			}
		}
		b, err := r.ReadFile("sys/inside")
		switch name {
		case "openat2": // RESOLVE_IN_ROOT: "/" is the copy's top, as in a chroot
			if err != nil || string(b) != "MemTotal: 1 kB\n" {
				t.Errorf("openat2: an absolute symlink into the copy: %q, %v", b, err)
			}
		case "os.Root": // refuses any link that would leave the root, absolute ones too
			if err == nil {
				t.Errorf("os.Root: an absolute symlink was followed: %q", b)
			}
		}
	}
}

// A FIFO is refused without blocking, and a device node is never opened.
func TestOnlyRegularFiles(t *testing.T) {
	root, _ := tree(t)
	if err := syscall.Mkfifo(filepath.Join(root, "proc/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, r := range openers(t, root) {
		done := make(chan error, 1)
		go func() { _, err := r.ReadFile("proc/fifo"); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), filepath.Join(root, "proc/fifo")) {
				t.Errorf("%s: FIFO: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: reading a FIFO blocked", name)
		}
		go func() { _, err := r.ReadDir("proc/fifo"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("%s: FIFO listed as a directory: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: listing a FIFO blocked", name)
		}
		if _, err := r.ReadFile("proc"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: a directory read as a file: %v", name, err)
		}
		if _, err := r.ReadDir("proc/vmstat"); err == nil {
			t.Errorf("%s: a file listed as a directory", name)
		}
	}
}

func TestDeviceNodeIsNotOpened(t *testing.T) {
	testutil.RequireRoot(t)
	root, _ := tree(t)
	// /dev/zero's numbers (1, 5): read, it never ends.
	if err := syscall.Mknod(filepath.Join(root, "proc/zero"), syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Fatal(err)
	}
	for name, r := range openers(t, root) {
		if _, err := r.ReadFile("proc/zero"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
			t.Errorf("%s: device node: %v", name, err)
		}
	}
}

// A read stops at its bound with one error naming the file; so does a line.
func TestBounds(t *testing.T) {
	root, _ := tree(t)
	big := filepath.Join(root, "proc/big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil { // sparse: 2 GiB of NULs, no newline
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(root, "proc/lines"), []byte(strings.Repeat("a b\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, r := range openers(t, root) {
		b, err := r.ReadFile("proc/big")
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), big) || !strings.Contains(err.Error(), "stopped reading at 64 KiB") || len(b) > 0 {
			t.Errorf("%s: a 2 GiB value file: %d bytes, %v", name, len(b), err)
		}
		err = r.Scan("proc/big", 1<<40, func(int, string) error { return nil })
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), big+": line 1") || !strings.Contains(err.Error(), "longer than 64 KiB") {
			t.Errorf("%s: a 2 GiB line: %v", name, err)
		}
		// 400 bytes with a bound of 200: stopped there, after whole lines.
		n := 0
		err = r.Scan("proc/lines", 200, func(int, string) error { n++; return nil })
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "stopped reading at 200 bytes") || n != 50 {
			t.Errorf("%s: 400 bytes bounded at 200: %d lines, %v", name, n, err)
		}
		// Exactly at the bound is not too large.
		if err := r.Scan("proc/lines", 400, func(int, string) error { return nil }); err != nil {
			t.Errorf("%s: 400 bytes bounded at 400: %v", name, err)
		}
		err = r.Scan("proc/lines", MaxTable, func(n int, _ string) error {
			if n == 7 {
				return errors.New("bad")
			}
			return nil
		})
		if err == nil || err.Error() != "read "+filepath.Join(root, "proc/lines")+": line 7: bad" {
			t.Errorf("%s: a parse error: %v", name, err)
		}
	}
}

func TestAbsent(t *testing.T) {
	root, _ := tree(t)
	symlink(t, "/nowhere", filepath.Join(root, "sys/dangling"))
	for name, r := range openers(t, root) {
		for _, f := range []string{"proc/none", "none/vmstat"} {
			if _, err := r.ReadFile(f); !Absent(err) || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %s: %v, want absent", name, f, err)
			}
		}
		// Dangling inside the copy (openat2), or leading out of it (os.Root).
		_, err := r.ReadFile("sys/dangling")
		if absent := Absent(err); absent != (name == "openat2") || err == nil {
			t.Errorf("%s: a dangling absolute symlink: %v", name, err)
		}
		sub := r.Sub("proc")
		if b, err := sub.ReadFile("vmstat"); err != nil || string(b) != "numa_hit 1\n" || sub.Path("vmstat") != filepath.Join(root, "proc/vmstat") {
			t.Errorf("%s: Sub: %q %v %s", name, b, err, sub.Path("vmstat"))
		}
		// A Sub still resolves inside the whole root: ".." leaves proc, not the copy.
		if b, err := sub.ReadFile("../sys/online"); err != nil || string(b) != "0-3\n" {
			t.Errorf("%s: Sub ..: %q %v", name, b, err)
		}
	}
}

func TestExcerpt(t *testing.T) {
	for in, want := range map[string]string{
		"0-3":                    `"0-3"`,
		"\x1b]0;pwned\x07":       `"\x1b]0;pwned\x07"`,
		`say "hi"`:               `"say \"hi\""`,
		strings.Repeat("x", 100): `"` + strings.Repeat("x", 40) + `"…`,
		strings.Repeat("é", 30):  `"` + strings.Repeat("é", 20) + `"…`,
	} {
		if got := Excerpt(in); got != want {
			t.Errorf("Excerpt(%q) = %s, want %s", in, got, want)
		}
	}
}

var _ io.Reader = (*File)(nil)
