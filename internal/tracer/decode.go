//go:build linux

package tracer

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/numatrace/numatrace/internal/stall"
)

// Decoder turns raw ring-buffer records into stall.Events. Enum values
// (migrate reasons, compaction results) are named from the kernel that
// produced them, since their numbering changes between kernels.
type Decoder struct {
	reasons  map[int64]string
	throttle map[int64]string // enum vmscan_throttle_state
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
		d.throttle = enumNames(spec, "vmscan_throttle_state", "VMSCAN_THROTTLE_")
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
	if r.Kind > uint32(typesEventKindKIND_WAIT) {
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
	if ev.Cause == stall.Compaction || ev.Cause == stall.DirtyThrottle {
		ev.AttemptNs = r.TotalNs
	}
	if ev.Cause == stall.DirtyThrottle {
		ev.Limit = r.Limit
	}
	flags := typesEventFlag(r.Flags)
	ev.SoftLimit = flags&typesEventFlagFLAG_SOFTLIMIT != 0
	ev.Write = flags&typesEventFlagFLAG_WRITE != 0
	ev.Acquired = flags&typesEventFlagFLAG_SUCCESS != 0
	ev.Swap = flags&typesEventFlagFLAG_SWAP != 0
	ev.Stick = flags&typesEventFlagFLAG_STICK != 0
	ev.GroupDead = flags&typesEventFlagFLAG_GROUP_DEAD != 0
	ev.Nested = flags&typesEventFlagFLAG_NESTED != 0
	if ev.Kind == stall.KindWait {
		ev.Reason = waitParts[min(uint32(r.Reason), uint32(len(waitParts)-1))].String()
	}
	if ev.Kind == stall.KindStall {
		switch ev.Cause {
		case stall.NUMAMigration:
			ev.Reason = name(d.reasons, r.Reason)
			ev.Mode = name(d.modes, r.Mode)
		case stall.Compaction:
			ev.Status = name(d.results, r.Status)
			ev.Mode = name(d.priority, r.Mode)
		case stall.ReclaimThrottle:
			ev.Reason = name(d.throttle, r.Reason)
		case stall.MemstallWait:
			ev.Reason = stall.MemstallReason(r.Reason)
		}
	}
	return ev, nil
}

// waitParts are the budget's parts by enum wait_part: what a KIND_WAIT
// waited for.
var waitParts = [...]stall.Part{typesWaitPartWAIT_DISK: stall.PartDiskIO, typesWaitPartWAIT_OTHER: stall.PartOtherWait}

// The histogram slots must agree; bpf2go generated typesHist from the C
// header. The causes are checked at load (checkCauses), against the
// descriptors in internal/stall.
var _ = [1]struct{}{}[stall.HistSlots-len(typesHist{}.Slots)]

// checkCauses compares enum cause in the BPF objects' BTF with the causes
// internal/stall describes: the same names at the same numbers, and
// CAUSE_MAX equal to their count. A mismatch would file every stall under
// the wrong cause, so loading stops.
func checkCauses(spec *btf.Spec) error {
	var enum *btf.Enum
	if err := spec.TypeByName("cause", &enum); err != nil {
		return fmt.Errorf("enum cause missing from the BPF object: %w", err)
	}
	return checkCauseEnum(enum)
}

func checkCauseEnum(enum *btf.Enum) error {
	seen := 0
	for _, v := range enum.Values {
		name, ok := strings.CutPrefix(v.Name, "CAUSE_")
		if !ok {
			return fmt.Errorf("enum cause: %s lacks the CAUSE_ prefix", v.Name)
		}
		if name == "MAX" {
			if v.Value != uint64(stall.NumCauses) {
				return fmt.Errorf("CAUSE_MAX is %d in bpf/numatrace.h, internal/stall has %d causes", v.Value, stall.NumCauses)
			}
			continue
		}
		c := stall.Cause(v.Value)
		if v.Value >= uint64(stall.NumCauses) || strings.ToUpper(c.String()) != name {
			return fmt.Errorf("%s is %d in bpf/numatrace.h, but internal/stall's cause %d is %q", v.Name, v.Value, v.Value, c)
		}
		seen++
	}
	if seen != int(stall.NumCauses) {
		return fmt.Errorf("bpf/numatrace.h names %d causes, internal/stall %d", seen, stall.NumCauses)
	}
	return nil
}
