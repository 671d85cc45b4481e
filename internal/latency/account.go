package latency

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/prose"
)

// Account is what a run's latency source gave, and what of it was left
// out and why. The engine keeps the counts and a recording carries them
// in its end record; the warnings while running, the text report and the
// JSON summary all take their words from Problems.
type Account struct {
	// StartNs and EndNs are the trace's span, CLOCK_MONOTONIC ns.
	StartNs uint64
	EndNs   uint64
	// Samples are the requests filed under a window that closed; Windows
	// the windows of statistics (a scraped histogram) put to use.
	Samples uint64
	Windows uint64
	// Before and After count the samples from before the trace began and
	// after it ended (or too far ahead of the clock to be held); their
	// times run from OutsideMinNs to OutsideMaxNs.
	Before       uint64
	After        uint64
	OutsideMinNs uint64
	OutsideMaxNs uint64
	// Likely is what clock or unit the samples outside look like, when
	// one fits (Guess).
	Likely string
	// Late counts samples that came after their window had closed;
	// LateWindows, windows' statistics that did.
	Late        uint64
	LateWindows uint64
	// SkippedWindows are windows whose latency the source could not tell
	// (Stats.Skipped): left out of the analysis rather than misread.
	SkippedWindows uint64
	// Skipped is what the source itself skipped, by kind (Source.Skipped).
	Skipped []Skip
}

// Skip is one kind of input a source skipped, and how much of it.
type Skip struct {
	Kind SkipKind
	N    uint64
	// Name is a SkipUnknown kind's name, as the newer recording that
	// carried it wrote it.
	Name string
}

// ExchangeHoldNs is how long a socket's exchange is held after its
// latest write before it is taken as whole (internal/latency/exchange):
// a response's writes come back to back, and a write later than this,
// after the exchange went on, is a late write (SkipLateWrites), not timed.
const ExchangeHoldNs = 20_000_000

// SkipKind is a kind of input a source skipped. The formats write it by
// a key of their own (internal/wire); people read its phrase (String).
type SkipKind uint8

// The kinds of input the sources skip: internal/latency/source counts
// them, skipText words them.
const (
	// SkipUnknown is a kind this numatrace does not know: a newer
	// recording's, kept by its name (Skip.Name).
	SkipUnknown SkipKind = iota
	SkipMalformed
	SkipNoLatency
	SkipScrapes
	SkipResets
	SkipLayouts
	SkipPipelined
	SkipLateWrites
	SkipDueWaits
	NumSkipKinds
)

// skipPhrases say the kinds in a sentence: "more malformed lines are
// counted in the report".
var skipPhrases = [NumSkipKinds]string{
	SkipUnknown:    "readings of an unknown kind",
	SkipMalformed:  "malformed lines",
	SkipNoLatency:  "lines without a latency",
	SkipScrapes:    "failed scrapes",
	SkipResets:     "counter resets",
	SkipLayouts:    "bucket layout changes",
	SkipPipelined:  "pipelined exchanges",
	SkipLateWrites: "late writes of a response",
	SkipDueWaits:   "requests counted from when they were due",
}

// String is the kind in a sentence, for people: "malformed lines".
func (k SkipKind) String() string {
	if k < NumSkipKinds {
		return skipPhrases[k]
	}
	return skipPhrases[SkipUnknown]
}

// Outside is how many samples lay outside the trace.
func (a *Account) Outside() uint64 { return a.Before + a.After }

// Usable reports whether the source gave anything the analysis could use.
func (a *Account) Usable() bool { return a.Samples+a.Windows > 0 }

// outside counts one sample outside the trace, at ts.
func (a *Account) outside(ts uint64, after bool) {
	if a.Outside() == 0 {
		a.OutsideMinNs, a.OutsideMaxNs = ts, ts
	}
	a.OutsideMinNs, a.OutsideMaxNs = min(a.OutsideMinNs, ts), max(a.OutsideMaxNs, ts)
	if after {
		a.After++
	} else {
		a.Before++
	}
}

// window counts one window's statistics taken.
func (a *Account) window(s Stats) {
	if s.Skipped != "" {
		a.SkippedWindows++
	} else {
		a.Windows++
	}
}

