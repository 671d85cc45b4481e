//go:build linux

package tracer

// Real stalls made on this machine by real workloads, checked against the
// workload's own thread ids and, where one exists, the kernel's counters.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

func setAffinity(t *testing.T, cpu int) {
	t.Helper()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Fatalf("pin to cpu %d: %v", cpu, err)
	}
}

func TestTaskMigrationCountsAffinityFlips(t *testing.T) {
	testutil.RequireFeature(t, runtime.NumCPU() >= 2, "needs two CPUs")
	// Counted by the kernel and read by the task iterator, and, as where
	// the iterator cannot load, counted on the hook.
	for _, noIter := range []bool{false, true} {
		name := map[bool]string{false: "iterator", true: "hook"}[noIter]
		t.Run(name, func(t *testing.T) {
			tid := lockedThread(t)
			var orig unix.CPUSet
			if err := unix.SchedGetaffinity(0, &orig); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.SchedSetaffinity(0, &orig) })

			// Pretend CPU 1 is on another node: every flip is then cross-node.
			tr := openForThreadCfg(t, tid, twoNodes(), noIter)
			if (tr.migrIter == nil) != noIter {
				t.Fatalf("migrations iterator loaded: %v", tr.migrIter != nil)
			}
			const flips = 200
			setAffinity(t, 0)
			before := threadCounts(t, tr, tid)
			for i := 1; i <= flips; i++ {
				setAffinity(t, i%2)
			}
			after := threadCounts(t, tr, tid)
			got := after.Migrations - before.Migrations
			cross := after.CrossNodeMigrations - before.CrossNodeMigrations
			// Each flip moves the running thread once; the scheduler may add a few.
			if got < flips || got > flips+flips/10 {
				t.Fatalf("%d migrations for %d affinity flips", got, flips)
			}
			if cross < flips || cross > got {
				t.Fatalf("%d cross-node of %d migrations, want every flip (%d) cross-node", cross, got, flips)
			}
		})
	}
}

// A thread's migrations outlive it: the iterator no longer sees it, so the
// exit hook keeps its count. Migrations before attaching are not counted.
func TestTaskMigrationsOfAnExitedThread(t *testing.T) {
	testutil.RequireFeature(t, runtime.NumCPU() >= 2, "needs two CPUs")
	// A goroutine that locks the main thread and returns does not end it:
	// hold the main thread elsewhere, if need be, and use another.
	tids := make(chan uint32)
	start, done, hold := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(hold)
	var tid uint32
	for tid == 0 {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			me := uint32(unix.Gettid())
			if int(me) == unix.Getpid() {
				tids <- 0
				<-hold
				return
			}
			for i := 0; i < 30; i++ { // before attaching: not counted
				setAffinity(t, i%2)
			}
			tids <- me
			<-start
			for i := 0; i < 100; i++ { // it sits on CPU 1: each of these moves it
				setAffinity(t, i%2)
			}
			close(done)
		}()
		tid = <-tids
	}
	tr := openForThread(t, tid, twoNodes())
	close(start)
	<-done
	// The goroutine returned: its thread exits (and the exit is traced).
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
			t.Fatalf("the thread did not exit: %.300s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	th := threadCounts(t, tr, tid)
	if th.Migrations < 100 || th.Migrations > 110 || th.CrossNodeMigrations < 100 {
		t.Fatalf("exited thread: %d migrations (%d cross-node), want the 100 after attaching", th.Migrations, th.CrossNodeMigrations)
	}
}

func threadCounts(t *testing.T, tr *Tracer, tid uint32) stall.ThreadStats {
	t.Helper()
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if th := snap.Threads[tid]; th != nil {
		return *th
	}
	return stall.ThreadStats{}
}

func TestTaskMigrationSameNodeIsNotCrossNode(t *testing.T) {
	testutil.RequireFeature(t, runtime.NumCPU() >= 2, "needs two CPUs")
	tid := lockedThread(t)
	var orig unix.CPUSet
	unix.SchedGetaffinity(0, &orig)
	t.Cleanup(func() { unix.SchedSetaffinity(0, &orig) })
	one := &topology.Topology{Nodes: []int{0}, CPUNode: map[int]int{0: 0, 1: 0}}
	tr := openForThread(t, tid, one)
	setAffinity(t, 0)
	before := threadCounts(t, tr, tid)
	for i := 1; i <= 50; i++ {
		setAffinity(t, i%2)
	}
	c := threadCounts(t, tr, tid)
	c.Migrations -= before.Migrations
	if c.Migrations < 50 || c.CrossNodeMigrations != 0 {
		t.Fatalf("migrations %d cross-node %d: want >= 50 and 0", c.Migrations, c.CrossNodeMigrations)
	}
}

