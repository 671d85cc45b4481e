package exporter

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/numatrace/numatrace/internal/sanitize"
)

// Labeller names the cgroup and container of a process, with the number
// of distinct cgroup values bounded: past the bound, new ones fold into
// "other" and the folding is counted.
type Labeller struct {
	proc    procfs.FS
	procErr error // no procfs at procRoot: every process reads as gone
	limit   int
	ids     *cgroupIDs // nil: no cgroup mount to resolve ids in

	mu     sync.Mutex
	byPID  map[uint32]labels
	seen   map[string]bool // cgroup values given out
	folded uint64          // observations folded into "other"
}

type labels struct{ cgroup, container string }

// maxCachedPIDs bounds the pid → labels cache; it is emptied when full
// (and on Forget), so a reused pid is read again.
const maxCachedPIDs = 1 << 16

// NewLabeller reads /proc under procRoot and keeps at most limit cgroup
// values. cgroupRoot ("/sys/fs/cgroup"; "" for none) is where a cgroup id
// the kernel gave is looked up when the process has gone from /proc.
func NewLabeller(procRoot, cgroupRoot string, limit int) *Labeller {
	l := &Labeller{limit: limit, byPID: map[uint32]labels{}, seen: map[string]bool{}}
	l.proc, l.procErr = procfs.NewFS(procRoot)
	if cgroupRoot != "" {
		l.ids = newCgroupIDs(cgroupRoot)
	}
	return l
}

// Other is the label value that over-limit cgroups fold into.
const Other = "other"

// unknown labels a process that had gone when it was looked up, with no
// cgroup id to go by.
const unknown = "unknown"

// For returns the cgroup and container labels of pid, and whether the
// cgroup was folded into Other. cgroupID, if not 0, is the id (the cgroup
// directory's inode) the kernel gave with the stall: a process that ended
// before its /proc entry was read is labelled by it.
func (l *Labeller) For(pid uint32, cgroupID uint64) (cgroup, container string, folded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lb, ok := l.byPID[pid]
	if !ok || lb.cgroup == unknown && cgroupID != 0 { // an id may name it now
		lb = l.read(pid)
		if lb.cgroup == unknown && cgroupID != 0 && l.ids != nil {
			if path, found := l.ids.path(cgroupID); found {
				lb = newLabels(path)
			}
		}
		if len(l.byPID) >= maxCachedPIDs {
			l.byPID = map[uint32]labels{}
		}
		l.byPID[pid] = lb
	}
	if !l.seen[lb.cgroup] {
		if len(l.seen) >= l.limit {
			l.folded++
			return Other, "", true
		}
		l.seen[lb.cgroup] = true
	}
	return lb.cgroup, lb.container, false
}

// Forget drops the cache (pids get reused).
func (l *Labeller) Forget() {
	l.mu.Lock()
	l.byPID = map[uint32]labels{}
	l.mu.Unlock()
}

// Folded is the number of observations folded into Other.
func (l *Labeller) Folded() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.folded
}

// Values is the number of distinct cgroup values given out.
func (l *Labeller) Values() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// read takes the process's cgroup from /proc/PID/cgroup: the unified
// (v2) path when the process has one, else the v1 memory controller's.
func (l *Labeller) read(pid uint32) labels {
	gone := labels{cgroup: unknown} // exited before we looked
	if l.procErr != nil {
		return gone
	}
	p, err := l.proc.Proc(int(pid))
	if err != nil {
		return gone
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return gone
	}
	var v2, mem string
	for _, c := range cgs {
		switch {
		case c.HierarchyID == 0 && len(c.Controllers) == 0:
			v2 = c.Path
		case slices.Contains(c.Controllers, "memory"):
			mem = c.Path
		}
	}
	cg := mem
	if v2 != "" && v2 != "/" {
		cg = v2
	}
	if cg == "" {
		cg = "/"
	}
	return newLabels(cg)
}

// newLabels labels the cgroup at path. Anyone who may make a cgroup names
// it: the path is escaped (an invalid UTF-8 byte would make the Prometheus
// client panic). The container id is hex digits by construction.
func newLabels(path string) labels {
	return labels{cgroup: sanitize.Text(path), container: containerID(path)}
}

// containerRE finds a container id in the cgroup paths of docker,
// containerd, CRI-O and podman (kubepods included): 64 hex digits.
var containerRE = regexp.MustCompile(`(?:docker-|cri-containerd-|crio-|libpod-|/docker/|/)([0-9a-f]{64})(?:\.scope)?(?:/|$)`)

// containerID is the short (12-digit) container id in a cgroup path, or "".
func containerID(cg string) string {
	m := containerRE.FindStringSubmatch(cg)
	if m == nil {
		return ""
	}
	return m[1][:12]
}

// cgroupIDs finds a cgroup's path from its id, the inode number of its
// directory, by walking the cgroup mounts: the v1 memory hierarchy (whose
// ids memcg stalls carry on a v1 or hybrid machine) and the v2 one.
type cgroupIDs struct {
	roots   []string
	byID    map[uint64]string
	scanned time.Time
	missed  map[uint64]time.Time // ids no walk found, and when
}

func newCgroupIDs(root string) *cgroupIDs {
	return &cgroupIDs{roots: []string{filepath.Join(root, "memory"), filepath.Join(root, "unified"), root},
		byID: map[uint64]string{}, missed: map[uint64]time.Time{}}
}

// path is id's path below its hierarchy's root ("/" for the root). An id
// not known yet (a cgroup made for a short job) walks the mounts again,
// at most every 10 ms; an id a fresh walk did not find (the cgroup is
// gone too) is not looked for again for a second.
func (c *cgroupIDs) path(id uint64) (string, bool) {
	if p, ok := c.byID[id]; ok {
		return p, true
	}
	now := time.Now()
	if t, ok := c.missed[id]; ok && now.Sub(t) < time.Second {
		return "", false
	}
	if now.Sub(c.scanned) < 10*time.Millisecond {
		return "", false // the next stall asks again
	}
	c.scan()
	p, ok := c.byID[id]
	if !ok {
		if len(c.missed) >= maxCgroupIDs {
			clear(c.missed)
		}
		c.missed[id] = now
	}
	return p, ok
}

// maxCgroupIDs bounds the id → path table: a machine has some thousands.
const maxCgroupIDs = 1 << 16

func (c *cgroupIDs) scan() {
	c.scanned = time.Now()
	c.byID = map[uint64]string{}
	for _, root := range c.roots {
		// Only a cgroup hierarchy (a hybrid machine's /sys/fs/cgroup is
		// a tmpfs holding them).
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			info, err := d.Info()
			if err != nil || len(c.byID) >= maxCgroupIDs {
				return fs.SkipDir
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			if _, dup := c.byID[st.Ino]; !dup { // the first hierarchy wins
				c.byID[st.Ino] = filepath.Clean("/" + rel)
			}
			return nil
		})
	}
}
