package doctor_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/doctor/doctortest"
)

// The tests of doctor --root on copies that lie: a copy of a machine is
// untrusted input, read only inside itself, only as regular files, in
// bounded memory, and its counters as the kernel prints them (unsigned).

// runOnce runs doctor on root with pid 4242, and fails if it does not
// return within a few seconds (a FIFO once hung it).
func runOnce(t *testing.T, opt doctor.Options) (*doctor.Report, error) {
	t.Helper()
	type result struct {
		r   *doctor.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := doctor.Run(opt)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-time.After(10 * time.Second):
		t.Fatalf("doctor.Run(%+v) did not return", opt)
		return nil, nil
	}
}

func replace(t *testing.T, path string, with func(path string) error) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := with(path); err != nil {
		t.Fatal(err)
	}
}

const shadow = "root:$6$rounds=656000$SECRETSALT$SECRETHASHSECRETHASH:19000:0:99999:7:::\n"

// A symlink in the copy to a file outside it (/etc/shadow once: 817 bytes
// of it were printed) reads as a missing file inside the copy; the error
// names the file read and quotes nothing of the target.
func TestRootSymlinkOutOfTheCopy(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(outside, []byte(strings.Repeat(shadow, 12)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{outside, "../../../../../../../../../../../../.." + outside} {
		root, _ := doctortest.Machine(t, "")
		file := filepath.Join(root, "sys/devices/system/node/node0/cpulist")
		replace(t, file, func(p string) error { return os.Symlink(target, p) })
		_, err := runOnce(t, doctor.Options{Root: root})
		if err == nil {
			t.Fatalf("symlink to %s: no error", target)
		}
		if msg := err.Error(); strings.Contains(msg, "SECRET") || strings.Contains(msg, "root:") || !strings.Contains(msg, file) ||
			!strings.Contains(msg, "no such file") {
			t.Errorf("symlink to %s: %q: want the cpulist's path and \"no such file\", nothing of the target", target, msg)
		}
	}
}

// A FIFO in place of a /proc or /sys file returns at once with an error
// naming it; it once hung doctor with no output.
func TestRootFIFO(t *testing.T) {
	for _, file := range []string{"proc/vmstat", "proc/sys/vm/zone_reclaim_mode", "sys/kernel/mm/transparent_hugepage/enabled",
		"proc/4242/numa_maps", "proc/uptime"} {
		t.Run(strings.ReplaceAll(file, "/", "_"), func(t *testing.T) {
			root, _ := doctortest.Machine(t, "")
			path := filepath.Join(root, file)
			replace(t, path, func(p string) error { return syscall.Mkfifo(p, 0o644) })
			_, err := runOnce(t, doctor.Options{Root: root, PID: 4242})
			if err == nil || !strings.Contains(err.Error(), path+": not a regular file (a named pipe)") {
				t.Errorf("FIFO at %s: %v", file, err)
			}
		})
	}
}

// A huge file stops at its bound with one error naming it, before it is
// held in memory: a 2 GiB proc/uptime (sparse), and a 2 GiB numa_maps
// of one endless line. (/dev/zero linked into a copy reads as missing:
// the link resolves inside the copy.)
func TestRootHugeFilesStopAtTheirBound(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"proc/uptime", "proc/uptime: too large: stopped reading at 64 KiB"},
		{"proc/4242/numa_maps", "proc/4242/numa_maps: line 1: too large: longer than 64 KiB"},
		{"sys/devices/system/node/node1/meminfo", "node1/meminfo: line 1: too large: longer than 64 KiB"},
	} {
		root, _ := doctortest.Machine(t, "")
		path := filepath.Join(root, c.file)
		replace(t, path, func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(2 << 30)
		})
		_, err := runOnce(t, doctor.Options{Root: root, PID: 4242})
		if err == nil || !strings.Contains(err.Error(), root) || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("2 GiB %s: %v; want an error ending %q", c.file, err, c.want)
		}
	}
	root, _ := doctortest.Machine(t, "")
	replace(t, filepath.Join(root, "proc/uptime"), func(p string) error { return os.Symlink("/dev/zero", p) })
	if _, err := runOnce(t, doctor.Options{Root: root}); err != nil {
		t.Errorf("/dev/zero linked as proc/uptime: %v; want it read as the copy's own /dev/zero, absent", err)
	}
}

