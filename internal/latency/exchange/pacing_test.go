package exchange

import (
	"math/rand/v2"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

const ms = uint64(1_000_000)

// handOn passes one exchange per call through x, as the reader does, and
// returns what was emitted for it.
func handOn(x *Assembler, conn, start, end uint64, st *stall.RequestStall) Record {
	var out Record
	x.Add(Record{Conn: conn, EndNs: end, LatNs: end - start, TID: 1, Stall: st}, func(Record) {})
	x.All(func(s Record) { out = s })
	return out
}

// onSchedule hands on 20 exchanges of connection 1, 0.2 ms each, on a 4
// ms schedule from at; it returns when the next is due, and whether each
// was counted as its own 0.2 ms.
func onSchedule(x *Assembler, at uint64) (next uint64, own bool) {
	own = true
	for range 20 {
		if got := handOn(x, 1, at, at+ms/5, nil); got.LatNs != ms/5 {
			own = false
		}
		at += 4 * ms
	}
	return at, own
}

// memcgFreeze is an exchange's breakdown: frozen ns in memcg reclaim.
func memcgFreeze(ns uint64) *stall.RequestStall {
	var st stall.RequestStall
	st.ByCause[stall.MemcgReclaim], st.FreezeNs = ns, ns
	return &st
}

// A connection on a 4 ms schedule, frozen 30 ms in memcg reclaim: the
// requests that came due meanwhile were sent as soon as the frozen reply
// came, and are counted from when they were due, charged to what froze
// the one they waited behind, as the client's own clock has them.
func TestPacedConnectionCountsRequestsFromWhenDue(t *testing.T) {
	x := NewAssembler()
	at, own := onSchedule(x, 1000*ms)
	if !own {
		t.Fatalf("an on-time exchange was not counted as its own 0.2 ms")
	}
	handOn(x, 1, at, at+30*ms, memcgFreeze(29*ms))
	// Seven came due at +4 ... +28 ms; each goes right after the reply before it.
	next := at + 30*ms + ms/10
	for k := uint64(1); k <= 7; k++ {
		got := handOn(x, 1, next, next+ms/10, nil)
		if want := next + ms/10 - (at + 4*k*ms); got.LatNs != want {
			t.Errorf("request %d behind the freeze: %v ns, want %v (from when it was due)", k, got.LatNs, want)
		}
		// Its wait lay inside the frozen exchange from its due time on.
		wantMemcg := uint64(float64(30*ms-4*k*ms) / float64(30*ms) * float64(29*ms))
		if got.Stall == nil || diff(int(got.Stall.ByCause[stall.MemcgReclaim]), int(wantMemcg)) > 1000 {
			t.Errorf("request %d: breakdown %+v, want memcg about %d", k, got.Stall, wantMemcg)
		}
		next += ms / 5
	}
	if got := handOn(x, 1, at+32*ms, at+32*ms+ms/5, nil); got.LatNs != ms/5 {
		t.Errorf("back on schedule: %d ns, want its own 0.2 ms", got.LatNs)
	}
	if n := x.Counts().DueWaits; n != 7 {
		t.Errorf("%d counted from when due, want 7", n)
	}
}

// timed is an exchange's breakdown with its thread's times: runq ns
// waiting for a CPU, cpu ns on one, nothing stalled.
func timed(runq, cpu uint64) *stall.RequestStall {
	var st stall.RequestStall
	st.Times.Ns[stall.TimeRunq], st.Times.Ns[stall.TimeCPU], st.HasTimes = runq, cpu, true
	return &st
}

// A connection on a 4 ms schedule whose server waits 30 ms for a CPU (a
// hog on its CPU): the requests held up behind that exchange waited for
// that CPU too. Their budget says so, as the exchange's own does: they
// keep their own times, and their wait is split as the time they waited
// behind (they were all 'not split' before, the bulk of a loaded host's
// slow requests). Behind an exchange whose times were not read, the wait
// cannot be split, and is not, but for what of it lay outside it.
func TestAWaitBehindASlowExchangeIsSplitAsItWas(t *testing.T) {
	x := NewAssembler()
	at, _ := onSchedule(x, 1000*ms)
	handOn(x, 1, at, at+30*ms, timed(29*ms, ms/2))
	next := at + 30*ms + ms/10
	for k := uint64(1); k <= 7; k++ {
		got := handOn(x, 1, next, next+ms/10, timed(0, ms/20))
		if got.Stall == nil || !got.Stall.HasTimes {
			t.Fatalf("request %d behind the wait for a CPU: breakdown %+v, want its times", k, got.Stall)
		}
		b := got.Stall.Budget(got.LatNs)
		if b.Total() != got.LatNs {
			t.Errorf("request %d: budget %v sums to %d ns, want its %d", k, b, b.Total(), got.LatNs)
		}
		wait := 30*ms - 4*k*ms // inside the exchange it waited behind
		wantRunq := uint64(float64(wait) / float64(30*ms) * float64(29*ms))
		if r := b[stall.PartOf(stall.RunqWait)]; diff(int(r), int(wantRunq)) > 1000 {
			t.Errorf("request %d: runq_wait %d ns, want about %d: budget %v", k, r, wantRunq, b)
		}
		if c := b[stall.PartOnCPU]; c < ms/20 {
			t.Errorf("request %d: on_cpu %d ns, want its own 0.05 ms at least: budget %v", k, c, b)
		}
		next += ms / 5
	}

	x = NewAssembler()
	at, _ = onSchedule(x, 1000*ms)
	handOn(x, 1, at, at+30*ms, &stall.RequestStall{}) // its thread's times not read
	next = at + 30*ms + ms/10
	got := handOn(x, 1, next, next+ms/10, timed(0, ms/20))
	if got.Stall == nil || got.Stall.HasTimes {
		t.Fatalf("behind an exchange not split: breakdown %+v, want no times", got.Stall)
	}
	// The 0.1 ms of its wait after that exchange ended is the client's.
	if b := got.Stall.Budget(got.LatNs); b[stall.PartUnsplit] != got.LatNs-ms/10 || b[stall.PartHeldUp] != ms/10 {
		t.Errorf("behind an exchange not split: budget %v, want all of its %d ns but the 0.1 ms outside it not split", b, got.LatNs)
	}
}

// On a 4 ms schedule, an exchange that runs 0.5 ms past when the next
// request was due, and the next sent 1.2 ms after its reply (its client
// was slow to send, not only held up): the 0.5 ms it waited behind the
// exchange is counted, the client's own 1.2 ms is not.
func TestSlightlyLateBehindASlowExchange(t *testing.T) {
	x := NewAssembler()
	at, _ := onSchedule(x, 1000*ms)
	handOn(x, 1, at, at+4*ms+ms/2, nil) // due again at +4 ms; its reply at +4.5 ms
	next := at + 4*ms + ms/2 + 6*ms/5
	if got := handOn(x, 1, next, next+ms/5, nil); got.LatNs != ms/5+ms/2 {
		t.Errorf("the request behind it: %v ns, want its own 0.2 ms and the 0.5 ms it was held up", got.LatNs)
	}
}

// A connection on an irregular schedule (pgbench -R sends at Poisson
// times, a pool hands a connection whichever request waits), frozen 30
// ms: when the requests sent right after the freeze were due cannot be
// told from the server's side (most such arrivals just happen to be due
// then), so they are timed as the server saw them, not from a guessed
// due time one median gap after the one before.
func TestIrregularScheduleIsNotCorrected(t *testing.T) {
	x := NewAssembler()
	at := 1000 * ms
	gaps := []uint64{2, 9, 3, 14, 5, 1, 7, 4} // exponential-like, mean 5.6 ms
	for i := range 40 {
		handOn(x, 1, at, at+ms/5, nil)
		at += gaps[i%len(gaps)] * ms
	}
	handOn(x, 1, at, at+30*ms, memcgFreeze(29*ms))
	next := at + 30*ms + ms/10
	for k := 0; k < 3; k++ {
		if got := handOn(x, 1, next, next+ms/10, nil); got.LatNs != ms/10 {
			t.Errorf("request %d after the freeze: %v ns, want its own 0.1 ms", k, got.LatNs)
		}
		next += ms / 5
	}
	if n := x.Counts().DueWaits; n != 0 {
		t.Errorf("%d counted from when due on an irregular schedule, want none", n)
	}
}

// A client that sends each request as soon as the reply before it comes
// (closed loop: redis-benchmark, pgbench without -R) has no schedule: its
// requests after a slow one are counted from their arrival, as that
// client counts them.
func TestClosedLoopConnectionIsNotCorrected(t *testing.T) {
	x := NewAssembler()
	at := 1000 * ms
	for i := range 200 {
		lat := ms / 5
		if i%50 == 49 {
			lat = 30 * ms
		}
		if got := handOn(x, 1, at, at+lat, nil); got.LatNs != lat {
			t.Fatalf("exchange %d counted %d ns, want %d", i, got.LatNs, lat)
		}
		at += lat + ms/20
	}
	if n := x.Counts().DueWaits; n != 0 {
		t.Errorf("%d counted from when due on a closed-loop connection", n)
	}
}

// A connection whose "backlog" grows past a second is not a freeze but a
// client off its schedule (or none): the estimate stops, and what is
// timed is the server's side again.
func TestEndlessBacklogStopsTheEstimate(t *testing.T) {
	x := NewAssembler()
	at, _ := onSchedule(x, 1000*ms)
	// From here on it sends back to back, 5 ms each: 1 ms a request behind schedule.
	var last Record
	for range 1500 {
		last = handOn(x, 1, at, at+5*ms, nil)
		at += 5*ms + ms/10
	}
	if last.LatNs != 5*ms {
		t.Errorf("after 1.5 k requests behind schedule: %d ns, want the server's own 5 ms", last.LatNs)
	}
	if n := x.Counts().DueWaits; n == 0 || n > 1000 {
		t.Errorf("%d counted from when due; want some, fewer than the backlog cap's", n)
	}
}

// handOnStalled is handOn for an exchange served by thread 1 whose stall
// totals at its end are totals (memcg reclaim only), none inside it.
func handOnStalled(x *Assembler, conn, start, end, totals uint64) Record {
	var out Record
	s := Record{Conn: conn, EndNs: end, LatNs: end - start, TID: 1, Stall: &stall.RequestStall{}}
	s.Totals[stall.MemcgReclaim], s.Totals[stall.NumCauses] = totals, totals
	x.Add(s, func(Record) {})
	x.All(func(s Record) { out = s })
	return out
}

// A fixed-rate client that could not send while the server was frozen
// (it shares the server's CPU): its next request comes 40 ms late after
// an idle gap in which the serving thread stalled 41 ms, and the ones
// due meanwhile follow it back to back. All are counted from when they
// were due, their wait charged to the thread's stall in the gap. On an
// irregular (Poisson) schedule, or after a gap with no stall, a late
// arrival is only a long gap: nothing is added.
func TestLateAfterAFrozenIdleGap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		jitter   func(i int) uint64
		stallNs  uint64
		wantWait uint64
	}{
		{"periodic", func(int) uint64 { return 2 * ms }, 41 * ms, 40 * ms},
		{"periodic, no stall in the gap", func(int) uint64 { return 2 * ms }, 0, 0},
		{"irregular", func(i int) uint64 { return []uint64{0, 1, 3, 6, 12}[i%5] * ms }, 41 * ms, 0},
	} {
		x := NewAssembler()
		at := 1000 * ms
		for i := range 20 {
			handOnStalled(x, 1, at, at+ms/5, 0)
			at += 2*ms + tc.jitter(i)
		}
		// Due at `at`; sent 40 ms late, once the thread's 41 ms stall is over.
		late := at + 40*ms
		got := handOnStalled(x, 1, late, late+ms/5, tc.stallNs)
		if want := ms/5 + tc.wantWait; got.LatNs != want {
			t.Errorf("%s: the late request counted %v ns, want %v", tc.name, got.LatNs, want)
		}
		if tc.wantWait > 0 && (got.Stall == nil || got.Stall.ByCause[stall.MemcgReclaim] != tc.wantWait) {
			t.Errorf("%s: breakdown %+v, want memcg %d (the stall, up to the wait)", tc.name, got.Stall, tc.wantWait)
		}
		if tc.wantWait == 0 {
			continue
		}
		// The next, due 4 ms after it, went as soon as its reply came.
		next := late + ms/5 + ms/10
		if got := handOnStalled(x, 1, next, next+ms/5, tc.stallNs); got.LatNs != next+ms/5-(at+4*ms) {
			t.Errorf("%s: the one behind it counted %v ns, want %v", tc.name, got.LatNs, next+ms/5-(at+4*ms))
		}
	}
}

