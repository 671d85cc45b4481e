package psi

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// mountinfo is what /proc/self/mountinfo holds for the cgroup mounts, in
// its order: a later mount on the same point hides an earlier one.
const mountinfo = "proc/self/mountinfo"

// mount is one line of mountinfo.
type mount struct {
	root   string // the directory of the file system shown at point ("/" mostly)
	point  string // where it is mounted, absolute
	fstype string
}

// readMounts reads mountinfo:
//
//	40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//
// Fields 4 and 5 are the root and the mount point; the file system type
// follows the "-" that ends the optional fields.
func readMounts(root *hostfs.Root) ([]mount, error) {
	var out []mount
	err := root.Scan(mountinfo, hostfs.MaxTable, func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || !strings.HasPrefix(f[3], "/") || !strings.HasPrefix(f[4], "/") {
			return fmt.Errorf("want \"id parent dev root point opts ... - fstype ...\", got %s", hostfs.Excerpt(line))
		}
		out = append(out, mount{root: unescape(f[3]), point: unescape(f[4]), fstype: f[sep+1]})
		return nil
	})
	return out, err
}

// unescape undoes mountinfo's octal escapes ("\040" for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// under tells whether p is dir or inside it; both are clean and absolute.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// CgroupOf is the cgroup v2 group of process pid: the "0::/path" line of
// /proc/PID/cgroup, found under the cgroup2 mount of /proc/self/mountinfo
// (/sys/fs/cgroup on a pure v2 machine, /sys/fs/cgroup/unified beside v1).
// Both files are read as numatrace sees them, so the path is relative to
// numatrace's cgroup namespace, as are the mounts.
//
// A process without a v2 line, a group outside numatrace's namespace and a
// machine without a cgroup2 mount give a *NotAvailableError.
func CgroupOf(root *hostfs.Root, pid int) (Scope, error) {
	who := fmt.Sprintf("pid %d", pid)
	file := fmt.Sprintf("proc/%d/cgroup", pid)
	cg, found := "", false
	err := root.Scan(file, hostfs.MaxTable, func(_ int, line string) error {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			cg, found = p, true
		}
		return nil
	})
	switch {
	case err != nil:
		return Scope{}, err
	case !found:
		return Scope{}, &NotAvailableError{Scope: who, Path: root.Path(file),
			Reason: "no \"0::\" line: the process is in no cgroup v2 group"}
	case !strings.HasPrefix(cg, "/") || path.Clean(cg) != cg:
		// The kernel writes "/../x" for a group outside the reader's
		// namespace: that group is not under our mount.
		return Scope{}, &NotAvailableError{Scope: who, Path: root.Path(file),
			Reason: fmt.Sprintf("its group %s is outside numatrace's cgroup namespace", sanitize.Text(cg))}
	}
	ms, err := readMounts(root)
	if err != nil {
		return Scope{}, err
	}
	var mounted bool
	for _, m := range ms {
		if m.fstype != "cgroup2" {
			continue
		}
		mounted = true
		if under(cg, m.root) {
			return Scope{Name: cg, File: pressureFile(path.Join(m.point, strings.TrimPrefix(cg, m.root)))}, nil
		}
	}
	why := "no cgroup2 file system is mounted"
	if mounted {
		why = fmt.Sprintf("no cgroup2 mount shows its group %s", sanitize.Text(cg))
	}
	return Scope{}, &NotAvailableError{Scope: who, Path: root.Path(mountinfo), Reason: why}
}

// CgroupDir is the group of an explicit cgroup directory (--cgroup), an
// absolute path on the machine. The mount it is on decides: a cgroup2
// directory gives its memory.pressure; a cgroup v1 one gives a
// *NotAvailableError, since the kernel keeps PSI per group on v2 only.
func CgroupDir(root *hostfs.Root, dir string) (Scope, error) {
	if !path.IsAbs(dir) {
		return Scope{}, fmt.Errorf("cgroup directory %s is not an absolute path", sanitize.Text(dir))
	}
	dir = path.Clean(dir)
	if fi, err := root.Stat(dir); err != nil {
		return Scope{}, err
	} else if !fi.IsDir() {
		return Scope{}, fmt.Errorf("%s is not a directory", sanitize.Text(root.Path(dir)))
	}
	ms, err := readMounts(root)
	if err != nil {
		return Scope{}, err
	}
	// The deepest mount holding dir, the later of two on one point.
	var m *mount
	for i := range ms {
		if under(dir, ms[i].point) && (m == nil || len(ms[i].point) >= len(m.point)) {
			m = &ms[i]
		}
	}
	switch {
	case m != nil && m.fstype == "cgroup2":
		name := path.Join(m.root, strings.TrimPrefix(dir, m.point))
		return Scope{Name: name, File: pressureFile(dir)}, nil
	case m != nil && m.fstype == "cgroup":
		return Scope{}, &NotAvailableError{Scope: dir, Path: root.Path(dir),
			Reason: "a cgroup v1 directory: PSI per cgroup needs cgroup v2"}
	case m != nil:
		return Scope{}, fmt.Errorf("%s is not a cgroup directory: it is on %s", sanitize.Text(root.Path(dir)), sanitize.Text(m.fstype))
	}
	return Scope{}, fmt.Errorf("%s is not a cgroup directory: no mount holds it in %s", sanitize.Text(root.Path(dir)), sanitize.Text(root.Path(mountinfo)))
}

// pressureFile is the memory.pressure of a cgroup2 directory, relative to
// the root as System's file is.
func pressureFile(dir string) string {
	return strings.TrimPrefix(path.Join(dir, "memory.pressure"), "/")
}
