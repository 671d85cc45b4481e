package exchange

import (
	"sync/atomic"

	"github.com/numatrace/numatrace/internal/latency"
)

// HoldNs is how long a connection's exchange is held after its latest
// write before it is handed on as whole (its home is latency's, which
// words the late writes it counts). Held exchanges are released at the
// timer's next drained call (the tracer's reader makes one at least
// every 100 ms), which keeps them well inside the engine's Grace.
const HoldNs = latency.ExchangeHoldNs

// released is the exchange a connection handed on last: a later write of
// it is told apart from the next exchange by its start.
type released struct{ startNs, endNs uint64 }

// Assembler turns the socket timer's per-write records into one record
// per exchange: the BPF side emits the exchange so far at each write of
// a response (bpf/sockreq.bpf.c), since only user space can wait to see
// whether another write follows. Each connection's exchanges are then
// timed from when they were due where it is paced (pacing.go). Used by
// one goroutine (the one that reads the timer); Counts may be read from
// any.
type Assembler struct {
	// held is by connection: the latest write's record. A Record is too
	// big for a map to hold in place (over 128 bytes): each one stored
	// would be an allocation, so they are reused (spare).
	held       map[uint64]*Record
	spare      []*Record
	done       map[uint64]released // by connection: the last handed on
	paces      map[uint64]*pace    // by connection: its schedule (pacing.go)
	pipelined  atomic.Uint64
	lateWrites atomic.Uint64
	dueWaits   atomic.Uint64
	sweptAt    uint64
}

// NewAssembler is an Assembler with no connection seen.
func NewAssembler() *Assembler {
	return &Assembler{held: map[uint64]*Record{}, done: map[uint64]released{}, paces: map[uint64]*pace{}}
}

// Counts are what an Assembler timed other than as the server saw each
// request: for the source's Skipped.
type Counts struct {
	// Pipelined is how many records carried pipelined requests, each
	// exchange of them timed as one.
	Pipelined uint64
	// LateWrites is how many writes of a response came after its
	// exchange had been handed on: it was timed to an earlier one.
	LateWrites uint64
	// DueWaits is how many exchanges on paced connections were counted
	// from when they were due rather than from their arrival: sent late
	// because the exchange before them was frozen (pacing.go).
	DueWaits uint64
}

// Counts are the counts so far.
func (a *Assembler) Counts() Counts {
	return Counts{Pipelined: a.pipelined.Load(), LateWrites: a.lateWrites.Load(), DueWaits: a.dueWaits.Load()}
}

// Assemble runs a timer (its Run: each record to record, drained each
// time what it read so far may go on) until it returns, handing each
// whole exchange to emit, and a record of no connection as it is; then
// hands on what it still holds, as whole as it will be seen. drained
// (if not nil) follows every batch of emits; now is CLOCK_MONOTONIC.
func (a *Assembler) Assemble(run func(record func(Record), drained func()), now func() uint64, emit func(Record), drained func()) {
	ripe := func() {
		a.Ripe(now(), emit)
		if drained != nil {
			drained()
		}
	}
	run(func(r Record) { a.Add(r, emit) }, ripe)
	a.All(emit) // the timer closed: what is held is as whole as it will be
	ripe()
}

// Add takes the exchange of r.Conn as it stood after a write. A record
// of the same connection and start replaces the held one; one with
// another start means the held exchange was whole: it goes to emit. A
// record of no connection goes to emit as it is.
func (a *Assembler) Add(r Record, emit func(Record)) {
	if r.Pipelined {
		a.pipelined.Add(1)
	}
	if r.Conn == 0 {
		emit(r)
		return
	}
	conn := r.Conn
	h := a.held[conn]
	if r.TotalsSame {
		switch p := a.paces[conn]; {
		case h != nil:
			r.Totals = h.Totals
		case p != nil:
			r.Totals = p.prev.Totals
		}
		r.TotalsSame = false
	}
	if h != nil {
		if h.StartNs() != r.StartNs() {
			a.handOn(conn, *h, emit)
		}
		*h = r
		return
	}
	if d, ok := a.done[conn]; ok && d.startNs == r.StartNs() {
		a.lateWrites.Add(1) // its exchange went on already, timed to an earlier write
		if p := a.paces[conn]; p != nil {
			p.prev.Totals = r.Totals // the connection's latest record, for the next LAT_PLAIN one
		}
		return
	}
	if n := len(a.spare); n > 0 {
		h, a.spare = a.spare[n-1], a.spare[:n-1]
	} else {
		h = new(Record)
	}
	*h = r
	a.held[conn] = h
}

// release hands on the exchange conn holds, and keeps its record for reuse.
func (a *Assembler) release(conn uint64, h *Record, emit func(Record)) {
	delete(a.held, conn)
	a.handOn(conn, *h, emit)
	a.spare = append(a.spare, h)
}

// handOn emits r, the whole of conn's exchange, counted from when it was
// due where the connection is paced.
func (a *Assembler) handOn(conn uint64, r Record, emit func(Record)) {
	a.done[conn] = released{r.StartNs(), r.EndNs}
	p := a.paces[conn]
	if p == nil {
		p = &pace{}
		a.paces[conn] = p
	}
	if wait, inherited := p.dueWait(r); wait > 0 {
		a.dueWaits.Add(1)
		r = r.withWait(wait, inherited)
	}
	emit(r)
}

// Ripe hands on the exchanges no write has extended for HoldNs by nowNs,
// and forgets, once a second, the connections whose last exchange went
// on long ago (closed ones, mostly).
func (a *Assembler) Ripe(nowNs uint64, emit func(Record)) {
	for conn, h := range a.held {
		if h.EndNs+HoldNs <= nowNs {
			a.release(conn, h, emit)
		}
	}
	if nowNs-a.sweptAt < 1e9 {
		return
	}
	a.sweptAt = nowNs
	for conn, d := range a.done {
		if d.endNs+10e9 < nowNs {
			delete(a.done, conn)
			delete(a.paces, conn)
		}
	}
}

// All hands on every held exchange: the run ended, so each is as whole
// as it will be seen.
func (a *Assembler) All(emit func(Record)) {
	for conn, h := range a.held {
		a.release(conn, h, emit)
	}
}
