//go:build linux

package tracer

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

// program returns a loaded program by name, so tests can drive a handler
// with BPF_PROG_TEST_RUN.
func (t *Tracer) program(name string) *ebpf.Program {
	for _, c := range t.colls {
		if p, ok := c.Programs[name]; ok {
			return p
		}
	}
	return nil
}

// lockedThread pins the test goroutine to its OS thread and returns its tid.
func lockedThread(t *testing.T) uint32 {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	return uint32(unix.Gettid())
}

// realtime runs the calling thread, locked by lockedThread, at a
// real-time priority until the test ends: a test whose BPF programs
// compare the gaps between its own calls (compaction's 10 ms attempt gap)
// must not be preempted between them by a loaded machine.
func realtime(t *testing.T) {
	t.Helper()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
		t.Fatalf("SCHED_FIFO: %v", err)
	}
	t.Cleanup(func() {
		unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	})
}

// hashFallback makes openForThread keep open stalls in the pendings hash,
// as on kernels without task storage (TestHandlersOnHashFallback).
var hashFallback bool

// openForThread loads every probe, tracing only tid.
func openForThread(t *testing.T, tid uint32, topo *topology.Topology) *Tracer {
	return openForThreadCfg(t, tid, topo, false)
}

// openForThreadCfg can also leave out the migrations iterator, as on a
// kernel that cannot load it.
func openForThreadCfg(t *testing.T, tid uint32, topo *topology.Topology, noIter bool) *Tracer {
	t.Helper()
	testutil.RequireRoot(t)
	if topo == nil {
		var err error
		if topo, err = topology.Read("/sys"); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := Open(Config{Filter: FilterTID, TID: tid, Topology: topo, noMigrIter: noIter, noTaskStorage: hashFallback})
	if err != nil {
		t.Fatalf("open tracer: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tr
}

// run drives one raw_tp program on the calling thread with these arguments.
func run(t *testing.T, tr *Tracer, prog string, args ...uint64) {
	t.Helper()
	p := tr.program(prog)
	if p == nil {
		t.Fatalf("program %s not loaded", prog)
	}
	if len(args) == 0 {
		args = []uint64{0}
	}
	if _, err := p.Run(&ebpf.RunOptions{Context: args}); err != nil {
		t.Fatalf("test-run %s: %v", prog, err)
	}
}

// drain reads every record available within wait.
func drain(t *testing.T, tr *Tracer, wait time.Duration) []stall.Event {
	t.Helper()
	rd, err := tr.Reader()
	if err != nil {
		t.Fatal(err)
	}
	var out []stall.Event
	rd.SetDeadline(time.Now().Add(wait))
	var rec ringbuf.Record
	for {
		err := rd.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		ev, err := tr.decode(rec.RawSample)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		out = append(out, ev)
	}
}

func only(t *testing.T, evs []stall.Event, c stall.Cause) []stall.Event {
	t.Helper()
	var out []stall.Event
	for _, e := range evs {
		if e.Kind == stall.KindStall && e.Cause == c {
			out = append(out, e)
		}
	}
	return out
}

func threadHist(t *testing.T, tr *Tracer, tid uint32, c stall.Cause) *stall.Hist {
	t.Helper()
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	th := snap.Threads[tid]
	if th == nil || th.Hists[c] == nil {
		return &stall.Hist{}
	}
	return th.Hists[c]
}

// enumValue reads a kernel enum constant from BTF.
func enumValue(t *testing.T, enum, name string) uint64 {
	t.Helper()
	spec, err := loadKernelBTF("")
	if err != nil {
		t.Fatal(err)
	}
	for v, n := range enumNames(spec, enum, "") {
		if n == strings.ToLower(name) {
			return uint64(v)
		}
	}
	t.Fatalf("enum %s has no %s", enum, name)
	return 0
}

// loadVariant loads a program variant written for another kernel's
// signature against the tracer's maps, so its argument handling can be
// test-run here: raw_tp programs may read fewer arguments than a
// tracepoint has.
func loadVariant(t *testing.T, tr *Tracer, obj string, prog string) *ebpf.Program {
	t.Helper()
	specs, err := objectSpecs()
	if err != nil {
		t.Fatal(err)
	}
	spec := specs[obj]
	if err := tr.configure(spec); err != nil {
		t.Fatal(err)
	}
	sub := spec.Copy()
	ps, ok := spec.Programs[prog]
	if !ok {
		t.Fatalf("no program %s", prog)
	}
	sub.Programs = map[string]*ebpf.ProgramSpec{prog: ps.Copy()}
	coll, err := ebpf.NewCollectionWithOptions(sub, ebpf.CollectionOptions{MapReplacements: tr.shared})
	if err != nil {
		t.Fatalf("load %s: %v", prog, err)
	}
	t.Cleanup(coll.Close)
	return coll.Programs[prog]
}

func runProg(t *testing.T, p *ebpf.Program, args ...uint64) {
	t.Helper()
	if _, err := p.Run(&ebpf.RunOptions{Context: args}); err != nil {
		t.Fatalf("test-run: %v", err)
	}
}

// monotonicNs is CLOCK_MONOTONIC, the clock of the events' timestamps.
func monotonicNs() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return uint64(ts.Nano())
}