func TestMemcgReclaimChargedToWorkloadThread(t *testing.T) {
	child := testutil.StartMemcgWorkload(t, "numatrace-test-tracer", true)
	pid := uint32(child.PID())
	topo, _ := topology.Read("/sys")
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{pid}, Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	child.Release(t)

	evs := only(t, drain(t, tr, 500*time.Millisecond), stall.MemcgReclaim)
	h := threadHist(t, tr, pid, stall.MemcgReclaim)
	if h.Count < 50 {
		t.Fatalf("%d memcg_reclaim stalls for the cat in a 64 MiB cgroup; this machine kind makes about 166 a read", h.Count)
	}
	if uint64(len(evs)) != h.Count {
		t.Errorf("%d streamed events but the histogram counted %d", len(evs), h.Count)
	}
	var sum uint64
	for _, e := range evs {
		if e.TID != pid || e.PID != pid {
			t.Fatalf("stall charged to %d/%d, want the workload %d", e.PID, e.TID, pid)
		}
		if e.CgroupID != child.CgroupID {
			t.Fatalf("cgroup id %d, want %d (the memory cgroup's inode)", e.CgroupID, child.CgroupID)
		}
		sum += e.DurNs
	}
	if sum != h.TotalNs {
		t.Errorf("events sum to %d ns, histogram total %d ns", sum, h.TotalNs)
	}
}

// mmapLockTracers opens two tracers on this process at once, one timing
// mmap_lock waits from the lock's slow path and one from the mmap_lock
// tracepoints, so both see the same waits.
func mmapLockTracers(t *testing.T) (slow, every *Tracer) {
	t.Helper()
	testutil.RequireRoot(t)
	topo, _ := topology.Read("/sys")
	open := func(via string) *Tracer {
		tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{uint32(os.Getpid())}, Topology: topo, MmapLockVia: via,
			Skip: skipAllBut("mmap_lock")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		for _, p := range tr.Probes() {
			switch {
			case p.Name == "mmap_lock" && !p.Attached:
				testutil.RequireFeature(t, !strings.Contains(p.Error, "not in this kernel"), "mmap_lock via "+via+": "+p.Error)
				t.Fatalf("mmap_lock via %s: %s", via, p.Error)
			case p.Name != "mmap_lock" && !infrastructure[ProbeName(p.Name)] && p.Attached:
				t.Errorf("%s attached although only mmap_lock was asked for", p.Name)
			}
		}
		return tr
	}
	return open(MmapLockContention), open(MmapLockTracepoints)
}

func skipAllBut(name string) map[ProbeName]bool {
	skip, err := SkipProbes(name, "")
	if err != nil {
		panic(err)
	}
	return skip
}

// holdWriteLock keeps rewriting a region's PTEs under the mmap_lock held
// for write until stop closes. It returns once the writer has rewritten
// them once: a waiter started before that, on a busy 2-CPU machine, could
// finish before the writer ever ran.
func holdWriteLock(t *testing.T, stop chan struct{}, wg *sync.WaitGroup, cpu int) {
	t.Helper()
	const size = 256 << 20
	region, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(region) })
	wg.Add(1)
	running := make(chan struct{})
	go func() {
		defer wg.Done()
		pinThread(t, cpu)
		for first := true; ; first = false {
			select {
			case <-stop:
				return
			default:
			}
			unix.Mprotect(region, unix.PROT_READ)
			unix.Mprotect(region, unix.PROT_READ|unix.PROT_WRITE)
			if first {
				close(running)
			}
		}
	}()
	<-running
}

// pinThread locks the calling goroutine to its thread and pins that to
// cpu, for the rest of the goroutine: the thread is not unlocked, so it
// ends with the goroutine rather than going back to the runtime pinned.
func pinThread(t *testing.T, cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Errorf("pin to cpu %d: %v", cpu, err)
	}
}

