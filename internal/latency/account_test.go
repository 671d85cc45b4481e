package latency

import (
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/window"
)

const sec = uint64(time.Second)

// A trace from 1,856 s to 1,881 s after boot, begun at this Unix time.
var (
	traceClock = Clock{WallNs: 1_764_590_000 * int64(sec), MonoNs: int64(1856 * sec)}
	traceStart = 1856 * sec
	traceEnd   = 1881 * sec
)

// outsideAccount files samples whose raw timestamps are ts (as a file
// would give them, through traceClock) in windows of the trace, closes
// them all and returns the account with its guess.
func outsideAccount(ts ...uint64) Account {
	w := NewWindows(window.Grid{StartNs: traceStart, LenNs: sec}, 0)
	for _, t := range ts {
		w.Add(Sample{TsNs: traceClock.Mono(t), LatencyNs: 1000})
	}
	for i := uint64(0); i < 25; i++ {
		w.Take(i)
	}
	w.Drop()
	a := w.Account()
	a.StartNs, a.EndNs = traceStart, traceEnd
	a.Guess(traceClock)
	return a
}

// repeat is n copies of v.
func repeat(v uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// spread is n timestamps from lo in steps of step.
func spread(lo, step uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = lo + uint64(i)*step
	}
	return out
}

// Each way a user's samples fell outside the trace gets counted, with the
// clock or unit they look like.
func TestOutsideSamplesSayTheirLikelyClock(t *testing.T) {
	wall := uint64(traceClock.WallNs)
	for _, c := range []struct {
		name          string
		ts            []uint64
		before, after uint64
		text          string
	}{
		{"awk's %d cap", repeat(2147483647, 11976), 11976, 0,
			"11,976 latency samples lie outside the trace: their times are 2.1 s after boot, the trace covered 1,856–1,881 s; check their clock and unit: every sample says 2147483647, the largest 32-bit integer: the writer's integer overflowed (awk's printf %d stops there)"},
		{"monotonic µs", spread(1860*sec/1000, 1000, 500), 500, 0,
			"500 latency samples lie outside the trace: their times are about 1.9 s after boot, the trace covered 1,856–1,881 s; check their clock and unit: they look like CLOCK_MONOTONIC in microseconds, not nanoseconds"},
		{"realtime µs", spread((wall+4*sec)/1000, 10_000, 300), 0, 300,
			"300 latency samples lie outside the trace: their times are about 1,764,590 s after boot, the trace covered 1,856–1,881 s; check their clock and unit: they look like Unix times in microseconds, not nanoseconds"},
		{"realtime an hour ahead", spread(wall+3600*sec+2*sec, sec/100, 1000), 0, 1000,
			"1,000 latency samples lie outside the trace: their times run from 5,458 s to 5,468 s after boot, the trace covered 1,856–1,881 s; check their clock and unit: they look an hour ahead of this machine's clock (a time zone or daylight saving?)"},
		{"realtime half an hour behind", spread(wall-1800*sec+sec, sec, 10), 10, 0,
			"10 latency samples lie outside the trace: their times run from 57.0 s to 66.0 s after boot, the trace covered 1,856–1,881 s; check their clock and unit: they look half an hour behind this machine's clock (a time zone or daylight saving?)"},
		{"older lines of the file", spread(1700*sec, sec, 100), 100, 0,
			"100 latency samples lie outside the trace: their times run from 1,700 s to 1,799 s after boot, the trace covered 1,856–1,881 s; older lines of the file? If not, check their clock and unit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := outsideAccount(c.ts...)
			if a.Before != c.before || a.After != c.after || a.Samples != 0 {
				t.Fatalf("before %d after %d samples %d, want %d %d 0", a.Before, a.After, a.Samples, c.before, c.after)
			}
			ps := a.Problems()
			if len(ps) != 2 || ps[0].Kind != ProblemUnusable || ps[1].Kind != ProblemOutside {
				t.Fatalf("problems %+v", ps)
			}
			if ps[1].Text != c.text {
				t.Errorf("said\n%s\nwant\n%s", ps[1].Text, c.text)
			}
		})
	}
}

// A sample far ahead of the clock is counted at once, not held to the
// end: a source in another clock would otherwise fill memory.
func TestWindowsDoNotHoldSamplesFarAhead(t *testing.T) {
	w := NewWindows(window.Grid{StartNs: traceStart, LenNs: sec}, 0)
	w.Add(Sample{TsNs: traceStart + 3600*sec, LatencyNs: 1})
	w.Add(Sample{TsNs: traceStart + 30*sec, LatencyNs: 1}) // near enough: held for its window
	if a := w.Account(); a.After != 1 || len(w.bins) != 1 {
		t.Fatalf("after %d, %d windows held", a.After, len(w.bins))
	}
}

// What a source skipped, windows it could not tell and readings that
// came too late are each said; a source that gave nothing says so first.
func TestProblemsOfAnAccount(t *testing.T) {
	a := Account{StartNs: traceStart, EndNs: traceEnd, Windows: 20, Late: 3, LateWindows: 1, SkippedWindows: 2,
		Skipped: []Skip{{SkipScrapes, 1, ""}, {SkipResets, 1, ""}, {SkipMalformed, 1200, ""}, {SkipUnknown, 2, "odd things"}}}
	want := []Problem{
		{ProblemLate, "3 latency samples came after their window had closed and were left out: the writer lags (does it buffer its output?)"},
		{ProblemLateWindows, "the latency statistics of 1 window came after the window had closed and were left out (a slow scrape)"},
		{ProblemSkippedWindows, "2 windows left out of the analysis rather than misread: the source could not tell their latency (a failed scrape, a counter reset, a change of buckets)"},
		{ProblemSkipped, "1 scrape of the latency endpoint failed"},
		{ProblemSkipped, "1 counter reset of the latency histogram (the service restarted?)"},
		{ProblemSkipped, "1,200 malformed lines of the latency file were skipped"},
		{ProblemSkipped, "the latency source skipped 2 odd things"},
	}
	got := a.Problems()
	if len(got) != len(want) {
		t.Fatalf("problems %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	empty := Account{StartNs: traceStart, EndNs: traceEnd}
	if got := empty.Problems(); len(got) != 1 || got[0].Text != "the latency source gave nothing usable (no latency arrived): there is no spike analysis" {
		t.Fatalf("nothing at all: %+v", got)
	}
}

// One line skipped is said as one: "was", not "were".
func TestOneMalformedLineIsSaidInTheSingular(t *testing.T) {
	for n, want := range map[uint64]string{
		1: "1 malformed line of the latency file was skipped",
		2: "2 malformed lines of the latency file were skipped",
	} {
		if got := skipText(Skip{Kind: SkipMalformed, N: n}); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

// Every kind a source skips is said in words of its own, in a warning
// and in the report.
func TestEverySkipKindIsWorded(t *testing.T) {
	fallback := skipText(Skip{Kind: SkipUnknown, N: 2, Name: "x"})
	seen := map[string]bool{}
	for k := SkipMalformed; k < NumSkipKinds; k++ {
		phrase, text := k.String(), skipText(Skip{Kind: k, N: 2})
		if phrase == "" || phrase == SkipUnknown.String() || seen[phrase] {
			t.Errorf("kind %d: phrase %q", k, phrase)
		}
		seen[phrase] = true
		if strings.HasPrefix(text, strings.TrimSuffix(fallback, "x")) {
			t.Errorf("%s: no words of its own: %q", phrase, text)
		}
	}
}
