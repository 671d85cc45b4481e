package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The three measurements beyond per-run program cost: what tracing costs
// the workload (throughput against nothing attached, bpftrace and perf),
// how big a recording is against perf.data and trace-cmd's, and numatrace's
// memory while it tracks 10,000 threads.

const (
	thrAffinity   = "stress-ng --affinity (migrations)"
	thrSwitch     = "stress-ng --switch (context switches)"
	thrMemcg      = "memcg reclaim reads"
	thrMmapLoop   = "bench/mmaploop (mmap + munmap of 64 KiB, one thread)"
	thrMmapStress = "stress-ng --mmap 2 --mmap-bytes 16M"
	thrFault      = "stress-ng --fault 2"
	thrCompile    = "gcc -O0 of a small file, in a loop"
)

// The last four hit the mmap_lock and the page-fault path, the busiest
// tracepoints numatrace could be on.
var throughputWorkloads = []string{thrAffinity, thrSwitch, thrMemcg, thrMmapLoop, thrMmapStress, thrFault, thrCompile}

// perfEvents are the tracepoints the workloads fire that numatrace and the
// bpftrace script trace too.
var perfEvents = []string{"sched:sched_migrate_task", "vmscan:mm_vmscan_memcg_reclaim_begin", "vmscan:mm_vmscan_memcg_reclaim_end",
	"mmap_lock:mmap_lock_start_locking", "mmap_lock:mmap_lock_acquire_returned"}

type extra struct {
	// throughput[config][workload] per round; config "baseline" is nothing attached.
	throughput map[string]map[string][]float64
	units      map[string]string
	configs    []string

	recSizes  []recSize
	recStalls map[string]uint64

	rssThreads       int
	rssTracked       int
	rssKB, rssPeakKB uint64

	request    requestTimer
	socket     socketTiming
	runq       runqCost
	switchCost switchCost
	stacks     stacksCost
	waits      waitsCost
	storm      *stormResult
}

type recSize struct {
	tool   string
	bytes  int64
	stalls uint64
	why    string // not measured: why
}

// stressNG runs one stressor and returns its bogo ops per second (real time).
func stressNG(ctx context.Context, stressor string, d time.Duration, extra ...string) (float64, error) {
	argv := append([]string{"--" + stressor, "2", "-t", fmt.Sprintf("%ds", int(d.Seconds())), "--metrics-brief"}, extra...)
	cmd := exec.CommandContext(ctx, "stress-ng", argv...)
	cmd.SysProcAttr = childAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("stress-ng --%s: %v: %s", stressor, err, out)
	}
	return parseStressNG(stressor, string(out))
}

// parseStressNG reads the bogo ops per second (real time) that
// --metrics-brief printed.
func parseStressNG(stressor, out string) (float64, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// "stress-ng: metrc: [pid] affinity  341718  2.01  0.35  2.15  170365.11  137109.22"
		if len(f) >= 10 && f[3] == stressor {
			return strconv.ParseFloat(f[8], 64)
		}
	}
	return 0, fmt.Errorf("stress-ng --%s printed no metrics: %s", stressor, out)
}

// startPerf runs perf record system-wide on perfEvents into file.
func startPerf(file string, events []string) (*proc, error) {
	argv := []string{"perf", "record", "-a", "-q", "-o", file}
	for _, e := range events {
		argv = append(argv, "-e", e)
	}
	p, err := startProc("perf", file+".log", nil, argv...)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // perf has no ready signal; a second covers its setup here
	if p.exited() {
		return nil, fmt.Errorf("perf record exited: %v\n%s", p.err, logTail(p.log))
	}
	return p, nil
}

func setBPFStats(on bool) error {
	v := "0\n"
	if on {
		v = "1\n"
	}
	return os.WriteFile(statsPath, []byte(v), 0o644)
}

