package perfetto

import (
	"fmt"

	"github.com/numatrace/numatrace/internal/stall"
)

// sliceArgs are a stall's details, shown when the slice is selected. The
// keys and their presence per cause are those of the NDJSON stall line
// (output.StallLine) without what the track already says: time, duration,
// pid, tid, comm and cause. Pointers keep a legitimate zero (order 0,
// node 0) in the output.
type sliceArgs struct {
	CPU       uint32  `json:"cpu"`
	Order     *int32  `json:"order,omitempty"`
	GFP       string  `json:"gfp,omitempty"`
	Pages     *uint64 `json:"pages,omitempty"`
	Node      *int32  `json:"node,omitempty"`
	CgroupID  *uint64 `json:"cgroup_id,omitempty"`
	SoftLimit bool    `json:"softlimit,omitempty"`
	Priority  string  `json:"priority,omitempty"` // compaction: its priority (Event.Mode)
	Status    string  `json:"status,omitempty"`
	Pass      uint32  `json:"pass,omitempty"`
	AttemptNs uint64  `json:"attempt_ns,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	Mode      string  `json:"mode,omitempty"`
	Move      string  `json:"move,omitempty"` // move, swap, or stick (a move that failed)
	SrcCPU    *int32  `json:"src_cpu,omitempty"`
	DstCPU    *int32  `json:"dst_cpu,omitempty"`
	SrcNode   *int32  `json:"src_node,omitempty"`
	DstNode   *int32  `json:"dst_node,omitempty"`
	OtherTID  uint32  `json:"other_tid,omitempty"`
	Write     *bool   `json:"write,omitempty"`
	Acquired  *bool   `json:"acquired,omitempty"`
	Nested    bool    `json:"nested,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func stallArgs(ev *stall.Event) sliceArgs {
	a := sliceArgs{CPU: ev.CPU, Nested: ev.Nested}
	switch ev.Cause {
	case stall.DirectReclaim, stall.MemcgReclaim, stall.NodeReclaim:
		a.Order, a.GFP, a.Pages = ptr(ev.Order), fmt.Sprintf("%#x", ev.GFP), ptr(ev.Pages)
		if ev.Cause == stall.NodeReclaim {
			a.Node = ptr(ev.Node)
		}
		if ev.Cause == stall.MemcgReclaim {
			a.CgroupID = ptr(ev.CgroupID)
			a.SoftLimit = ev.SoftLimit
		}
	case stall.Compaction:
		a.Order, a.GFP = ptr(ev.Order), fmt.Sprintf("%#x", ev.GFP)
		a.Priority, a.Status = ev.Mode, ev.Status
		a.Pass, a.AttemptNs = ev.Pass, ev.AttemptNs
	case stall.NUMAMigration:
		a.Pages, a.Reason, a.Mode = ptr(ev.Pages), ev.Reason, ev.Mode
	case stall.NUMATaskMove:
		a.Move = "move"
		switch {
		case ev.Swap:
			a.Move = "swap"
		case ev.Stick:
			a.Move = "stick"
		}
		a.SrcCPU, a.DstCPU = ptr(ev.SrcCPU), ptr(ev.DstCPU)
		a.SrcNode, a.DstNode = ptr(ev.Node), ptr(ev.DstNode)
		a.OtherTID = ev.OtherTID
	case stall.MmapLock:
		a.Write, a.Acquired = ptr(ev.Write), ptr(ev.Acquired)
	}
	return a
}
