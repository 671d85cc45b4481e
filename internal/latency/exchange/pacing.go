package exchange

import (
	"math/bits"
	"slices"

	"github.com/numatrace/numatrace/internal/stall"
)

// A client that sends on a schedule (an open-loop load generator, a
// service's timer, a rate-limited benchmark) counts each request from
// when it was due. While the server is frozen, the requests that came
// due on a connection busy with a frozen exchange wait in the client, not
// in the socket: they reach the server just after the frozen response,
// look fast there, and are slow to the client. pacing estimates that
// wait from the server's side, per connection, as wrk2 and HdrHistogram
// correct a client's own measurement for coordinated omission: a request
// sent right after the previous response, on a connection otherwise on a
// fixed-rate schedule, was due one interval after the one before it. On
// an irregular one (pgbench -R sends at Poisson times; a pool hands a
// connection whichever request waits) when it was due cannot be told
// from the server's side, and nothing is estimated.
const (
	// queuedGapNs: a request arriving within this of the previous
	// response's last write was sent as soon as that response came (or
	// its client just happened to be due then).
	queuedGapNs = 1_000_000
	// A connection is paced when, of its last exchanges (up to
	// paceWindow, pacedMin at least), three in four arrived on their
	// own, not right after a response, and pacedGaps intervals between
	// those are known: within a few requests of attach, since the
	// incident is under way then (with 8 and 6, a freeze in the first
	// 40 ms of a run on a 4 ms schedule went uncounted).
	paceWindow = 16
	pacedMin   = 4
	pacedGaps  = 3
	// gapWindow is how many of the latest gaps between on-time arrivals
	// the schedule is read from: with 16, a Poisson client's looked
	// periodic in 3% of readings; with 32 and the bound on the middle
	// three quarters (schedule), in 1 in 5,000.
	gapWindow = 32
	// maxBacklogNs caps an estimated wait that the server's stalls do not
	// account for: a backlog longer than this is a client that cannot
	// keep up with its schedule, or one that is not on a schedule at all;
	// the connection is no longer taken as paced. A longer wait at least
	// half of which the serving thread was frozen is a freeze's backlog,
	// and counts (a 2 s memcg freeze read a p99 of 0.46 ms, not 2 s).
	maxBacklogNs = 1_000_000_000
	// stalledKept is how many of a connection's latest exchanges that
	// stalled are kept, to charge a wait behind them to their causes.
	stalledKept = 8
	// recentKept is how many of its latest exchanges are kept, to split a
	// wait behind them as their own time was split: the slow one, and the
	// short ones queued behind it that the next request waited for too.
	recentKept  = 8
	resortEvery = 4
)

// pace is one connection's schedule, as its exchanges showed it.
type pace struct {
	prev    Record // the last exchange, as measured
	prevDue uint64 // when it was due (its start, unless estimated)
	onTime  uint16 // the last exchanges, newest in bit 0: 1 arrived on its own
	seen    uint8  // how many of the last paceWindow are in onTime
	gaps    [gapWindow]uint64
	nGaps   int
	nextGap int
	// The schedule's interval and shape, from gaps, refreshed once
	// resortEvery new gaps have come: sorting per request would cost the
	// reader more than the rest of its work on the exchange.
	interval    uint64
	periodic    bool
	newGaps     int
	stalled     [stalledKept]keptExchange
	nextStalled int
	// recent are its latest exchanges, stalled or not: what a wait
	// behind them was (timesIn).
	recent     [recentKept]keptExchange
	nextRecent int
}

// keptExchange is one of a connection's exchanges as it arrived and ended,
// with its breakdown.
type keptExchange struct {
	startNs, endNs uint64
	st             *stall.RequestStall
}

// schedule says whether the connection's requests come on a schedule:
// its interval (the median gap between on-time arrivals), and whether it
// is periodic (the middle half of the gaps within a third of it, the
// middle three quarters within half of it), as a fixed-rate client's
// are, even when its timers fire up to a millisecond late on a 4 ms
// schedule and one in 50 fires 5 ms late, and a Poisson one's (a
// quarter of its gaps under 0.42 of the median, a quarter over 2.0) are
// not, but for one reading in about 5,000 (pgbench -R's, whose shortest
// gaps are queued ones, left out).
func (p *pace) schedule() (intervalNs uint64, periodic, ok bool) {
	n := bits.OnesCount16(p.onTime & (1<<p.seen - 1))
	if int(p.seen) < pacedMin || 4*n < 3*int(p.seen) || p.nGaps < pacedGaps {
		return 0, false, false
	}
	if p.interval == 0 || p.newGaps >= resortEvery {
		var sorted [gapWindow]uint64
		g := sorted[:p.nGaps]
		copy(g, p.gaps[:p.nGaps])
		slices.Sort(g)
		n := len(g)
		mid, lo, hi := g[n/2], g[n/4], g[n*3/4]
		first, last := g[n/8], g[n-1-n/8]
		p.interval, p.newGaps = mid, 0
		p.periodic = 3*lo >= 2*mid && 3*hi <= 4*mid && 2*first >= mid && 2*last <= 3*mid
	}
	return p.interval, p.periodic, true
}

