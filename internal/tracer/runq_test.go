//go:build linux

package tracer

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

// runDelay is the kernel's own count of the time tid spent runnable
// waiting for a CPU (/proc/PID/schedstat, second field).
func runDelay(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("schedstat %q", b)
	}
	v, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// pinned runs a shell loop on these CPUs.
func pinned(t *testing.T, cpus, loop string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("taskset", "-c", cpus, "sh", "-c", loop)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

const spin = "while :; do :; done"

// A target shares CPU 0 with a spinner. Preempted (it spins too) or woken
// (it waits for a child each turn), its run-queue wait in numatrace must
// match the kernel's own run_delay over the same second; the spinner, not
// a target, must have none. The target is a --pid target, whose filter is
// a compare. In "moved", each CPU has a spinner of its own and the target
// is moved from one to the other every millisecond, often while it waits:
// a wait begun on one CPU's queue and ended on the other's must count
// whole. Each again with run_delay kept in the hash of kernels without
// task storage.
func TestRunqWaitMatchesSchedstat(t *testing.T) {
	testutil.RequireRoot(t)
	if err := schedInfoOn(nil); err != nil {
		testutil.RequireFeature(t, false, err.Error())
	}
	for _, c := range []struct {
		name, cpus, loop string
		least            uint64 // the set-up is wrong below this much waiting
		hash             bool
	}{
		{"preempted", "0", spin, 200e6, false},
		{"woken", "0", "while :; do /bin/true; done", 5e6, false},
		{"moved", "0", spin, 100e6, false},
		{"preempted/hash", "0", spin, 200e6, true},
		{"woken/hash", "0", "while :; do /bin/true; done", 5e6, true},
		{"moved/hash", "0", spin, 100e6, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			moved := strings.HasPrefix(c.name, "moved")
			testutil.RequireFeature(t, !moved || runtime.NumCPU() >= 2, "needs two CPUs")
			target, other := pinned(t, c.cpus, c.loop), pinned(t, c.cpus, spin)
			if moved {
				pinned(t, "1", spin)
				stop := make(chan struct{})
				done := make(chan struct{})
				defer func() { close(stop); <-done }()
				go func() {
					defer close(done)
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
						var set unix.CPUSet
						set.Set(i % 2)
						unix.SchedSetaffinity(target.Process.Pid, &set)
					}
				}()
			}
			time.Sleep(200 * time.Millisecond)
			pid := target.Process.Pid
			topo, _ := topology.Read("/sys")
			cfg := Config{Filter: FilterPIDs, PIDs: []uint32{uint32(pid)}, Topology: topo, RunqWait: true, noTaskStorage: c.hash}
			if singleTgid(cfg) != uint32(pid) {
				t.Fatalf("a --pid target is not compared directly: %d", singleTgid(cfg))
			}
			tr, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			h0 := *threadHist(t, tr, uint32(pid), stall.RunqWait)
			d0 := runDelay(t, pid)
			time.Sleep(time.Second)
			d1 := runDelay(t, pid)
			h1 := *threadHist(t, tr, uint32(pid), stall.RunqWait)
			kernel, ours := d1-d0, h1.TotalNs-h0.TotalNs
			t.Logf("run_delay %.1f ms, runq_wait %.1f ms in %d waits", float64(kernel)/1e6, float64(ours)/1e6, h1.Count-h0.Count)
			if kernel < c.least {
				t.Fatalf("the target waited only %d ns in a second on a shared CPU: the set-up is wrong", kernel)
			}
			// A wait open at either read is counted by one side only; a
			// time slice here is a few ms.
			diff := float64(ours) - float64(kernel)
			if diff < 0 {
				diff = -diff
			}
			if diff > 0.05*float64(kernel)+10e6 {
				t.Errorf("runq_wait %d ns, the kernel's run_delay %d ns", ours, kernel)
			}
			if h := threadHist(t, tr, uint32(other.Process.Pid), stall.RunqWait); h.Count != 0 {
				t.Errorf("the spinner, not a target, has %d waits", h.Count)
			}
		})
	}
}

func TestSchedInfoOn(t *testing.T) {
	if err := schedInfoFrom([]byte("12345 6789 42\n"), nil); err != nil {
		t.Errorf("a kernel with run-queue times: %v", err)
	}
	if err := schedInfoFrom([]byte("0 0 0\n"), nil); err == nil || !strings.Contains(err.Error(), "delayacct") {
		t.Errorf("all zeros: %v", err)
	}
	if err := schedInfoFrom(nil, os.ErrNotExist); err == nil || !strings.Contains(err.Error(), "CONFIG_SCHED_INFO") {
		t.Errorf("no file: %v", err)
	}
}

// This kernel's BTF leads from a task's cfs_rq to its runqueue; a BTF
// whose cfs_rq lacks the pointer is refused with the reason.
func TestSchedInfoNeedsTheRunqueuePointer(t *testing.T) {
	testutil.RequireRoot(t)
	kspec, err := loadKernelBTF("")
	if err != nil {
		t.Fatal(err)
	}
	if err := schedInfoOn(kspec); err != nil {
		t.Fatalf("this kernel: %v", err)
	}
	var empty btf.Builder
	if _, err := empty.Add(&btf.Struct{Name: "cfs_rq", Members: []btf.Member{{Name: "nr_running", Type: &btf.Int{Name: "int", Size: 4}}}}); err != nil {
		t.Fatal(err)
	}
	raw, err := empty.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := schedInfoOn(spec); err == nil || !strings.Contains(err.Error(), "CONFIG_FAIR_GROUP_SCHED") {
		t.Errorf("a cfs_rq without rq: %v", err)
	}
}