// A freeze longer than the backlog cap, 2 s of memcg reclaim on a 4 ms
// schedule: the requests that came due during it are counted from when
// they were due, as the client counts them, all the way back to
// schedule (the cap is for backlogs no stall accounts for: in a real
// incident's recording, numatrace read a p99 of 0.46 ms for the window
// whose client p99 was 2.07 s).
func TestFreezeLongerThanTheBacklogCapCounts(t *testing.T) {
	x := NewAssembler()
	at, _ := onSchedule(x, 1000*ms)
	handOn(x, 1, at, at+2000*ms, memcgFreeze(2000*ms))
	next := at + 2000*ms + ms/10
	for k := uint64(1); k <= 499; k++ {
		got := handOn(x, 1, next, next+ms/10, nil)
		if want := next + ms/10 - (at + 4*k*ms); got.LatNs != want {
			t.Fatalf("request %d behind the 2 s freeze: %v ns, want %v (from when it was due)", k, got.LatNs, want)
		}
		if got.Stall == nil || got.Stall.ByCause[stall.MemcgReclaim] == 0 {
			t.Fatalf("request %d behind the freeze: breakdown %+v, want memcg_reclaim", k, got.Stall)
		}
		next += ms / 10
	}
	if n := x.Counts().DueWaits; n != 499 {
		t.Errorf("%d counted from when due, want 499", n)
	}
}