// measureThroughput runs each workload with nothing attached, numatrace,
// the bpftrace script and perf record, in rotating order over rounds.
// BPF stats are off meanwhile: they would tax the BPF tracers only.
func measureThroughput(ctx context.Context, c *config, w *workloads, ex *extra) error {
	if err := setBPFStats(false); err != nil {
		return err
	}
	defer setBPFStats(true)
	ex.configs = []string{"baseline", "numatrace", "bpftrace", "perf record"}
	ex.throughput = map[string]map[string][]float64{}
	ex.units = map[string]string{thrAffinity: "bogo ops/s", thrSwitch: "bogo ops/s", thrMemcg: "MiB/s",
		thrMmapLoop: "pairs/s", thrMmapStress: "bogo ops/s", thrFault: "bogo ops/s", thrCompile: "compiles/s"}
	src := filepath.Join(c.workdir, "small.c")
	if err := os.WriteFile(src, []byte(smallC), 0o644); err != nil {
		return err
	}
	for round := 0; round < c.overheadRounds; round++ {
		for i := range ex.configs {
			cfg := ex.configs[(i+round)%len(ex.configs)]
			var stop func() error
			switch cfg {
			case "numatrace":
				s, err := startNumatrace(ctx, c, 1000+round)
				if err != nil {
					return err
				}
				stop = s.stop
			case "bpftrace":
				s, err := startBpftrace(ctx, c, 1000+round)
				if err != nil {
					return err
				}
				stop = s.stop
			case "perf record":
				file := filepath.Join(c.workdir, fmt.Sprintf("overhead-%d.perf.data", round))
				p, err := startPerf(file, perfEvents)
				if err != nil {
					return err
				}
				stop = func() error { err := p.stop(syscall.SIGINT, 30*time.Second); os.Remove(file); return err }
			}
			vals, err := throughputRound(ctx, c, w, src)
			if stop != nil {
				if serr := stop(); err == nil {
					err = serr
				}
			}
			if err != nil {
				return fmt.Errorf("throughput round %d, %s: %w", round+1, cfg, err)
			}
			if ex.throughput[cfg] == nil {
				ex.throughput[cfg] = map[string][]float64{}
			}
			for wl, v := range vals {
				ex.throughput[cfg][wl] = append(ex.throughput[cfg][wl], v)
			}
			logf("throughput round %d, %s: affinity %.0f, switch %.0f ops/s, memcg %.0f MiB/s, mmaploop %.0f pairs/s, mmap %.0f, fault %.0f ops/s, %.2f compiles/s",
				round+1, cfg, vals[thrAffinity], vals[thrSwitch], vals[thrMemcg], vals[thrMmapLoop], vals[thrMmapStress], vals[thrFault], vals[thrCompile])
		}
	}
	return nil
}

