// Package exchange turns the request timers' records into one sample per
// request: the socket timer's per-write records paired into one per
// request/response exchange, each counted from when it was due where
// its connection is paced (pacing.go). It knows nothing of BPF: the
// tracer decodes its ring buffers into Records, and the latency source
// assembles them (on the goroutine that reads the ring), so this is
// tested on any OS.
package exchange

import (
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// Record is one lat_sample record of a request timer, decoded: a call
// of a timed function as it returned (Conn 0: whole as it is), or a
// socket's exchange as it stood after one write of its response.
type Record struct {
	EndNs, LatNs uint64 // CLOCK_MONOTONIC at its end, and how long it took
	TID          uint32 // the thread it ended on
	// Stall is its stall time by cause, where it ended on the thread it
	// began on; nil where not known.
	Stall *stall.RequestStall
	// Conn is the connection the exchange was on; 0 for a timed call.
	Conn uint64
	// Totals are the serving thread's stall totals at EndNs (by cause,
	// then the freeze), where Stall is known: pacing.go reads the gap
	// between a connection's exchanges from them.
	Totals [stall.NumCauses + 1]uint64
	// TotalsSame: the record carried no totals (LAT_PLAIN) because they
	// were those of the connection's record before; Add fills them in.
	TotalsSame bool
	// Pipelined: more of the request arrived after the server read it
	// and before it wrote, so the exchange carries more than one request.
	Pipelined bool
}

// StartNs is when the request began: its first byte's arrival, or the
// call's entry.
func (r Record) StartNs() uint64 { return r.EndNs - r.LatNs }

// Sample is the request as the engine files it.
func (r Record) Sample() latency.Sample {
	return latency.Sample{TsNs: r.EndNs, LatencyNs: r.LatNs, TID: r.TID, Stall: r.Stall}
}
