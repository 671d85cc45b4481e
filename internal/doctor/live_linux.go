//go:build linux

package doctor

import (
	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/hostfs"
)

// LiveProc tells whether root/proc is a mounted procfs (the host's, or one
// bind-mounted into a container at /host/proc) rather than a copy: only a
// live one can be read twice for rates. proc is found as every other file
// is, inside root: a copy's proc that is a symlink to the host's /proc is
// not the host's.
func LiveProc(root string) bool {
	fs, err := hostfs.Open(root)
	if err != nil {
		return false
	}
	defer fs.Close()
	var st unix.Statfs_t
	return fs.Statfs("proc", &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