// pgbench -R sends each connection's transactions at Poisson times, one
// at a time. Its gaps between requests that arrived on their own (the
// short ones go right after a reply, and are left out) can look like a
// schedule's for a while: the middle half of 16 of them within a third
// of their median, in 3% of the readings. A freeze in such a stretch
// then added a guessed wait to the requests behind it (in CI: a window's
// p99 read 18.7 ms, pgbench's on the wire 3.1 ms). Over 200,000 such
// requests, a handful may be counted from a guessed due time, not
// hundreds. A fixed-rate client whose timers fire up to 1 ms late, and
// 5 ms late now and then, still has its schedule recognised.
func TestPoissonScheduleIsNotTakenForAFixedRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const requests = 200_000
	// send runs one connection's requests, each due at dueAt(k), sent
	// when due or 50 µs after the reply before it; every 100th is frozen
	// 20 ms. It returns how many were counted from a guessed due time.
	send := func(dueAt func(k int) uint64) uint64 {
		x := NewAssembler()
		prevEnd := uint64(0)
		for k := range requests {
			start := max(dueAt(k), prevEnd+ms/20)
			took := ms / 5
			var st *stall.RequestStall
			if k%100 == 99 {
				took, st = 20*ms, memcgFreeze(20*ms)
			}
			handOn(x, 1, start, start+took, st)
			prevEnd = start + took
		}
		return x.Counts().DueWaits
	}
	due := 1000 * ms
	poisson := send(func(int) uint64 { due += uint64(rng.ExpFloat64() * 5e6); return due })
	if poisson > requests/10_000 {
		t.Errorf("pgbench -R: %d of %d requests counted from a guessed due time, want %d at most", poisson, requests, requests/10_000)
	}
	fixed := send(func(k int) uint64 {
		late := uint64(rng.Float64() * 1e6)
		if rng.IntN(50) == 0 {
			late += 5 * ms
		}
		return 1000*ms + uint64(k)*4*ms + late
	})
	// Each 20 ms freeze on a 4 ms schedule holds up the next four or five.
	if want := uint64(requests / 100 * 4); fixed < want {
		t.Errorf("fixed rate: %d requests counted from when due, want %d or more", fixed, want)
	}
	t.Logf("counted from when due: pgbench -R %d, fixed rate %d, of %d", poisson, fixed, requests)
}

