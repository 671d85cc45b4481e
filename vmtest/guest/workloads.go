package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	page    = 4096
	ramdisk = "/dev/ram0"
)

// report is what a workload tells the host: who did the work and where
// its memory ended up.
type report struct {
	PID     int              `json:"pid"`
	TIDs    []int            `json:"tids"`
	Pages   map[string]int64 `json:"pages,omitempty"`  // region pages per node after
	Before  map[string]int64 `json:"before,omitempty"` // region pages per node before the move
	CPUNode int              `json:"cpu_node"`         // node of the CPU the work ran on
	Extra   map[string]any   `json:"extra,omitempty"`
}

func runWorkload(name string) error {
	runtime.LockOSThread()
	var r *report
	var err error
	switch name {
	case "misplaced":
		r, err = misplaced()
	case "zonereclaim0", "zonereclaim1":
		r, err = zoneReclaim()
	case "bind":
		if os.Getenv("NT_BOUND") == "" {
			return execBound() // as numactl --cpunodebind=0 --membind=1 does
		}
		r, err = bindMismatch()
	case "directreclaim":
		r, err = directReclaim()
	case "crossnode":
		r, err = crossNode()
	case "mmaplock":
		r, err = mmapLockBoth()
	case "thp":
		r, err = thpCompaction()
	case "memoryhigh":
		r, err = memoryHigh()
	default:
		return fmt.Errorf("unknown scenario %q", name)
	}
	if err != nil {
		return err
	}
	r.PID = os.Getpid()
	return json.NewEncoder(os.Stdout).Encode(r)
}

func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

// region maps anonymous memory in its own VMA (no THP unless asked), so
// its numa_maps line is its own.
func region(size int, huge bool) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	advice := unix.MADV_NOHUGEPAGE
	if huge {
		advice = unix.MADV_HUGEPAGE
	}
	if err := unix.Madvise(b, advice); err != nil {
		return nil, err
	}
	return b, nil
}

func touch(b []byte, stride int) {
	for i := 0; i < len(b); i += stride {
		b[i] = 1
	}
}

// nodePages reads the pages per node of the VMA starting at b.
func nodePages(b []byte) map[string]int64 {
	start := fmt.Sprintf("%x ", uintptr(unsafe.Pointer(&b[0])))
	return numaMapsPages(func(line string) bool { return strings.HasPrefix(line, start) })
}

// numaMapsPages sums, per node, the 4 KiB pages of this process's
// numa_maps lines that keep accepts.
func numaMapsPages(keep func(line string) bool) map[string]int64 {
	data, _ := os.ReadFile("/proc/self/numa_maps")
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if !keep(line) {
			continue
		}
		pageKB := int64(4)
		counts := map[string]int64{}
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			switch {
			case k == "kernelpagesize_kB":
				pageKB = n
			case len(k) > 1 && k[0] == 'N':
				counts[k] = n
			}
		}
		for k, n := range counts {
			out[k] += n * pageKB / 4
		}
	}
	return out
}

// Scenario 1: first touch on node 0, then run on node 1 and keep reading.
func misplaced() (*report, error) {
	if err := pin(0); err != nil {
		return nil, err
	}
	b, err := region(128<<20, false)
	if err != nil {
		return nil, err
	}
	touch(b, page)
	r := &report{TIDs: []int{unix.Gettid()}, Before: nodePages(b), CPUNode: 1}
	if err := pin(1); err != nil {
		return nil, err
	}
	var sum byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for i := 0; i < len(b); i += page {
			sum += b[i]
		}
	}
	r.Pages = nodePages(b)
	r.Extra = map[string]any{"sum": sum}
	return r, nil
}

// openRamdisk holds the ramdisk open until the workload exits: closing a
// block device's last opener drops its page cache.
var openRamdisk *os.File

// readRamdisk fills the page cache from the ramdisk: reading a block
// device caches its blocks, and an untouched brd disk allocates nothing.
func readRamdisk(limit int64) (int64, error) {
	f, err := os.Open(ramdisk)
	if err != nil {
		return 0, err
	}
	openRamdisk = f
	return io.Copy(io.Discard, io.LimitReader(f, limit))
}

