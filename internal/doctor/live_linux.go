//go:build linux

package doctor

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LiveProc tells whether root/proc is a mounted procfs (the host's, or one
// bind-mounted into a container at /host/proc) rather than a copy: only a
// live one can be read twice for rates.
func LiveProc(root string) bool {
	var st unix.Statfs_t
	return unix.Statfs(filepath.Join(root, "proc"), &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
