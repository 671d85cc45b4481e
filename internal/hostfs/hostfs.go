// Package hostfs reads a machine's /proc and /sys: the live ones under
// "/", or a copy of another machine's under any directory (doctor --root).
// A copy is untrusted input, so every read here is confined and bounded:
//
//   - a path is resolved inside the root: a symlink in the copy, absolute
//     or full of "..", cannot lead out of it (openat2 with RESOLVE_IN_ROOT
//     on Linux, os.Root where openat2 is missing);
//   - only regular files are read, checked on a descriptor that cannot
//     block or act (O_PATH, then O_NONBLOCK): a FIFO cannot hang the
//     reader and a device node (/dev/zero, /dev/watchdog) is never opened;
//   - every read stops at a size bound and every line at a length bound,
//     with one error that names the file.
//
// Errors name the path actually read (the root joined with the name),
// escaped with sanitize.Text, and never quote more of a file than Excerpt.
package hostfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/numatrace/numatrace/internal/sanitize"
)

// Bounds on what is read. /proc and /sys files are small: the largest, a
// big machine's zoneinfo, is a few MiB; numa_maps, a line per mapping, is
// read with its own bound (see MaxNumaMaps in procsnap).
const (
	MaxValue = 64 << 10 // a value file (a sysctl, a sysfs attribute, comm, uptime)
	MaxTable = 64 << 20 // a file of lines (vmstat, meminfo, zoneinfo, status)
	MaxLine  = 64 << 10 // a line of any file
)

// ErrNotRegular is returned for a path that is not a regular file (or,
// for ReadDir, not a directory): a FIFO, a socket, a device.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned when a file holds more than its bound.
var ErrTooLarge = errors.New("too large")

// Root is a directory holding a machine's /proc and /sys.
type Root struct {
	dir    string // as given, for messages
	prefix string // of Sub: names are read under it
	o      opener
}

// opener resolves names inside the root. Names are slash-separated and
// relative to the root.
type opener interface {
	// stat describes name without opening it for reading: no side
	// effects, no blocking, whatever it is.
	stat(name string) (fs.FileInfo, error)
	// openFile opens name for reading, non-blocking.
	openFile(name string) (*os.File, error)
	// openDir opens name as a directory.
	openDir(name string) (*os.File, error)
	close() error
}

// Open opens dir as a root.
func Open(dir string) (*Root, error) {
	o, err := newOpener(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: sanitize.Text(dir), Err: unwrapPath(err)}
	}
	return &Root{dir: dir, o: o}, nil
}

// Close releases the root. A Sub shares its parent's and must not be used
// after the parent is closed.
func (r *Root) Close() error {
	if r.prefix != "" {
		return nil
	}
	return r.o.close()
}

// Sub is the directory name inside r, itself a Root: names given to it
// are still resolved inside r.
func (r *Root) Sub(name string) *Root {
	return &Root{dir: r.dir, prefix: r.rel(name), o: r.o}
}

// Path is name as a path on this machine, for messages: the root joined
// with the name ("/proc/vmstat" live, "/tmp/copy/proc/vmstat" for a copy).
// ".." in a name stops at the root, as it does when the name is read.
func (r *Root) Path(name string) string { return filepath.Join(r.dir, path.Clean("/"+r.rel(name))) }

func (r *Root) rel(name string) string {
	name = strings.TrimPrefix(filepath.ToSlash(name), "/")
	if r.prefix == "" {
		return name
	}
	return r.prefix + "/" + name
}

func (r *Root) err(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: sanitize.Text(r.Path(name)), Err: unwrapPath(err)}
}

// unwrapPath drops the inner PathError of the opener (which names the
// path relative to the root) so the message names the path once.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Stat describes name, following symlinks inside the root.
func (r *Root) Stat(name string) (fs.FileInfo, error) {
	fi, err := r.o.stat(r.rel(name))
	if err != nil {
		return nil, r.err("stat", name, err)
	}
	return fi, nil
}

// Exists tells whether name exists (as anything).
func (r *Root) Exists(name string) bool {
	_, err := r.o.stat(r.rel(name))
	return err == nil
}

// File is a regular file opened for reading, bounded.
type File struct {
	f     *os.File
	r     *Root
	name  string
	limit int64
	n     int64
}