// Problem is one thing to tell about a source's input.
type Problem struct {
	Kind ProblemKind
	Text string
}

// ProblemKind is what a Problem is about.
type ProblemKind uint8

// The kinds of Problem.
const (
	ProblemUnusable ProblemKind = iota
	ProblemOutside
	ProblemLate
	ProblemLateWindows
	ProblemSkippedWindows
	ProblemSkipped // what the source itself skipped, one Problem for each kind
)

// Problems says what went wrong with the source's input, most important
// first: that nothing of it was usable, then each kind of input left out.
func (a *Account) Problems() []Problem {
	var out []Problem
	if n := a.Outside(); n > 0 {
		out = append(out, Problem{ProblemOutside, a.outsideText()})
	}
	if a.Late > 0 {
		its, were := "their", "were"
		if a.Late == 1 {
			its, were = "its", "was"
		}
		out = append(out, Problem{ProblemLate, fmt.Sprintf("%s came after %s window had closed and %s left out: the writer lags (does it buffer its output?)",
			prose.Count(a.Late, "latency sample"), its, were)})
	}
	if a.LateWindows > 0 {
		out = append(out, Problem{ProblemLateWindows, fmt.Sprintf("the latency statistics of %s came after the window had closed and were left out (a slow scrape)",
			prose.Count(a.LateWindows, "window"))})
	}
	if a.SkippedWindows > 0 {
		out = append(out, Problem{ProblemSkippedWindows, fmt.Sprintf("%s left out of the analysis rather than misread: the source could not tell their latency (a failed scrape, a counter reset, a change of buckets)",
			prose.Count(a.SkippedWindows, "window"))})
	}
	for _, s := range a.Skipped {
		out = append(out, Problem{ProblemSkipped, skipText(s)})
	}
	if !a.Usable() {
		why := "no latency arrived"
		if len(out) > 0 {
			why = "see below"
		}
		out = append([]Problem{{ProblemUnusable, "the latency source gave nothing usable (" + why + "): there is no spike analysis"}}, out...)
	}
	return out
}

// skipText says what a source skipped.
func skipText(s Skip) string {
	switch s.Kind {
	case SkipMalformed:
		return prose.Count(s.N, "malformed line") + " of the latency file " + prose.Were(s.N) + " skipped"
	case SkipNoLatency:
		return prose.Count(s.N, "line") + " of the latency file carried no latency (requests that failed, were skipped or reached no upstream; or other messages of the log)"
	case SkipScrapes:
		return prose.Count(s.N, "scrape") + " of the latency endpoint failed"
	case SkipResets:
		return prose.Count(s.N, "counter reset") + " of the latency histogram (the service restarted?)"
	case SkipLayouts:
		return prose.Count(s.N, "change") + " of the latency histogram's buckets"
	case SkipPipelined:
		return prose.Count(s.N, "exchange") + " on the target's sockets carried pipelined requests: each was timed as one, from its first request's arrival to its last response"
	case SkipLateWrites:
		return prose.Count(s.N, "write") + " of a response came more than " + strconv.Itoa(ExchangeHoldNs/1e6) +
			" ms after the one before (a streamed response?): each such exchange was timed to its last write before the pause"
	case SkipDueWaits:
		return prose.Count(s.N, "request") + " on paced connections reached the socket late, held up by a frozen exchange before them or by the server's freeze: each was counted from when its connection's schedule had it due, as the client counts it (an estimate)"
	}
	name := s.Name
	if name == "" {
		name = s.Kind.String()
	}
	return "the latency source skipped " + prose.Thousands(s.N) + " " + name
}

func (a *Account) outsideText() string {
	n := a.Outside()
	lo, hi := a.OutsideMinNs, a.OutsideMaxNs
	times := "their times are " + bootTime(lo)
	switch {
	case n == 1:
		times = "its time is " + bootTime(lo)
	case bootTime(lo) != bootTime(hi):
		times = "their times run from " + bootTime(lo) + " to " + bootTime(hi)
	case lo != hi:
		times = "their times are about " + bootTime(lo)
	}
	verb := " lie"
	if n == 1 {
		verb = " lies"
	}
	s := fmt.Sprintf("%s outside the trace: %s after boot, the trace covered %s; ", prose.Count(n, "latency sample")+verb, times, span(a.StartNs, a.EndNs))
	switch {
	case a.Likely != "":
		return s + "check their clock and unit: " + a.Likely
	case a.After == 0 && hi < a.StartNs:
		return s + "older lines of the file? If not, check their clock and unit"
	}
	return s + "check their clock and unit"
}

