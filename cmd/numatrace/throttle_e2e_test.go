package main

// The throttling causes against bpftrace, on real writers: a writer over
// the dirty limit (dirty_throttle) and a writer whose small memory cgroup
// fills with dirty pages (reclaim_throttle). Each is a dd held at a gate
// until bpftrace and then numatrace are attached, and both stop after it
// ends, so the two count the same window.

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// bpftraceDirtyPauses sums pid's balance_dirty_pages pauses that sleep
// (pause > 0), in ms as the tracepoint gives them: jiffies*1000/HZ, which
// is numatrace's jiffies*1e9/HZ ns for HZ 100, 250 and 1000.
const bpftraceDirtyPauses = `
tracepoint:writeback:balance_dirty_pages /pid == %d && args->pause > 0/ { @n = count(); @ms = sum(args->pause); }
`

// bpftraceReclaimThrottle sums pid's reclaim throttles by the time each
// waited (usec_delayed), and counts apart those that did not wait: woken
// in the jiffy they began, they are no stall, and numatrace skips them.
const bpftraceReclaimThrottle = `
tracepoint:vmscan:mm_vmscan_throttled /pid == %[1]d && args->usec_delayed > 0/ { @n = count(); @us = sum(args->usec_delayed); }
tracepoint:vmscan:mm_vmscan_throttled /pid == %[1]d && args->usec_delayed <= 0/ { @zero = count(); }
`

// gatedWriter is a shell held at a gate (a line on its stdin) that then
// becomes dd, on the same pid: a writer whose pid the tracers are given
// before it writes anything.
type gatedWriter struct {
	cmd  *exec.Cmd
	gate io.WriteCloser
}

// startGatedWriter starts a writer of mib MiB of zeros to file, moved
// into the v1 memory cgroup cg unless cg is "" (its later pages are
// charged there).
func startGatedWriter(t *testing.T, cg, file string, mib int) *gatedWriter {
	t.Helper()
	cmd := exec.Command("sh", "-c", `read x && exec dd if=/dev/zero of="$1" bs=1M count="$2" status=none`,
		"sh", file, strconv.Itoa(mib))
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close(); cmd.Process.Kill(); cmd.Wait() })
	if cg != "" {
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatalf("writer into %s: %v", cg, err)
		}
	}
	return &gatedWriter{cmd: cmd, gate: gate}
}

func (w *gatedWriter) pid() int { return w.cmd.Process.Pid }

// release opens the gate and waits for dd to finish; it returns how
// long dd took.
func (w *gatedWriter) release(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := fmt.Fprintln(w.gate, "go"); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	return time.Since(start)
}

// setDirtyBytes sets vm.dirty_bytes and vm.dirty_background_bytes until
// the test ends. The kernel keeps a byte count or a ratio for each, and
// writing one zeroes the other; it refuses a byte count of 0, so cleanup
// writes back whichever of the two was set.
func setDirtyBytes(t *testing.T, dirty, background int) {
	t.Helper()
	testutil.RequireRoot(t)
	// Background first: the pair is never set with the background limit
	// above the other.
	for _, s := range []struct {
		name  string
		bytes int
	}{{"dirty_background", background}, {"dirty", dirty}} {
		bytesFile, ratioFile := "/proc/sys/vm/"+s.name+"_bytes", "/proc/sys/vm/"+s.name+"_ratio"
		oldBytes, err := os.ReadFile(bytesFile)
		if err != nil {
			t.Fatal(err)
		}
		oldRatio, err := os.ReadFile(ratioFile)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			file, old := bytesFile, oldBytes
			if strings.TrimSpace(string(oldBytes)) == "0" {
				file, old = ratioFile, oldRatio
			}
			if err := os.WriteFile(file, old, 0o644); err != nil {
				t.Errorf("restore %s to %s: %v", file, strings.TrimSpace(string(old)), err)
			}
		})
		if err := os.WriteFile(bytesFile, []byte(strconv.Itoa(s.bytes)), 0o644); err != nil {
			t.Fatalf("set %s: %v", bytesFile, err)
		}
	}
}

// throttleRun is what numatrace reported for one cause of the writer.
type throttleRun struct {
	count, totalNs   uint64 // the writer's own row
	causes, causesNs uint64 // the run's totals by cause
	lines            []map[string]any
	windows          int
}

// traceWriter attaches bpftrace (script, given the writer's pid), then
// numatrace to the writer, releases it, and stops both once it has
// ended. It returns numatrace's figures for cause and bpftrace's maps.
func traceWriter(t *testing.T, w *gatedWriter, script, cause string) (throttleRun, map[string]float64) {
	t.Helper()
	pid := w.pid()
	bt := startBpftrace(t, fmt.Sprintf(script, pid))
	nt := startAttach(t, "--pid", strconv.Itoa(pid), "--json", "--duration", "60s")
	took := w.release(t)
	nt.wait(t, 20*time.Second) // numatrace ends as its target exits
	maps := bt.stop(t)

	stalls, windows, sum := parseNDJSON(t, nt.stdout.Bytes())
	var totals causeSummary
	summaryOf(t, nt.stdout.Bytes(), &totals)
	run := throttleRun{causes: totals.Causes[cause].Count, causesNs: totals.Causes[cause].TotalNs, windows: len(windows)}
	found := false
	for _, th := range sum.Threads {
		if th.TID == uint32(pid) {
			s := th.Stalls[cause]
			run.count, run.totalNs, found = s.Count, s.TotalNs, true
		}
	}
	if !found {
		t.Fatalf("writer tid %d missing from the summary: %+v", pid, sum.Threads)
	}
	for _, s := range stalls {
		if s["cause"] == cause {
			run.lines = append(run.lines, s)
		}
	}
	if sum.LostEvents != 0 {
		t.Errorf("%d events lost", sum.LostEvents)
	}
	t.Logf("writer ran %s; numatrace: %d %s, %d ns (totals by cause %d, %d ns; %d stall lines); bpftrace: %v",
		took.Round(time.Millisecond), run.count, cause, run.totalNs, run.causes, run.causesNs, len(run.lines), maps)
	return run, maps
}

