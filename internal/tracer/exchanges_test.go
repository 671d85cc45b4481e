//go:build linux

package tracer

import (
	"slices"
	"testing"
)

// The per-write samples of a connection become one sample per exchange:
// a later write of the same response replaces the held one, the next
// exchange's first write hands it on, a quiet one goes on once ripe, a
// write after its exchange went on is counted, and the end hands on all.
func TestExchangesOneSamplePerExchange(t *testing.T) {
	x := newExchanges()
	var out []exchangeSample
	emit := func(s exchangeSample) { out = append(out, s) }
	const ms = 1_000_000
	w := func(conn, start, end uint64) {
		x.add(conn, exchangeSample{endNs: end, latNs: end - start, tid: 1}, emit)
	}

	w(1, 100*ms, 101*ms)
	w(1, 100*ms, 103*ms) // the same response's second write
	w(2, 100*ms, 102*ms)
	if len(out) != 0 {
		t.Fatalf("handed on %d before any exchange was whole", len(out))
	}
	w(1, 110*ms, 111*ms) // conn 1's next request: its first exchange was whole
	if len(out) != 1 || out[0].endNs != 103*ms || out[0].latNs != 3*ms {
		t.Fatalf("after conn 1's next exchange: %+v, want its first, to the second write", out)
	}
	x.ripe(102*ms+exchangeHoldNs-1, emit)
	if len(out) != 1 {
		t.Fatalf("conn 2 handed on before its hold ran out: %+v", out)
	}
	x.ripe(111*ms+exchangeHoldNs, emit) // both quiet long enough now
	if len(out) != 3 {
		t.Fatalf("%d handed on after the hold, want 3", len(out))
	}
	w(2, 100*ms, 200*ms) // a late write of an exchange already handed on
	if got := x.lateWrites.Load(); got != 1 || len(out) != 3 || len(x.held) != 0 {
		t.Fatalf("late write: %d counted, %d out, %d held; want 1, 3, 0", got, len(out), len(x.held))
	}
	w(3, 300*ms, 301*ms)
	x.all(emit)
	if len(out) != 4 || out[3].endNs != 301*ms || len(x.held) != 0 {
		t.Fatalf("at the end: %+v held %d", out, len(x.held))
	}
	// Long-quiet connections are forgotten, once a second.
	x.ripe(20_000*ms, emit)
	if len(x.done) != 0 {
		t.Errorf("%d connections remembered after 20 s", len(x.done))
	}
}

// A LAT_PLAIN record carries no totals: they are those of its
// connection's record before, held or handed on, and a connection's
// first record's are zero.
func TestPlainRecordsTakeTheTotalsBefore(t *testing.T) {
	x := newExchanges()
	var out []exchangeSample
	emit := func(s exchangeSample) { out = append(out, s) }
	full := func(conn, start, end, total uint64) {
		s := exchangeSample{endNs: end, latNs: end - start, tid: 1}
		s.totals[0] = total
		x.add(conn, s, emit)
	}
	plain := func(conn, start, end uint64) {
		x.add(conn, exchangeSample{endNs: end, latNs: end - start, tid: 1, totalsSame: true}, emit)
	}
	const ms = 1_000_000
	plain(1, 10*ms, 11*ms) // the connection's first: nothing before it
	full(1, 20*ms, 21*ms, 7)
	plain(1, 20*ms, 22*ms) // the same response's second write, while held
	plain(1, 30*ms, 31*ms) // the next exchange, after the held one went on
	x.all(emit)
	plain(1, 40*ms, 41*ms) // after all went on: the last handed on
	x.all(emit)
	var got []uint64
	for _, s := range out {
		got = append(got, s.totals[0])
		if s.totalsSame {
			t.Errorf("exchange ending %d still marked totalsSame", s.endNs)
		}
	}
	if want := []uint64{0, 7, 7, 7}; !slices.Equal(got, want) {
		t.Errorf("totals %v, want %v", got, want)
	}
}
