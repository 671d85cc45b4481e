package target

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// A pid no kernel hands out (pid_max is at most 2^22), so pidfd_open on it
// always fails and the fake /proc tree decides.
const (
	fakePID  = 4194305
	fakeTID  = 4194306
	fakePID2 = 4194400
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// task adds /proc/<id>/{status,stat,comm} for a task of thread group tgid.
func task(t *testing.T, proc string, id, tgid int, comm string, state byte) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(id))
	write(t, filepath.Join(dir, "status"), "Name:\t"+comm+"\nUmask:\t0022\nState:\t"+string(state)+
		" (whatever)\nTgid:\t"+strconv.Itoa(tgid)+"\nNgid:\t0\nPid:\t"+strconv.Itoa(id)+"\nPPid:\t1\n")
	setState(t, proc, id, comm, state)
	write(t, filepath.Join(dir, "comm"), comm+"\n")
}

func setState(t *testing.T, proc string, id int, comm string, state byte) {
	t.Helper()
	write(t, filepath.Join(proc, strconv.Itoa(id), "stat"),
		strconv.Itoa(id)+" ("+comm+") "+string(state)+" 1 1 1 0 -1 4194560 100 0 0 0 0 0\n")
}

func TestResolveSystem(t *testing.T) {
	tg, err := Resolve(t.TempDir(), t.TempDir(), 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Kind != System || tg.String() != "system-wide" {
		t.Errorf("target = %+v (%s)", tg, tg)
	}
	if !tg.exists() {
		t.Errorf("system-wide target does not exist")
	}
}

func TestResolveProcess(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "postgres", 'S')
	tg, err := Resolve(proc, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Kind != Process || tg.ID != fakePID || tg.Comm != "postgres" {
		t.Errorf("target = %+v", tg)
	}
	if s := tg.String(); s != "pid 4194305 (postgres)" {
		t.Errorf("String = %q", s)
	}
}

func TestResolveProcessWithoutComm(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "x", 'S')
	os.Remove(filepath.Join(proc, strconv.Itoa(fakePID), "comm"))
	tg, err := Resolve(proc, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Comm != "?" {
		t.Errorf("comm = %q, want ?", tg.Comm)
	}
}

// A launcher that execs after the look-up: the name at attach is the
// program's, and a target gone since keeps the name it had.
func TestAttachedReadsTheNameAgain(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "setpriv", 'S')
	tg, err := Resolve(proc, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(proc, strconv.Itoa(fakePID), "comm"), "cat\n")
	tg.Attached()
	if got, want := tg.Ended("cat"), "pid 4194305 (cat)"; got != want {
		t.Errorf("Ended = %q, want %q", got, want)
	}
	os.RemoveAll(filepath.Join(proc, strconv.Itoa(fakePID)))
	tg.Attached()
	if tg.Comm != "cat" {
		t.Errorf("comm %q once gone, want cat", tg.Comm)
	}
}

func TestResolvePidThatIsAThread(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "java", 'S')
	task(t, proc, fakeTID, fakePID, "GC Thread", 'S')
	_, err := Resolve(proc, "", fakeTID, 0, "")
	if err == nil {
		t.Fatal("Resolve accepted a thread id as --pid")
	}
	want := "4194306 is a thread of process 4194305; use --tid 4194306 or --pid 4194305"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if errors.Is(err, ErrNotFound) {
		t.Errorf("thread-as-pid error wraps ErrNotFound; the task exists")
	}
	// The same id as --tid is fine.
	tg, err := Resolve(proc, "", 0, fakeTID, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Kind != Thread || tg.ID != fakeTID || tg.Comm != "GC Thread" || tg.String() != "tid 4194306 (GC Thread)" {
		t.Errorf("target = %+v (%s)", tg, tg)
	}
	// A main thread can also be traced alone.
	if tg, err := Resolve(proc, "", 0, fakePID, ""); err != nil || tg.Kind != Thread {
		t.Errorf("--tid of a main thread: %+v, %v", tg, err)
	}
}