// smallC is the compile loop's source: small, but enough for gcc to map,
// fault and free memory the way a build does.
const smallC = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct item { char name[32]; int n; };
static int cmp(const void *a, const void *b) { return ((const struct item *)a)->n - ((const struct item *)b)->n; }
int main(int argc, char **argv) {
	struct item v[64];
	for (int i = 0; i < 64; i++) { snprintf(v[i].name, sizeof v[i].name, "item%d", i); v[i].n = (i * 37) % 64; }
	qsort(v, 64, sizeof v[0], cmp);
	for (int i = 0; i < argc && i < 64; i++) puts(strlen(v[i].name) ? v[i].name : argv[0]);
	return 0;
}
`

// throughputRound runs every throughput workload once.
func throughputRound(ctx context.Context, c *config, w *workloads, src string) (map[string]float64, error) {
	vals := map[string]float64{}
	var err error
	if vals[thrAffinity], err = stressNG(ctx, "affinity", c.stressDur); err != nil {
		return nil, err
	}
	if vals[thrSwitch], err = stressNG(ctx, "switch", c.stressDur); err != nil {
		return nil, err
	}
	n, err := w.memcg(ctx)
	if err != nil {
		return nil, err
	}
	vals[thrMemcg] = float64(n.count) * float64(c.fileMiB) / n.seconds
	if n, err = w.tool(ctx, "pairs", c.mmaploop, "-duration", c.stressDur.String()); err != nil {
		return nil, err
	}
	vals[thrMmapLoop] = float64(n.count) / n.seconds
	if vals[thrMmapStress], err = stressNG(ctx, "mmap", c.stressDur, "--mmap-bytes", "16M"); err != nil {
		return nil, err
	}
	if vals[thrFault], err = stressNG(ctx, "fault", c.stressDur); err != nil {
		return nil, err
	}
	start, compiles := time.Now(), 0
	for compiles < 40 || time.Since(start) < c.stressDur { // as long as the others, and 40 at least
		if _, err := runFg(ctx, "gcc", "-O0", "-c", "-o", src+".o", src); err != nil {
			return nil, err
		}
		compiles++
	}
	vals[thrCompile] = float64(compiles) / time.Since(start).Seconds()
	return vals, nil
}

// recordingFiles are where the three recorders write the same workload.
type recordingFiles struct{ ntr, perfData, traceDat string }

// recordedEvents are the tracepoints perf and trace-cmd record.
var recordedEvents = []string{"vmscan:mm_vmscan_memcg_reclaim_begin", "vmscan:mm_vmscan_memcg_reclaim_end"}

// measureRecordingSize records the same memcg workload with numatrace,
// perf record and trace-cmd at once, and counts each file's stalls.
func measureRecordingSize(ctx context.Context, c *config, w *workloads, ex *extra) error {
	dir := c.workdir
	files := recordingFiles{filepath.Join(dir, "size.ntr"), filepath.Join(dir, "size.perf.data"), filepath.Join(dir, "size.trace.dat")}
	ready := filepath.Join(dir, "size-ready")
	nt, err := startProc("numatrace record", filepath.Join(dir, "size-ntr.log"), nil,
		c.numatrace, "record", "-o", files.ntr, "--ready-file", ready, "--duration", "10m")
	if err != nil {
		return err
	}
	defer nt.stop(syscall.SIGKILL, 0)
	if _, err := waitFile(ctx, nt, ready, 10*time.Millisecond); err != nil {
		return err
	}
	pf, err := startPerf(files.perfData, recordedEvents)
	if err != nil {
		return err
	}
	defer pf.stop(syscall.SIGKILL, 0)
	tc, tcWhy, err := startTraceCmd(ctx, files.traceDat)
	if err != nil {
		return err
	}
	if tc != nil {
		defer tc.stop(syscall.SIGKILL, 0)
		time.Sleep(2 * time.Second) // trace-cmd has no ready signal either
	}
	if _, err := w.memcg(ctx); err != nil {
		return err
	}
	if err := stopRecorders(nt, pf, tc); err != nil {
		return err
	}
	sizes, err := recordingSizes(ctx, c, files, tc != nil, tcWhy)
	if err != nil {
		return err
	}
	for _, r := range sizes {
		ex.recSizes = append(ex.recSizes, r)
		logf("recording size: %s %d bytes for %d stalls", r.tool, r.bytes, r.stalls)
	}
	return nil
}

// startTraceCmd starts trace-cmd recording into dat. trace-cmd needs to
// switch ftrace on, which some machines refuse (this VM: EPERM on
// kernel.ftrace_enabled); then it returns no process and why, for its row.
func startTraceCmd(ctx context.Context, dat string) (*proc, string, error) {
	if out, err := runFg(ctx, "trace-cmd", "record", "-q", "-o", dat, "-e", recordedEvents[0], "true"); err != nil {
		return nil, strings.TrimSpace(strings.ReplaceAll(out+" "+err.Error(), "\n", " ")), nil
	}
	os.Remove(dat)
	tc, err := startProc("trace-cmd", dat+".log", nil, "trace-cmd", "record", "-q", "-o", dat, "-e", recordedEvents[0], "-e", recordedEvents[1])
	if err != nil {
		return nil, "", err
	}
	return tc, "", nil
}

// stopRecorders interrupts each recorder that runs and waits for it to
// finish its file.
func stopRecorders(procs ...*proc) error {
	for _, p := range procs {
		if p == nil {
			continue
		}
		if err := p.stop(syscall.SIGINT, 60*time.Second); err != nil {
			return fmt.Errorf("%s: %w\n%s", p.name, err, logTail(p.log))
		}
	}
	return nil
}

// recordingSizes are each file's size and stalls as the file has them: a
// stall is an end event in perf's and trace-cmd's. Without traceCmd its
// row says tcWhy.
func recordingSizes(ctx context.Context, c *config, files recordingFiles, traceCmd bool, tcWhy string) ([]recSize, error) {
	ntStalls, err := reportedStalls(ctx, c, files.ntr)
	if err != nil {
		return nil, err
	}
	perfStalls, err := countLines(ctx, "mm_vmscan_memcg_reclaim_end", "perf", "script", "-i", files.perfData)
	if err != nil {
		return nil, err
	}
	sizes := []recSize{{tool: "numatrace record", bytes: size(files.ntr), stalls: ntStalls}, {tool: "perf record", bytes: size(files.perfData), stalls: perfStalls}}
	if !traceCmd {
		return append(sizes, recSize{tool: "trace-cmd record", why: tcWhy}), nil
	}
	tcStalls, err := countLines(ctx, "mm_vmscan_memcg_reclaim_end", "trace-cmd", "report", "-i", files.traceDat)
	if err != nil {
		return nil, err
	}
	return append(sizes, recSize{tool: "trace-cmd record", bytes: size(files.traceDat), stalls: tcStalls}), nil
}

// reportedStalls is the memcg reclaims in numatrace's report of ntr.
func reportedStalls(ctx context.Context, c *config, ntr string) (uint64, error) {
	out, err := runFg(ctx, c.numatrace, "report", "--json", ntr)
	if err != nil {
		return 0, err
	}
	var sum struct {
		Threads []struct {
			Stalls map[string]struct{ Count uint64 } `json:"stalls"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		return 0, fmt.Errorf("numatrace report: %w", err)
	}
	var ntStalls uint64
	for _, th := range sum.Threads {
		ntStalls += th.Stalls["memcg_reclaim"].Count
	}
	return ntStalls, nil
}

