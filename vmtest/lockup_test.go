package vmtest

// TestAttachLoop is the experiment of LOCKUP.md, not part of make vmtest:
// boot a guest again and again while one tool attaches and detaches its
// probes in a loop, with the soft-lockup watchdog set to panic, and count
// the boots that lock up. Run it as, for example,
//
//	go test ./vmtest -run TestAttachLoop -v -vm -timeout 3h \
//	    -loop.tool probes -loop.accel tcg -loop.boots 10 -loop.iterations 30 -loop.out /tmp/lockup
//
// and compare tools (numatrace's probes or attach against bpftrace's) and
// accelerators (tcg, tcg,thread=single, kvm).

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

var (
	loopTool       = flag.String("loop.tool", "", "TestAttachLoop: what each iteration runs in the guest (probes, attach, bpftrace, bpftrace-tp, bpftrace-fn)")
	loopKernel     = flag.String("loop.kernel", "6.1", "TestAttachLoop: the matrix kernel to boot")
	loopAccel      = flag.String("loop.accel", "tcg", "TestAttachLoop: QEMU accelerator (tcg is multi-threaded)")
	loopBoots      = flag.Int("loop.boots", 10, "TestAttachLoop: guests to boot")
	loopIterations = flag.Int("loop.iterations", 30, "TestAttachLoop: attach/detach cycles in each guest")
	loopLoad       = flag.Bool("loop.load", false, "TestAttachLoop: keep both CPUs faulting and switching during the loop")
	loopOut        = flag.String("loop.out", "", "TestAttachLoop: directory for each boot's console log")
)

// lockupSigns are the console lines of a kernel that stopped making progress.
var lockupSigns = regexp.MustCompile(`soft lockup|hard LOCKUP|rcu_sched self-detected stall|rcu: INFO: rcu_sched detected stalls|Kernel panic|BUG: |Oops`)

func TestAttachLoop(t *testing.T) {
	requireVM(t)
	testutil.OptIn(t, *loopTool != "", "the lockup experiment runs with -loop.tool (see LOCKUP.md)")
	var k Kernel
	for _, m := range Matrix {
		if m.Name == *loopKernel {
			k = m
		}
	}
	if k.Name == "" {
		t.Fatalf("no kernel %q in the matrix", *loopKernel)
	}
	nt, guest := binaries(t)
	ex, err := Cache{Dir: cacheDir()}.Extract(k)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	node := 1024
	if strings.HasPrefix(*loopTool, "bpftrace") {
		if extra, err = withLibraries("/usr/bin/bpftrace"); err != nil {
			t.Fatal(err)
		}
		node = 1536 // bpftrace and LLVM unpacked in the initramfs take 300 MiB
	}
	initrd := filepath.Join(t.TempDir(), "initrd.gz")
	if err := Initramfs(initrd, guest, nt, ex.Brd, extra...); err != nil {
		t.Fatal(err)
	}
	loop := fmt.Sprintf("nt.loop=%s:%d", *loopTool, *loopIterations)
	if *loopLoad {
		loop += ":load"
	}
	args := []string{loop, "loglevel=5", "softlockup_panic=1", "softlockup_all_cpu_backtrace=1", "nmi_watchdog=0"}
	if *loopOut != "" {
		os.MkdirAll(*loopOut, 0o755)
	}
	locked, hung, done := 0, 0, 0
	for b := 1; b <= *loopBoots; b++ {
		start := time.Now()
		var live *os.File
		var w io.Writer // a nil *os.File in it would not be a nil Writer
		if *loopOut != "" {
			name := fmt.Sprintf("%s-%s-%s-%02d.log", k.Name, *loopTool, strings.ReplaceAll(*loopAccel, ",", "_"), b)
			if live, err = os.Create(filepath.Join(*loopOut, name)); err != nil {
				t.Fatal(err)
			}
			w = live
		}
		g := Guest{Console: w, Kernel: k, Vmlinuz: ex.Vmlinuz, Initrd: initrd, Limit: time.Duration(*loopIterations)*20*time.Second + 2*time.Minute,
			Args: args, Accel: *loopAccel, NodeMiB: node}
		lines, console, err := g.Boot(context.Background())
		iters := 0
		for _, l := range lines {
			if l.Kind == "NTLOOP" {
				iters++
			}
		}
		done += iters
		sign := lockupSigns.FindString(console)
		if sign != "" {
			locked++
		}
		t.Logf("boot %d: %d of %d iterations in %s; %v; lockup sign: %q", b, iters, *loopIterations,
			time.Since(start).Round(time.Second), err, sign)
		if live != nil {
			live.Close()
		}
		if sign == "" && (err != nil || iters != *loopIterations) {
			if strings.Contains(console, "== the vCPUs when the deadline passed") {
				hung++ // so stuck that the guest's watchdog never ran
			} else {
				t.Errorf("boot %d failed without a lockup sign: %v\n%s", b, err, tail(console, 3000))
			}
		}
	}
	t.Logf("SUMMARY kernel %s tool %s accel %s load %v: of %d boots, %d locked up (the kernel said so) and %d hung silently; %d attach/detach cycles completed",
		k.Name, *loopTool, *loopAccel, *loopLoad, *loopBoots, locked, hung, done)
}

// withLibraries is path and every shared library it loads, as ldd finds them.
func withLibraries(path string) ([]string, error) {
	out, err := exec.Command("ldd", path).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", path, err)
	}
	files := []string{path}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	return files, nil
}