// longWaits counts tid's streamed waits of at least min to take the
// mmap_lock for write (its mmaps and munmaps); a wait for read is a page
// fault of the Go runtime on that thread, left out.
func longWaits(t *testing.T, tr *Tracer, tid uint32, min time.Duration) int {
	n := 0
	cg := ownMemcgID(t)
	for _, e := range only(t, drain(t, tr, 300*time.Millisecond), stall.MmapLock) {
		if e.TID == tid && e.CgroupID != cg {
			t.Errorf("an mmap_lock wait carries cgroup id %d; the thread's memory cgroup is %d", e.CgroupID, cg)
		}
		if e.TID == tid && e.DurNs >= uint64(min) && e.Write {
			if !e.Acquired {
				t.Errorf("an mmap's wait streamed as not acquired")
			}
			n++
		}
	}
	return n
}

// ownMemcgID is the kernfs id (the directory's inode) of this process's
// memory cgroup: v1's memory hierarchy, else the nearest v2 cgroup with
// the memory controller (memory.current), else the v2 root.
func ownMemcgID(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	dir := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) < 3:
		case parts[1] == "memory":
			dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		case parts[0] == "0" && dir == "":
			root := "/sys/fs/cgroup"
			if _, err := os.Stat(filepath.Join(root, "unified", "cgroup.procs")); err == nil {
				root = filepath.Join(root, "unified")
			}
			dir = filepath.Join(root, parts[2])
			for dir != root {
				if _, err := os.Stat(filepath.Join(dir, "memory.current")); err == nil {
					break
				}
				dir = filepath.Dir(dir)
			}
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatalf("memory cgroup of this process: %v", err)
	}
	return st.Ino
}

// A writer holds the mmap_lock while it rewrites 64k PTEs; a second
// thread's mmaps must wait for it. The tracepoints time every acquisition,
// from before the thread asks for the lock to after it has it; the slow
// path only the waits that queued, not those a writer spent spinning on a
// running owner. Both threads share one CPU, so that the owner is never
// running while the waiter asks: every long wait queues, and the slow
// path must see nearly all. (On two CPUs the share that spins is the
// scheduler's to choose: 46-59% of the long waits queued, run to run,
// and a test that wanted half failed one run in eight.)
func TestMmapLockWaitBehindWriter(t *testing.T) {
	slow, every := mmapLockTracers(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cpu := runtime.NumCPU() - 1
	holdWriteLock(t, stop, &wg, cpu)
	waiter := make(chan uint32)
	go func() {
		pinThread(t, cpu)
		// 300 pairs at least, and for half a second at least: on a busy
		// host a short run can slip between the writer's rewrites.
		until := time.Now().Add(500 * time.Millisecond)
		for i := 0; i < 300 || time.Now().Before(until); i++ {
			if m, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
				unix.Munmap(m)
			}
		}
		waiter <- uint32(unix.Gettid())
	}()
	tid := <-waiter
	close(stop)
	wg.Wait()

	all, contended := threadHist(t, every, tid, stall.MmapLock), threadHist(t, slow, tid, stall.MmapLock)
	t.Logf("acquisitions timed %d (longest %d ns), contended waits %d (longest %d ns)", all.Count, all.MaxNs, contended.Count, contended.MaxNs)
	if all.Count < 600 {
		t.Errorf("the tracepoints timed %d acquisitions for 300 mmap+munmap pairs", all.Count)
	}
	if contended.Count == 0 || contended.Count > all.Count {
		t.Errorf("%d contended waits of %d acquisitions", contended.Count, all.Count)
	}
	if contended.MaxNs < uint64(100*time.Microsecond) {
		t.Errorf("longest contended wait %d ns; a writer rewriting 256 MiB of PTEs should block it far longer", contended.MaxNs)
	}
	a, c := longWaits(t, every, tid, 100*time.Microsecond), longWaits(t, slow, tid, 100*time.Microsecond)
	t.Logf("waits of 100µs or more: %d from the tracepoints, %d from the slow path", a, c)
	if a < 20 {
		t.Errorf("only %d waits of 100µs or more: the writer did not hold the lock against the waiter", a)
	}
	if c > a+2 || 10*c < 9*a {
		t.Errorf("waits of 100µs or more: %d from the tracepoints, %d from the slow path; the slow path must see 90%% of them and no more", a, c)
	}
}