func size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// countLines counts the lines of a command's output that contain s.
func countLines(ctx context.Context, s string, argv ...string) (uint64, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = childAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var n uint64
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return n, nil
}

// measureRSS attaches numatrace system-wide while c.threads threads each
// migrate once, and reads its resident memory while it tracks them and at
// its peak (which includes building the final summary).
func measureRSS(ctx context.Context, c *config, ex *extra) error {
	ready := filepath.Join(c.workdir, "rss-ready")
	summary := filepath.Join(c.workdir, "rss-summary.json")
	out, err := os.Create(summary)
	if err != nil {
		return err
	}
	defer out.Close()
	nt, err := startProc("numatrace", filepath.Join(c.workdir, "rss.log"), out, numatraceArgs(c, ready)...)
	if err != nil {
		return err
	}
	defer nt.stop(syscall.SIGKILL, 0)
	if _, err := waitFile(ctx, nt, ready, 10*time.Millisecond); err != nil {
		return err
	}
	th := exec.CommandContext(ctx, c.threads, "-n", strconv.Itoa(c.rssThreads))
	th.SysProcAttr = childAttr()
	stdin, _ := th.StdinPipe()
	stdout, _ := th.StdoutPipe()
	if err := th.Start(); err != nil {
		return err
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "threads ") {
		th.Process.Kill()
		th.Wait()
		return fmt.Errorf("threads helper printed %q", line)
	}
	time.Sleep(2 * time.Second) // the session's windows close and its maps settle
	ex.rssKB = statusKB(nt.pid(), "VmRSS")
	stdin.Close()
	th.Wait()
	nt.cmd.Process.Signal(syscall.SIGINT)
	for !nt.exited() {
		if v := statusKB(nt.pid(), "VmHWM"); v > ex.rssPeakKB {
			ex.rssPeakKB = v
		}
		time.Sleep(5 * time.Millisecond)
	}
	out.Sync()
	b, _ := os.ReadFile(summary)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var sum struct {
		Threads []json.RawMessage `json:"threads"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		return fmt.Errorf("numatrace summary: %w", err)
	}
	ex.rssTracked = len(sum.Threads)
	ex.rssThreads = c.rssThreads
	logf("RSS: %d threads tracked, VmRSS %d kB, peak %d kB", ex.rssTracked, ex.rssKB, ex.rssPeakKB)
	return nil
}

func statusKB(pid int, key string) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
