package memcg

import (
	"fmt"
	"strings"

	"github.com/numatrace/numatrace/internal/prose"
)

// Span is a group's reading as a run started and as it ended: where the
// report's figures of the group come from, each computed here once.
// Either reading may be nil: a run that could not read the group as it
// started, a recording cut before its end; doctor has one reading, or
// two an interval apart.
type Span struct {
	Start, End *Reading
	// Over names the time between the readings for the growth of the
	// counters: "the run" (the default), "1s".
	Over string
}

// Last is the newest reading, nil when there is none.
func (s Span) Last() *Reading {
	if s.End != nil {
		return s.End
	}
	return s.Start
}

// Known says whether the group was read at all.
func (s Span) Known() bool { return s.Last() != nil }

// both says whether the span has two readings of one group, so that its
// counters grew between them.
func (s Span) both() bool {
	return s.Start != nil && s.End != nil && s.Start.Group == s.End.Group && s.Start.V2 == s.End.V2
}

// HighBinds says whether the group's memory.high (v2), not its hard
// limit, is the tighter: the kernel reclaims and throttles it there.
func (r *Reading) HighBinds() bool { return r.V2 && r.HighSet() && r.High < r.Limit }

// Bound is the limit that binds the group, in bytes: memory.high where
// it is the tighter, else the hard limit (Unlimited when neither is set).
func (r *Reading) Bound() uint64 { return r.bound() }

// Knob is the file that sets the binding limit: memory.limit_in_bytes on
// cgroup v1, memory.max or memory.high on v2.
func (r *Reading) Knob() string {
	switch {
	case !r.V2:
		return "memory.limit_in_bytes"
	case r.HighBinds():
		return "memory.high"
	}
	return "memory.max"
}

// hits is how often the group met its binding limit: v1's failcnt, v2's
// memory.events max (or high, where memory.high binds).
func (r *Reading) hits() uint64 {
	switch {
	case !r.V2:
		return r.Failcnt
	case r.HighBinds():
		return r.Events.High
	}
	return r.Events.Max
}

// slack is how close to its limit a group's usage counts as at it: the
// kernel reclaims in batches below the limit, a 64th of it or 1 MiB.
func slack(limit uint64) uint64 { return max(limit/64, 1<<20) }

// AtLimit says whether the group reached its binding limit: the kernel
// counted it meeting the limit, or it holds (or once held) all but a
// sliver of it.
func (s Span) AtLimit() bool {
	r := s.Last()
	if r == nil || r.Bound() == Unlimited {
		return false
	}
	near := r.Bound() - min(r.Bound(), slack(r.Bound()))
	return r.hits() > 0 || r.Usage >= near || r.Peak >= near
}

// CacheShare is the share of the group's usage that is page cache, which
// counts against its limit as its anonymous memory does; ok is false
// when it holds nothing.
func (s Span) CacheShare() (share float64, ok bool) {
	r := s.Last()
	if r == nil || r.Usage == 0 {
		return 0, false
	}
	return min(1, float64(r.File)/float64(r.Usage)), true
}

// Counter is one of the group's counters, with its growth over the span.
type Counter struct {
	Name  string // "failcnt", "memory.events max"
	Total uint64
	// Grew is its growth between the span's readings; Measured is
	// false with one reading (or a counter that went backwards).
	Grew     uint64
	Measured bool
}

// Counters are the group's counters worth naming: the count of hits of
// its binding limit always (failcnt, memory.events max or high), the
// others (the other limit's, oom, oom_kill) where they are not 0.
func (s Span) Counters() []Counter {
	r := s.Last()
	if r == nil {
		return nil
	}
	type field struct {
		name   string
		of     func(*Reading) uint64
		always bool
	}
	var fs []field
	if r.V2 {
		fs = []field{
			{"memory.events max", func(r *Reading) uint64 { return r.Events.Max }, !r.HighBinds()},
			{"memory.events high", func(r *Reading) uint64 { return r.Events.High }, r.HighBinds()},
			{"memory.events oom", func(r *Reading) uint64 { return r.Events.OOM }, false},
		}
	} else {
		fs = []field{{"failcnt", func(r *Reading) uint64 { return r.Failcnt }, true}}
	}
	fs = append(fs, field{"oom_kill", func(r *Reading) uint64 { return r.Events.OOMKill }, false})
	var out []Counter
	for _, f := range fs {
		c := Counter{Name: f.name, Total: f.of(r)}
		if !f.always && c.Total == 0 {
			continue
		}
		if s.both() && f.of(s.End) >= f.of(s.Start) {
			c.Grew, c.Measured = f.of(s.End)-f.of(s.Start), true
		}
		out = append(out, c)
	}
	return out
}

// Bytes is a size for people: "160 MiB", "1.5 GiB", "512 KiB".
func Bytes(n uint64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%.0f GiB", float64(n)/(1<<30))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", (n+1<<19)>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", (n+1<<9)>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Figures are the group's figures in a phrase: "usage 159 MiB, 72% of it
// page cache, failcnt 1,234 (+1,200 over the run)".
func (s Span) Figures() string {
	r := s.Last()
	if r == nil {
		return ""
	}
	p := []string{"usage " + Bytes(r.Usage)}
	if share, ok := s.CacheShare(); ok {
		p = append(p, fmt.Sprintf("%.0f%% of it page cache", share*100))
	}
	if r.Peak > r.Usage+max(r.Usage/8, 1<<20) { // it once held much more than it does now
		p = append(p, "peak "+Bytes(r.Peak))
	}
	over := s.Over
	if over == "" {
		over = "the run"
	}
	for _, c := range s.Counters() {
		w := c.Name + " " + prose.Thousands(c.Total)
		if c.Measured {
			w += fmt.Sprintf(" (+%s over %s)", prose.Thousands(c.Grew), over)
		}
		p = append(p, w)
	}
	return strings.Join(p, ", ")
}

// Sentence names the group, its binding limit and its figures, as the
// subject of a next step: "the cgroup memory/numatrace-e2e-redis reached
// its limit (160 MiB; usage 159 MiB, 72% of it page cache, failcnt
// 1,234)"; "" when the group was not read.
func (s Span) Sentence() string {
	r := s.Last()
	if r == nil {
		return ""
	}
	who := "the cgroup " + r.Group
	if r.Member != "" {
		who += ", around the target's " + r.Member + ","
	}
	limit := "its limit"
	if r.V2 {
		limit = "its " + r.Knob()
	}
	switch {
	case r.Bound() == Unlimited:
		return fmt.Sprintf("%s has no memory limit (%s)", who, s.Figures())
	case s.AtLimit():
		return fmt.Sprintf("%s reached %s (%s; %s)", who, limit, Bytes(r.Bound()), s.Figures())
	}
	return fmt.Sprintf("%s stayed under %s (%s; %s)", who, limit, Bytes(r.Bound()), s.Figures())
}