func nodeMeminfo(node int, key string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/sys/devices/system/node/node%d/meminfo", node))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == key+":" {
			n, _ := strconv.ParseInt(f[3], 10, 64)
			return n
		}
	}
	return -1
}

// Scenario 2: node 0 full of page cache, then a node-0 thread allocates.
// With zone_reclaim_mode=1 it reclaims on node 0; with 0 it spills to node 1.
func zoneReclaim() (*report, error) {
	if err := pin(0); err != nil {
		return nil, err
	}
	n, err := readRamdisk(900 << 20)
	if err != nil {
		return nil, err
	}
	b, err := region(192<<20, false)
	if err != nil {
		return nil, err
	}
	touch(b, page)
	return &report{TIDs: []int{unix.Gettid()}, Pages: nodePages(b), CPUNode: 0, Extra: map[string]any{
		"read":          n,
		"node0_file_kb": nodeMeminfo(0, "FilePages"),
		"node1_file_kb": nodeMeminfo(1, "FilePages"),
	}}, nil
}

// execBound sets this thread's CPUs to node 0 and its memory policy to
// bind to node 1, then execs the workload again: like numactl
// --cpunodebind=0 --membind=1, every thread of the new image inherits both.
func execBound() error {
	if err := pin(0); err != nil {
		return err
	}
	var nodes unix.CPUSet
	nodes.Set(1)
	if err := unix.SetMemPolicy(unix.MPOL_BIND, &nodes); err != nil {
		return fmt.Errorf("set_mempolicy: %w", err)
	}
	return unix.Exec("/proc/self/exe", os.Args, append(os.Environ(), "NT_BOUND=1"))
}

// BindReady is created once the bind workload's memory is in place;
// doctor examines the process then.
const BindReady = "/tmp/bind-ready"

// Scenario 3: CPU on node 0, memory bound to node 1 (see execBound).
func bindMismatch() (*report, error) {
	b, err := region(64<<20, false)
	if err != nil {
		return nil, err
	}
	touch(b, page)
	var sum byte
	for i := 0; i < len(b); i += 64 {
		sum += b[i]
	}
	// Hold the memory while doctor looks.
	os.WriteFile(BindReady, nil, 0o644)
	time.Sleep(3 * time.Second)
	status, _ := os.ReadFile("/proc/self/status")
	var allowed []string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Cpus_allowed_list") || strings.HasPrefix(l, "Mems_allowed_list") {
			allowed = append(allowed, l)
		}
	}
	return &report{TIDs: []int{unix.Gettid()}, Pages: nodePages(b), CPUNode: 0,
		Extra: map[string]any{"status": allowed, "sum": sum}}, nil
}