// addGap counts a gap between on-time arrivals.
func (p *pace) addGap(g uint64) {
	p.gaps[p.nextGap] = g
	p.nextGap = (p.nextGap + 1) % gapWindow
	p.nGaps = min(p.nGaps+1, gapWindow)
	p.newGaps++
}

func (p *pace) push(onTime bool) {
	p.onTime <<= 1
	if onTime {
		p.onTime |= 1
	}
	p.seen = min(p.seen+1, paceWindow)
}

// forget drops what the connection's schedule was thought to be.
func (p *pace) forget() {
	p.onTime, p.seen, p.nGaps, p.nextGap, p.interval = 0, 0, 0, 0, 0
}

// dueWait is the pacing estimate for the exchange s that follows the
// connection's last one: how long before it arrived it was due (0 when
// it was not held up), and what stalled in that time. A request was held
// up, on a connection with a periodic schedule, when
//   - it was sent as soon as the reply before it came, later than the
//     schedule had it due: it waited behind that exchange; or
//   - it came late otherwise: held up by at most what of its lateness
//     the exchange before it was still under way (the client sends one
//     at a time), and the serving thread's stalls in the gap after it
//     (the client could not send while the server was frozen: it shares
//     the server's CPU, or waits on another of its connections). The
//     rest of its lateness is the client's own (a timer that fired late,
//     its CPU taken), which no server-side timer sees.
//
// It updates the connection's schedule with s.
func (p *pace) dueWait(s Record) (waitNs uint64, inherited *stall.RequestStall) {
	start, first := s.StartNs(), p.prev.EndNs == 0
	queued := !first && start >= p.prev.EndNs && start-p.prev.EndNs < queuedGapNs
	due := start
	if g, periodic, ok := p.schedule(); ok && periodic && p.prevDue+g < start {
		expected := p.prevDue + g
		switch {
		case queued:
			due = expected
			inherited = p.stallsIn(due, start)
		default:
			busy := p.prev.EndNs - min(max(expected, p.prev.StartNs()), p.prev.EndNs)
			gap := p.idleStalls(s)
			due = max(expected, start-min(busy+gap.FreezeNs, start))
			if due < start {
				inherited = p.stallsIn(due, start)
				add(inherited, scaledTo(gap, start-due-min(busy, start-due)))
			}
		}
	}
	switch {
	case due < start && (start-due <= maxBacklogNs || frozenThrough(inherited, start-due)):
		waitNs = start - due
	case due < start: // a backlog too long to be a freeze
		p.forget()
		due, inherited = start, nil
	case queued:
		p.push(false)
	default:
		if !first && start > p.prev.StartNs() && p.prevDue == p.prev.StartNs() {
			p.addGap(start - p.prev.StartNs())
		}
		p.push(true)
	}
	if inherited != nil {
		inherited.Times, inherited.WaitCoveredNs, inherited.HasTimes = p.timesIn(due, start)
	}
	p.prev, p.prevDue = s, due
	if s.Stall != nil && s.Stall.FreezeNs > 0 {
		p.stalled[p.nextStalled] = keptExchange{start, s.EndNs, s.Stall}
		p.nextStalled = (p.nextStalled + 1) % stalledKept
	}
	p.recent[p.nextRecent] = keptExchange{start, s.EndNs, s.Stall}
	p.nextRecent = (p.nextRecent + 1) % recentKept
	return waitNs, inherited
}

// frozenThrough says whether the server was frozen for at least half of
// a wait of waitNs, by what it inherited.
func frozenThrough(inherited *stall.RequestStall, waitNs uint64) bool {
	return inherited != nil && 2*inherited.FreezeNs >= waitNs
}

