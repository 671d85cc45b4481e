package tracer

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/numatrace/numatrace/internal/stall"
)

// Decoder turns raw ring-buffer records into stall.Events. Enum values
// (migrate reasons, compaction results) are named from the kernel that
// produced them, since their numbering changes between kernels.
type Decoder struct {
	reasons  map[int64]string
	modes    map[int64]string
	results  map[int64]string
	priority map[int64]string
}

// NewDecoder reads enum names from the kernel's BTF. A nil spec gives a
// decoder that prints numbers.
func NewDecoder(spec *btf.Spec) *Decoder {
	d := &Decoder{}
	if spec != nil {
		d.reasons = enumNames(spec, "migrate_reason", "MR_")
		d.modes = enumNames(spec, "migrate_mode", "MIGRATE_")
		d.results = enumNames(spec, "compact_result", "COMPACT_")
		d.priority = enumNames(spec, "compact_priority", "COMPACT_PRIO_")
	}
	return d
}

// EventSize is the size of one ring-buffer record.
const EventSize = int(unsafe.Sizeof(typesEvent{}))

func name(m map[int64]string, v int32) string {
	if n, ok := m[int64(v)]; ok {
		return n
	}
	return strconv.Itoa(int(v))
}

func cString(b []int8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	out := make([]byte, n)
	for i := 0; i < n; i++ {
		out[i] = byte(b[i])
	}
	return string(out)
}

// Decode converts one record. It copies everything out of raw, so the
// caller may reuse the buffer.
func (d *Decoder) Decode(raw []byte) (stall.Event, error) {
	if len(raw) < EventSize {
		return stall.Event{}, fmt.Errorf("short record: %d bytes, want %d", len(raw), EventSize)
	}
	r := (*typesEvent)(unsafe.Pointer(&raw[0]))
	if r.Kind > uint32(typesEventKindKIND_EXIT) {
		return stall.Event{}, fmt.Errorf("record with unknown kind %d", r.Kind)
	}
	if r.Cause >= uint32(stall.NumCauses) {
		return stall.Event{}, fmt.Errorf("record with unknown cause %d", r.Cause)
	}
	ev := stall.Event{
		Kind:     stall.Kind(r.Kind),
		Cause:    stall.Cause(r.Cause),
		TsNs:     r.TsNs,
		DurNs:    r.DurNs,
		PID:      r.Pid,
		TID:      r.Tid,
		Comm:     cString(r.Comm[:]),
		CPU:      r.Cpu,
		Order:    r.Order,
		GFP:      r.Gfp,
		Pages:    r.Pages,
		CgroupID: r.CgroupId,
		Node:     r.Node,
		DstNode:  r.DstNode,
		SrcCPU:   r.SrcCpu,
		DstCPU:   r.DstCpu,
		OtherTID: r.OtherTid,
		Pass:     r.Pass,
	}
	if ev.Cause == stall.Compaction {
		ev.AttemptNs = r.TotalNs
	}
	flags := typesEventFlag(r.Flags)
	ev.SoftLimit = flags&typesEventFlagFLAG_SOFTLIMIT != 0
	ev.Write = flags&typesEventFlagFLAG_WRITE != 0
	ev.Acquired = flags&typesEventFlagFLAG_SUCCESS != 0
	ev.Swap = flags&typesEventFlagFLAG_SWAP != 0
	ev.Stick = flags&typesEventFlagFLAG_STICK != 0
	ev.GroupDead = flags&typesEventFlagFLAG_GROUP_DEAD != 0
	ev.Nested = flags&typesEventFlagFLAG_NESTED != 0
	if ev.Kind == stall.KindStall {
		switch ev.Cause {
		case stall.NUMAMigration:
			ev.Reason = name(d.reasons, r.Reason)
			ev.Mode = name(d.modes, r.Mode)
		case stall.Compaction:
			ev.Status = name(d.results, r.Status)
			ev.Mode = name(d.priority, r.Mode)
		}
	}
	return ev, nil
}

// The Go and C enums must agree; bpf2go generated the C side.
var _ = [1]struct{}{}[int(typesCauseCAUSE_MAX)-int(stall.NumCauses)]
var _ = [1]struct{}{}[int(typesCauseCAUSE_MMAP_LOCK)-int(stall.MmapLock)]
var _ = [1]struct{}{}[int(typesCauseCAUSE_COMPACTION)-int(stall.Compaction)]
var _ = [1]struct{}{}[int(typesCauseCAUSE_NUMA_TASK_MOVE)-int(stall.NUMATaskMove)]
var _ = [1]struct{}{}[stall.HistSlots-len(typesHist{}.Slots)]
