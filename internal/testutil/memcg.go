//go:build linux

package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MemcgV1 is where this machine mounts the cgroup v1 memory controller.
const MemcgV1 = "/sys/fs/cgroup/memory"

// MemcgWorkload is a shell held at a gate inside a 64 MiB memory cgroup.
// Released, it reads a 400 MiB file three times, which forces memcg
// reclaim: about 166 reclaims per read on this machine kind, as counted
// by a tp_btf program and by bpftrace alike.
type MemcgWorkload struct {
	Cmd      *exec.Cmd
	Cgroup   string // absolute path of the cgroup directory
	CgroupID uint64 // the directory's inode: the kernel's cgroup id
	gate     *os.File
}

// PID is the shell's pid.
func (w *MemcgWorkload) PID() int { return w.Cmd.Process.Pid }

// BigFile returns a 400 MiB file in the temp dir, creating it once. A
// file it creates leaves no pages cached, as one dropped from the cache
// would: a first reader in a small cgroup must reclaim, not find the
// writer's pages (on a fresh machine the first test to ask read it all
// from the cache, and stalled nothing).
func BigFile(t testing.TB) string {
	t.Helper()
	// /var/tmp, not a possibly-tmpfs /tmp: the pages must be page cache that
	// dropping caches evicts.
	path := filepath.Join("/var/tmp", "numatrace-400m")
	if st, err := os.Stat(path); err == nil && st.Size() == 400<<20 {
		return path
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for i := 0; i < 400; i++ {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	// Written back first: the kernel drops only clean pages.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// DropCaches empties the page cache so the next read must allocate.
func DropCaches(t testing.TB) {
	t.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
		t.Fatalf("drop caches: %v", err)
	}
}

// MemcgCgroup creates cgroup name under the v1 memory controller, with
// limitBytes as its limit (0 leaves it unlimited), and returns its path.
// Cleanup removes it once the processes in it are gone.
func MemcgCgroup(t testing.TB, name string, limitBytes int) string {
	t.Helper()
	RequireRoot(t)
	_, err := os.Stat(filepath.Join(MemcgV1, "memory.limit_in_bytes"))
	RequireFeature(t, err == nil, "needs the cgroup v1 memory controller at "+MemcgV1)
	cg := filepath.Join(MemcgV1, name)
	if err := os.Mkdir(cg, 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if err := os.Remove(cg); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	if limitBytes > 0 {
		if err := os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte(strconv.Itoa(limitBytes)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cg
}

// StartMemcgWorkload creates cgroup name under the v1 memory controller
// (64 MiB) and starts the gated shell in it. With exec the shell becomes
// cat (same pid); without, cat is a forked child. Cleanup kills it and
// removes the cgroup.
func StartMemcgWorkload(t testing.TB, name string, exec_ bool) *MemcgWorkload {
	t.Helper()
	return StartMemcgReader(t, name, exec_, "cat")
}

// StartMemcgReader is StartMemcgWorkload with reader run in cat's place:
// a program that reads the files it is given, such as a link to cat whose
// name becomes the thread's name (comm) when it is executed.
func StartMemcgReader(t testing.TB, name string, exec_ bool, reader string) *MemcgWorkload {
	t.Helper()
	cg := MemcgCgroup(t, name, 64<<20)
	file := BigFile(t)
	var st syscall.Stat_t
	if err := syscall.Stat(cg, &st); err != nil {
		t.Fatal(err)
	}
	DropCaches(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	run := `"$1"`
	if exec_ {
		run = `exec "$1"`
	}
	// Three reads: about 500 reclaims, so one noisy stall cannot swing a
	// comparison of totals.
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && read x && %s %s %s %s > /dev/null", cg, run, file, file, file)
	cmd := exec.Command("sh", "-c", script, "sh", reader)
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	wl := &MemcgWorkload{Cmd: cmd, Cgroup: cg, CgroupID: st.Ino, gate: w}
	t.Cleanup(func() {
		wl.gate.Close()
		wl.Cmd.Process.Kill()
		wl.Cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if f == strconv.Itoa(cmd.Process.Pid) {
				return wl
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d never joined %s", cmd.Process.Pid, cg)
	return nil
}

// Release opens the gate and waits for the workload to finish.
func (w *MemcgWorkload) Release(t testing.TB) {
	t.Helper()
	if _, err := w.gate.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Cmd.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
}

// CgroupV2 creates group name in the cgroup2 hierarchy, wherever it is
// mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1), and
// returns its path. A process in it has its own PSI figures
// (memory.pressure) whatever v1 controllers it is under. Cleanup removes
// it once the processes in it are gone.
func CgroupV2(t testing.TB, name string) string {
	t.Helper()
	RequireRoot(t)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	root := ""
	for _, l := range strings.Split(string(mounts), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(l, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			root = f[4]
			break
		}
	}
	RequireFeature(t, root != "", "needs cgroup2 mounted")
	cg := filepath.Join(root, name)
	if err := os.Mkdir(cg, 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if err := os.Remove(cg); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return cg
}