// Scenario 4: memory full of page cache, then two threads allocate anon
// memory faster than kswapd frees it. Clean page cache is so cheap to
// reclaim that kswapd keeps up with any one allocator, so the allocators
// run SCHED_FIFO: kswapd gets only the 1% that RT throttling leaves (see rt_starve), and
// the allocators must reclaim for themselves.
func directReclaim() (*report, error) {
	if _, err := readRamdisk(1400 << 20); err != nil {
		return nil, err
	}
	r := &report{CPUNode: -1}
	// Map both regions first: mmap takes the mmap_lock for write, which
	// would wait behind the other thread's populate and serialize them.
	var regions [2][]byte
	for i := range regions {
		b, err := region(640<<20, false)
		if err != nil {
			return nil, err
		}
		regions[i] = b
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for cpu := 0; cpu < 2; cpu++ {
		wg.Add(1)
		go func(cpu int) {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pin(cpu)
			if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
				errs <- fmt.Errorf("sched_setattr: %w", err)
				return
			}
			mu.Lock()
			r.TIDs = append(r.TIDs, unix.Gettid())
			mu.Unlock()
			b := regions[cpu]
			if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err != nil {
				touch(b, page) // kernels before 5.14
			}
		}(cpu)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return r, nil
}

// Scenario 5: fill free memory with 4K pages, free every other one, then
// fault in huge pages with defrag=always. Half that memory is free, but no
// 2 MiB block of it is, so huge-page faults have to compact. Any 2 MiB
// blocks left elsewhere serve the first faults without compaction, so
// rounds repeat (up to three) until the kernel reports a compaction stall.
func thpCompaction() (*report, error) {
	const huge = 2 << 20
	before := vmstat()["compact_stall"]
	var frags, thps [][]byte
	rounds, fragmented := 0, 0
	for rounds < 3 && vmstat()["compact_stall"] == before {
		rounds++
		free := meminfo("MemFree") << 10
		size := int(free-(96<<20)) &^ (page - 1)
		if size < 64<<20 {
			break
		}
		frag, err := region(size, false)
		if err != nil {
			return nil, err
		}
		touch(frag, page)
		for i := 0; i+2*page <= len(frag); i += 2 * page {
			unix.Madvise(frag[i:i+page], unix.MADV_DONTNEED)
		}
		fragmented += size >> 20
		raw, err := region(256<<20+huge, true)
		if err != nil {
			return nil, err
		}
		off := int((huge - uintptr(unsafe.Pointer(&raw[0]))%huge) % huge)
		b := raw[off : off+256<<20]
		touch(b, huge)
		frags, thps = append(frags, frag), append(thps, raw)
	}
	smaps, _ := os.ReadFile("/proc/self/smaps_rollup")
	var anonHuge string
	for _, l := range strings.Split(string(smaps), "\n") {
		if strings.HasPrefix(l, "AnonHugePages") {
			anonHuge = strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return &report{TIDs: []int{unix.Gettid()}, CPUNode: -1,
		Extra: map[string]any{"anon_huge": anonHuge, "fragmented_mib": fragmented, "rounds": rounds,
			"held": len(frags) + len(thps)}}, nil
}

// meminfo reads a /proc/meminfo field in kB.
func meminfo(key string) int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == key+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// CrossReady is created once crossnode's worker reads its memory from
// the other node; the workload gets CrossDone once doctor has looked.
const (
	CrossReady = "/tmp/cross-ready"
	CrossDone  = unix.SIGUSR1
)

// nodeCounter reads one counter of node n's numastat.
func nodeCounter(n int, key string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/sys/devices/system/node/node%d/numastat", n))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return -1
}

// processPages sums every mapping of this process per node, as numastat -p does.
func processPages() map[string]int64 {
	return numaMapsPages(func(string) bool { return true })
}

// Scenario 6: an unbound process (seeds 002, 003): one thread first
// touches the heap on node 0, as a JVM's or a buffer pool's initialisation
// does, and the worker that uses it runs on node 1. NUMA balancing is off,
// so the memory stays where it was first touched.
func crossNode() (*report, error) {
	if err := pin(0); err != nil {
		return nil, err
	}
	b, err := region(96<<20, false)
	if err != nil {
		return nil, err
	}
	local0, other0 := nodeCounter(0, "local_node"), nodeCounter(0, "other_node")
	touch(b, page)
	r := &report{Before: nodePages(b), CPUNode: 1, Extra: map[string]any{
		"node0_local_node_growth": nodeCounter(0, "local_node") - local0,
		"node0_other_node_growth": nodeCounter(0, "other_node") - other0,
	}}
	// The process is unbound: its main thread may run anywhere.
	var all unix.CPUSet
	all.Set(0)
	all.Set(1)
	if err := unix.SchedSetaffinity(0, &all); err != nil {
		return nil, err
	}
	// The worker cannot be preempted (GODEBUG=asyncpreemptoff=1, a loop
	// without calls): a collection would wait for it for ever.
	debug.SetGCPercent(-1)
	done := make(chan os.Signal, 1)
	signal.Notify(done, CrossDone)
	var stop atomic.Bool
	tid := make(chan int)
	var sum byte
	go func() {
		runtime.LockOSThread() // the worker pins itself, as the application's own threads do
		pin(1)
		tid <- unix.Gettid()
		// Nothing but the reads while doctor measures: no system call and
		// no function call, so none of the process's other threads wakes.
		for !stop.Load() {
			for i := 0; i < len(b); i += page {
				sum += b[i]
			}
		}
		close(tid)
	}()
	r.TIDs = []int{<-tid}
	time.Sleep(1500 * time.Millisecond)
	os.WriteFile(CrossReady, nil, 0o644)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		return nil, fmt.Errorf("no %v from the harness within 90 s", CrossDone)
	}
	stop.Store(true)
	<-tid
	r.Extra["process_pages"] = processPages()
	r.Pages = nodePages(b)
	r.Extra["sum"] = sum
	return r, nil
}

// Scenario 7: a thread mapping and unmapping behind a writer that
// keeps rewriting 64 MiB of PTEs. The harness's numatrace times the waits
// the default way (from the lock's slow path where the kernel has it);
// a second numatrace, started here, times them on the mmap_lock
// tracepoints. Both count the thread's waits of 1 ms or more.
func mmapLockBoth() (*report, error) {
	out, err := os.Create("/tmp/tp.json")
	if err != nil {
		return nil, err
	}
	defer out.Close()
	nt, ntErr, err := startTracepointTracer(out)
	if err != nil {
		return nil, err
	}
	region, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	stopWriter := rewritePTEs(region)
	pin(1)
	mapAndUnmap()
	stopWriter()
	time.Sleep(300 * time.Millisecond)
	nt.Process.Signal(unix.SIGINT)
	if err := nt.Wait(); err != nil {
		return nil, fmt.Errorf("numatrace --mmap-lock-via tracepoints: %v: %s", err, ntErr.String())
	}
	reader := unix.Gettid()
	waits := mmapLockWaits("/tmp/tp.json", reader)
	return &report{TIDs: []int{reader}, CPUNode: 1, Extra: map[string]any{"tracepoint_waits": waits}}, nil
}

// startTracepointTracer starts a numatrace on this process that times
// mmap_lock waits on the tracepoints, its NDJSON to out, and waits until
// it is ready.
func startTracepointTracer(out *os.File) (*exec.Cmd, *strings.Builder, error) {
	ready := "/tmp/tp-ready"
	os.Remove(ready)
	nt := exec.Command(numatrace, "attach", "--no-tui", "--json", "--mmap-lock-via", "tracepoints", "--causes", "mmap_lock",
		"--pid", fmt.Sprint(os.Getpid()), "--min-event", "mmap_lock=1ms", "--ready-file", ready, "--duration", "120s")
	nt.Stdout = out
	ntErr := &strings.Builder{}
	nt.Stderr = ntErr
	if err := nt.Start(); err != nil {
		return nil, nil, err
	}
	if err := waitFile(ready, 60*time.Second); err != nil {
		nt.Process.Kill()
		return nil, nil, fmt.Errorf("numatrace --mmap-lock-via tracepoints: %v: %s", err, ntErr.String())
	}
	return nt, ntErr, nil
}

// rewritePTEs starts a thread on CPU 0 that rewrites region's PTEs over
// and over, holding the mmap_lock for writing each time, and returns once
// it wrote them once; the returned stop ends it.
func rewritePTEs(region []byte) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		pin(0)
		for first := true; ; first = false {
			select {
			case <-quit:
				close(done)
				return
			default:
			}
			unix.Mprotect(region, unix.PROT_READ)
			unix.Mprotect(region, unix.PROT_READ|unix.PROT_WRITE)
			if first {
				close(writing)
			}
		}
	}()
	<-writing
	return func() {
		close(quit)
		<-done
	}
}

// mapAndUnmap maps and unmaps a page, each call taking the mmap_lock.
// Enough waits of 1 ms or more to compare (about ten in 600 mmaps with a
// host thread per vCPU). With both vCPUs on one host thread they take
// turns, each for up to about 100 ms, and 600 mmaps can all fit in one
// turn of this vCPU's while the writer's waits: a span of time gives the
// writer turns to hold the lock while this one waits.
func mapAndUnmap() {
	for i, until := 0, time.Now().Add(4*time.Second); i < 600 || time.Now().Before(until); i++ {
		if m, err := unix.Mmap(-1, 0, page, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
			unix.Munmap(m)
		}
	}
}

// mmapLockWaits counts the mmap_lock stalls of thread tid in the NDJSON
// at path.
func mmapLockWaits(path string, tid int) int {
	data, _ := os.ReadFile(path)
	waits := 0
	for _, line := range strings.Split(string(data), "\n") {
		var l struct {
			Type, Cause string
			TID         int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Type == "stall" && l.Cause == "mmap_lock" && l.TID == tid {
			waits++
		}
	}
	return waits
}
