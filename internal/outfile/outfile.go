// Package outfile creates the files numatrace writes at a path the user
// names (a recording, an export). numatrace runs as root and often writes
// to shared directories such as /tmp, where any user can plant a symbolic
// or hard link at the path beforehand and have root overwrite the file it
// points at. Recordings also hold process names and memory layout, so
// they are readable by their owner only.
package outfile

import (
	"errors"
	"fmt"
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
		return nil, fmt.Errorf("%s is a symbolic link: not written through; remove it or choose another path", path)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && st.Mode().IsRegular() {
		switch {
		case sys.Nlink > 1:
			f.Close()
			return nil, fmt.Errorf("%s has %d hard links: not written; remove it or choose another path", path, sys.Nlink)
		case int(sys.Uid) != os.Geteuid():
			// Made beforehand by someone else, who could read what we write.
			f.Close()
			return nil, fmt.Errorf("%s belongs to another user (uid %d): not written; remove it or choose another path", path, sys.Uid)
		}
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