// numa_maps is summed line by line: a numa_maps of 300,000 mappings (a
// big JVM's) is read in the heap of a few of them. The old parser kept
// every mapping with a map of its own, about 7 bytes of heap per byte
// of file: a 200 MiB numa_maps took 1.4 GiB.
func TestRootNumaMapsInBoundedMemory(t *testing.T) {
	root, _ := doctortest.Machine(t, "seed001_mysql_unbound")
	var b strings.Builder
	for i := 0; i < 300_000; i++ {
		fmt.Fprintf(&b, "7f%010x default anon=512 dirty=512 active=0 N0=300 N1=212 kernelpagesize_kB=4\n", i<<12)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/4242/numa_maps"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	size := b.Len()
	b = strings.Builder{}
	runtime.GC() // the file's text is garbage now: measure from here
	stop := heapPeak()
	r, err := runOnce(t, doctor.Options{Root: root, PID: 4242})
	max := stop()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Numastat.Total["N0"]; got != 300_000*300/256.0 {
		t.Errorf("node 0 holds %.2f MiB, want %.2f", got, 300_000*300/256.0)
	}
	const bound = 64 << 20
	if max > bound {
		t.Errorf("reading a %d MiB numa_maps took the heap to %d MiB, above %d MiB", size>>20, max>>20, bound>>20)
	}
	t.Logf("numa_maps of %d MiB: heap peaked at %d MiB", size>>20, max>>20)
}

// heapPeak samples the heap's objects (live, and dead ones not yet
// swept) every millisecond until stop, which returns the largest seen.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	quit, done := make(chan struct{}), make(chan uint64)
	go func() {
		max := read()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				done <- max
				return
			case <-t.C:
				if v := read(); v > max {
					max = v
				}
			}
		}
	}()
	return func() uint64 { close(quit); return <-done }
}

