//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Feature is an optional kernel facility numatrace checked for.
type Feature struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

// probeFeatures checks fentry/fexit and kprobes, which give exact function
// boundaries on kernels that allow them. numatrace's stall boundaries come
// from tracepoints, which every supported kernel has; these results say
// which finer hooks the kernel would allow.
func probeFeatures(kspec *btf.Spec) []Feature {
	return []Feature{probeFexit(kspec), probeKprobe(), probeDelayAcct()}
}

// probeDelayAcct says whether the kernel keeps delay accounting, which
// splits a request's disk I/O wait from its other waits.
func probeDelayAcct() Feature {
	f := Feature{Name: "delayacct"}
	b, err := os.ReadFile("/proc/sys/kernel/task_delayacct")
	switch {
	case err != nil:
		f.Detail = fmt.Sprintf("no delay accounting (%s): a request's disk I/O wait is not split from its other waits", short(err))
	case strings.TrimSpace(string(b)) == "1":
		f.Available = true
		f.Detail = "kernel.task_delayacct is on: a request's disk I/O wait is split from its other waits"
	default:
		f.Available = true
		f.Detail = "kernel.task_delayacct is off: a run that times requests switches it on for its duration, and sets it back"
	}
	return f
}

func trivial(typ ebpf.ProgramType, attach ebpf.AttachType, to string) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Type:         typ,
		AttachType:   attach,
		AttachTo:     to,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	}
}

const featureTarget = "try_to_compact_pages"

func probeFexit(kspec *btf.Spec) Feature {
	f := Feature{Name: "fexit"}
	prog, err := ebpf.NewProgramWithOptions(trivial(ebpf.Tracing, ebpf.AttachTraceFExit, featureTarget),
		ebpf.ProgramOptions{KernelTypes: kspec})
	if err != nil {
		f.Detail = fmt.Sprintf("fexit/%s does not load (%s); stall boundaries come from tracepoints", featureTarget, short(err))
		return f
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceFExit})
	if err != nil {
		f.Detail = fmt.Sprintf("fexit/%s loads but does not attach (%s)", featureTarget, short(err))
		return f
	}
	l.Close()
	f.Available = true
	f.Detail = "fexit attaches; tracepoints are still used so results match every kernel"
	return f
}

func probeKprobe() Feature {
	f := Feature{Name: "kprobe"}
	if _, err := os.Stat("/sys/bus/event_source/devices/kprobe"); err != nil {
		// Without the kprobe PMU the only route left is tracefs kprobe_events,
		// which also needs CONFIG_KPROBES.
		f.Detail = "the kernel has no kprobe PMU (CONFIG_KPROBES is off); stall boundaries come from tracepoints"
		return f
	}
	prog, err := ebpf.NewProgram(trivial(ebpf.Kprobe, ebpf.AttachNone, ""))
	if err != nil {
		f.Detail = fmt.Sprintf("kprobe programs do not load (%s)", short(err))
		return f
	}
	defer prog.Close()
	l, err := link.Kprobe(featureTarget, prog, nil)
	if err != nil {
		f.Detail = fmt.Sprintf("kprobe on %s does not attach (%s); stall boundaries come from tracepoints", featureTarget, short(err))
		return f
	}
	l.Close()
	f.Available = true
	f.Detail = "kprobes attach; tracepoints are still used so results match every kernel"
	return f
}

func short(err error) string {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return "verifier rejected it"
	}
	switch {
	case errors.Is(err, unix.EPERM):
		return "EPERM"
	case errors.Is(err, unix.ENOENT):
		return "ENOENT"
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, ebpf.ErrNotSupported):
		return "not supported"
	}
	return err.Error()
}
