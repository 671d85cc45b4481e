package exporter

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/stall"
)

const dockerID = "4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"

// fakeProc writes /proc/PID/cgroup files: 10 in a v1 memory cgroup, 20 in
// a docker container under cgroup v2, 30 and 31 in more v1 groups.
func fakeProc(t *testing.T) string {
	root := t.TempDir()
	files := map[int]string{
		10: "12:memory:/redis\n11:cpu,cpuacct:/redis\n0::/\n",
		20: "0::/system.slice/docker-" + dockerID + ".scope\n",
		30: "4:memory:/batch-a\n",
		31: "4:memory:/batch-b\n",
	}
	for pid, body := range files {
		dir := filepath.Join(root, itoa(pid))
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestLabels(t *testing.T) {
	l := NewLabeller(fakeProc(t), "", 2)
	if cg, ctr, _ := l.For(10, 0); cg != "/redis" || ctr != "" {
		t.Errorf("v1 memory cgroup: %q %q", cg, ctr)
	}
	if cg, ctr, _ := l.For(20, 0); cg != "/system.slice/docker-"+dockerID+".scope" || ctr != dockerID[:12] {
		t.Errorf("docker under v2: %q %q", cg, ctr)
	}
	if cg, _, _ := l.For(99, 0); cg != "unknown" {
		t.Errorf("an exited pid: %q", cg)
	}
	// The limit is 2 values: /redis and the docker scope ("unknown"
	// takes none). More fold, and each cgroup folded is counted once.
	for i := 0; i < 2; i++ {
		if cg, ctr, folded := l.For(30, 0); cg != Overflow || ctr != "" || !folded {
			t.Errorf("past the limit: %q %q folded=%v", cg, ctr, folded)
		}
	}
	l.For(31, 0)
	if cg, _, _ := l.For(10, 0); cg != "/redis" {
		t.Errorf("a known value after the limit: %q", cg)
	}
	if c := l.Counts(); c != (Counts{Values: 2, Folded: 3, FoldedCgroups: 2}) {
		t.Errorf("counts %+v, want 2 values, 3 observations of 2 cgroups folded", c)
	}
}

func TestExporterMetrics(t *testing.T) {
	e := New(Config{ProcRoot: fakeProc(t), CgroupLimit: 2, Comms: map[string]bool{"redis-server": true}, Version: "test"})
	ev := func(pid uint32, comm string, c stall.Cause, dur uint64) *stall.Event {
		return &stall.Event{Kind: stall.KindStall, Cause: c, PID: pid, TID: pid, Comm: comm, DurNs: dur, Pass: 1}
	}
	e.Stall(ev(10, "redis-server", stall.MemcgReclaim, 2_000_000))
	e.Stall(ev(10, "redis-server", stall.MemcgReclaim, 3_000_000))
	e.Stall(ev(20, "java", stall.Compaction, 1_000))
	e.Stall(ev(30, "batch", stall.MmapLock, 1_000)) // folded: limit 2
	e.Stall(ev(10, "redis-server", stall.NUMATaskMove, 0))
	e.Stall(&stall.Event{Kind: stall.KindExit, PID: 10})
	e.Window(&aggregate.Window{LostEvents: 7})
	e.SetProbe("memcg_reclaim", true)
	e.SetProbe("numa_migration", false)
	e.SetFindings([]doctor.Finding{{Check: "zone_reclaim_mode", Severity: doctor.Crit, Title: "zone reclaim on"}})

	want := `
# HELP numatrace_lost_events_total Stall events the kernel dropped because the ring buffer was full (the histograms then undercount).
# TYPE numatrace_lost_events_total counter
numatrace_lost_events_total 7
# HELP numatrace_cgroup_label_folded_total Observations labelled cgroup="overflow" because --cgroup-limit cgroups held a label value already.
# TYPE numatrace_cgroup_label_folded_total counter
numatrace_cgroup_label_folded_total 1
# HELP numatrace_numa_task_moves_total Threads moved (or swapped) to another node by NUMA balancing, by cgroup.
# TYPE numatrace_numa_task_moves_total counter
numatrace_numa_task_moves_total{cgroup="/redis",comm="redis-server",container=""} 1
# HELP numatrace_probe_attached 1 if the probe is attached, 0 if this kernel could not attach it.
# TYPE numatrace_probe_attached gauge
numatrace_probe_attached{probe="memcg_reclaim"} 1
numatrace_probe_attached{probe="numa_migration"} 0
# HELP numatrace_doctor_finding 1 for each misconfiguration ` + "`numatrace doctor`" + ` currently finds on this machine.
# TYPE numatrace_doctor_finding gauge
numatrace_doctor_finding{check="zone_reclaim_mode",severity="crit",title="zone reclaim on"} 1
`
	if err := testutil.GatherAndCompare(e.Registry, strings.NewReader(want), "numatrace_lost_events_total",
		"numatrace_cgroup_label_folded_total", "numatrace_numa_task_moves_total", "numatrace_probe_attached", "numatrace_doctor_finding"); err != nil {
		t.Error(err)
	}
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "numatrace_stall_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				key += lp.GetName() + "=" + lp.GetValue() + " "
			}
			got[strings.TrimSpace(key)] = m.GetHistogram().GetSampleCount()
			if strings.Contains(key, "memcg_reclaim") {
				sum = m.GetHistogram().GetSampleSum()
				if m.GetHistogram().GetSchema() == 0 && len(m.GetHistogram().GetPositiveSpan()) == 0 {
					t.Error("no native histogram buckets")
				}
			}
		}
	}
	wantCounts := map[string]uint64{
		"cause=memcg_reclaim cgroup=/redis comm=redis-server container=":                                       2,
		"cause=compaction cgroup=/system.slice/docker-" + dockerID + ".scope comm= container=" + dockerID[:12]: 1,
		"cause=mmap_lock cgroup=overflow comm= container=":                                                     1,
	}
	for k, n := range wantCounts {
		if got[k] != n {
			t.Errorf("%s: %d observations, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(wantCounts) {
		t.Errorf("series %v", got)
	}
	if sum < 0.00499 || sum > 0.00501 {
		t.Errorf("memcg_reclaim sum %g s, want 0.005", sum)
	}
}

// A process gone from /proc by the time its stall is labelled (a short
// writer) is labelled by the cgroup id the kernel gave with the stall:
// the inode of its cgroup's directory, found under the cgroup mounts.
func TestLabelsFromCgroupIDs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/batch/job-7", "unified/system.slice/docker-" + dockerID + ".scope"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []string{"memory", "unified"} { // what marks a hierarchy
		os.WriteFile(filepath.Join(root, h, "cgroup.procs"), nil, 0o644)
	}
	ino := func(d string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(root, d), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	l := NewLabeller(fakeProc(t), root, 10)
	if cg, _, _ := l.For(99, ino("memory/batch/job-7")); cg != "/batch/job-7" {
		t.Errorf("an exited writer with its memcg id: %q, want /batch/job-7", cg)
	}
	if cg, ctr, _ := l.For(98, ino("unified/system.slice/docker-"+dockerID+".scope")); cg != "/system.slice/docker-"+dockerID+".scope" || ctr != dockerID[:12] {
		t.Errorf("an exited container process with its v2 id: %q %q", cg, ctr)
	}
	if cg, _, _ := l.For(10, ino("memory/batch/job-7")); cg != "/redis" {
		t.Errorf("a live process is labelled from /proc: %q", cg)
	}
	if cg, _, _ := l.For(97, 0); cg != "unknown" {
		t.Errorf("an exited process without an id: %q", cg)
	}
	// A cgroup made after the last walk is found on its first miss, 10 ms
	// after that walk at most.
	os.MkdirAll(filepath.Join(root, "memory/batch/job-8"), 0o755)
	time.Sleep(20 * time.Millisecond)
	if cg, _, _ := l.For(96, ino("memory/batch/job-8")); cg != "/batch/job-8" {
		t.Errorf("a new cgroup: %q", cg)
	}
}

