package psi

import (
	"errors"
	"math"
	"testing"
	"time"
	"unicode/utf8"
)

func TestExplained(t *testing.T) {
	for _, tc := range []struct {
		psi, ours time.Duration
		want      float64
	}{
		{1900 * time.Millisecond, 1200 * time.Millisecond, 1200.0 / 1900},
		{7100 * time.Millisecond, 6900 * time.Millisecond, 6900.0 / 7100},
		{time.Second, 0, 0},
		{time.Second, time.Second, 1},
		{time.Second, 3 * time.Second, 1}, // ours past PSI's: all explained, not 300%
		{0, 0, 1},
		{0, time.Second, 1},
		{time.Second, -time.Second, 0},
	} {
		if got := Explained(tc.psi, tc.ours); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Explained(%v, %v) = %v, want %v", tc.psi, tc.ours, got, tc.want)
		}
	}
}

func TestSentence(t *testing.T) {
	sys := Span{Scope: System()}
	cg := Span{Scope: Scope{Name: "/app", File: "sys/fs/cgroup/app/memory.pressure"}}
	with := func(s Span, some time.Duration) Span { s.Growth.Some = some; return s }
	notAvail := cg
	notAvail.Err = &NotAvailableError{Scope: "/app", Path: "/sys/fs/cgroup/app", Reason: "a cgroup v1 directory: PSI per cgroup needs cgroup v2"}
	for _, tc := range []struct {
		span Span
		ours time.Duration
		want string
	}{
		{with(sys, 7100*time.Millisecond), 6900 * time.Millisecond,
			"PSI counted 7.10s of memory stall (system); numatrace timed 6.90s of it (97%)"},
		{with(cg, 1900*time.Millisecond), 1200 * time.Millisecond,
			"PSI counted 1.90s of memory stall in this cgroup; numatrace timed 1.20s: 37% it cannot see"},
		{with(sys, 2*time.Second), 2 * time.Second,
			"PSI counted 2.00s of memory stall (system); numatrace timed 2.00s of it (100%)"},
		{with(cg, 40*time.Millisecond), 0,
			"PSI counted 40.00ms of memory stall in this cgroup; numatrace timed none of it"},
		{with(cg, 999*time.Millisecond), 500 * time.Millisecond, // the widest figures
			"PSI counted 999.00ms of memory stall in this cgroup; numatrace timed 500.00ms: 50% it cannot see"},
		// The machine's figure counts every process: what the target's
		// stalls leave of it is not said to be unseen ("84% it cannot
		// see" of a writer's stall, in the README's run).
		{with(sys, 999*time.Millisecond), 500 * time.Millisecond,
			"PSI counted 999.00ms of memory stall (system); numatrace timed 500.00ms (50%): the rest is others'"},
		{with(sys, 500*time.Millisecond), time.Second,
			"PSI counted 500.00ms of memory stall (system); numatrace timed 1.00s, more (PSI averages over CPUs)"},
		{with(sys, 0), 0, "PSI counted no memory stall (system); numatrace timed none"},
		{with(cg, 0), 1500 * time.Microsecond, "PSI counted no memory stall in this cgroup; numatrace timed 1.50ms"},
		{notAvail, time.Second,
			"PSI has no figure in this cgroup: memory PSI not available for /app: /sys/fs/cgroup/app: a cgroup v1 directory: PSI per cgroup needs cgroup v2"},
	} {
		got := tc.span.Sentence(tc.ours)
		if got != tc.want {
			t.Errorf("Sentence(%v) of %+v\n got %q\nwant %q", tc.ours, tc.span, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n >= 100 && tc.span.Err == nil {
			t.Errorf("%q is %d columns: keep a sentence under 100", got, n)
		}
	}
	if !errors.Is(notAvail.Err, ErrNotAvailable) {
		t.Fatal("the test's error is meant to be a NotAvailableError")
	}
}
