package memcg

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// NoGroupError says why a target has no memory cgroup to read: a process
// in cgroup v2's root group, a group without the memory controller, a
// kernel without it.
type NoGroupError struct {
	Who string // "pid 4242", or the directory
	Why string
}

func (e *NoGroupError) Error() string { return e.Who + ": " + e.Why }

// cgroupRoot is where cgroups are conventionally mounted; a group under it
// is named relative to it, as --cgroup takes it.
const cgroupRoot = "/sys/fs/cgroup"

// maxDepth bounds the walk up a group's ancestors (a copy's tree is
// untrusted; a real one is a few levels deep).
const maxDepth = 64

// Of reads the memory cgroup of process pid: its group under cgroup v1's
// memory controller where it has one, else its cgroup v2 group, each
// found under its mount in /proc/self/mountinfo (the conventional
// /sys/fs/cgroup layout where a copy has no mountinfo). Both files are
// read as numatrace sees them: the paths are relative to its cgroup
// namespace, as are the mounts. A process in no group with memory files
// gives a *NoGroupError.
func Of(fs *hostfs.Root, pid int) (*Reading, error) {
	dir, err := Find(fs, pid)
	if err != nil {
		return nil, err
	}
	return Dir(fs, dir)
}

// Find is the directory of process pid's own memory cgroup, as Of finds
// it: a run reads it again by its directory (Dir) once the process may
// have exited.
func Find(fs *hostfs.Root, pid int) (string, error) {
	who := fmt.Sprintf("pid %d", pid)
	var v1, v2 string
	err := fs.Scan(fmt.Sprintf("proc/%d/cgroup", pid), hostfs.MaxTable, func(_ int, line string) error {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			return nil
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				v1 = f[2]
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	ms, err := mounts(fs)
	if err != nil {
		return "", err
	}
	for _, c := range []struct {
		group string
		v2    bool
	}{{v1, false}, {v2, true}} {
		if c.group == "" {
			continue
		}
		if !strings.HasPrefix(c.group, "/") || path.Clean(c.group) != c.group {
			// The kernel writes "/../x" for a group outside the
			// reader's cgroup namespace: no mount of ours shows it.
			continue
		}
		for _, m := range ms {
			if m.v2 != c.v2 || !(m.v2 || m.memory) || !under(c.group, m.root) {
				continue
			}
			dir := path.Join(m.point, strings.TrimPrefix(c.group, m.root))
			if fs.Exists(dir + "/" + filesOf(c.v2).usage) {
				return dir, nil
			}
		}
	}
	why := "its cgroups have no memory controller files (cgroup v2's root group, or no memory controller)"
	if v1 == "" && v2 == "" {
		why = "its /proc/PID/cgroup names no memory cgroup"
	}
	return "", &NoGroupError{Who: who, Why: why}
}

// Dir reads the memory cgroup in dir, an absolute directory (--cgroup,
// or what Find found): a v1 memory controller group or a cgroup v2 group
// with memory files; or the ancestor whose limit binds it.
func Dir(fs *hostfs.Root, dir string) (*Reading, error) {
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("cgroup directory %s is not an absolute path", sanitize.Text(dir))
	}
	dir = path.Clean(dir)
	for _, v2 := range []bool{false, true} {
		if fs.Exists(dir + "/" + filesOf(v2).usage) {
			return group(fs, dir, v2)
		}
	}
	return nil, &NoGroupError{Who: sanitize.Text(dir),
		Why: "no memory controller files (a cgroup v2 group without the memory controller, or a v1 group of another controller)"}
}

func filesOf(v2 bool) files {
	if v2 {
		return v2Files
	}
	return v1Files
}

// group reads the group in dir, or the ancestor whose limit (or
// memory.high) is the tightest over it: that is the group the kernel
// reclaims when its allocations reach it. Of ancestors with the same
// bound the nearest is taken.
func group(fs *hostfs.Root, dir string, v2 bool) (*Reading, error) {
	bind, best := dir, Unlimited
	f := filesOf(v2)
	d := dir
	for depth := 0; depth < maxDepth && d != "/" && d != "."; depth++ {
		if !fs.Exists(d + "/" + f.limit) { // above the hierarchy's root (v2's root has no memory.max)
			break
		}
		limit, err := readLimit(fs, d+"/"+f.limit)
		if err != nil {
			return nil, err
		}
		if v2 {
			high, err := readLimit(fs, d+"/memory.high")
			if err != nil {
				return nil, err
			}
			limit = min(limit, high)
		}
		if limit < best {
			bind, best = d, limit
		}
		d = path.Dir(d)
	}
	r, err := read(fs, bind, name(bind), v2)
	if err != nil {
		return nil, err
	}
	if bind != dir {
		r.Member = name(dir)
	}
	return r, nil
}

// name is how a group's directory is shown: relative to /sys/fs/cgroup
// where it is under it, escaped.
func name(dir string) string {
	if rel, ok := strings.CutPrefix(dir, cgroupRoot+"/"); ok {
		return sanitize.Text(rel)
	}
	return sanitize.Text(dir)
}

// mount is a cgroup mount of /proc/self/mountinfo.
type mount struct {
	root   string // the hierarchy's directory shown at point ("/" mostly)
	point  string // where it is mounted
	v2     bool   // cgroup2, else a v1 hierarchy
	memory bool   // a v1 hierarchy with the memory controller
}

// defaultMounts are the conventional layout, for a copy without
// mountinfo: v1's memory controller at /sys/fs/cgroup/memory, cgroup2 at
// /sys/fs/cgroup.
var defaultMounts = []mount{{root: "/", point: cgroupRoot + "/memory", memory: true}, {root: "/", point: cgroupRoot, v2: true}}

// mounts reads the cgroup mounts of /proc/self/mountinfo:
//
//	35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
//
// Fields 4 and 5 are the root and the mount point; the file system type
// and its options follow the "-" that ends the optional fields.
func mounts(fs *hostfs.Root) ([]mount, error) {
	var out []mount
	err := fs.Scan("proc/self/mountinfo", hostfs.MaxTable, func(_ int, line string) error {
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || len(f) < 5 {
			return nil
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4])}
		switch f[sep+1] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			if sep+3 < len(f) {
				for _, o := range strings.Split(f[sep+3], ",") {
					m.memory = m.memory || o == "memory"
				}
			}
		default:
			return nil
		}
		if path.IsAbs(m.root) && path.IsAbs(m.point) {
			out = append(out, m)
		}
		return nil
	})
	if hostfs.Absent(err) {
		return defaultMounts, nil
	}
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
