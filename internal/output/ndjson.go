// Package output renders events, windows and summaries as NDJSON or as a
// readable text report. It only formats; it never talks to the kernel.
package output

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/wire"
)

// NDJSON writes one JSON object per line.
type NDJSON struct {
	w    *bufio.Writer
	enc  *json.Encoder
	line []byte // reused for stall lines
}

// NewNDJSON writes to w. Call Flush to push buffered lines out.
func NewNDJSON(w io.Writer) *NDJSON {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &NDJSON{w: bw, enc: json.NewEncoder(bw)}
}

// Flush writes buffered lines.
func (n *NDJSON) Flush() error { return n.w.Flush() }

// Details are a stall's details beyond who, when and how long, as its
// cause's descriptor lists them: the NDJSON stream flattens them into the
// stall line, the Perfetto export shows them as a slice's arguments.
type Details struct{ ev *stall.Event }

// DetailsOf returns ev's details.
func DetailsOf(ev *stall.Event) Details { return Details{ev} }

// MarshalJSON writes the details as one object.
func (d Details) MarshalJSON() ([]byte, error) {
	b := d.ev.AppendDetails(nil) // ,"key":value...
	b = appendStack(b, d.ev.Stack)
	if len(b) == 0 {
		return []byte("{}"), nil
	}
	b[0] = '{'
	return append(b, '}'), nil
}

// appendStack appends a stall's stack, when it has one, as
// ,"kernel_stack":[...],"user_stack":[...],"stack_note":"...": the
// frames' names, innermost first.
func appendStack(b []byte, s *stall.Stack) []byte {
	if s == nil {
		return b
	}
	for _, part := range []struct {
		key    string
		frames []stall.Frame
	}{{`,"kernel_stack":[`, s.Kernel}, {`,"user_stack":[`, s.User}} {
		b = append(b, part.key...)
		for i, f := range part.frames {
			if i > 0 {
				b = append(b, ',')
			}
			b = stall.AppendJSONString(b, f.Name())
		}
		b = append(b, ']')
	}
	if s.Note != "" {
		b = append(b, `,"stack_note":`...)
		b = stall.AppendJSONString(b, s.Note)
	}
	return b
}

// AppendStallLine appends one {"type":"stall"} line, without the newline:
// where and when, then the cause's details, flattened.
func AppendStallLine(b []byte, ev *stall.Event) []byte {
	b = append(b, `{"type":"stall","ts_ns":`...)
	b = strconv.AppendUint(b, ev.TsNs, 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(ev.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(ev.TID), 10)
	b = append(b, `,"comm":`...)
	b = stall.AppendJSONString(b, ev.Comm)
	b = append(b, `,"cause":`...)
	b = stall.AppendJSONString(b, ev.Cause.String())
	b = append(b, `,"dur_ns":`...)
	b = strconv.AppendUint(b, ev.DurNs, 10)
	b = ev.AppendDetails(b)
	b = appendStack(b, ev.Stack)
	return append(b, '}')
}

// Stall writes one {"type":"stall"} line; a wait has none (the summary
// line's waits count them).
func (n *NDJSON) Stall(ev *stall.Event) error {
	if ev.Kind != stall.KindStall {
		return nil
	}
	n.line = append(AppendStallLine(n.line[:0], ev), '\n')
	_, err := n.w.Write(n.line)
	return err
}

// causeTotalJSON is one cause's stalls in a window.
type causeTotalJSON struct {
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
	MaxNs   uint64 `json:"max_ns"`
}

type windowThread struct {
	PID     uint32            `json:"pid"`
	TID     uint32            `json:"tid"`
	Comm    string            `json:"comm"`
	StallNs uint64            `json:"stall_ns"`
	Stalls  map[string]uint64 `json:"stalls"` // cause → ns
}

type windowLine struct {
	Type       string                    `json:"type"`
	Index      uint64                    `json:"index"`
	StartNs    uint64                    `json:"start_ns"`
	EndNs      uint64                    `json:"end_ns"`
	Partial    bool                      `json:"partial,omitempty"`
	Latency    *wire.Stats               `json:"latency,omitempty"`
	StallNs    uint64                    `json:"stall_ns"`
	Stalls     map[string]causeTotalJSON `json:"stalls"`
	LostEvents uint64                    `json:"lost_events"`
	Threads    []windowThread            `json:"threads"`
}

// WindowThreads is how many threads a window line lists, worst first.
const WindowThreads = 20

// WindowLine builds the JSON object for one window.
func WindowLine(w *aggregate.Window) any {
	l := windowLine{Type: "window", Index: w.Index, StartNs: w.StartNs, EndNs: w.EndNs, Partial: w.Partial,
		Stalls: map[string]causeTotalJSON{}, LostEvents: w.LostEvents, Threads: []windowThread{}}
	if w.Latency != nil {
		st := wire.NewStats(*w.Latency)
		l.Latency = &st
	}
	for c, t := range w.Causes {
		if t.Count == 0 {
			continue
		}
		l.Stalls[stall.Cause(c).String()] = causeTotalJSON{Count: t.Count, TotalNs: t.TotalNs, MaxNs: t.MaxNs}
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
