package exchange

import (
	"slices"
	"testing"
)

// The per-write samples of a connection become one sample per exchange:
// a later write of the same response replaces the held one, the next
// exchange's first write hands it on, a quiet one goes on once ripe, a
// write after its exchange went on is counted, and the end hands on all.
func TestExchangesOneSamplePerExchange(t *testing.T) {
	x := NewAssembler()
	var out []Record
	emit := func(s Record) { out = append(out, s) }
	const ms = 1_000_000
	w := func(conn, start, end uint64) {
		x.Add(Record{Conn: conn, EndNs: end, LatNs: end - start, TID: 1}, emit)
	}

	w(1, 100*ms, 101*ms)
	w(1, 100*ms, 103*ms) // the same response's second write
	w(2, 100*ms, 102*ms)
	if len(out) != 0 {
		t.Fatalf("handed on %d before any exchange was whole", len(out))
	}
	w(1, 110*ms, 111*ms) // conn 1's next request: its first exchange was whole
	if len(out) != 1 || out[0].EndNs != 103*ms || out[0].LatNs != 3*ms {
		t.Fatalf("after conn 1's next exchange: %+v, want its first, to the second write", out)
	}
	x.Ripe(102*ms+HoldNs-1, emit)
	if len(out) != 1 {
		t.Fatalf("conn 2 handed on before its hold ran out: %+v", out)
	}
	x.Ripe(111*ms+HoldNs, emit) // both quiet long enough now
	if len(out) != 3 {
		t.Fatalf("%d handed on after the hold, want 3", len(out))
	}
	w(2, 100*ms, 200*ms) // a late write of an exchange already handed on
	if got := x.Counts().LateWrites; got != 1 || len(out) != 3 || len(x.held) != 0 {
		t.Fatalf("late write: %d counted, %d out, %d held; want 1, 3, 0", got, len(out), len(x.held))
	}
	w(3, 300*ms, 301*ms)
	x.All(emit)
	if len(out) != 4 || out[3].EndNs != 301*ms || len(x.held) != 0 {
		t.Fatalf("at the end: %+v held %d", out, len(x.held))
	}
	// Long-quiet connections are forgotten, once a second.
	x.Ripe(20_000*ms, emit)
	if len(x.done) != 0 {
		t.Errorf("%d connections remembered after 20 s", len(x.done))
	}
}

// A LAT_PLAIN record carries no totals: they are those of its
// connection's record before, held or handed on, and a connection's
// first record's are zero.
func TestPlainRecordsTakeTheTotalsBefore(t *testing.T) {
	x := NewAssembler()
	var out []Record
	emit := func(s Record) { out = append(out, s) }
	full := func(conn, start, end, total uint64) {
		s := Record{Conn: conn, EndNs: end, LatNs: end - start, TID: 1}
		s.Totals[0] = total
		x.Add(s, emit)
	}
	plain := func(conn, start, end uint64) {
		x.Add(Record{Conn: conn, EndNs: end, LatNs: end - start, TID: 1, TotalsSame: true}, emit)
	}
	const ms = 1_000_000
	plain(1, 10*ms, 11*ms) // the connection's first: nothing before it
	full(1, 20*ms, 21*ms, 7)
	plain(1, 20*ms, 22*ms) // the same response's second write, while held
	plain(1, 30*ms, 31*ms) // the next exchange, after the held one went on
	x.All(emit)
	plain(1, 40*ms, 41*ms) // after all went on: the last handed on
	x.All(emit)
	var got []uint64
	for _, s := range out {
		got = append(got, s.Totals[0])
		if s.TotalsSame {
			t.Errorf("exchange ending %d still marked totalsSame", s.EndNs)
		}
	}
	if want := []uint64{0, 7, 7, 7}; !slices.Equal(got, want) {
		t.Errorf("totals %v, want %v", got, want)
	}
}

// The reader assembles up to 80,000 records a second: once its
// connections are known, a record costs no allocation (a held record
// stored in the map by value was one per exchange, 160 bytes: 13 MB/s of
// garbage at that rate).
func TestAssemblingAllocatesNothing(t *testing.T) {
	x := NewAssembler()
	emit := func(Record) {}
	const conns, ms = 64, uint64(1_000_000)
	at := 1000 * ms
	exchanges := func() {
		for c := uint64(1); c <= conns; c++ {
			x.Add(Record{Conn: c, EndNs: at + ms/10, LatNs: ms / 10, TID: 1}, emit)
			x.Add(Record{Conn: c, EndNs: at + ms/5, LatNs: ms / 5, TID: 1, TotalsSame: true}, emit)
		}
		x.Ripe(at+ms/5+HoldNs, emit)
		at += 4 * ms
	}
	for range 50 {
		exchanges()
	}
	if n := testing.AllocsPerRun(100, exchanges); n != 0 {
		t.Errorf("%.1f allocations per %d exchanges, want none", n, conns)
	}
}