// A kernel thread (PF_KTHREAD in its stat flags) is refused, as --pid and
// as --tid, in one line that says why.
func TestResolveKernelThread(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "kthreadd", 'S')
	write(t, filepath.Join(proc, strconv.Itoa(fakePID), "stat"),
		strconv.Itoa(fakePID)+" (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0\n") // PF_KTHREAD|PF_NOFREEZE|...
	want := "pid 4194305 (kthreadd) is a kernel thread: numatrace traces user processes (kswapd's and kcompactd's work is counted in every trace)"
	if _, err := Resolve(proc, "", fakePID, 0, ""); err == nil || err.Error() != want {
		t.Errorf("--pid of a kernel thread: %v, want %q", err, want)
	}
	if _, err := Resolve(proc, "", 0, fakePID, ""); err == nil || !strings.HasPrefix(err.Error(), "tid 4194305 (kthreadd) is a kernel thread") {
		t.Errorf("--tid of a kernel thread: %v", err)
	}
	// A comm with parentheses and spaces does not shift the fields.
	task(t, proc, fakePID2, fakePID2, "a) b (c", 'S')
	if _, err := Resolve(proc, "", fakePID2, 0, ""); err != nil {
		t.Errorf("a user process named %q: %v", "a) b (c", err)
	}
}

func TestResolveNotFound(t *testing.T) {
	proc := t.TempDir()
	cg := t.TempDir()
	_, err := Resolve(proc, cg, fakePID, 0, "")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no process with pid 4194305") {
		t.Errorf("missing pid: %v", err)
	}
	_, err = Resolve(proc, cg, 0, fakeTID, "")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no thread with tid 4194306") {
		t.Errorf("missing tid: %v", err)
	}
	_, err = Resolve(proc, cg, 0, 0, "nope.slice")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), filepath.Join(cg, "nope.slice")) {
		t.Errorf("missing cgroup: %v", err)
	}
	// A status file without a Tgid line is not a task.
	write(t, filepath.Join(proc, strconv.Itoa(fakePID2), "status"), "Name:\tbroken\n")
	if _, err := Resolve(proc, cg, fakePID2, 0, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("status without Tgid: %v", err)
	}
}

func TestResolveRejectsMoreThanOneTarget(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "a", 'S')
	for _, c := range []struct {
		pid, tid int
		cg       string
	}{
		{fakePID, fakePID, ""},
		{fakePID, 0, "x"},
		{0, fakePID, "x"},
		{fakePID, fakePID, "x"},
		{-1, -1, ""},
	} {
		_, err := Resolve(proc, t.TempDir(), c.pid, c.tid, c.cg)
		if err == nil || !strings.Contains(err.Error(), "at most one of --pid, --tid and --cgroup") {
			t.Errorf("Resolve(pid=%d, tid=%d, cgroup=%q) = %v", c.pid, c.tid, c.cg, err)
		}
	}
}

func TestResolveNegativeIDs(t *testing.T) {
	if _, err := Resolve(t.TempDir(), "", -5, 0, ""); err == nil || err.Error() != "invalid pid -5" {
		t.Errorf("pid -5: %v", err)
	}
	if _, err := Resolve(t.TempDir(), "", 0, -7, ""); err == nil || err.Error() != "invalid tid -7" {
		t.Errorf("tid -7: %v", err)
	}
}