// setLines rewrites a file of a copy, each key's line with the value given.
func setLines(t *testing.T, path string, values map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range values {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + ` \S+$`)
		if !re.MatchString(s) {
			t.Fatalf("%s has no %s", path, k)
		}
		s = re.ReplaceAllString(s, k+" "+v)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The kernel prints its counters unsigned: a value above int64 is read
// (it once aborted doctor).
func TestRootCountersAboveInt64(t *testing.T) {
	root, later := doctortest.Machine(t, "seed000_zone_reclaim")
	for _, dir := range []string{root, later} {
		setLines(t, filepath.Join(dir, "proc/vmstat"), map[string]string{"zone_reclaim_failed": "18446744073709551615"})
		setLines(t, filepath.Join(dir, "sys/devices/system/node/node0/numastat"), map[string]string{"numa_foreign": "18446744073709551614"})
	}
	r, err := runOnce(t, doctor.Options{Root: root, Later: later, PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	f := find(r, "zone_reclaim_mode")
	if f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), "/proc/vmstat zone_reclaim_failed = 18446744073709551615") ||
		!strings.Contains(strings.Join(f.Evidence, "\n"), "zone_reclaim_failed growth over 1s = 0") || f.Severity != doctor.Warn {
		t.Errorf("zone_reclaim_mode: %+v", f)
	}
}

// A counter that goes backwards between the copies (a wrap, or copies
// out of order) is a reset: its growth is not measured and says so, never
// a negative rate, and nothing is judged on it. Here node 0's local_node
// falls while other_node grows 20,000/s: cross_node_alloc once read
// "1000% of page allocations crossed nodes" and said CRIT.
func TestRootCountersGoingBackwards(t *testing.T) {
	root, later := doctortest.Machine(t, "")
	setLines(t, filepath.Join(later, "sys/devices/system/node/node0/numastat"),
		map[string]string{"local_node": "59781000", "other_node": "222050"})
	r, err := runOnce(t, doctor.Options{Root: root, Later: later, PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	// The numa_miss share is measured (0.1%), the other_node share is not.
	if f := find(r, "cross_node_alloc"); f != nil {
		t.Errorf("cross_node_alloc on a counter gone backwards: [%s] %s", f.Severity, f.Title)
	}
	want := "cross_node_alloc: the other_node share is not measured: node 0 local_node 59800000 then 59781000, backwards between the readings (a reset or a wrap)"
	if !strings.Contains(strings.Join(r.Skipped, "\n"), want) {
		t.Errorf("skipped %q, want %q", r.Skipped, want)
	}

	root, later = doctortest.Machine(t, "seed000_thp_always")
	setLines(t, filepath.Join(later, "proc/vmstat"), map[string]string{"compact_stall": "5"})
	r, err = runOnce(t, doctor.Options{Root: root, Later: later})
	if err != nil {
		t.Fatal(err)
	}
	f := find(r, "thp_defrag")
	if f == nil || f.Severity != doctor.Warn ||
		!strings.Contains(strings.Join(f.Evidence, "\n"), "compact_stall growth = not measured: 18250 then 5, backwards between the readings (a reset or a wrap)") {
		t.Errorf("thp_defrag with compact_stall gone backwards: %+v", f)
	}
}

// Errors name the path read (the copy's, not the live /proc/sys/vm) and
// quote at most a short escaped excerpt of what was in it.
func TestRootErrorsNameThePathRead(t *testing.T) {
	root, _ := doctortest.Machine(t, "")
	vm := filepath.Join(root, "proc/sys/vm")
	if err := os.RemoveAll(vm); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vm, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runOnce(t, doctor.Options{Root: root})
	if err == nil || strings.Contains(err.Error(), "read /proc/sys/vm") || !strings.Contains(err.Error(), vm+"/zone_reclaim_mode: not a directory") {
		t.Errorf("proc/sys/vm a file: %v", err)
	}

	root, _ = doctortest.Machine(t, "")
	secret := "\x1b]0;pwned\x07" + strings.Repeat("SECRET", 2000)
	if err := os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemTotal: 1 kB\n"+secret+": lots kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runOnce(t, doctor.Options{Root: root})
	if err == nil {
		t.Fatal("a bad meminfo line: no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, filepath.Join(root, "proc/meminfo")+": line 2: ") || strings.ContainsRune(msg, '\x1b') ||
		!strings.Contains(msg, `\x1b]0;pwned\x07`) || strings.Count(msg, "SECRET") > 6 || len(msg) > len(root)+200 {
		t.Errorf("a bad meminfo line: %d bytes: %q", len(msg), msg)
	}
}

// A process whose threads cannot be read: where it runs is not measured,
// so its remote share is information, never a warning drawn from its
// allowed CPUs alone ("about 50% remote" once).
func TestRemoteShareNotMeasured(t *testing.T) {
	r := run(t, "remote_not_measured")
	f := find(r, "remote_memory")
	if f == nil {
		t.Fatalf("remote_memory silent: %v", titles(r))
	}
	e := strings.Join(f.Evidence, "\n")
	if f.Severity != doctor.Info || !strings.Contains(f.Title, "its remote share is not measured: no thread could be read") ||
		!strings.Contains(e, "CPU time per node = not measured: no thread could be read (/proc/4242/task)") ||
		!strings.Contains(e, "remote share of accesses (estimate) = not measured") || strings.Contains(f.Title+e, "50%") {
		t.Errorf("[%s] %s\n%s", f.Severity, f.Title, e)
	}
	complete(t, f)
	if r.Numastat.Remote != nil || len(r.Numastat.ThreadNodes) != 0 {
		t.Errorf("numastat: remote %v, thread nodes %v: want neither", r.Numastat.Remote, r.Numastat.ThreadNodes)
	}
	var b strings.Builder
	r.Numastat.Write(&b, r.PID, r.Comm)
	if !strings.Contains(b.String(), "Remote accesses: not measured: no thread could be read") || strings.Contains(b.String(), "Threads' CPU time") {
		t.Errorf("numastat table:\n%s", b.String())
	}
	for _, f := range r.Findings {
		if f.Severity > doctor.Info {
			t.Errorf("[%s] %s: a warning on a machine with nothing measured wrong", f.Check, f.Title)
		}
	}

	// Bound to one node's CPUs, the threads can only run there: the
	// binding is the measurement, and 41% of its pages are elsewhere.
	root, later := doctortest.Machine(t, "seed002_cpu_only")
	for _, dir := range []string{root, later} {
		if err := os.RemoveAll(filepath.Join(dir, "proc/4242/task")); err != nil {
			t.Fatal(err)
		}
	}
	r, err := doctor.Run(doctor.Options{Root: root, Later: later, PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	f = find(r, "remote_memory")
	if f == nil || f.Severity != doctor.Warn || !strings.Contains(strings.Join(f.Evidence, "\n"),
		"CPU time per node (its allowed CPUs, all on node 0 (not measured: no thread could be read)) = N0=100%") {
		t.Errorf("bound to node 0, threads unread: %+v", f)
	}
}

// A 20 GiB pool on the 128 GB machine with 0.4 GB free and PSI at 27% is
// named, with its page size, what is unused, and the fix; the same with
// a quarter of memory available is not the pool's doing; a pool all on
// node 0 starves node 0.
func TestHugepageStarvationNamesThePool(t *testing.T) {
	cases := []struct {
		machine string
		sev     doctor.Severity
		title   []string
		fix     string
	}{
		{"seed000_hugetlb_psi", doctor.Warn, []string{
			"the 20480 MiB huge-page pool (10240 pages of 2048 kB, 16% of memory, 2048 MiB unused) leaves normal memory 389 MiB free and 13671 MiB available of 107860 MiB",
			"tasks stalled on memory 27% of the last 10 s"},
			"sysctl -w vm.nr_hugepages=9216 (returns the 2048 MiB no mapping uses or has reserved); then lower what maps the rest"},
		{"hugetlb_one_node", doctor.Warn, []string{"sits unevenly: node 0 holds 20480 MiB of it (32% of the node) and has 198 MiB free"},
			"echo 9728 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages (returns node 0's unused pages now); then stop what maps the pool, " +
				"spread it: echo 5120 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages && echo 5120 > /sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages"},
	}
	for _, c := range cases {
		r := run(t, c.machine)
		f := find(r, "hugepage_starvation")
		if f == nil {
			t.Errorf("%s: hugepage_starvation silent: %v", c.machine, titles(r))
			continue
		}
		for _, w := range c.title {
			if !strings.Contains(f.Title, w) {
				t.Errorf("%s: title %q lacks %q", c.machine, f.Title, w)
			}
		}
		if f.Severity != c.sev || !strings.HasPrefix(f.Fix, c.fix) {
			t.Errorf("%s: [%s] fix %q, want [%s] %q", c.machine, f.Severity, f.Fix, c.sev, c.fix)
		}
		e := strings.Join(f.Evidence, "\n")
		for _, w := range []string{"/sys/kernel/mm/hugepages/hugepages-2048kB: nr_hugepages 10240", "MemFree = ", "MemAvailable = ",
			"/proc/pressure/memory some avg10 = ", "node 0: 2048 kB pages", "node 1: 2048 kB pages"} {
			if !strings.Contains(e, w) {
				t.Errorf("%s: evidence lacks %q:\n%s", c.machine, w, e)
			}
		}
		complete(t, f)
	}
	if f := find(run(t, "ok_hugetlb_psi_available"), "hugepage_starvation"); f != nil {
		t.Errorf("a quarter of normal memory available, yet: %s", f.Title)
	}
}
