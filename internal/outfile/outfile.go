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
// does not exist. It refuses a symbolic link at path, and an existing
// file with other hard links or of another user, before writing anything
// to either.
func Create(path string) (*os.File, error) {
	// No O_TRUNC: the checks come first, then the truncation.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, Mode)
	if errors.Is(err, syscall.ELOOP) {
		return nil, symlinkError(path)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := refuse(path, st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode().IsRegular() {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
		if st.Mode().Perm() != Mode { // an older file of ours, made readable
			if err := f.Chmod(Mode); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
	return f, nil
}

// Check says now what Create would refuse at path: a symbolic link, or a
// file with other hard links or of another user. A path with nothing at
// it passes. It lets a command refuse before it starts work whose file
// it creates later (a ready file, created once tracing runs); Create
// checks again when it opens the file.
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
// write: one with other hard links, or one of another user.
func refuse(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.Mode().IsRegular() {
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