// Every label value comes from text anyone can set (a cgroup name, a
// thread name, a doctor finding that names a device): invalid UTF-8 in
// one made the Prometheus client panic and took serve down. Each is
// escaped instead, the way the view and the report show it.
func TestLabelValuesAreEscaped(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "memory", "gone\xffjob"), 0o755)
	os.WriteFile(filepath.Join(root, "memory", "cgroup.procs"), nil, 0o644)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, "memory", "gone\xffjob"), &st); err != nil {
		t.Fatal(err)
	}
	proc := fakeProc(t)
	os.MkdirAll(filepath.Join(proc, "40"), 0o755)
	os.WriteFile(filepath.Join(proc, "40", "cgroup"), []byte("4:memory:/rt_bad\xff\x1b[2J\u202e\n"), 0o644)
	e := New(Config{ProcRoot: proc, CgroupRoot: root, CgroupLimit: 10, Comms: map[string]bool{"w\xffrker": true}, Version: "v1\xff"})
	e.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, PID: 40, TID: 40, Comm: "w\xffrker", DurNs: 1000})
	e.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, PID: 41, TID: 41, Comm: "x", DurNs: 1000, CgroupID: st.Ino})
	e.Stall(&stall.Event{Kind: stall.KindStall, Cause: stall.NUMATaskMove, PID: 40, TID: 40, Comm: "w\xffrker"})
	e.SetProbe("probe\xff", true)
	e.SetFindings([]doctor.Finding{{Check: "irq\xff", Severity: doctor.Warn, Title: "eth\xff0 \x1b]0;x\x07"}})

	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				got[mf.GetName()+" "+lp.GetName()+"="+lp.GetValue()] = true
			}
		}
	}
	for _, want := range []string{
		`numatrace_stall_seconds cgroup=/rt_bad\xff\x1b[2J\u202e`,
		`numatrace_stall_seconds comm=w\xffrker`,
		`numatrace_stall_seconds cgroup=/gone\xffjob`,
		`numatrace_numa_task_moves_total cgroup=/rt_bad\xff\x1b[2J\u202e`,
		`numatrace_numa_task_moves_total comm=w\xffrker`,
		`numatrace_probe_attached probe=probe\xff`,
		`numatrace_doctor_finding check=irq\xff`,
		`numatrace_doctor_finding title=eth\xff0 \x1b]0;x\x07`,
		`numatrace_build_info version=v1\xff`,
	} {
		if !got[want] {
			t.Errorf("no label %s in %v", want, got)
		}
	}
}
