//go:build linux

package tracer

import (
	"sync/atomic"

	"github.com/numatrace/numatrace/internal/stall"
)

// exchangeHoldNs is how long a connection's exchange is held after its
// latest write before it is handed on as whole. A response written in
// several writes is written back to back; a write that comes later than
// this, after the exchange went on, is counted (lateWrites), not timed.
// Held samples are released at the reader's next drain or poll (at most
// PollInterval), which keeps them well inside the engine's Grace.
const exchangeHoldNs = 20_000_000

// exchangeSample is one emitted exchange, as the ring buffer gave it.
type exchangeSample struct {
	endNs, latNs uint64
	tid          uint32
	st           *stall.RequestStall
	// totals are the serving thread's stall totals at endNs (by cause,
	// then the freeze), where st is known: pacing.go's gap between exchanges.
	totals [stall.NumCauses + 1]uint64
	// totalsSame: the record carried no totals (LAT_PLAIN) because they
	// were those of the connection's record before; add fills them in.
	totalsSame bool
}

func (s exchangeSample) startNs() uint64 { return s.endNs - s.latNs }

// released is the exchange a connection handed on last: a later write of
// it is told apart from the next exchange by its start.
type released struct{ startNs, endNs uint64 }

// exchanges turns the socket timer's per-write samples into one sample
// per exchange: the BPF side emits the exchange so far at each write of
// a response (bpf/sockreq.bpf.c), since only user space can wait to see
// whether another write follows. Used by one goroutine (the reader's).
type exchanges struct {
	held       map[uint64]exchangeSample // by connection: the latest write's
	done       map[uint64]released       // by connection: the last handed on
	paces      map[uint64]*pace          // by connection: its schedule (pacing.go)
	lateWrites atomic.Uint64             // read by the source's Skipped
	dueWaits   atomic.Uint64             // exchanges counted from when they were due
	sweptAt    uint64
}

func newExchanges() *exchanges {
	return &exchanges{held: map[uint64]exchangeSample{}, done: map[uint64]released{}, paces: map[uint64]*pace{}}
}

// add takes the exchange of conn as it stood after a write. A sample of
// the same connection and start replaces the held one; one with another
// start means the held exchange was whole: it goes to emit.
func (x *exchanges) add(conn uint64, s exchangeSample, emit func(exchangeSample)) {
	h, holding := x.held[conn]
	if s.totalsSame {
		switch p := x.paces[conn]; {
		case holding:
			s.totals = h.totals
		case p != nil:
			s.totals = p.prev.totals
		}
		s.totalsSame = false
	}
	if holding {
		if h.startNs() != s.startNs() {
			x.release(conn, h, emit)
		}
		x.held[conn] = s
		return
	}
	if d, ok := x.done[conn]; ok && d.startNs == s.startNs() {
		x.lateWrites.Add(1) // its exchange went on already, timed to an earlier write
		if p := x.paces[conn]; p != nil {
			p.prev.totals = s.totals // the connection's latest record, for the next LAT_PLAIN one
		}
		return
	}
	x.held[conn] = s
}

func (x *exchanges) release(conn uint64, s exchangeSample, emit func(exchangeSample)) {
	delete(x.held, conn)
	x.done[conn] = released{s.startNs(), s.endNs}
	p := x.paces[conn]
	if p == nil {
		p = &pace{}
		x.paces[conn] = p
	}
	if wait, inherited := p.dueWait(s); wait > 0 {
		x.dueWaits.Add(1)
		s = s.withWait(wait, inherited)
	}
	emit(s)
}

// ripe hands on the exchanges no write has extended for exchangeHoldNs
// by nowNs, and forgets, once a second, the connections whose last
// exchange went on long ago (closed ones, mostly).
func (x *exchanges) ripe(nowNs uint64, emit func(exchangeSample)) {
	for conn, s := range x.held {
		if s.endNs+exchangeHoldNs <= nowNs {
			x.release(conn, s, emit)
		}
	}
	if nowNs-x.sweptAt < 1e9 {
		return
	}
	x.sweptAt = nowNs
	for conn, d := range x.done {
		if d.endNs+10e9 < nowNs {
			delete(x.done, conn)
			delete(x.paces, conn)
		}
	}
}

// all hands on every held exchange: the run ended, so each is as whole as
// it will be seen.
func (x *exchanges) all(emit func(exchangeSample)) {
	for conn, s := range x.held {
		x.release(conn, s, emit)
	}
}