func TestResolveCgroup(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "db.slice", "pg.service", "cgroup.procs"), "")
	write(t, filepath.Join(root, "db.slice", "cgroup.procs"), "")

	// Relative to the cgroup root.
	tg, err := Resolve("", root, 0, 0, "db.slice/pg.service")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "db.slice", "pg.service")
	if tg.Kind != Cgroup || tg.Path != want || tg.String() != "cgroup "+want {
		t.Errorf("relative: %+v (%s)", tg, tg)
	}
	// Absolute paths are used as given, cleaned; the cgroup root is ignored.
	tg, err = Resolve("", "/nonexistent", 0, 0, root+"//db.slice/./")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Path != filepath.Join(root, "db.slice") {
		t.Errorf("absolute: path %q", tg.Path)
	}
	// An absolute path must not be looked up under the root.
	if _, err := Resolve("", root, 0, 0, "/db.slice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("/db.slice resolved under the root: %v", err)
	}
	// A directory without cgroup.procs is not a cgroup; neither is one where
	// cgroup.procs is a directory.
	if err := os.MkdirAll(filepath.Join(root, "plain"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve("", root, 0, 0, "plain"); !errors.Is(err, ErrNotFound) {
		t.Errorf("plain dir: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "odd", "cgroup.procs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve("", root, 0, 0, "odd"); !errors.Is(err, ErrNotFound) {
		t.Errorf("cgroup.procs directory: %v", err)
	}
}

func sorted(p []uint32) []uint32 {
	sort.Slice(p, func(i, j int) bool { return p[i] < p[j] })
	return p
}

func TestCgroupPIDsRecurses(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.procs"), "10\n11\n")
	write(t, filepath.Join(root, "a", "cgroup.procs"), "20\n")
	write(t, filepath.Join(root, "a", "b", "cgroup.procs"), "30\n31\n32\n")
	write(t, filepath.Join(root, "a", "b", "c", "cgroup.procs"), "")        // empty leaf
	write(t, filepath.Join(root, "d", "cgroup.procs"), "40\nnot-a-pid\n\n") // junk is skipped
	write(t, filepath.Join(root, "e", "memory.max"), "max\n")               // no cgroup.procs: skipped
	write(t, filepath.Join(root, "e", "f", "cgroup.procs"), "50\n")         // but descended into
	write(t, filepath.Join(root, "cgroup.threads"), "99\n")                 // other files are not read

	tg, err := Resolve("", root, 0, 0, root)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := tg.CgroupPIDs()
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{10, 11, 20, 30, 31, 32, 40, 50}; !reflect.DeepEqual(sorted(pids), want) {
		t.Errorf("CgroupPIDs = %v, want %v", pids, want)
	}

	// Only the subtree of the target.
	sub, err := Resolve("", root, 0, 0, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	pids, err = sub.CgroupPIDs()
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{30, 31, 32}; !reflect.DeepEqual(sorted(pids), want) {
		t.Errorf("subtree CgroupPIDs = %v, want %v", pids, want)
	}
}

func TestCgroupPIDsGone(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "x", "cgroup.procs"), "1\n")
	tg, err := Resolve("", root, 0, 0, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.CgroupPIDs(); err == nil {
		t.Errorf("CgroupPIDs of a removed cgroup succeeded")
	}
}

func TestExistsByState(t *testing.T) {
	proc := t.TempDir()
	for _, c := range []struct {
		state byte
		alive bool
	}{
		{'R', true}, {'S', true}, {'D', true}, {'T', true}, {'t', true}, {'I', true},
		{'Z', false}, {'X', false},
	} {
		task(t, proc, fakePID, fakePID, "w", c.state)
		for _, k := range []Kind{Process, Thread} {
			tg := &Target{Kind: k, ID: fakePID, proc: proc}
			if got := tg.exists(); got != c.alive {
				t.Errorf("kind %d state %c: exists = %v, want %v", k, c.state, got, c.alive)
			}
		}
	}
	// No stat file: gone.
	if (&Target{Kind: Thread, ID: fakeTID, proc: proc}).exists() {
		t.Errorf("a task without /proc entry exists")
	}
}

// The state is the field after the last ')': comm may contain ") Z".
func TestExistsCommWithParens(t *testing.T) {
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "a) Z (b", 'S')
	tg := &Target{Kind: Process, ID: fakePID, proc: proc}
	if !tg.exists() {
		t.Errorf("comm with ') Z' made a sleeping task look like a zombie")
	}
	setState(t, proc, fakePID, "x) S (y", 'Z')
	if tg.exists() {
		t.Errorf("zombie with ') S' in comm looks alive")
	}
	// A truncated stat line is not proof the task is gone.
	write(t, filepath.Join(proc, strconv.Itoa(fakePID), "stat"), "1 (x)")
	if !tg.exists() {
		t.Errorf("truncated stat: exists = false")
	}
}

func TestExistsCgroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	write(t, filepath.Join(dir, "cgroup.procs"), "")
	tg := &Target{Kind: Cgroup, Path: dir}
	if !tg.exists() {
		t.Fatal("existing cgroup does not exist")
	}
	os.RemoveAll(dir)
	if tg.exists() {
		t.Error("removed cgroup exists")
	}
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func TestWaitGoneThreadBecomesZombie(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "p", 'S')
	task(t, proc, fakeTID, fakePID, "w", 'S')
	tg, err := Resolve(proc, "", 0, fakeTID, "")
	if err != nil {
		t.Fatal(err)
	}
	gone := tg.WaitGone(context.Background())
	if closedWithin(gone, 300*time.Millisecond) {
		t.Fatal("WaitGone fired while the thread is alive")
	}
	setState(t, proc, fakeTID, "w", 'Z')
	if !closedWithin(gone, 3*time.Second) {
		t.Fatal("WaitGone did not fire after the thread became a zombie")
	}
}

func TestWaitGoneProcessFallsBackToProc(t *testing.T) {
	t.Parallel()
	// pidfd_open fails for this pid, so the /proc tree is polled.
	proc := t.TempDir()
	task(t, proc, fakePID, fakePID, "p", 'S')
	tg, err := Resolve(proc, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	gone := tg.WaitGone(context.Background())
	if closedWithin(gone, 300*time.Millisecond) {
		t.Fatal("WaitGone fired while the process is alive")
	}
	if err := os.RemoveAll(filepath.Join(proc, strconv.Itoa(fakePID))); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(gone, 3*time.Second) {
		t.Fatal("WaitGone did not fire after the process disappeared")
	}
}

func TestWaitGoneCgroupRemoved(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, filepath.Join(root, "x", "cgroup.procs"), "")
	tg, err := Resolve("", root, 0, 0, "x")
	if err != nil {
		t.Fatal(err)
	}
	gone := tg.WaitGone(context.Background())
	if closedWithin(gone, 300*time.Millisecond) {
		t.Fatal("WaitGone fired while the cgroup exists")
	}
	os.RemoveAll(filepath.Join(root, "x"))
	if !closedWithin(gone, 3*time.Second) {
		t.Fatal("WaitGone did not fire after the cgroup was removed")
	}
}

func TestWaitGoneContextEnds(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	task(t, proc, fakeTID, fakeTID, "w", 'S')
	tg := &Target{Kind: Thread, ID: fakeTID, proc: proc}
	ctx, cancel := context.WithCancel(context.Background())
	gone := tg.WaitGone(ctx)
	time.Sleep(300 * time.Millisecond) // the watcher is polling
	cancel()
	time.Sleep(50 * time.Millisecond) // and has seen the context end
	// Now the thread goes, but nobody is watching any more: never closed.
	setState(t, proc, fakeTID, "w", 'Z')
	if closedWithin(gone, 600*time.Millisecond) {
		t.Error("WaitGone fired after its context ended")
	}
}

func TestWaitGoneSystemNever(t *testing.T) {
	t.Parallel()
	tg := &Target{Kind: System}
	if closedWithin(tg.WaitGone(context.Background()), 100*time.Millisecond) {
		t.Error("system-wide target went away")
	}
}

// A real child process, watched through its pidfd.
func TestWaitGoneRealProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(testutil.RequireTool(t, "sleep", "coreutils"), "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	tg, err := Resolve("/proc", "/sys/fs/cgroup", cmd.Process.Pid, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Comm != "sleep" {
		t.Errorf("comm = %q, want sleep", tg.Comm)
	}
	gone := tg.WaitGone(context.Background())
	if closedWithin(gone, 300*time.Millisecond) {
		t.Fatal("WaitGone fired while the child runs")
	}
	cmd.Process.Kill()
	// Not reaped yet: a zombie counts as gone.
	if !closedWithin(gone, 3*time.Second) {
		t.Fatal("WaitGone did not fire after the child was killed")
	}
}
