//go:build linux

package tracer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

// schedstat is the kernel's count of the time thread tid ran on a CPU
// and waited for one (/proc/PID/task/TID/schedstat).
func schedstat(t *testing.T, tid uint32) (cpu, runq uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(tid)) + "/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("schedstat %q", b)
	}
	cpu, err1 := strconv.ParseUint(f[0], 10, 64)
	runq, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("schedstat %q", b)
	}
	return cpu, runq
}

// ioWaitNs is the I/O wait the sched_switch program has timed for tid.
func ioWaitNs(t *testing.T, tr *Tracer, tid uint32) uint64 {
	t.Helper()
	var ts typesThreadStall
	if err := tr.maps.ThreadStalls.Lookup(tid, &ts); err != nil {
		return 0 // no wait timed yet
	}
	return ts.IoWaitNs
}

// A thread reads 16 KiB at a time with O_DIRECT from a disk whose reads
// the block I/O controller holds to 1 MB/s, with 3 ms sleeps between the
// reads, while a spinner shares its CPU. Its I/O wait as the sched_switch
// program times it must be the reads' own time less what the kernel says
// the thread ran and waited for a CPU in them (schedstat), and the sleeps
// must not count. (Delay accounting's blkio_delay, which the budgets read
// before, is no ground truth on this 6.18 kernel: bpftrace around each
// read found it short for one read in twelve of a lone dd and six in ten
// of a MariaDB's under load, and one of dd's counted as 99 minutes.)
func TestIOWaitIsTheReadsOwnWait(t *testing.T) {
	testutil.RequireRoot(t)
	if err := schedInfoOn(nil); err != nil {
		testutil.RequireFeature(t, false, err.Error())
	}
	mnt := testutil.SlowDisk(t, 256<<20, 1<<30)
	path := filepath.Join(mnt, "data")
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.SlowReads(t, mnt, 1<<20)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 16<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)

	tid := lockedThread(t)
	var cpus unix.CPUSet
	cpus.Set(0)
	if err := unix.SchedSetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	pinned(t, "0", spin)
	topo, _ := topology.Read("/sys")
	tr, err := Open(Config{Filter: FilterTID, TID: tid, Topology: topo, RunqWait: true, RequestStalls: true, RequestTimes: true,
		Skip: skipAllBut(string(probeRunqWait))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !tr.IOWaitTimed() {
		testutil.RequireFeature(t, false, "the sched_switch program does not time I/O waits here (no task storage for tracing programs)")
	}

	before := ioWaitNs(t, tr, tid)
	var want uint64
	for i := range 40 {
		off := int64(rand.IntN(len(data)>>14)) << 14
		cpu0, runq0 := schedstat(t, tid)
		start := time.Now()
		if _, err := unix.Pread(fd, buf, off); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		wall := uint64(time.Since(start))
		cpu1, runq1 := schedstat(t, tid)
		if off := (cpu1 - cpu0) + (runq1 - runq0); wall > off {
			want += wall - off
		}
		time.Sleep(3 * time.Millisecond)
	}
	got := ioWaitNs(t, tr, tid) - before
	t.Logf("the reads waited %.1f ms off a CPU; timed as I/O wait: %.1f ms", float64(want)/1e6, float64(got)/1e6)
	if want < 200e6 {
		t.Fatalf("40 reads at 1 MB/s waited only %d ns: the throttle did not hold them", want)
	}
	// A read's schedstat is read a few µs outside its wait; the sleeps
	// (120 ms) must not be in it.
	if diff := int64(got) - int64(want); diff > int64(want)/20+2e6 || -diff > int64(want)/20+2e6 {
		t.Errorf("I/O wait %d ns, the reads' own wait %d ns", got, want)
	}
}