// within fails the test when got is more than limit (a fraction of want)
// away from want.
func within(t *testing.T, what string, got uint64, want, limit float64) {
	t.Helper()
	if d := math.Abs(float64(got)-want) / want; d > limit {
		t.Errorf("%s: numatrace %d, bpftrace %.0f: %.2f%% apart, limit %.0f%%", what, got, want, d*100, limit*100)
	}
}

// A writer over a small dirty limit, to a disk that takes 20 MB/s, is
// paused by balance_dirty_pages: numatrace's dirty_throttle count and
// time equal the sum of the tracepoint's pauses that bpftrace sees.
func TestAttachDirtyThrottleMatchesBpftrace(t *testing.T) {
	disk := testutil.SlowDisk(t, 1<<30, 20<<20)
	setDirtyBytes(t, 16<<20, 8<<20)
	w := startGatedWriter(t, "", filepath.Join(disk, "dirty"), 150)
	run, maps := traceWriter(t, w, bpftraceDirtyPauses, "dirty_throttle")

	btCount, btNs := maps["@n"], maps["@ms"]*1e6
	// 71 to 1245 pauses for these 150 MiB in trial runs on this VM, as
	// the disk's bandwidth estimate settles; 90 to 132 in the test.
	if btCount < 30 {
		t.Fatalf("bpftrace saw only %.0f dirty pauses; the writer was not throttled", btCount)
	}
	within(t, "dirty_throttle count", run.count, btCount, 0.02)
	within(t, "dirty_throttle time (ns)", run.totalNs, btNs, 0.02)
	if run.causes != run.count || run.causesNs != run.totalNs {
		t.Errorf("totals by cause %d, %d ns; the only traced thread has %d, %d ns", run.causes, run.causesNs, run.count, run.totalNs)
	}
	if uint64(len(run.lines)) != run.count {
		t.Errorf("%d dirty_throttle lines, the summary counts %d", len(run.lines), run.count)
	}
	for _, s := range run.lines {
		if s["dirty_pages"] == nil || s["limit_pages"] == nil || s["limit_pages"].(float64) == 0 {
			t.Fatalf("dirty_throttle line without its dirty pages and limit: %v", s)
		}
	}
}

// A writer in a 4 MiB memory cgroup (v1) writes 300 MiB to a disk that
// takes 40 MB/s: its reclaim keeps finding a batch of dirty pages not yet
// queued for writeback, wakes the flusher and throttles (v1 memcgs have no
// dirty throttling of their own; shrink_inactive_list throttles on
// writeback instead). numatrace's reclaim_throttle count and time equal
// bpftrace's count and sum of usec_delayed.
func TestAttachReclaimThrottleMatchesBpftrace(t *testing.T) {
	disk := testutil.SlowDisk(t, 1<<30, 40<<20)
	// With a 32 MiB limit the throttles come once per 32 MiB written,
	// about 12 for 200 MiB; 4 MiB gives about 150 for 300 MiB, a third to
	// a half of them woken before they waited.
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-rthrottle", 4<<20)
	w := startGatedWriter(t, cg, filepath.Join(disk, "memcg"), 300)
	run, maps := traceWriter(t, w, bpftraceReclaimThrottle, "reclaim_throttle")

	btCount, btNs := maps["@n"], maps["@us"]*1e3
	if btCount < 30 {
		t.Fatalf("bpftrace saw only %.0f reclaim throttles that waited (and %.0f that did not); the writer's reclaim was not throttled",
			btCount, maps["@zero"])
	}
	within(t, "reclaim_throttle count", run.count, btCount, 0.02)
	within(t, "reclaim_throttle time (ns)", run.totalNs, btNs, 0.02)
	if run.causes != run.count || run.causesNs != run.totalNs {
		t.Errorf("totals by cause %d, %d ns; the only traced thread has %d, %d ns", run.causes, run.causesNs, run.count, run.totalNs)
	}
	if uint64(len(run.lines)) != run.count {
		t.Errorf("%d reclaim_throttle lines, the summary counts %d", len(run.lines), run.count)
	}
	for _, s := range run.lines {
		// Inside the memcg reclaim that throttled: nested, and named by
		// enum vmscan_throttle_state (the tracepoint's print shows 1<<it).
		if s["reason"] != "writeback" || s["nested"] != true {
			t.Fatalf("reclaim_throttle line not a nested writeback throttle: %v", s)
		}
	}
}
