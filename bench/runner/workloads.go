package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	wlMigrate = "migrate"
	wlMemcg   = "memcg"
	wlMmap    = "mmap"
	wlWrite   = "write"
)

type workloads struct {
	c    *config
	cg   *cgroup
	file string
}

// workloadNote is what a workload reports about one of its runs.
type workloadNote struct {
	count   uint64 // flips, file reads, or map/unmap pairs
	seconds float64
}

func (n workloadNote) String() string {
	return fmt.Sprintf("%d in %.2f s", n.count, n.seconds)
}

func (w *workloads) run(ctx context.Context, wl string) (workloadNote, error) {
	switch wl {
	case wlMigrate:
		return w.tool(ctx, "flips", w.c.flip, "-duration", w.c.flipDur.String())
	case wlMmap:
		return w.tool(ctx, "pairs", w.c.mmaploop, "-duration", w.c.mmapDur.String())
	case wlMemcg:
		return w.memcg(ctx)
	case wlWrite:
		return w.write(ctx)
	}
	return workloadNote{}, fmt.Errorf("unknown workload %q", wl)
}

// tool runs flip or mmaploop, which print "<what> N seconds S ...".
func (w *workloads) tool(ctx context.Context, what string, argv ...string) (workloadNote, error) {
	out, err := runFg(ctx, argv...)
	if err != nil {
		return workloadNote{}, err
	}
	f := strings.Fields(out)
	if len(f) < 4 || f[0] != what || f[2] != "seconds" {
		return workloadNote{}, fmt.Errorf("%s printed %q", filepath.Base(argv[0]), out)
	}
	n, err1 := strconv.ParseUint(f[1], 10, 64)
	s, err2 := strconv.ParseFloat(f[3], 64)
	if err := errors.Join(err1, err2); err != nil {
		return workloadNote{}, fmt.Errorf("%s printed %q: %w", filepath.Base(argv[0]), out, err)
	}
	return workloadNote{count: n, seconds: s}, nil
}

// memcg drops the page cache, then reads the file from inside the limited
// cgroup, memcgReads times: each read charges far more page cache to the
// cgroup than its limit, so the reader reclaims from its own cgroup.
func (w *workloads) memcg(ctx context.Context) (workloadNote, error) {
	start := time.Now()
	for i := 0; i < w.c.memcgReads; i++ {
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o644); err != nil {
			return workloadNote{}, fmt.Errorf("drop caches: %w", err)
		}
		_, err := runFg(ctx, "/bin/sh", "-c", `echo $$ > "$1" && exec cat "$2" > /dev/null`,
			"sh", w.cg.procsFile(), w.file)
		if err != nil {
			return workloadNote{}, err
		}
	}
	return workloadNote{count: uint64(w.c.memcgReads), seconds: time.Since(start).Seconds()}, nil
}

// write writes writeMiB of zeros to a new file from inside the limited
// cgroup, then removes it: the writer runs over its dirty limit and
// pauses (balance_dirty_pages: dirty_throttle), and the cgroup's reclaim
// meets pages under writeback and waits for them (reclaim_throttle).
func (w *workloads) write(ctx context.Context) (workloadNote, error) {
	path := filepath.Join(w.c.workdir, "nt-bench-write.dat")
	defer os.Remove(path)
	start := time.Now()
	_, err := runFg(ctx, "/bin/sh", "-c", `echo $$ > "$1" && exec dd if=/dev/zero of="$2" bs=1M count="$3" status=none`,
		"sh", w.cg.procsFile(), path, strconv.Itoa(w.c.writeMiB))
	if err != nil {
		return workloadNote{}, err
	}
	return workloadNote{count: uint64(w.c.writeMiB), seconds: time.Since(start).Seconds()}, nil
}

// cgroup is the memory cgroup of the memcg workload.
type cgroup struct {
	dir string
	v2  bool
}

func (g *cgroup) procsFile() string { return filepath.Join(g.dir, "cgroup.procs") }

// setupCgroup creates the memory cgroup with the limit: cgroup v1's memory
// controller at /sys/fs/cgroup/memory, else cgroup v2 with memory enabled.
func setupCgroup(name string, limitMiB int) (*cgroup, error) {
	limit := strconv.Itoa(limitMiB << 20)
	var g *cgroup
	var limitFile string
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		g = &cgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
		limitFile = "memory.limit_in_bytes"
	} else if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil &&
		strings.Contains(string(b), "memory") {
		g = &cgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		limitFile = "memory.max"
	} else {
		return nil, errors.New("no memory cgroup controller (neither v1 at /sys/fs/cgroup/memory nor enabled in v2)")
	}
	if _, err := os.Stat(g.dir); err == nil {
		// Left by a run that was killed; an empty group can go.
		if err := syscall.Rmdir(g.dir); err != nil {
			return nil, fmt.Errorf("%s exists and cannot be removed (%v); is another benchmark running?", g.dir, err)
		}
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(g.dir, limitFile), []byte(limit), 0o644); err != nil {
		g.remove()
		return nil, fmt.Errorf("set %s: %w", limitFile, err)
	}
	return g, nil
}

// remove removes the cgroup, waiting a little for a killed reader to leave.
func (g *cgroup) remove() {
	var err error
	for i := 0; i < 50; i++ {
		if err = syscall.Rmdir(g.dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("remove cgroup %s: %v", g.dir, err)
}

// writeFile writes a file of mib MiB and syncs it, so dropping caches
// leaves none of it in memory. It must be on a disk file system: a tmpfs
// file cannot be dropped from memory.
func writeFile(path string, mib int) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		return err
	}
	const tmpfsMagic = 0x01021994
	if st.Type == tmpfsMagic {
		return fmt.Errorf("%s is on tmpfs; the memcg workload needs a disk file system", filepath.Dir(path))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9) // not all zeros, in case the file system is clever
	}
	for i := 0; i < mib; i++ {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
