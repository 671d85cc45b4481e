package symbolize

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/stall"
)

// Kernel symbolizes kernel addresses from a kallsyms file.
type Kernel struct {
	syms []kernelSym // sorted by addr
}

type kernelSym struct {
	addr   uint64
	name   string
	module string // stall.KernelModule or "[modname]"
}

// LoadKernel reads a file in /proc/kallsyms format and keeps its text
// symbols.
func LoadKernel(path string) (*Kernel, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open kallsyms: %w", err)
	}
	defer f.Close()
	k, err := parseKallsyms(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return k, nil
}

func parseKallsyms(r io.Reader) (*Kernel, error) {
	var syms []kernelSym
	lines, nonZero := 0, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		sym, ok := parseKallsymsLine(sc.Text())
		if !ok {
			continue
		}
		lines++
		if sym.addr == 0 {
			continue
		}
		nonZero = true
		syms = append(syms, sym)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if lines == 0 {
		return nil, errors.New("no text symbols")
	}
	if !nonZero {
		return nil, errors.New("every address is 0: kernel.kptr_restrict hides them from this user (run as root, or set kernel.kptr_restrict=0)")
	}
	// Stable, so that of aliases at one address the first listed wins.
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	kept := syms[:1]
	for _, s := range syms[1:] {
		if s.addr != kept[len(kept)-1].addr {
			kept = append(kept, s)
		}
	}
	return &Kernel{syms: kept}, nil
}

// parseKallsymsLine reads "ffffffff81000000 T _stext" or
// "ffffffffc0a01000 t foo\t[ext4]"; ok is false for lines that are not
// text symbols.
func parseKallsymsLine(line string) (kernelSym, bool) {
	fields := strings.Fields(line)
	if len(fields) < 3 || len(fields[1]) != 1 {
		return kernelSym{}, false
	}
	switch fields[1][0] {
	case 't', 'T', 'w', 'W':
	default:
		return kernelSym{}, false
	}
	addr, err := strconv.ParseUint(fields[0], 16, 64)
	if err != nil {
		return kernelSym{}, false
	}
	module := stall.KernelModule
	if len(fields) > 3 && strings.HasPrefix(fields[3], "[") {
		module = fields[3]
	}
	return kernelSym{addr: addr, name: fields[2], module: module}, true
}

// Frames symbolizes a kernel stack, innermost first, from the frame
// that called into tracing: a stack taken in a BPF program starts in the
// program and the tracepoint's machinery, which say nothing of why the
// thread was there.
func (k *Kernel) Frames(addrs []uint64) []stall.Frame {
	frames := make([]stall.Frame, 0, len(addrs))
	for _, addr := range addrs {
		frames = append(frames, k.frame(addr))
	}
	return TrimTracing(frames)
}

func (k *Kernel) frame(addr uint64) stall.Frame {
	f := stall.Frame{Addr: addr, Module: stall.KernelModule}
	i := sort.Search(len(k.syms), func(i int) bool { return k.syms[i].addr > addr }) - 1
	if i < 0 {
		return f
	}
	f.Func = k.syms[i].name
	f.Module = k.syms[i].module
	return f
}

// KernelFrames are addresses without names, for when kallsyms could not
// be read.
func KernelFrames(addrs []uint64) []stall.Frame {
	frames := make([]stall.Frame, 0, len(addrs))
	for _, addr := range addrs {
		frames = append(frames, stall.Frame{Addr: addr, Module: stall.KernelModule})
	}
	return frames
}

// tracingFrames is how deep into a kernel stack the tracing machinery
// is looked for: the helper, the program, the tracepoint's runner and
// its stub take a handful of frames.
const tracingFrames = 12

// TrimTracing drops the innermost frames up to the last one that belongs
// to BPF or the tracepoint that ran it (bpf_get_stack, bpf_prog_*,
// bpf_trace_run*, __bpf_trace_*, __traceiter_*, a trampoline): whatever
// lies inside the last of them, a JIT-ed program without a name
// included, is tracing's own.
func TrimTracing(frames []stall.Frame) []stall.Frame {
	cut := -1
	for i := 0; i < len(frames) && i < tracingFrames; i++ {
		if isTracingFrame(frames[i]) {
			cut = i
		}
	}
	return frames[cut+1:]
}

func isTracingFrame(f stall.Frame) bool {
	if f.Module == "[bpf]" {
		return true
	}
	for _, p := range []string{"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_trampoline_",
		"__bpf_prog_enter", "bpf_get_stack", "__bpf_get_stack", "bpf_get_stackid"} {
		if strings.HasPrefix(f.Func, p) {
			return true
		}
	}
	return false
}

// Range is the text of the kernel function name: its address and the
// next symbol's, which ends it. ok is false when the kernel has no such
// function (or only as a module's).
func (k *Kernel) Range(name string) (start, end uint64, ok bool) {
	for i, s := range k.syms {
		if s.name != name || s.module != stall.KernelModule {
			continue
		}
		if i+1 == len(k.syms) {
			return 0, 0, false
		}
		return s.addr, k.syms[i+1].addr, true
	}
	return 0, 0, false
}
