// Package outfile creates the files numatrace writes at a path the user
// names (a recording, an export, the ready file). numatrace runs as root
// and often writes to shared directories such as /tmp, where any user can
// plant a symbolic or hard link at the path beforehand and have root
// overwrite the file it points at. Recordings also hold process names and
// memory layout, so they are readable by their owner only.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Mode is the permission of a file Create makes.
const Mode = 0o600

// Create opens path for writing, emptied and with Mode, making it if it
// does not exist. It refuses a symbolic link at path, anything but a
// regular file (a FIFO, a device), and an existing file with other hard
// links or of another user, before writing anything to either. It never
// waits: a FIFO is refused, not opened to wait for its reader.
func Create(path string) (*os.File, error) {
	// What is there is refused before it is opened: a device is never opened.
	if err := Check(path); err != nil {
		return nil, err
	}
	// No O_TRUNC: the checks come first, then the truncation. O_NONBLOCK: a
	// FIFO put there since opens at once or fails, and is refused below.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, Mode)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, symlinkError(path)
	case errors.Is(err, syscall.ENXIO): // a FIFO without a reader
		if st, lerr := os.Lstat(path); lerr == nil && !st.Mode().IsRegular() {
			return nil, refuse(path, st)
		}
		return nil, err
	case err != nil:
		return nil, err
	}
	if err := empty(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// empty checks the file opened at path, as Check checked the path, and
// empties it.
func empty(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := refuse(path, st); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if st.Mode().Perm() != Mode { // an older file of ours, made readable
		return f.Chmod(Mode)
	}
	return nil
}

// Check says now what Create would refuse at path: a symbolic link,
// anything but a regular file, or a file with other hard links or of
// another user. A path with nothing at it passes. It lets a command
// refuse before it starts work whose file it creates later (a ready
// file, created once tracing runs); Create checks again when it opens
// the file.
func Check(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode()&fs.ModeSymlink != 0:
		return symlinkError(path)
	}
	return refuse(path, st)
}

func symlinkError(path string) error {
	return fmt.Errorf("%s is a symbolic link: not written through; remove it or choose another path", path)
}

// refuse is the error for an existing file at path that Create must not
// write: one that is not a regular file, one with other hard links, or
// one of another user.
func refuse(path string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		// A FIFO would hand what is written to whoever reads it, and hold
		// the writer until someone does.
		return fmt.Errorf("%s is %s, not a regular file: not written; remove it or choose another path", path, kind(st.Mode()))
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	switch {
	case sys.Nlink > 1:
		return fmt.Errorf("%s has %d hard links: not written; remove it or choose another path", path, sys.Nlink)
	case int(sys.Uid) != os.Geteuid():
		// Made beforehand by someone else, who could read what we write.
		return fmt.Errorf("%s belongs to another user (uid %d): not written; remove it or choose another path", path, sys.Uid)
	}
	return nil
}

// kind names a file type that is not a regular file's.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	}
	return "of type " + m.Type().String()
}
