//go:build linux

package symbolize

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// overlayfsMagic is statfs's f_type of an overlay mount (a container's
// root): its files show the overlay's device, where the maps line shows
// the layer's.
const overlayfsMagic = 0x794c7630

// openMapped opens the file m maps in pid, as the kernel mapped it: the
// mapping's own file through /proc/PID/map_files (whatever its path names
// now), else the path inside the process's root, resolved in that root,
// and only if it is the device and inode the maps line names. Never the
// path as numatrace's own namespace reads it: a name swapped since the
// mapping was made (a symbolic link, a mount in the process's namespace,
// an upgrade by rename) may name any file, root's own among them.
func (u *User) openMapped(pid uint32, m *mapping) (*os.File, error) {
	dir := u.pidDir(pid)
	f, err := openNonblock(filepath.Join(dir, "map_files", fmt.Sprintf("%x-%x", m.start, m.end)))
	if err != nil && !m.deleted {
		f, err = openInRoot(filepath.Join(dir, "root"), m.path)
	}
	if err != nil {
		return nil, err
	}
	if err := checkMapped(f, m); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openNonblock opens path for reading without waiting on a FIFO.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
}

// openInRoot opens path as a process whose root is root sees it: an
// absolute link on the way resolves inside root, not in numatrace's.
func openInRoot(root, path string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Before 5.6: resolved as the kernel does; checkMapped still
		// keeps any file but the mapped one out.
		return openNonblock(filepath.Join(root, path))
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(root, path), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, path)), nil
}

// checkMapped says whether f is a regular file with the device and inode
// m's maps line names. On an overlay mount only the inode can be
// compared: the maps line shows the layer's device.
func checkMapped(f *os.File, m *mapping) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", m.path)
	}
	if st.Ino != m.inode {
		return fmt.Errorf("%s is not the file mapped (inode %d, mapped %d)", m.path, st.Ino, m.inode)
	}
	if unix.Major(st.Dev) == m.devMajor && unix.Minor(st.Dev) == m.devMinor {
		return nil
	}
	var fs unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &fs) == nil && fs.Type == overlayfsMagic {
		return nil
	}
	return fmt.Errorf("%s is not the file mapped (device %d:%d, mapped %x:%x)", m.path,
		unix.Major(st.Dev), unix.Minor(st.Dev), m.devMajor, m.devMinor)
}
