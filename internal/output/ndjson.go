// Package output renders events, windows and summaries as NDJSON or as a
// readable text report. It only formats; it never talks to the kernel.
package output

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// NDJSON writes one JSON object per line.
type NDJSON struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewNDJSON writes to w. Call Flush to push buffered lines out.
func NewNDJSON(w io.Writer) *NDJSON {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &NDJSON{w: bw, enc: json.NewEncoder(bw)}
}

// Flush writes buffered lines.
func (n *NDJSON) Flush() error { return n.w.Flush() }

// stallLine is one {"type":"stall"} line: where and when, then the
// cause's details, flattened.
type stallLine struct {
	Type  string `json:"type"`
	TsNs  uint64 `json:"ts_ns"`
	PID   uint32 `json:"pid"`
	TID   uint32 `json:"tid"`
	Comm  string `json:"comm"`
	Cause string `json:"cause"`
	DurNs uint64 `json:"dur_ns"`
	StallDetails
}

// StallDetails are a stall's details beyond who, when and how long. Each
// cause sets only the fields it has; the pointers keep a legitimate zero
// (order 0, node 0) in the output. The NDJSON stream and the Perfetto
// export both use them.
type StallDetails struct {
	CPU       uint32  `json:"cpu"`
	Order     *int32  `json:"order,omitempty"`
	GFP       string  `json:"gfp,omitempty"`
	Pages     *uint64 `json:"pages,omitempty"`
	Node      *int32  `json:"node,omitempty"`
	CgroupID  *uint64 `json:"cgroup_id,omitempty"`
	SoftLimit bool    `json:"softlimit,omitempty"`
	Priority  string  `json:"priority,omitempty"`
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

// Details builds the cause-specific details of one stall event.
func Details(ev *stall.Event) StallDetails {
	d := StallDetails{CPU: ev.CPU, Nested: ev.Nested}
	switch ev.Cause {
	case stall.DirectReclaim, stall.MemcgReclaim, stall.NodeReclaim:
		d.Order, d.GFP, d.Pages = ptr(ev.Order), fmt.Sprintf("%#x", ev.GFP), ptr(ev.Pages)
		if ev.Cause == stall.NodeReclaim {
			d.Node = ptr(ev.Node)
		}
		if ev.Cause == stall.MemcgReclaim {
			d.CgroupID = ptr(ev.CgroupID)
			d.SoftLimit = ev.SoftLimit
		}
	case stall.Compaction:
		d.Order, d.GFP = ptr(ev.Order), fmt.Sprintf("%#x", ev.GFP)
		d.Priority, d.Status = ev.Mode, ev.Status
		d.Pass, d.AttemptNs = ev.Pass, ev.AttemptNs
	case stall.NUMAMigration:
		d.Pages, d.Reason, d.Mode = ptr(ev.Pages), ev.Reason, ev.Mode
	case stall.NUMATaskMove:
		d.Move = "move"
		switch {
		case ev.Swap:
			d.Move = "swap"
		case ev.Stick:
			d.Move = "stick"
		}
		d.SrcCPU, d.DstCPU = ptr(ev.SrcCPU), ptr(ev.DstCPU)
		d.SrcNode, d.DstNode = ptr(ev.Node), ptr(ev.DstNode)
		d.OtherTID = ev.OtherTID
	case stall.MmapLock:
		d.Write, d.Acquired = ptr(ev.Write), ptr(ev.Acquired)
	}
	return d
}

// StallLine builds the JSON object for one stall event.
func StallLine(ev *stall.Event) any {
	return stallLine{Type: "stall", TsNs: ev.TsNs, PID: ev.PID, TID: ev.TID, Comm: ev.Comm,
		Cause: ev.Cause.String(), DurNs: ev.DurNs, StallDetails: Details(ev)}
}

// Stall writes one {"type":"stall"} line.
func (n *NDJSON) Stall(ev *stall.Event) error { return n.enc.Encode(StallLine(ev)) }

type windowThread struct {
	PID     uint32            `json:"pid"`
	TID     uint32            `json:"tid"`
	Comm    string            `json:"comm"`
	StallNs uint64            `json:"stall_ns"`
	Stalls  map[string]uint64 `json:"stalls"` // cause → ns
}

type windowLine struct {
	Type       string                          `json:"type"`
	Index      uint64                          `json:"index"`
	StartNs    uint64                          `json:"start_ns"`
	EndNs      uint64                          `json:"end_ns"`
	Partial    bool                            `json:"partial,omitempty"`
	Latency    *latency.Stats                  `json:"latency,omitempty"`
	StallNs    uint64                          `json:"stall_ns"`
	Stalls     map[string]aggregate.CauseTotal `json:"stalls"`
	LostEvents uint64                          `json:"lost_events"`
	Threads    []windowThread                  `json:"threads"`
}

// WindowThreads is how many threads a window line lists, worst first.
const WindowThreads = 20

// WindowLine builds the JSON object for one window.
func WindowLine(w *aggregate.Window) any {
	l := windowLine{Type: "window", Index: w.Index, StartNs: w.StartNs, EndNs: w.EndNs, Partial: w.Partial, Latency: w.Latency,
		Stalls: map[string]aggregate.CauseTotal{}, LostEvents: w.LostEvents, Threads: []windowThread{}}
	for c, t := range w.Causes {
		if t.Count == 0 {
			continue
		}
		l.Stalls[stall.Cause(c).String()] = t
		l.StallNs += t.TotalNs
	}
	for _, t := range w.TopThreads(WindowThreads) {
		wt := windowThread{PID: t.PID, TID: t.TID, Comm: t.Comm, StallNs: t.TotalNs, Stalls: map[string]uint64{}}
		for c, ct := range t.ByCause {
			if ct.Count > 0 {
				wt.Stalls[stall.Cause(c).String()] = ct.TotalNs
			}
		}
		l.Threads = append(l.Threads, wt)
	}
	return l
}

// Window writes one {"type":"window"} line.
func (n *NDJSON) Window(w *aggregate.Window) error { return n.enc.Encode(WindowLine(w)) }

// Summary writes the final {"type":"summary"} line.
func (n *NDJSON) Summary(r *Report) error {
	if err := n.enc.Encode(r.summaryLine()); err != nil {
		return err
	}
	return n.Flush()
}
