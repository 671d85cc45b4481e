package exporter

import (
	"regexp"
	"slices"
	"sync"

	"github.com/prometheus/procfs"
)

// Labeller names the cgroup and container of a process, with the number
// of distinct cgroup values bounded: past the bound, new ones fold into
// "other" and the folding is counted.
type Labeller struct {
	procRoot string
	limit    int

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
// values.
func NewLabeller(procRoot string, limit int) *Labeller {
	return &Labeller{procRoot: procRoot, limit: limit, byPID: map[uint32]labels{}, seen: map[string]bool{}}
}

// Other is the label value that over-limit cgroups fold into.
const Other = "other"

// For returns the cgroup and container labels of pid, and whether the
// cgroup was folded into Other.
func (l *Labeller) For(pid uint32) (cgroup, container string, folded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lb, ok := l.byPID[pid]
	if !ok {
		lb = l.read(pid)
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
	unknown := labels{cgroup: "unknown"} // exited before we looked
	fs, err := procfs.NewFS(l.procRoot)
	if err != nil {
		return unknown
	}
	p, err := fs.Proc(int(pid))
	if err != nil {
		return unknown
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return unknown
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
	return labels{cgroup: cg, container: containerID(cg)}
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
