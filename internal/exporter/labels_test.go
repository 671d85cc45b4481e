package exporter

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
)

// fakeCgroups makes a v1 memory hierarchy under a temp root with the
// cgroups named, and a /proc whose pid 100+i is in the i-th.
func fakeCgroups(t *testing.T, names ...string) (proc, root string) {
	t.Helper()
	root, proc = t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(root, "memory"), 0o755)
	os.WriteFile(filepath.Join(root, "memory", "cgroup.procs"), nil, 0o644)
	for i, n := range names {
		if err := os.MkdirAll(filepath.Join(root, "memory", n), 0o755); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(proc, itoa(100+i))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "cgroup"), []byte("4:memory:/"+n+"\n"), 0o644)
	}
	return proc, root
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// A cgroup that is gone gives its label value back once a scrape has
// taken its last figures: the next scrape has no series of it, and a new
// cgroup takes the value's place instead of folding.
func TestLabelsGiveBackGoneCgroups(t *testing.T) {
	proc, root := fakeCgroups(t, "a", "b", "c")
	l := NewLabeller(proc, root, 2)
	t.Cleanup(l.Close)
	var released []string
	release := func(cg string) { released = append(released, cg) }
	l.For(100, 0)
	l.For(101, 0)
	if cg, _, folded := l.For(102, 0); cg != Overflow || !folded {
		t.Fatalf("/c at the limit: %q", cg)
	}
	os.Remove(filepath.Join(root, "memory", "a"))
	early := l.BeginScrape()
	l.For(100, 0) // a stall of /a read late, after that scrape began
	l.Scraped(early, release)
	if len(released) != 0 {
		t.Fatalf("released %v: no scrape had taken /a's last figures", released)
	}
	l.Scraped(l.BeginScrape(), release)
	if strings.Join(released, " ") != "/a" {
		t.Fatalf("released %v, want /a", released)
	}
	if cg, _, folded := l.For(102, 0); cg != "/c" || folded {
		t.Errorf("/c after /a gave its value back: %q", cg)
	}
	// A cgroup that still exists keeps its value.
	l.Scraped(l.BeginScrape(), release)
	if c := l.Counts(); strings.Join(released, " ") != "/a" || c.Values != 2 || c.Released != 1 || c.FoldedCgroups != 1 {
		t.Errorf("released %v, counts %+v", released, c)
	}
}

// A path from /proc that cannot be placed under the mounts (a cgroup
// namespace's "/../x") is never taken for gone.
func TestLabelsKeepCgroupsThatCannotBeFound(t *testing.T) {
	proc, root := fakeCgroups(t)
	os.MkdirAll(filepath.Join(proc, "7"), 0o755)
	os.WriteFile(filepath.Join(proc, "7", "cgroup"), []byte("0::/../pod/x\n"), 0o644)
	l := NewLabeller(proc, root, 2)
	t.Cleanup(l.Close)
	if cg, _, _ := l.For(7, 0); cg != "/../pod/x" {
		t.Fatalf("label %q", cg)
	}
	for i := 0; i < 3; i++ {
		l.Scraped(l.BeginScrape(), func(cg string) { t.Errorf("released %s", cg) })
	}
}

// A short job's process and cgroup can both be gone before its stalls
// are read (the ring buffer is read every 100 ms): its cgroup is known
// from the moment its directory was made, not from a walk of the mounts
// that comes too late to find it. (Stalls of 5,000 short-lived cgroups
// were 87% "unknown" before.)
func TestLabelsNameCgroupsGoneBeforeTheirStalls(t *testing.T) {
	proc, root := fakeCgroups(t, "batch")
	l := NewLabeller(proc, root, 10)
	t.Cleanup(l.Close)
	job := filepath.Join(root, "memory", "batch", "job-1")
	if err := os.Mkdir(job, 0o755); err != nil {
		t.Fatal(err)
	}
	id := inode(t, job)
	// The directory a new one is made in is watched too.
	os.Mkdir(filepath.Join(job, "step"), 0o755)
	step := inode(t, filepath.Join(job, "step"))
	for deadline := time.Now().Add(5 * time.Second); !known(l, id) || !known(l, step); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("new cgroup directories not learnt of in 5 s (no walk of the mounts ran)")
		}
	}
	os.Remove(filepath.Join(job, "step"))
	os.Remove(job)
	if cg, _, _ := l.For(999, id); cg != "/batch/job-1" {
		t.Errorf("a gone job's stall: %q, want /batch/job-1", cg)
	}
	if cg, _, _ := l.For(998, step); cg != "/batch/job-1/step" {
		t.Errorf("a gone job's child's stall: %q, want /batch/job-1/step", cg)
	}
}

// known reports whether l's id table has id, without walking the mounts.
func known(l *Labeller, id uint64) bool {
	l.ids.mu.Lock()
	defer l.ids.mu.Unlock()
	_, ok := l.ids.byID[id]
	return ok
}

// The exporter gives a gone cgroup's value back after each scrape: its
// series are in the scrape after its last stall, then deleted.
func TestExporterDeletesGoneCgroupsSeries(t *testing.T) {
	proc, root := fakeCgroups(t, "a", "b")
	e := New(Config{ProcRoot: proc, CgroupRoot: root, CgroupLimit: 1, Version: "test"})
	t.Cleanup(e.Close)
	h := e.Handler(func() bool { return true })
	scrape := func() string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(w.Result().Body)
		return string(b)
	}
	e.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, PID: 100, DurNs: 1000})
	os.Remove(filepath.Join(root, "memory", "a"))
	if m := scrape(); !strings.Contains(m, `numatrace_stall_seconds_count{cause="memcg_reclaim",cgroup="/a",comm="",container=""} 1`) {
		t.Fatalf("the scrape after /a's last stall:\n%s", m)
	}
	m := scrape()
	if strings.Contains(m, `cgroup="/a"`) || !strings.Contains(m, "numatrace_cgroup_label_released_total 1\n") ||
		!strings.Contains(m, "numatrace_cgroup_label_values 0\n") {
		t.Fatalf("the next scrape:\n%s", m)
	}
	e.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, PID: 101, DurNs: 1000})
	if m := scrape(); !strings.Contains(m, `cgroup="/b"`) || strings.Contains(m, `cgroup="overflow",`) {
		t.Fatalf("/b took /a's value:\n%s", m)
	}
}

// A process seen in one cgroup and moved to another (a job runner forks,
// then writes the child into the job's cgroup.procs) is labelled by the
// cgroup the kernel gave with each stall, not by where it was first seen.
// (One short job in 40 had its stalls labelled "/" in a CI run: its shell
// had a stall before it moved itself.)
func TestLabelsFollowAProcessThatMoved(t *testing.T) {
	proc, root := fakeCgroups(t, "job")
	cgroupFile := filepath.Join(proc, "100", "cgroup")
	os.WriteFile(cgroupFile, []byte("4:memory:/\n"), 0o644)
	l := NewLabeller(proc, root, 10)
	t.Cleanup(l.Close)
	if cg, _, _ := l.For(100, inode(t, filepath.Join(root, "memory"))); cg != "/" {
		t.Fatalf("before the move: %q, want /", cg)
	}
	os.WriteFile(cgroupFile, []byte("4:memory:/job\n"), 0o644)
	job := inode(t, filepath.Join(root, "memory", "job"))
	if cg, _, _ := l.For(100, job); cg != "/job" {
		t.Errorf("a stall in /job after the move: %q, want /job", cg)
	}
}
