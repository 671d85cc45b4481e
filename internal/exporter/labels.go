package exporter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/procfs"

	"github.com/numatrace/numatrace/internal/sanitize"
)

// Labeller names the cgroup and container of a process, with the number
// of distinct cgroup values bounded: at most limit cgroups hold a value
// (a slot) at once; past that, a new one folds into Overflow, and both
// the observations and the distinct cgroups folded are counted. A cgroup
// that is gone gives its slot back once a scrape has taken its last
// figures (Scraped). Unknown (the process and its cgroup were gone before
// they could be named) and Overflow take no slot.
type Labeller struct {
	proc    procfs.FS
	procErr error  // no procfs at procRoot: every process reads as gone
	memRoot string // the v1 memory hierarchy, "" if none
	unified string // the v2 hierarchy, "" if none
	limit   int
	ids     *cgroupIDs // nil: no cgroup mount to resolve ids in

	mu            sync.Mutex
	byPID         map[uint32]labels
	slots         map[string]*slot // cgroup values given out
	scrapes       uint64           // scrapes begun
	folded        uint64           // observations folded into Overflow
	foldedSet     map[string]bool  // cgroups folded, to count each once
	foldedCgroups uint64
	released      uint64 // slots given back by cgroups gone
}

type labels struct {
	cgroup, container string
	// dir is the cgroup's directory, where it can be told; checked
	// tells whether it is known to be that cgroup's (a path from /proc
	// may be relative to a cgroup namespace's root and name another).
	dir     string
	checked bool
	// id is the cgroup id of the stall the labels were read for (0:
	// none given). A process moves between cgroups (a job runner forks,
	// then moves the child into the job's cgroup): a stall whose id
	// differs reads the labels again.
	id uint64
}

// slot is a cgroup value given out: its directory ("" if not known, so
// never found gone) and the number of scrapes begun at its last
// observation (so scrape seen+1 and later began after it).
type slot struct {
	dir  string
	seen uint64
}

// maxCachedPIDs bounds the pid → labels cache; it is emptied when full
// (and on Forget), so a reused pid is read again.
const maxCachedPIDs = 1 << 16

// NewLabeller reads /proc under procRoot and keeps at most limit cgroup
// values. cgroupRoot ("/sys/fs/cgroup"; "" for none) is where a cgroup id
// the kernel gave is looked up when the process has gone from /proc, and
// where a cgroup is seen to be gone.
func NewLabeller(procRoot, cgroupRoot string, limit int) *Labeller {
	l := &Labeller{limit: limit, byPID: map[uint32]labels{}, slots: map[string]*slot{}, foldedSet: map[string]bool{}}
	l.proc, l.procErr = procfs.NewFS(procRoot)
	if cgroupRoot != "" {
		l.ids = newCgroupIDs(cgroupRoot)
		for _, r := range l.ids.roots {
			switch r {
			case filepath.Join(cgroupRoot, "memory"):
				l.memRoot = r
			default:
				if l.unified == "" {
					l.unified = r
				}
			}
		}
	}
	return l
}

// Close stops watching the cgroup mounts.
func (l *Labeller) Close() {
	if l.ids != nil {
		l.ids.Close()
	}
}

// Overflow is the label value that cgroups past the limit fold into.
const Overflow = "overflow"

// Unknown labels a process that had gone when it was looked up, whose
// cgroup could not be found from the id the kernel gave either. (Real
// values are paths: they start with "/".)
const Unknown = "unknown"

