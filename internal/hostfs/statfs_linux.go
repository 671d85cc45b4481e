package hostfs

import "golang.org/x/sys/unix"

// Statfs describes the file system of directory name inside the root.
func (r *Root) Statfs(name string, st *unix.Statfs_t) error {
	d, err := r.o.openDir(r.rel(name))
	if err != nil {
		return r.err("open", name, err)
	}
	defer d.Close()
	if err := unix.Fstatfs(int(d.Fd()), st); err != nil {
		return r.err("statfs", name, err)
	}
	return nil
}