func diff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// A request counted from when it was due keeps its own thread's counters
// for its budget: its wait behind a frozen exchange is that freeze's, and
// the rest of its wait, outside any exchange, it was held up: not time
// that could not be split (the redis incident's budget was 69% unsplit,
// most of its requests due-counted), nor time of its own off a CPU.
func TestADueRequestKeepsItsBudget(t *testing.T) {
	own := &stall.RequestStall{FreezeNs: 2e6, HasTimes: true}
	own.ByCause[stall.MemcgReclaim] = 2e6
	own.Times.Ns[stall.TimeCPU] = 1e6
	// 5 ms of its 6 ms wait were behind an exchange frozen all along.
	inherited := &stall.RequestStall{FreezeNs: 5e6, HasTimes: true, WaitCoveredNs: 5e6}
	inherited.ByCause[stall.MemcgReclaim] = 5e6
	r := Record{EndNs: 20e6, LatNs: 4e6, Stall: own}.withWait(6e6, inherited)
	b := r.Stall.Budget(r.LatNs)
	if !r.Stall.HasTimes || b[stall.PartUnsplit] != 0 || b[stall.PartOf(stall.MemcgReclaim)] != 7e6 ||
		b[stall.PartOnCPU] != 1e6 || b[stall.PartHeldUp] != 1e6 || b[stall.PartOtherWait] != 1e6 || b.Total() != 10e6 {
		t.Errorf("budget %v of a request of %d ns counted from when it was due", b, r.LatNs)
	}
}

