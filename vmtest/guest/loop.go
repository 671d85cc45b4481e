package main

// The attach/detach loop of vmtest/LOCKUP.md: one tool attaches and
// detaches its probes over and over while the guest kernel's soft-lockup
// watchdog panics on the first stuck CPU (softlockup_panic=1, with every
// CPU's backtrace), so the host can tell which tool, and which emulation,
// locks a guest up. The kernel command line names it:
//
//	nt.loop=TOOL:ITERATIONS[:load]
//
// TOOL is one of the loopTools; with :load a thread on each CPU keeps
// switching, faulting and taking its mmap_lock throughout, so the
// patched sites are being executed while they are patched.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// loopTools: what one iteration runs.
var loopTools = map[string]func() *exec.Cmd{
	// Every probe numatrace has, and the optional-feature probes
	// (an fexit and a kprobe on try_to_compact_pages): the guest's first
	// command in every matrix run.
	"probes": func() *exec.Cmd { return exec.Command(numatrace, "probes", "--json") },
	// The default attach, system-wide: raw tracepoints only.
	"attach": func() *exec.Cmd {
		return exec.Command(numatrace, "attach", "--no-tui", "--json", "--duration", "200ms")
	},
	// bpftrace on the tracepoints numatrace attaches, plus the kprobe and
	// the fexit (kretfunc) numatrace probes for: the same text patches
	// from an independent tool.
	"bpftrace": func() *exec.Cmd { return bpftrace(true) },
	// bpftrace on the tracepoints only.
	"bpftrace-tp": func() *exec.Cmd { return bpftrace(false) },
	// Only the kprobe and fexit probes, by bpftrace.
	"bpftrace-fn": func() *exec.Cmd {
		return exec.Command("/usr/bin/bpftrace", "-e", fnProbes+" { @n = count(); } interval:ms:200 { exit(); }")
	},
}

const fnProbes = "kprobe:try_to_compact_pages, kfunc:try_to_compact_pages"

// loopTracepoints are numatrace's tracepoints, as bpftrace names them.
var loopTracepoints = []string{
	"vmscan:mm_vmscan_direct_reclaim_begin", "vmscan:mm_vmscan_direct_reclaim_end",
	"vmscan:mm_vmscan_memcg_reclaim_begin", "vmscan:mm_vmscan_memcg_reclaim_end",
	"vmscan:mm_vmscan_memcg_softlimit_reclaim_begin", "vmscan:mm_vmscan_memcg_softlimit_reclaim_end",
	"vmscan:mm_vmscan_node_reclaim_begin", "vmscan:mm_vmscan_node_reclaim_end",
	"compaction:mm_compaction_try_to_compact_pages", "compaction:mm_compaction_begin", "compaction:mm_compaction_end",
	"migrate:mm_migrate_pages_start", "migrate:mm_migrate_pages",
	"sched:sched_move_numa", "sched:sched_swap_numa", "sched:sched_stick_numa",
	"sched:sched_migrate_task", "lock:contention_begin", "lock:contention_end", "sched:sched_switch",
	"vmscan:mm_vmscan_wakeup_kswapd", "huge_memory:mm_collapse_huge_page",
	"sched:sched_process_exit", "sched:sched_process_fork", "cgroup:cgroup_attach_task",
}

func bpftrace(withFn bool) *exec.Cmd {
	var probes []string
	for _, tp := range loopTracepoints {
		if _, err := os.Stat(filepath.Join("/sys/kernel/tracing/events", strings.Replace(tp, ":", "/", 1))); err == nil {
			probes = append(probes, "tracepoint:"+tp)
		}
	}
	script := strings.Join(probes, ", ") + " { @n = count(); } "
	if withFn { // a block of its own: bpftrace 0.17 fails to load a kfunc listed with tracepoints
		script += fnProbes + " { @f = count(); } "
	}
	return exec.Command("/usr/bin/bpftrace", "-e", script+"interval:ms:200 { exit(); }")
}

// loopConfig reads nt.loop from the kernel command line.
func loopConfig() (tool string, iterations int, load bool, ok bool) {
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		v, found := strings.CutPrefix(f, "nt.loop=")
		if !found {
			continue
		}
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			return "", 0, false, false
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			return "", 0, false, false
		}
		return parts[0], n, len(parts) > 2 && parts[2] == "load", true
	}
	return "", 0, false, false
}

// runLoop runs the loop and prints an NTLOOP line per iteration; a
// lockup stops it where the watchdog panics.
func runLoop(tool string, iterations int, load bool) {
	mk, ok := loopTools[tool]
	if !ok {
		emit("NTERROR", map[string]string{"loop": tool, "error": "unknown loop tool"})
		return
	}
	var stop atomic.Bool
	if load {
		for cpu := 0; cpu < 2; cpu++ {
			go churn(cpu, &stop)
		}
	}
	for i := 1; i <= iterations; i++ {
		start := time.Now()
		c := mk()
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := output(c, 5*time.Minute)
		if err != nil {
			emit("NTERROR", map[string]any{"loop": tool, "iteration": i, "error": err.Error(), "stderr": stderr.String()})
			break
		}
		line := map[string]any{"tool": tool, "iteration": i, "ms": time.Since(start).Milliseconds()}
		if i == 1 { // what the tool says it attached, once
			line["stdout"], line["stderr"] = clip(string(out)), clip(stderr.String())
		}
		emit("NTLOOP", line)
	}
	stop.Store(true)
}

// churn keeps one CPU going through the scheduler, the page-fault path
// and its mmap_lock: the code the patched tracepoints sit in.
func churn(cpu int, stop *atomic.Bool) {
	runtime.LockOSThread()
	if err := pin(cpu); err != nil {
		emit("NTERROR", map[string]string{"churn": fmt.Sprint(cpu), "error": err.Error()})
		return
	}
	for !stop.Load() {
		if m, err := unix.Mmap(-1, 0, 16*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
			for off := 0; off < len(m); off += page {
				m[off] = 1
			}
			unix.Munmap(m)
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 200_000}, nil)
	}
}

func clip(s string) string {
	if len(s) > 4096 {
		return s[:4096] + "..."
	}
	return s
}
