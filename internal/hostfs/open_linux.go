package hostfs

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// at2Opener resolves names with openat2(RESOLVE_IN_ROOT): the root is "/" for
// every path, so an absolute symlink in a copy points inside the copy and
// ".." stops at its top, as in a chroot. Magic links (/proc/PID/fd/N) are
// refused: a copy has none, and a live /proc's lead anywhere.
type at2Opener struct{ fd int }

func newOpener(dir string) (opener, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	o := &at2Opener{fd: fd}
	f, err := o.open(".", unix.O_PATH)
	switch {
	case err == nil:
		f.Close()
		return o, nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		// A kernel before 5.6, or a seccomp profile that refuses openat2.
		unix.Close(fd)
		return newRootOpener(dir)
	}
	unix.Close(fd)
	return nil, err
}

func (o *at2Opener) open(name string, flags uint64) (*os.File, error) {
	flags |= unix.O_CLOEXEC
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NOCTTY // openat2 refuses it beside O_PATH
	}
	how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(o.fd, dot(name), &how)
		// EAGAIN: a rename raced the resolution of ".."; the kernel asks
		// for a retry.
		if err == unix.EINTR || (err == unix.EAGAIN && tries < 16) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "openat2", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// stat opens name with O_PATH: that neither blocks on a FIFO nor runs a
// device's open.
func (o *at2Opener) stat(name string) (fs.FileInfo, error) {
	f, err := o.open(name, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

func (o *at2Opener) openFile(name string) (*os.File, error) {
	return o.open(name, unix.O_RDONLY|unix.O_NONBLOCK)
}

func (o *at2Opener) openDir(name string) (*os.File, error) {
	return o.open(name, unix.O_RDONLY|unix.O_DIRECTORY)
}

func (o *at2Opener) close() error { return unix.Close(o.fd) }