// idleStalls is what the serving thread stalled between the connection's
// last exchange and s's arrival: its totals at s's end, less s's own
// stalls, less its totals at the last exchange's end. Nothing when not
// known: another thread served one of them, or did not know its stalls.
func (p *pace) idleStalls(s Record) (gap stall.RequestStall) {
	if s.Stall == nil || p.prev.Stall == nil || s.TID != p.prev.TID {
		return gap
	}
	for c := range gap.ByCause {
		if before := p.prev.Totals[c] + s.Stall.ByCause[c]; s.Totals[c] > before {
			gap.ByCause[c] = s.Totals[c] - before
		}
	}
	if before := p.prev.Totals[stall.NumCauses] + s.Stall.FreezeNs; s.Totals[stall.NumCauses] > before {
		gap.FreezeNs = s.Totals[stall.NumCauses] - before
	}
	return gap
}

// add adds b's stalls to a's.
func add(a, b *stall.RequestStall) {
	for c := range a.ByCause {
		a.ByCause[c] += b.ByCause[c]
	}
	a.FreezeNs += b.FreezeNs
}

// scaledTo is st scaled down so that its freeze is no more than ns.
func scaledTo(st stall.RequestStall, ns uint64) *stall.RequestStall {
	if st.FreezeNs <= ns {
		return &st
	}
	f := float64(ns) / float64(st.FreezeNs)
	for c := range st.ByCause {
		st.ByCause[c] = uint64(f * float64(st.ByCause[c]))
	}
	st.FreezeNs = ns
	return &st
}

// stallsIn is the connection's stall time between fromNs and toNs: each
// kept exchange's breakdown, pro rata of its time inside that span (a
// request waiting behind a frozen one waited for what froze it).
func (p *pace) stallsIn(fromNs, toNs uint64) *stall.RequestStall {
	var out stall.RequestStall
	for _, e := range p.stalled {
		lo, hi := max(e.startNs, fromNs), min(e.endNs, toNs)
		if e.st == nil || hi <= lo || e.endNs <= e.startNs {
			continue
		}
		share := float64(hi-lo) / float64(e.endNs-e.startNs)
		for c := range out.ByCause {
			out.ByCause[c] += uint64(share * float64(e.st.ByCause[c]))
		}
		out.FreezeNs += uint64(share * float64(e.st.FreezeNs))
	}
	return &out
}

// timesIn is the serving thread's task times in the connection's recent
// exchanges between fromNs and toNs, each one's pro rata of its time
// inside that span, as stallsIn charges their stalls: a request held up
// behind an exchange that waited for a CPU waited for that CPU too.
// covered is how much of the span they take. known is false when one of
// them was not split (its thread's counters were not read at both ends).
// What of the span no exchange covers (the client's turnaround, its
// late timer) is in none of the times: the budget says it was held up.
func (p *pace) timesIn(fromNs, toNs uint64) (t stall.TaskTimes, covered uint64, known bool) {
	known = true
	for _, e := range p.recent {
		lo, hi := max(e.startNs, fromNs), min(e.endNs, toNs)
		if hi <= lo || e.endNs <= e.startNs {
			continue
		}
		covered += hi - lo
		if e.st == nil || !e.st.HasTimes {
			known = false
			continue
		}
		share := float64(hi-lo) / float64(e.endNs-e.startNs)
		for i := range t.Ns {
			t.Ns[i] += uint64(share * float64(e.st.Times.Ns[i]))
			t.InStallNs[i] += uint64(share * float64(e.st.Times.InStallNs[i]))
		}
	}
	return t, covered, known
}

// withWait is r counted from when it was due, waitNs before it arrived,
// with what stalled in that wait added to its own breakdown, and the
// serving thread's times in that wait (timesIn) to its own times: where
// both are known, the wait is split as the time it waited behind was.
func (r Record) withWait(waitNs uint64, inherited *stall.RequestStall) Record {
	if r.Stall == nil && inherited.FreezeNs == 0 {
		r.LatNs += waitNs // nothing is known of its own stalls, nor did any come before
		return r
	}
	st := inherited
	st.HasTimes = st.HasTimes && r.Stall != nil && r.Stall.HasTimes
	st.WaitNs = waitNs
	if r.Stall != nil {
		add(st, r.Stall)
		for i := range st.Times.Ns {
			st.Times.Ns[i] += r.Stall.Times.Ns[i]
			st.Times.InStallNs[i] += r.Stall.Times.InStallNs[i]
		}
	}
	if !st.HasTimes {
		st.Times = stall.TaskTimes{}
	}
	r.LatNs += waitNs
	r.Stall = st
	return r
}
