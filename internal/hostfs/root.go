package hostfs

import (
	"io/fs"
	"os"
	"syscall"
)

// rootOpener resolves names with os.Root: inside the root, as openat2's
// RESOLVE_IN_ROOT does, except that a symlink leading out of it (an
// absolute one included) is an error rather than read as inside it. It
// serves where openat2 is missing: Linux before 5.6, seccomp filters that
// refuse it, other systems.
type rootOpener struct{ r *os.Root }

func newRootOpener(dir string) (opener, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return rootOpener{r}, nil
}

func dot(name string) string {
	if name == "" {
		return "."
	}
	return name
}

func (o rootOpener) stat(name string) (fs.FileInfo, error) { return o.r.Stat(dot(name)) }

func (o rootOpener) openFile(name string) (*os.File, error) {
	return o.r.OpenFile(dot(name), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}

// openDir refuses a non-directory before opening it: a FIFO cannot block.
func (o rootOpener) openDir(name string) (*os.File, error) {
	return o.r.OpenFile(dot(name), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
}

func (o rootOpener) close() error { return o.r.Close() }
