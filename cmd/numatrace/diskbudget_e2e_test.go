package main

// Where the slow requests' time went (the budget, issue 45) when they wait
// on the disk. The incident: MariaDB 10.11 with its data on a disk whose
// reads the block I/O controller holds to 4 MB/s, InnoDB reading with
// O_DIRECT past a 16 MiB buffer pool, sysbench oltp_point_select at 300/s,
// no memory limit anywhere. numatrace said its STALL column was 0 and that
// memory management was still the likely cause, from PSI that was other
// processes'; the queries were waiting on the disk.
//
// Ground truth by construction, on any host: the table is about six
// times the buffer pool and is read at uniformly random rows, so most
// point selects read a 16 KiB page; O_DIRECT keeps the page cache out, so
// each read goes to the disk; the throttle lets 256 such reads a second
// through, fewer than the 300 selects asked for, so the disk is saturated
// and each select waits for the reads queued before its own (16
// connections: about 60 ms), not for a CPU or a lock. No memory cgroup
// above mariadbd has a limit.
// The incident's PSI was other processes': here a bystander, no process
// of mariadbd's, thrashes in a memory cgroup of its own on a disk of its
// own, so that PSI counts memory stall machine-wide in every window.

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

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

const (
	diskRuns       = 5
	diskReadBps    = 4 << 20 // the throttle on the data disk's reads
	diskPoolBytes  = 16 << 20
	diskTableRows  = 400_000 // about 100 MB of InnoDB pages
	diskQueryRate  = 300
	diskClients    = 16
	diskLoadSecond = 6
)

// diskPart is one part of a budget in the JSON summary.
type diskPart struct {
	Part  string  `json:"part"`
	Share float64 `json:"share"`
}

// diskSummary is what this test reads of a run's summary.
type diskSummary struct {
	Headline struct {
		Verdict string `json:"verdict"`
		Next    string `json:"next"`
	} `json:"headline"`
	Spikes      []struct{} `json:"spikes"`
	Correlation *struct {
		PSINs       uint64     `json:"uncovered_psi_ns"`
		ExplainedBy []string   `json:"explained_by"`
		PartlyBy    []string   `json:"partly_explained_by"`
		Conclusion  string     `json:"conclusion"`
		Budget      []diskPart `json:"budget"`
	} `json:"correlation"`
	Waits []waitRow `json:"waits"`
}

func TestSlowQueriesWaitingOnTheDiskAreDiskIO(t *testing.T) {
	testutil.RequireRoot(t)
	sysbench := testutil.RequireTool(t, "sysbench", "sysbench")
	mnt := testutil.SlowDisk(t, 1<<30, 1<<30) // its writes are not what is held
	port := testutil.FreeTCPPort(t)
	db := testutil.StartMariaDB(t, filepath.Join(mnt, "mariadb"), port,
		"--innodb-buffer-pool-size="+strconv.Itoa(diskPoolBytes), "--innodb-flush-method=O_DIRECT",
		"--innodb-buffer-pool-load-at-startup=0", "--innodb-buffer-pool-dump-at-shutdown=0",
		"--innodb-flush-log-at-trx-commit=0", "--skip-log-bin")
	pid := db.Cmd.Process.Pid
	noMemoryLimit(t, pid)
	if got := db.Query(t, "SELECT @@innodb_buffer_pool_size, @@innodb_flush_method"); got != fmt.Sprintf("%d\tO_DIRECT", diskPoolBytes) {
		t.Fatalf("buffer pool and flush method: %q", got)
	}
	db.Query(t, "CREATE DATABASE sbtest")
	bench := func(args ...string) *exec.Cmd {
		return exec.Command(sysbench, append([]string{"oltp_point_select", "--db-driver=mysql", "--mysql-user=root",
			"--mysql-db=sbtest", "--tables=1", "--table-size=" + strconv.Itoa(diskTableRows)}, args...)...)
	}
	if out, err := bench("--mysql-socket="+db.Socket, "--create_secondary=off", "prepare").CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v: %s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(db.DataDir, "sbtest", "sbtest1.ibd")); err != nil || fi.Size() < 4*diskPoolBytes {
		t.Fatalf("the table's file: %v, %v; want at least four buffer pools", fi, err)
	}
	testutil.SlowReads(t, mnt, diskReadBps)
	bystanderThrashes(t)

	for i := range diskRuns {
		nt := startAttach(t, "--pid", strconv.Itoa(pid), "--slo", "10ms", "--json", "--window", "1s", "--duration", "60s")
		reads := db.Status(t, "Innodb_buffer_pool_reads")
		load := bench("--mysql-host=127.0.0.1", "--mysql-port="+strconv.Itoa(port), "--rand-type=uniform",
			"--threads="+strconv.Itoa(diskClients), "--rate="+strconv.Itoa(diskQueryRate), "--time="+strconv.Itoa(diskLoadSecond), "run")
		if out, err := load.CombinedOutput(); err != nil {
			t.Fatalf("sysbench run: %v: %s", err, out)
		}
		reads = db.Status(t, "Innodb_buffer_pool_reads") - reads
		time.Sleep(time.Second) // the last exchanges go out, the last window closes
		nt.cmd.Process.Signal(os.Interrupt)
		nt.wait(t, 30*time.Second)
		var s diskSummary
		summaryOf(t, nt.stdout.Bytes(), &s)
		checkDiskRun(t, i, &s, reads)
		// The disk's waits have their code path: InnoDB's pread asleep
		// in io_schedule_timeout (O_DIRECT's wait), from libc's pread64.
		checkWaitStacks(t, i, s.Waits, "disk_io", "io_schedule")
	}
}