// read: of lat, 90% waiting for the disk and 5% on a CPU.
func diskBound(lat uint64) *stall.RequestStall {
	st := &stall.RequestStall{HasTimes: true}
	st.Times.Ns[stall.TimeIO], st.Times.Ns[stall.TimeCPU] = lat*9/10, lat/20
	return st
}

// when it was due lost its own counters too, and was all "not split".
func TestAWaitBehindADiskBoundExchangeIsSplitAsItsTime(t *testing.T) {
	x := NewAssembler()
	at := 1000 * ms
	for range 20 {
		handOn(x, 1, at, at+ms/5, diskBound(ms/5))
		at += 4 * ms
	}
	handOn(x, 1, at, at+30*ms, diskBound(30*ms))
	next := at + 30*ms + ms/10
	for k := uint64(1); k <= 7; k++ {
		got := handOn(x, 1, next, next+ms/10, diskBound(ms/10))
		if want := next + ms/10 - (at + 4*k*ms); got.LatNs != want {
			t.Fatalf("request %d behind the slow exchange: %v ns, want %v (from when it was due)", k, got.LatNs, want)
		}
		b, gaps := got.Stall.Budget(got.LatNs), k*ms/10
		if b[stall.PartUnsplit] > gaps+1000 {
			t.Errorf("request %d: %d ns not split, want the %d ns of gaps between the exchanges it waited behind", k, b[stall.PartUnsplit], gaps)
		}
		if disk := b[stall.PartDiskIO]; disk < (got.LatNs-gaps)*88/100 {
			t.Errorf("request %d: %d of its %d ns waiting for the disk, want 90%% of all but the gaps: %v", k, disk, got.LatNs, b)
		}
		next += ms / 5
	}
	// Behind an exchange whose counters were not read, the wait is not split.
	at = next + 4*ms
	handOn(x, 1, at, at+30*ms, nil)
	next = at + 30*ms + ms/10
	got := handOn(x, 1, next, next+ms/10, diskBound(ms/10))
	if got.LatNs <= ms {
		t.Fatalf("the request behind the unsplit exchange: %d ns, not counted from when it was due", got.LatNs)
	}
	if b := got.Stall.Budget(got.LatNs); b[stall.PartUnsplit] < got.LatNs-ms/10 {
		t.Errorf("behind an exchange not split: %v, want all but its own 0.1 ms not split", b)
	}
}
