package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// pressureSummary is what the summary line says of memory pressure.
type pressureSummary struct {
	Type          string `json:"type"`
	MemoryStallNs uint64 `json:"memory_stall_ns"`
	LostEvents    uint64 `json:"lost_events"`
	PSI           []struct {
		Scope       string   `json:"scope"`
		SomeNs      uint64   `json:"some_ns"`
		NumatraceNs uint64   `json:"numatrace_ns"`
		Explained   *float64 `json:"explained"`
		Error       string   `json:"error"`
	} `json:"psi"`
}

// psiSome is the "some" total of a memory PSI file.
func psiSome(t *testing.T, file string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(file)
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("needs memory PSI (boot with psi=1): %v", err))
	for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			us, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return time.Duration(us) * time.Microsecond
		}
	}
	t.Fatalf("%s has no some total: %q", file, b)
	return 0
}

// A reader thrashes: its cgroup (128 MiB) is smaller than the file it
// re-reads at random (160 MiB), on a disk that reads 20 MB a second, so
// most of its reads refault a page evicted moments before, and wait for
// the disk inside a PSI memory stall that no other cause times. Nothing
// else on the machine stalls on memory (make test runs one package at a
// time), so PSI's system-wide count over the run is the reader's, and
// numatrace must have timed it: memstall_wait, told thrashing by its
// wait site, and the union of the reader's memory stalls within 10% of
// the growth of /proc/pressure/memory's "some" total.
func TestThrashingMatchesPSI(t *testing.T) {
	testutil.RequireRoot(t)
	const system = "/proc/pressure/memory"
	psiSome(t, system)
	_, err := exec.LookPath("gcc")
	testutil.RequireFeature(t, err == nil, "gcc not installed (make deps installs it)")
	reader := filepath.Join(t.TempDir(), "thrash")
	if out, err := exec.Command("gcc", "-O1", "-o", reader, "testdata/thrash.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	disk := testutil.SlowDisk(t, 1<<30, 1<<30)
	file := filepath.Join(disk, "data")
	writeRandomFile(t, file, 160<<20)
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-thrash", 128<<20)
	group := testutil.CgroupV2(t, "numatrace-e2e-thrash")
	groupPSI := filepath.Join(group, "memory.pressure")
	testutil.DropCaches(t)
	// The reader's first passes run at the disk's full speed: a page read
	// back soon after its eviction is marked as in use (workingset), and
	// from then on each read back of it is a refault the kernel counts as
	// thrashing.
	inCgroup := `echo $$ > "$1/cgroup.procs" && echo $$ > "$2/cgroup.procs" && shift 2 && exec "$@"`
	const pages = 160 << 20 / 4096
	warmed := 0
	for deadline := time.Now().Add(time.Minute); warmed < 2*pages; {
		out, err := exec.Command("sh", "-c", inCgroup, "sh", cg, group, reader, file, "2").CombinedOutput()
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(string(out)), " reads"))
		if err != nil || n == 0 || time.Now().After(deadline) {
			t.Fatalf("warming the cgroup up: %v: %s (%d reads of two passes' %d in a minute)", err, out, warmed, 2*pages)
		}
		warmed += n
	}
	testutil.SlowReads(t, disk, 20<<20)

	// The reader starts in its cgroup (its shell joins, then execs it),
	// and fills it for 3 s before numatrace attaches: the incident is
	// under way.
	cmd := exec.Command("sh", "-c", inCgroup, "sh", cg, group, reader, file, "20")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(3 * time.Second)

	if cmd.ProcessState != nil || !alive(cmd.Process.Pid) {
		t.Fatalf("the reader is gone before numatrace attached: %s", out.String())
	}
	run := startAttach(t, "--pid", strconv.Itoa(cmd.Process.Pid), "--json", "--duration", "8s")
	// numatrace works on the reader's CPU: the system's PSI weighs each
	// CPU's stall time by how busy the CPU was, so its own work on the
	// other CPU would dilute the reader's stall in /proc/pressure/memory
	// (17% once, with a poller running beside).
	pinTasks(t, run.cmd.Process.Pid, 0)
	before, groupBefore := psiSome(t, system), psiSome(t, groupPSI)
	run.wait(t, 30*time.Second)
	grew, groupGrew := psiSome(t, system)-before, psiSome(t, groupPSI)-groupBefore

	stalls, _, _ := parseNDJSON(t, run.stdout.Bytes())
	var sum pressureSummary
	lines := strings.Split(strings.TrimSpace(run.stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" {
		t.Fatalf("no summary line (%v)", err)
	}
	byReason := map[string]time.Duration{}
	var memstall time.Duration
	type span struct {
		start, end float64
		tid        any
	}
	spans := map[string][]span{} // the reader's memory stalls that count, by cause
	for _, s := range stalls {
		if s["nested"] != true && s["cause"] != "runq_wait" {
			end := s["ts_ns"].(float64)
			c := s["cause"].(string)
			spans[c] = append(spans[c], span{end - s["dur_ns"].(float64), end, s["tid"]})
		}
		switch s["cause"] {
		case "memstall_wait":
			d := time.Duration(s["dur_ns"].(float64))
			reason, _ := s["reason"].(string)
			byReason[reason] += d
			memstall += d
		case "memcg_reclaim", "reclaim_throttle", "runq_wait":
		default:
			t.Errorf("a stall of another cause than the reader's: %v", s)
		}
	}
	ours := time.Duration(sum.MemoryStallNs)
	t.Logf("warm-up: %d reads", warmed)
	t.Logf("PSI some grew %v (the reader's group: %v); numatrace's union of memory stalls %v (memstall_wait %v: %v; %d events lost); psi %+v",
		grew, groupGrew, ours, memstall, byReason, sum.LostEvents, sum.PSI)
	if memstall < 200*time.Millisecond {
		t.Fatalf("memstall_wait timed %v in 8 s of thrashing: the set-up did not thrash, or the probe saw none of it", memstall)
	}
	// The nesting rule: a memory stall inside a reclaim is the reclaim's
	// time, so a memstall_wait never overlaps one.
	for _, m := range spans["memstall_wait"] {
		for _, r := range spans["memcg_reclaim"] {
			if m.start < r.end && r.start < m.end {
				t.Fatalf("memstall_wait [%.0f, %.0f] of tid %v overlaps memcg_reclaim [%.0f, %.0f] of tid %v", m.start, m.end, m.tid, r.start, r.end, r.tid)
			}
		}
	}
	if th := byReason["thrashing"]; th < memstall*9/10 {
		t.Errorf("thrashing is %v of %v of memstall_wait: its wait site was not told (%v)", th, memstall, byReason)
	}
	for _, c := range []struct {
		scope string
		psi   time.Duration
	}{{"system", grew}, {"the reader's group", groupGrew}} {
		if diff := (ours - c.psi).Abs(); diff > c.psi/10 {
			t.Errorf("numatrace timed %v of memory stall, PSI counted %v (%s): %.1f%% apart, more than 10%%",
				ours, c.psi, c.scope, 100*float64(diff)/float64(c.psi))
		}
	}
	// The report's own PSI figures are the same readings, over its own
	// run, which the test's bracket.
	scopes := map[string]bool{}
	for _, p := range sum.PSI {
		scopes[p.Scope] = true
		bracket := grew
		if p.Scope != "system" {
			bracket = groupGrew
		}
		if p.Error != "" || p.NumatraceNs != sum.MemoryStallNs || time.Duration(p.SomeNs) > bracket+bracket/50 {
			t.Errorf("the report's PSI for %s: %+v; the test read %v around it", p.Scope, p, bracket)
		}
	}
	if want := "/" + filepath.Base(group); !scopes["system"] || !scopes[want] {
		t.Errorf("the report's PSI scopes %v, want system and %s", scopes, want)
	}
}

// writeRandomFile writes n bytes that do not compress to path, synced.
func writeRandomFile(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.Reader, n); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