// Open opens name, which must be a regular file, for reading at most
// limit bytes: a read past them fails with ErrTooLarge.
func (r *Root) Open(name string, limit int64) (*File, error) {
	rel := r.rel(name)
	fi, err := r.o.stat(rel)
	if err != nil {
		return nil, r.err("open", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, r.err("open", name, notRegular(fi.Mode()))
	}
	f, err := r.o.openFile(rel)
	if err != nil {
		return nil, r.err("open", name, err)
	}
	// The same file, still regular: a copy changed between the two looks
	// cannot slip a FIFO in.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		f.Close()
		if err != nil {
			return nil, r.err("open", name, err)
		}
		return nil, r.err("open", name, fmt.Errorf("%w: it changed while being opened", ErrNotRegular))
	}
	return &File{f: f, r: r, name: name, limit: limit}, nil
}

func notRegular(m fs.FileMode) error {
	what := "a directory"
	switch {
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	case m&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case !m.IsDir():
		what = "of type " + m.Type().String()
	}
	return fmt.Errorf("%w (%s)", ErrNotRegular, what)
}

// Read reads from the file, and fails once more than its limit is there.
func (f *File) Read(p []byte) (int, error) {
	if f.n >= f.limit {
		// One byte more tells a file of exactly limit bytes from a longer one.
		var one [1]byte
		if n, _ := f.f.Read(one[:]); n > 0 {
			return 0, f.r.err("read", f.name, fmt.Errorf("%w: stopped reading at %s", ErrTooLarge, Size(f.limit)))
		}
		return 0, io.EOF
	}
	if int64(len(p)) > f.limit-f.n {
		p = p[:f.limit-f.n]
	}
	n, err := f.f.Read(p)
	f.n += int64(n)
	if err != nil && err != io.EOF {
		err = f.r.err("read", f.name, err)
	}
	return n, err
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// ReadFile reads all of name, at most MaxValue bytes.
func (r *Root) ReadFile(name string) ([]byte, error) {
	f, err := r.Open(name, MaxValue)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ReadValue is ReadFile without the surrounding white space: the value
// of a sysctl or a sysfs attribute.
func (r *Root) ReadValue(name string) (string, error) {
	b, err := r.ReadFile(name)
	return string(bytes.TrimSpace(b)), err
}

// Scan calls fn with each line of name, without its newline, numbered
// from 1, reading at most limit bytes. An error of fn stops the scan and
// is returned with the path and line number.
func (r *Root) Scan(name string, limit int64, fn func(n int, line string) error) error {
	f, err := r.Open(name, limit)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Scan(fn)
}

// Scan calls fn with each line of the file, as Root.Scan does.
func (f *File) Scan(fn func(n int, line string) error) error {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), MaxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := fn(n, sc.Text()); err != nil {
			return f.r.err("read", f.name, fmt.Errorf("line %d: %w", n, err))
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return f.r.err("read", f.name, fmt.Errorf("line %d: %w: longer than %s", n+1, ErrTooLarge, Size(MaxLine)))
	case err != nil:
		return err // from Read: it names the file
	}
	return nil
}

// ReadDir lists the names in directory name, sorted.
func (r *Root) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := r.o.openDir(r.rel(name))
	if err != nil {
		return nil, r.err("open", name, err)
	}
	defer d.Close()
	if st, err := d.Stat(); err != nil || !st.IsDir() {
		if err == nil {
			err = fmt.Errorf("%w: not a directory", ErrNotRegular)
		}
		return nil, r.err("open", name, err)
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, r.err("readdir", name, err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// Absent tells whether err means the file is not there: missing, or (for
// a /proc/PID file) its process or thread has exited.
func Absent(err error) bool { return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) }

// Excerpt is at most 40 bytes of text read from a file, escaped and
// quoted, for an error message: enough to recognise, never the file.
func Excerpt(s string) string {
	const max = 40
	cut := len(s) > max
	if cut {
		s = s[:max]
		for len(s) > 0 && !utf8.ValidString(s) && len(s) > max-utf8.UTFMax {
			s = s[:len(s)-1]
		}
	}
	out := `"` + strings.ReplaceAll(sanitize.Text(s), `"`, `\"`) + `"`
	if cut {
		out += "…"
	}
	return out
}

// Size is a bound in bytes for messages: "64 KiB", "256 MiB".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
