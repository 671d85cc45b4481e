package psi

import (
	"fmt"
	"time"
)

// wellExplained is the share of PSI's stall above which numatrace's timing
// is taken to account for it: the rest is clock edges and rounding.
const wellExplained = 0.9

// Explained is the share of the stall PSI counted (psiGrowth, a Span's
// Growth.Some) that numatrace timed (ours, the Union of its stalls clipped
// to the span), from 0 to 1.
//
// PSI's "some" for a group is each CPU's stall time averaged with the
// CPUs' busy time as weights, so it never exceeds the union of the
// stalls of its tasks: PSI time beyond ours is stall numatrace did not
// time. Ours may exceed PSI's (one CPU stalled while another ran); the
// share is then 1. With no stall counted by PSI nothing is left
// unexplained: 1.
func Explained(psiGrowth, ours time.Duration) (share float64) {
	if psiGrowth <= 0 || ours >= psiGrowth {
		return 1
	}
	return float64(max(ours, 0)) / float64(psiGrowth)
}

// Sentence says in one line how ours compares with the span's "some":
//
//	PSI counted 7.10s of memory stall (system); numatrace timed 6.90s of it (97%)
//	PSI counted 1.90s of memory stall in this cgroup; numatrace timed 1.20s: 37% it cannot see
//	PSI counted 13.36s of memory stall (system); numatrace timed 2.34s (17%): the rest is others'
//
// The machine's figure counts every process: what the target's stalls
// leave of it is not said to be unseen. A span without a figure says
// why, in the words of its error.
func (s Span) Sentence(ours time.Duration) string {
	where := "in this cgroup"
	if s.Scope.IsSystem() {
		where = "(system)"
	}
	if s.Err != nil {
		return fmt.Sprintf("PSI has no figure %s: %v", where, s.Err)
	}
	psi := s.Growth.Some
	counted := "PSI counted no memory stall " + where
	if psi > 0 {
		counted = fmt.Sprintf("PSI counted %s of memory stall %s", dur(psi), where)
	}
	share := Explained(psi, ours)
	switch {
	case ours <= 0 && psi <= 0:
		return counted + "; numatrace timed none"
	case ours <= 0:
		return counted + "; numatrace timed none of it"
	case psi <= 0:
		return fmt.Sprintf("%s; numatrace timed %s", counted, dur(ours))
	case ours > psi:
		return fmt.Sprintf("%s; numatrace timed %s, more (PSI averages over CPUs)", counted, dur(ours))
	case share >= wellExplained:
		return fmt.Sprintf("%s; numatrace timed %s of it (%.0f%%)", counted, dur(ours), share*100)
	case s.Scope.IsSystem():
		return fmt.Sprintf("%s; numatrace timed %s (%.0f%%): the rest is others'", counted, dur(ours), share*100)
	}
	return fmt.Sprintf("%s; numatrace timed %s: %.0f%% it cannot see", counted, dur(ours), (1-share)*100)
}

// dur formats as output.Dur does (812ns, 16.4µs, 3.21ms, 1.50s), so a
// sentence reads like the report around it; psi does not import output,
// which would have to import psi to print it.
func dur(d time.Duration) string {
	ns := uint64(max(d, 0))
	switch {
	case ns < 1_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 999_950:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case ns < 999_995_000:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}