// Four threads mapping and unmapping at once contend on their own: the
// slow path sees each contended wait once, and no acquisition that did
// not wait; the waits long enough to matter are the tracepoints' too.
func TestMmapLockContendedThreads(t *testing.T) {
	slow, every := mmapLockTracers(t)
	var wg sync.WaitGroup
	tids := make(chan uint32, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- uint32(unix.Gettid())
			for j := 0; j < 20000; j++ {
				b, err := unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
				if err == nil {
					b[0] = 1
					unix.Munmap(b)
				}
			}
		}()
	}
	wg.Wait()
	close(tids)
	var all, contended uint64
	for tid := range tids {
		all += threadHist(t, every, tid, stall.MmapLock).Count
		contended += threadHist(t, slow, tid, stall.MmapLock).Count
	}
	t.Logf("4 threads, 80000 mmap+munmap pairs: %d acquisitions timed, %d contended", all, contended)
	if all < 160000 {
		t.Errorf("the tracepoints timed %d acquisitions for 80000 mmap+munmap pairs", all)
	}
	if contended == 0 || contended >= all/2 {
		t.Errorf("%d contended waits of %d acquisitions: most of them should not wait", contended, all)
	}
}

func readVmstat(t *testing.T, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/vmstat", key)
	return 0
}

func TestProactiveCompactionCountedNotCharged(t *testing.T) {
	tid := lockedThread(t)
	tr := openForThread(t, tid, nil)
	stallsBefore := readVmstat(t, "compact_stall")
	migratedBefore := readVmstat(t, "pgmigrate_success")
	before, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Writing compact_memory compacts every zone in this thread's context.
	if err := os.WriteFile("/proc/sys/vm/compact_memory", []byte("1"), 0o200); err != nil {
		t.Fatal(err)
	}
	after, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	migrated := readVmstat(t, "pgmigrate_success") - migratedBefore
	if after.System.ProactivePasses <= before.System.ProactivePasses {
		t.Fatal("sysctl compaction passes were not counted system-wide")
	}
	if h := threadHist(t, tr, tid, stall.Compaction); h.Count != 0 {
		t.Fatalf("sysctl compaction charged to the writer as %d direct-compaction stalls", h.Count)
	}
	// Direct compaction is what compact_stall counts; none happened here.
	if d := readVmstat(t, "compact_stall") - stallsBefore; d == 0 {
		if n := after.System.DirectCompactAttempts - before.System.DirectCompactAttempts; n != 0 {
			t.Errorf("%d direct compaction attempts seen but compact_stall did not move", n)
		}
	}
	// Pages the writer migrated while compacting, against the kernel's own count.
	var pages uint64
	for _, e := range only(t, drain(t, tr, 300*time.Millisecond), stall.NUMAMigration) {
		if e.TID == tid {
			if e.Reason != "compaction" {
				t.Errorf("migration during compaction has reason %q", e.Reason)
			}
			pages += e.Pages
		}
	}
	// The writer's own migrations are part of the kernel's count; others
	// (kcompactd) may add to it, but the writer did most of this work.
	if pages > migrated || (migrated > 0 && pages*2 < migrated) {
		t.Errorf("the writer migrated %d pages but pgmigrate_success grew by %d", pages, migrated)
	}
	t.Logf("compaction passes %d, writer migrated %d pages, pgmigrate_success +%d",
		after.System.ProactivePasses-before.System.ProactivePasses, pages, migrated)
}

// With FollowForks the kernel adds a traced process's children itself, and
// drops processes from the target set once they exit (pids get reused).
func TestFollowForksInKernel(t *testing.T) {
	wl := testutil.StartMemcgWorkload(t, "numatrace-test-fork", false)
	shell := uint32(wl.PID())
	topo, _ := topology.Read("/sys")
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{shell}, FollowForks: true, Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	wl.Release(t) // the shell forks cat, which reclaims

	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var child *stall.ThreadStats
	for _, th := range snap.Threads {
		if th.PID != shell && th.Hists[stall.MemcgReclaim] != nil {
			child = th
		}
	}
	if child == nil || child.Hists[stall.MemcgReclaim] == nil || child.Hists[stall.MemcgReclaim].Count < 50 {
		for _, th := range snap.Threads {
			t.Logf("traced %d/%d %s: %+v", th.PID, th.TID, th.Comm, th.Hists)
		}
		t.Fatal("the forked cat was not traced")
	}
	// Both processes have exited: neither may stay in the target set.
	for _, pid := range []uint32{shell, child.PID} {
		var v uint8
		if err := tr.maps.TargetTgids.Lookup(pid, &v); err == nil {
			t.Errorf("exited process %d still in the target set", pid)
		}
	}
}