// For returns the cgroup and container labels of pid, and whether the
// cgroup was folded into Overflow. cgroupID, if not 0, is the id (the
// cgroup directory's inode) the kernel gave with the stall: a process that
// ended before its /proc entry was read is labelled by it.
func (l *Labeller) For(pid uint32, cgroupID uint64) (cgroup, container string, folded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lb, ok := l.byPID[pid]
	if !ok || cgroupID != 0 && (lb.cgroup == Unknown || lb.id != cgroupID) { // moved, or an id may name it now
		lb = l.read(pid)
		lb.id = cgroupID
		if lb.cgroup == Unknown && cgroupID != 0 && l.ids != nil {
			if abs, rel, found := l.ids.path(cgroupID); found {
				lb = newLabels(rel)
				lb.dir, lb.checked, lb.id = abs, true, cgroupID
			}
		}
		if len(l.byPID) >= maxCachedPIDs {
			l.byPID = map[uint32]labels{}
		}
		l.byPID[pid] = lb
	}
	if lb.cgroup == Unknown {
		return Unknown, "", false
	}
	if s := l.slots[lb.cgroup]; s != nil {
		s.seen = l.scrapes
		return lb.cgroup, lb.container, false
	}
	if len(l.slots) >= l.limit {
		l.folded++
		if !l.foldedSet[lb.cgroup] {
			if len(l.foldedSet) >= maxCgroupIDs {
				clear(l.foldedSet)
			}
			l.foldedSet[lb.cgroup] = true
			l.foldedCgroups++
		}
		return Overflow, "", true
	}
	s := &slot{seen: l.scrapes}
	if lb.checked || lb.dir != "" && isDir(lb.dir) {
		s.dir = lb.dir
	}
	l.slots[lb.cgroup] = s
	return lb.cgroup, lb.container, false
}

// BeginScrape numbers a scrape as it begins.
func (l *Labeller) BeginScrape() (scrape uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scrapes++
	return l.scrapes
}

// Scraped gives back, once scrape (BeginScrape's number) has gathered its
// figures, the slots of cgroups that are gone and that it took the last
// figures of (no observation since it began). release deletes a value's
// series; it runs with the Labeller locked, so For gives out nothing
// meanwhile. A scrape still gathering at once with this one may or may
// not have them.
func (l *Labeller) Scraped(scrape uint64, release func(cgroup string)) {
	l.mu.Lock()
	type candidate struct{ value, dir string }
	var cands []candidate
	for v, s := range l.slots {
		if s.dir != "" && s.seen < scrape {
			cands = append(cands, candidate{v, s.dir})
		}
	}
	l.mu.Unlock()
	var gone []string
	for _, c := range cands { // outside the lock: a few hundred stats
		if _, err := os.Stat(c.dir); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, c.value)
		}
	}
	if len(gone) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	freed := map[string]bool{}
	for _, v := range gone {
		if s := l.slots[v]; s != nil && s.seen < scrape { // not observed since
			delete(l.slots, v)
			freed[v] = true
			release(v)
			l.released++
		}
	}
	for pid, lb := range l.byPID {
		if freed[lb.cgroup] {
			delete(l.byPID, pid)
		}
	}
}

// Forget drops the cache (pids get reused).
func (l *Labeller) Forget() {
	l.mu.Lock()
	l.byPID = map[uint32]labels{}
	l.mu.Unlock()
}

// Counts are the Labeller's figures for its own metrics.
type Counts struct {
	Values        int    // cgroup values given out now (at most the limit)
	Folded        uint64 // observations folded into Overflow
	FoldedCgroups uint64 // distinct cgroups folded into Overflow
	Released      uint64 // values given back because their cgroup was gone
}

// Counts returns the figures.
func (l *Labeller) Counts() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Counts{Values: len(l.slots), Folded: l.folded, FoldedCgroups: l.foldedCgroups, Released: l.released}
}

// read takes the process's cgroup from /proc/PID/cgroup: the unified
// (v2) path when the process has one, else the v1 memory controller's.
func (l *Labeller) read(pid uint32) labels {
	gone := labels{cgroup: Unknown} // exited before we looked
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
	cg, root := mem, l.memRoot
	if v2 != "" && v2 != "/" {
		cg, root = v2, l.unified
	}
	if cg == "" {
		cg = "/"
	}
	lb := newLabels(cg)
	// A path from a cgroup namespace may climb above its root ("/../x"):
	// then where it is cannot be told.
	if dir := filepath.Join(root, cg); root != "" && (dir == root || strings.HasPrefix(dir, root+"/")) {
		lb.dir = dir
	}
	return lb
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
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
