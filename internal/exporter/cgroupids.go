package exporter

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cgroupIDs finds a cgroup's directory from its id, the inode number of
// the directory, in the cgroup mounts: the v1 memory hierarchy (whose ids
// memcg stalls carry on a v1 or hybrid machine) and the v2 one.
//
// A stall is read up to a tenth of a second after it happened, and a
// short job's process and cgroup may both be gone by then. So the table
// is kept as cgroups come: inotify tells of each new directory as it is
// made (every cgroup directory is watched), and a directory's id stays
// known for a minute after it is removed. A miss (a directory inotify
// could not tell of: its watches ran out) walks the mounts again, at most
// every 10 ms; an id a fresh walk did not find is not looked for again
// for a second. Kernfs ids are 64 bits and not reused, so an id a removed
// cgroup had never names another.
type cgroupIDs struct {
	roots []string // the hierarchies, in the order they win a shared id

	mu      sync.Mutex
	byID    map[uint64]cgroupDir
	wds     map[int32]cgroupDir // inotify watch → its directory
	removed []removedID         // oldest first
	scanned time.Time
	missed  map[uint64]time.Time // ids no walk found, and when

	fd   int      // inotify; -1 without
	file *os.File // fd, for a read that Close interrupts
}

// cgroupDir is a cgroup's directory: roots[root] + rel.
type cgroupDir struct {
	root int
	rel  string // "/" for the hierarchy's root
	id   uint64
}

type removedID struct {
	id uint64
	at time.Time
}

const (
	// maxCgroupIDs bounds the table (and the watches): a machine has
	// some thousands.
	maxCgroupIDs = 1 << 16
	// keepRemoved is how long a removed cgroup's id stays known, for its
	// stalls still on their way.
	keepRemoved = time.Minute
)

func newCgroupIDs(root string) *cgroupIDs {
	c := &cgroupIDs{byID: map[uint64]cgroupDir{}, wds: map[int32]cgroupDir{}, missed: map[uint64]time.Time{}, fd: -1}
	for _, r := range []string{filepath.Join(root, "memory"), filepath.Join(root, "unified"), root} {
		// Only a cgroup hierarchy (a hybrid machine's /sys/fs/cgroup is
		// a tmpfs holding them).
		if _, err := os.Stat(filepath.Join(r, "cgroup.procs")); err == nil {
			c.roots = append(c.roots, r)
		}
	}
	if fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err == nil {
		c.fd, c.file = fd, os.NewFile(uintptr(fd), "inotify")
	}
	c.mu.Lock()
	c.scan()
	c.mu.Unlock()
	if c.file != nil {
		go c.watch()
	}
	return c
}

// Close stops watching.
func (c *cgroupIDs) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		c.file.Close()
		c.fd = -1
	}
}

// path is id's directory, absolute, and its path below its hierarchy's
// root ("/" for the root).
func (c *cgroupIDs) path(id uint64) (abs, rel string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.byID[id]
	if !ok {
		now := time.Now()
		if t, seen := c.missed[id]; seen && now.Sub(t) < time.Second {
			return "", "", false
		}
		if now.Sub(c.scanned) < 10*time.Millisecond {
			return "", "", false // the next stall asks again
		}
		c.scan()
		if d, ok = c.byID[id]; !ok {
			if len(c.missed) >= maxCgroupIDs {
				clear(c.missed)
			}
			c.missed[id] = now
			return "", "", false
		}
	}
	return filepath.Join(c.roots[d.root], d.rel), d.rel, true
}

// scan walks every hierarchy, adding what it finds (c.mu held).
func (c *cgroupIDs) scan() {
	c.scanned = time.Now()
	c.prune(c.scanned)
	for i, r := range c.roots {
		c.walk(i, r)
	}
}

// walk adds dir and every directory below it in hierarchy root, and
// watches each (c.mu held).
func (c *cgroupIDs) walk(root int, dir string) {
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if len(c.byID) >= maxCgroupIDs {
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return fs.SkipDir
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		rel, _ := filepath.Rel(c.roots[root], path)
		cd := cgroupDir{root: root, rel: filepath.Clean("/" + rel), id: st.Ino}
		if old, dup := c.byID[st.Ino]; !dup || old.root >= root { // the first hierarchy wins
			c.byID[st.Ino] = cd
		}
		if c.fd >= 0 && len(c.wds) < maxCgroupIDs {
			// A directory made before its watch was added is found by
			// the walk itself.
			if wd, err := unix.InotifyAddWatch(c.fd, path, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_ONLYDIR); err == nil {
				c.wds[int32(wd)] = cd
			}
		}
		return nil
	})
}

// prune forgets the ids of directories removed keepRemoved ago (c.mu
// held).
func (c *cgroupIDs) prune(now time.Time) {
	n := 0
	for _, r := range c.removed {
		if now.Sub(r.at) < keepRemoved && len(c.removed)-n <= maxCgroupIDs {
			break
		}
		if d, ok := c.byID[r.id]; ok && d.id == r.id {
			delete(c.byID, r.id)
		}
		n++
	}
	c.removed = c.removed[n:]
	if len(c.byID) >= maxCgroupIDs { // directories removed unwatched
		clear(c.byID)
	}
}

// watch reads inotify's events until Close.
func (c *cgroupIDs) watch() {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.file.Read(buf)
		if err != nil {
			return // closed
		}
		c.mu.Lock()
		c.events(buf[:n])
		c.mu.Unlock()
	}
}

// events files a read's worth of inotify events (c.mu held).
func (c *cgroupIDs) events(b []byte) {
	now := time.Now()
	rescan := false
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			break
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00"))
		b = b[end:]
		parent, known := c.wds[ev.Wd]
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0, ev.Mask&unix.IN_MOVED_FROM != 0:
			rescan = true // events lost, or a cgroup renamed (v1): its subtree's paths changed
		case ev.Mask&unix.IN_IGNORED != 0: // the directory is gone
			if known {
				delete(c.wds, ev.Wd)
				c.removed = append(c.removed, removedID{parent.id, now})
			}
		case known && ev.Mask&unix.IN_ISDIR != 0 && name != "":
			c.walk(parent.root, filepath.Join(c.roots[parent.root], parent.rel, name))
		}
	}
	if rescan {
		c.scan()
	}
	c.prune(now)
}