// --pid follows the process's threads, including new ones, but not its
// child processes.
func TestPIDFilterTakesNewThreadsNotChildren(t *testing.T) {
	testutil.RequireRoot(t)
	topo, _ := topology.Read("/sys")
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{uint32(os.Getpid())}, Topology: twoNodesIfTwoCPUs(topo)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// A fresh OS thread, created after the tracer attached.
	tids := make(chan uint32)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		var orig unix.CPUSet
		unix.SchedGetaffinity(0, &orig)
		for i := 0; i < 20; i++ {
			var set unix.CPUSet
			set.Set(i % 2)
			unix.SchedSetaffinity(0, &set)
		}
		unix.SchedSetaffinity(0, &orig)
		tids <- uint32(unix.Gettid())
	}()
	tid := <-tids
	// A child process that migrates too.
	child := exec.Command("sh", "-c", "for i in 1 2 3 4 5 6; do taskset -c $((i % 2)) true; done")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if th := snap.Threads[tid]; th == nil || th.Migrations < 19 {
		t.Fatalf("new thread %d: %+v, want its ~20 migrations", tid, th)
	}
	for _, th := range snap.Threads {
		if th.PID != uint32(os.Getpid()) {
			t.Fatalf("thread %d of process %d (%s) traced under --pid %d", th.TID, th.PID, th.Comm, os.Getpid())
		}
	}
}

func twoNodesIfTwoCPUs(topo *topology.Topology) *topology.Topology {
	if runtime.NumCPU() >= 2 {
		return twoNodes()
	}
	return topo
}

// A process moved into the --cgroup target (here into a cgroup below it)
// joins the target set in the kernel, at once: its reclaim from the first
// page on is charged, with no rescan of cgroup.procs.
func TestFollowMovesIntoTheCgroup(t *testing.T) {
	wl := testutil.StartMemcgWorkload(t, "numatrace-test-move", false) // for its cgroup; its reader never runs
	child := filepath.Join(wl.Cgroup, "inner")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(child) })
	os.WriteFile(filepath.Join(child, "memory.limit_in_bytes"), []byte(strconv.Itoa(64<<20)), 0o644)
	var st unix.Stat_t
	if err := unix.Stat(wl.Cgroup, &st); err != nil {
		t.Fatal(err)
	}
	topo, _ := topology.Read("/sys")
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{uint32(wl.PID())}, FollowForks: true, CgroupID: st.Ino, Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	testutil.DropCaches(t)
	// Started outside the cgroup, it moves itself in, then reads.
	cmd := exec.Command("sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec cat %s > /dev/null", child, testutil.BigFile(t)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	var n uint64
	for _, th := range snap.Threads {
		if th.PID == pid && th.Hists[stall.MemcgReclaim] != nil {
			n += th.Hists[stall.MemcgReclaim].Count
		}
	}
	if n < 50 {
		t.Fatalf("the moved process has %d memcg_reclaim stalls; it was not followed", n)
	}
	t.Logf("the process moved into the cgroup: %d memcg_reclaim stalls", n)
}

// A run whose asked-for probes all fail to attach is an error, not a run
// that traces nothing: runq_wait alone needs a latency source.
func TestAskedProbesMustAttach(t *testing.T) {
	testutil.RequireRoot(t)
	topo, _ := topology.Read("/sys")
	tr, err := Open(Config{Filter: FilterTID, TID: uint32(unix.Gettid()), Topology: topo, Skip: skipAllBut("runq_wait")})
	if err == nil {
		tr.Close()
		t.Fatal("a run with only runq_wait asked for, and no latency source, opened")
	}
	if !strings.Contains(err.Error(), "none of the probes asked for attached") {
		t.Errorf("error %q", err)
	}
}