// checkDiskRun checks run i: the disk was read (reads pages in the
// run), and PSI counted the bystander's memory stall in the spikes'
// windows; the spikes' slow requests' time went mostly to disk I/O wait,
// in the JSON summary and in the verdict's opening; no memory cause
// explains them, and memory is not called the likely cause.
func checkDiskRun(t *testing.T, i int, s *diskSummary, reads uint64) {
	t.Helper()
	if reads < diskLoadSecond*diskReadBps/(16<<10)/2 {
		t.Fatalf("run %d: InnoDB read %d pages in %d s: the set-up did not make it read the disk", i, reads, diskLoadSecond)
	}
	c := s.Correlation
	if c == nil {
		t.Fatalf("run %d: no correlation in the summary: %s", i, s.Headline.Verdict)
	}
	var figures []string
	for _, p := range c.Budget {
		figures = append(figures, fmt.Sprintf("%s %.1f%%", p.Part, p.Share*100))
	}
	t.Logf("run %d: %d pages read, %d spikes, budget [%s], partly explained by %v: %s", i, reads, len(s.Spikes),
		strings.Join(figures, ", "), c.PartlyBy, c.Conclusion)
	if c.PSINs < 100e6 {
		t.Errorf("run %d: PSI counted %d ns of memory stall in the spikes' windows: the bystander did not thrash", i, c.PSINs)
	}
	if len(s.Spikes) < 3 {
		t.Errorf("run %d: %d spikes; the disk held every select past the 10 ms SLO", i, len(s.Spikes))
	}
	if len(c.Budget) == 0 || c.Budget[0].Part != "disk_io" {
		t.Errorf("run %d: the slow requests' budget is [%s]; want disk_io its largest part", i, strings.Join(figures, ", "))
	} else if want := fmt.Sprintf("(the slow requests' time: %.0f%% disk I/O wait", c.Budget[0].Share*100); !strings.Contains(c.Conclusion, want) {
		t.Errorf("run %d: the verdict does not open with %q: %s", i, want, c.Conclusion)
	}
	for _, name := range c.ExplainedBy {
		if cause, err := stall.ParseCause(name); err != nil || cause.Freezes() {
			t.Errorf("run %d: no memory limit anywhere, and the spikes are explained by %s: %s", i, name, c.Conclusion)
		}
	}
	if text := strings.Join([]string{c.Conclusion, s.Headline.Verdict, s.Headline.Next}, "\n"); strings.Contains(text, "memory management is still the likely cause") {
		t.Errorf("run %d: memory is called the likely cause:\n%s", i, text)
	}
}

// bystanderThrashes starts a reader that is none of mariadbd's and
// thrashes until the test ends: testdata/thrash.c re-reading a 160 MiB
// file at random in a 128 MiB memory cgroup, on a disk of its own whose
// reads are held to 20 MB/s, after two passes at full speed that mark its
// pages as its working set (TestThrashingMatchesPSI's set-up). Its refaults
// are memory stall that PSI counts machine-wide, about half of each second.
func bystanderThrashes(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testutil.RequireFeature(t, err == nil, "gcc not installed (make deps installs it)")
	reader := filepath.Join(t.TempDir(), "thrash")
	if out, err := exec.Command("gcc", "-O1", "-o", reader, "testdata/thrash.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	disk := testutil.SlowDisk(t, 1<<30, 1<<30)
	file := filepath.Join(disk, "data")
	writeRandomFile(t, file, 160<<20)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	// Out of the cache (the writer's pages are charged to the test's own
	// cgroup), without dropping the rest of the machine's.
	err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-disk-bystander", 128<<20)
	inCgroup := `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`
	const pages = 160 << 20 / 4096
	for warmed, deadline := 0, time.Now().Add(time.Minute); warmed < 2*pages; {
		out, err := exec.Command("sh", "-c", inCgroup, "sh", cg, reader, file, "2").CombinedOutput()
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(string(out)), " reads"))
		if err != nil || n == 0 || time.Now().After(deadline) {
			t.Fatalf("warming the bystander's cgroup up: %v: %s (%d reads of two passes' %d in a minute)", err, out, warmed, 2*pages)
		}
		warmed += n
	}
	testutil.SlowReads(t, disk, 20<<20)
	cmd := exec.Command("sh", "-c", inCgroup, "sh", cg, reader, file, "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Until PSI counts it: the refaults of pages read back soon after
	// their eviction are thrashing once the kernel has marked them as the
	// working set, which takes it a few passes.
	for deadline := time.Now().Add(30 * time.Second); ; {
		before := psiSome(t, "/proc/pressure/memory")
		time.Sleep(time.Second)
		grew := psiSome(t, "/proc/pressure/memory") - before
		t.Logf("bystander: PSI some grew %v in a second", grew)
		if grew >= 300*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bystander does not thrash: PSI grew %v in its last second", grew)
		}
	}
}

// noMemoryLimit fails unless no memory cgroup of pid's, up to the root,
// has a limit (cgroup v1's memory.limit_in_bytes, v2's memory.max).
func noMemoryLimit(t *testing.T, pid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		root, file := "", ""
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		case f[0] == "0" && f[1] == "":
			root, file = "/sys/fs/cgroup", "memory.max"
		default:
			continue
		}
		for dir := filepath.Join(root, f[2]); strings.HasPrefix(dir, root); dir = filepath.Dir(dir) {
			v, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				continue // no such controller file here (v2 without memory, or the root)
			}
			s := strings.TrimSpace(string(v))
			if n, err := strconv.ParseUint(s, 10, 64); s != "max" && (err != nil || n < 1<<62) {
				t.Fatalf("%s is %s: the incident had no memory limit anywhere", filepath.Join(dir, file), s)
			}
		}
	}
}
