//go:build linux

package tracer

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// haveTaskStorage reports whether the raw tracepoint programs may keep
// open stalls in task storage: the map type came in 5.11, and tracing
// programs may use it from 5.12.
func haveTaskStorage() error {
	if err := features.HaveMapType(ebpf.TaskStorage); err != nil {
		return fmt.Errorf("task storage maps: %w", err)
	}
	for _, fn := range []asm.BuiltinFunc{asm.FnTaskStorageGet, asm.FnGetCurrentTaskBtf} {
		if err := features.HaveProgramHelper(ebpf.RawTracepoint, fn); err != nil {
			return fmt.Errorf("%s in raw tracepoint programs: %w", fn, err)
		}
	}
	return nil
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// taskStorageFeature says where this tracer keeps open stalls.
func (t *Tracer) taskStorageFeature() Feature {
	f := Feature{Name: "task_storage", Available: t.taskStorage}
	switch err := haveTaskStorage(); {
	case t.taskStorage:
		f.Detail = "open stalls are kept in each thread's task storage"
	case err != nil:
		f.Detail = fmt.Sprintf("open stalls are kept in a hash map (%v)", err)
	default:
		f.Detail = "open stalls are kept in a hash map (asked for)"
	}
	return f
}

// stackRegsFeature says whether a stall's stacks come with the user
// registers and the words at the stack pointer, from which a leaf that
// keeps no frame pointer gets its caller.
func (t *Tracer) stackRegsFeature() Feature {
	f := Feature{Name: "stack_regs", Available: t.taskStorage && haveTaskRegs()}
	if f.Available {
		f.Detail = "a user stack's leaf gets its caller from the words at the stack pointer (bpf_task_pt_regs)"
	} else {
		f.Detail = "no bpf_task_pt_regs (5.15+) here: a user stack whose leaf keeps no frame pointer misses the leaf's caller"
	}
	return f
}
