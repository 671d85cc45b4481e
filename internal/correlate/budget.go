package correlate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/numatrace/numatrace/internal/stall"
)

// The verdict is the budget: where the slow requests' time went, in the
// threads that served them (stall.Budget), worst part first. It names
// every part, memory management's or not, so a spike no stall covers
// says where its time went instead of guessing.

// budgetShown is the smallest share of the slow requests' time a part
// must hold to be named.
const budgetShown = 0.01

// PartShare is one part of a budget and its share of the whole.
type PartShare struct {
	Part  stall.Part
	Ns    uint64
	Share float64
}

// Shares are b's parts worst first, those of at least budgetShown.
func Shares(b *stall.Budget) []PartShare {
	total := b.Total()
	if total == 0 {
		return nil
	}
	var out []PartShare
	for p, ns := range b {
		if s := float64(ns) / float64(total); s >= budgetShown {
			out = append(out, PartShare{Part: stall.Part(p), Ns: ns, Share: s})
		}
	}
	slices.SortStableFunc(out, func(a, b PartShare) int {
		switch {
		case a.Ns > b.Ns:
			return -1
		case a.Ns < b.Ns:
			return 1
		}
		return 0
	})
	return out
}

// BudgetWords is b for people, worst first: "61% disk I/O wait, 22% on
// CPU, 9% memcg_reclaim".
func BudgetWords(b *stall.Budget) string {
	var parts []string
	for _, s := range Shares(b) {
		parts = append(parts, fmt.Sprintf("%.0f%% %s", s.Share*100, s.Part.Words()))
	}
	return strings.Join(parts, ", ")
}

// Largest is b's largest part, ok false for an empty budget.
func Largest(b *stall.Budget) (PartShare, bool) {
	s := Shares(b)
	if len(s) == 0 {
		return PartShare{}, false
	}
	return s[0], true
}

// spikesBudget sums the budgets of the spikes, and of the frozen
// windows, whose slow requests were timed with them.
func (r *Result) spikesBudget() {
	r.Budget, r.HasBudget = sumBudgets(r.Spikes)
	r.FrozenBudget, r.HasFrozenBudget = sumBudgets(r.Frozen)
}

func sumBudgets(sps []Spike) (b stall.Budget, ok bool) {
	for _, sp := range sps {
		if sp.HasBudget {
			b.Add(&sp.Budget)
			ok = true
		}
	}
	return b, ok
}

// unaccounted is the share of a budget that no counter split: waits off
// a CPU numatrace cannot name, and time not split at all. Only this may
// be memory management's where numatrace cannot see it.
func unaccounted(b *stall.Budget) float64 {
	total := b.Total()
	if total == 0 {
		return 0
	}
	return float64(b[stall.PartOtherWait]+b[stall.PartUnsplit]) / float64(total)
}