// tolerance is how far outside the trace a sample read in another unit
// or clock may fall and still count as inside: a writer that lags, or
// history written just before the trace began.
const tolerance = 60 * uint64(time.Second)

// Guess fills in Likely: which other clock or unit the samples outside
// the trace look like, if one puts them inside it. clk is how the run
// turned Unix times into CLOCK_MONOTONIC (zero when it did not say).
func (a *Account) Guess(clk Clock) {
	a.Likely = ""
	if a.Outside() == 0 {
		return
	}
	lo, hi := a.OutsideMinNs, a.OutsideMaxNs
	in := func(v uint64) bool { return v+tolerance >= a.StartNs && v <= a.EndNs+tolerance }
	if lo == hi && a.Outside() > 1 {
		switch lo {
		case math.MaxInt32:
			a.Likely = "every sample says 2147483647, the largest 32-bit integer: the writer's integer overflowed (awk's printf %d stops there)"
			return
		case math.MaxUint32:
			a.Likely = "every sample says 4294967295, the largest unsigned 32-bit integer: the writer's integer overflowed"
			return
		}
	}
	for _, u := range []struct {
		ns   uint64
		name string
	}{{1e3, "microseconds"}, {1e6, "milliseconds"}, {1e9, "seconds"}} {
		if hi > math.MaxUint64/u.ns {
			continue
		}
		if v := hi * u.ns; v >= epochThreshold && clk.WallNs != 0 && in(clk.Mono(v)) {
			a.Likely = "they look like Unix times in " + u.name + ", not nanoseconds"
			return
		} else if v < epochThreshold && in(v) {
			a.Likely = "they look like CLOCK_MONOTONIC in " + u.name + ", not nanoseconds"
			return
		}
	}
	const step = 30 * uint64(time.Minute)
	for off := step; off <= 14*uint64(time.Hour); off += step {
		if lo >= off && in(lo-off) && in(hi-off) {
			a.Likely = "they look " + hours(off) + " ahead of this machine's clock (a time zone or daylight saving?)"
			return
		}
		if in(lo+off) && in(hi+off) {
			a.Likely = "they look " + hours(off) + " behind this machine's clock (a time zone or daylight saving?)"
			return
		}
	}
	if lo == hi && a.Outside() > 1 {
		a.Likely = fmt.Sprintf("every sample says %d: a constant where the time should be", lo)
	}
}

// hours is a whole number of half hours: "an hour", "5.5 hours".
func hours(ns uint64) string {
	h := float64(ns) / float64(time.Hour)
	switch h {
	case 0.5:
		return "half an hour"
	case 1:
		return "an hour"
	}
	return strconv.FormatFloat(h, 'f', -1, 64) + " hours"
}

// bootTime is a CLOCK_MONOTONIC time in seconds: "2.1 s", "1,856 s".
func bootTime(ns uint64) string {
	if ns < 100*uint64(time.Second) {
		return strconv.FormatFloat(float64(ns)/1e9, 'f', 1, 64) + " s"
	}
	return prose.Thousands((ns+5e8)/1e9) + " s"
}

// span is the trace's span in seconds after boot: "1,856–1,881 s", with
// tenths when it is short.
func span(start, end uint64) string {
	prec := 0
	if end-start < 10*uint64(time.Second) || end < 100*uint64(time.Second) {
		prec = 1
	}
	f := func(ns uint64) string {
		s := strconv.FormatFloat(float64(ns)/1e9, 'f', prec, 64)
		whole, frac, _ := strings.Cut(s, ".")
		if frac != "" {
			frac = "." + frac
		}
		return prose.GroupDigits(whole) + frac
	}
	return f(start) + "–" + f(end) + " s"
}
