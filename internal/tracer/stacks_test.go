//go:build linux

package tracer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

// TestStallStacksAreTakenAndSymbolized drives memcg reclaim's programs
// on this test's own thread with stacks on from 1 ms: the long stall
// carries the thread's stacks as it made the bpf() call that ran the
// program, symbolized (the kernel's without the tracing machinery, the
// user's down to this Go function), and the short one none.
func TestStallStacksAreTakenAndSymbolized(t *testing.T) {
	tid := lockedThread(t)
	testutil.RequireRoot(t)
	topo, err := topology.Read("/sys")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Config{Filter: FilterTID, TID: tid, Topology: topo, StacksMinNs: uint64(time.Millisecond)})
	if err != nil {
		t.Fatalf("open tracer: %v", err)
	}
	t.Cleanup(func() { tr.Close() })

	run(t, tr, "memcg_reclaim_begin", 0, gfpKernel)
	time.Sleep(2 * time.Millisecond)
	run(t, tr, "memcg_reclaim_end", 5)
	run(t, tr, "memcg_reclaim_begin", 0, gfpKernel)
	run(t, tr, "memcg_reclaim_end", 6)

	evs := only(t, drain(t, tr, 300*time.Millisecond), stall.MemcgReclaim)
	if len(evs) != 2 {
		t.Fatalf("%d memcg_reclaim events, want 2", len(evs))
	}
	long, short := evs[0], evs[1]
	if short.DurNs < uint64(time.Millisecond) && short.Stack != nil {
		t.Errorf("a %d ns stall, under --stacks-min, carries a stack", short.DurNs)
	}
	s := long.Stack
	if s == nil {
		t.Fatalf("the %d ns stall carries no stack", long.DurNs)
	}
	var kernel, user []string
	for _, f := range s.Kernel {
		kernel = append(kernel, f.Name())
	}
	for _, f := range s.User {
		user = append(user, f.Name())
	}
	t.Logf("kernel %v\nuser %v\nnote %q", kernel, user, s.Note)
	if !slices.ContainsFunc(kernel, func(n string) bool { return strings.Contains(n, "sys_bpf") }) {
		t.Errorf("kernel stack %v: no bpf() system call in it", kernel)
	}
	for _, n := range kernel {
		if strings.HasPrefix(n, "bpf_prog_") || strings.HasPrefix(n, "bpf_trace_run") || strings.HasPrefix(n, "bpf_get_stack") {
			t.Errorf("kernel stack %v keeps the tracing machinery's frame %s", kernel, n)
		}
	}
	const self = "tracer.TestStallStacksAreTakenAndSymbolized"
	if !slices.ContainsFunc(user, func(n string) bool { return strings.HasSuffix(n, self) }) ||
		!slices.ContainsFunc(user, func(n string) bool { return strings.HasSuffix(n, "ebpf.(*Program).Run") }) {
		t.Errorf("user stack %v: want %s and the ebpf.(*Program).Run it called", user, self)
	}
	if s.Note != "" {
		t.Errorf("a whole Go stack, to runtime.goexit, has a note: %q", s.Note)
	}
	for _, f := range s.User {
		if f.Module == "" || f.Offset == 0 {
			t.Errorf("user frame %s: module %q offset %#x", f.Name(), f.Module, f.Offset)
		}
	}
	// This kernel (5.15+) gives the user registers: numatrace probes says
	// so, and the frameless Syscall6's caller, read at the stack pointer,
	// is in the stack.
	if !hasFeature(tr, "stack_regs", true) || !slices.ContainsFunc(user, func(n string) bool { return strings.HasSuffix(n, "RawSyscall6") }) {
		t.Errorf("stack_regs not available here, or no RawSyscall6 (the leaf's caller) in %v", user)
	}
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if sys := snap.System; sys.StacksTaken != 1 || sys.KernelStacksLost != 0 || sys.UserStacksLost != 0 {
		t.Errorf("stacks taken %d, lost %d kernel %d user; want 1 taken, none lost", sys.StacksTaken, sys.KernelStacksLost, sys.UserStacksLost)
	}
}
