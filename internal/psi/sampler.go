package psi

import (
	"fmt"
	"time"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/monoclock"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// Sampler reads the memory PSI of a fixed set of scopes (the system, and
// the traced cgroup if there is one).
type Sampler struct {
	root   *hostfs.Root
	scopes []Scope
	now    func() uint64 // CLOCK_MONOTONIC ns: the clock of numatrace's events
}

// NewSampler samples scopes of the machine at root.
func NewSampler(root *hostfs.Root, scopes ...Scope) *Sampler {
	return &Sampler{root: root, scopes: scopes, now: monoclock.Ns}
}

// Snapshot is every scope's totals at one moment.
type Snapshot struct {
	Mono     uint64 // CLOCK_MONOTONIC ns when it was taken
	Readings []Reading
}

// Reading is one scope's totals, or why it has none.
type Reading struct {
	Scope  Scope
	Totals Totals
	Err    error // a *NotAvailableError, or a read or parse error
}

// Take reads every scope now. A scope that cannot be read keeps its error
// in its Reading; the others are still read.
func (s *Sampler) Take() Snapshot {
	snap := Snapshot{Mono: s.now(), Readings: make([]Reading, len(s.scopes))}
	for i, sc := range s.scopes {
		t, err := Read(s.root, sc)
		snap.Readings[i] = Reading{Scope: sc, Totals: t, Err: err}
	}
	return snap
}

// Scope is the scope whose figure the snapshot gives the run's windows:
// the target's group where it has a reading (the group is listed after
// the system), else the system; ok false when none was read.
func (s Snapshot) Scope() (Scope, bool) {
	for i := len(s.Readings) - 1; i >= 0; i-- {
		if s.Readings[i].Err == nil {
			return s.Readings[i].Scope, true
		}
	}
	return Scope{}, false
}

// Span is the memory stall PSI counted in one scope between two snapshots.
type Span struct {
	Scope    Scope
	From, To uint64 // CLOCK_MONOTONIC ns: clip numatrace's own intervals to these
	Growth   Totals
	Err      error // why Growth is unknown; Growth is zero then, not a measurement
}

// Wall is the length of the span.
func (s Span) Wall() time.Duration { return time.Duration(s.To - s.From) }

// Between is the growth of each scope of start over [start, end], in
// start's order. A scope unreadable at either end, or whose totals went
// back (its cgroup was removed and made again), has Err set.
func Between(start, end Snapshot) []Span {
	out := make([]Span, len(start.Readings))
	for i, a := range start.Readings {
		sp := Span{Scope: a.Scope, From: start.Mono, To: end.Mono}
		b, ok := find(end, a.Scope)
		switch {
		case end.Mono < start.Mono:
			sp.Err = fmt.Errorf("memory PSI of %s: the end snapshot is older than the start", sanitize.Text(a.Scope.Name))
		case a.Err != nil:
			sp.Err = a.Err
		case !ok:
			sp.Err = fmt.Errorf("memory PSI of %s: not read at the end of the span", sanitize.Text(a.Scope.Name))
		case b.Err != nil:
			sp.Err = b.Err
		case b.Totals.Some < a.Totals.Some || b.Totals.Full < a.Totals.Full:
			sp.Err = fmt.Errorf("memory PSI of %s went back during the span (was its cgroup made again?)", sanitize.Text(a.Scope.Name))
		default:
			sp.Growth = Totals{Some: b.Totals.Some - a.Totals.Some, Full: b.Totals.Full - a.Totals.Full}
		}
		out[i] = sp
	}
	return out
}

func find(s Snapshot, sc Scope) (Reading, bool) {
	for _, r := range s.Readings {
		if r.Scope == sc {
			return r, true
		}
	}
	return Reading{}, false
}
