package stackexport

import (
	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

// RunSamples are a run's samples for a profile: the stalls that carried
// stacks, and for each thread and timed cause the rest of its stall time
// as one sample without a stack (stalls under --stacks-min, or not
// streamed), so the profile's total is the kernel's exact total and its
// stacks are seen in proportion.
func RunSamples(sum *aggregate.Summary) []aggregate.StackSample {
	type key struct {
		tid   uint32
		cause stall.Cause
	}
	stacked := map[key]aggregate.StackSample{}
	for _, s := range sum.Stacks {
		k := key{s.TID, s.Cause}
		t := stacked[k]
		t.Count += s.Count
		t.Ns += s.Ns
		stacked[k] = t
	}
	names := make(map[uint32]string, len(sum.Processes))
	for _, p := range sum.Processes {
		names[p.PID] = p.Comm
	}
	out := append([]aggregate.StackSample(nil), sum.Stacks...)
	for _, t := range sum.Threads {
		for c := range stall.NumCauses {
			cs := t.Stalls[c]
			if !c.Timed() || cs.TotalNs == 0 {
				continue
			}
			with := stacked[key{t.TID, c}]
			if cs.TotalNs <= with.Ns {
				continue
			}
			out = append(out, aggregate.StackSample{Cause: c, PID: t.PID, TID: t.TID, Comm: t.Comm, Process: names[t.PID],
				Count: cs.Count - min(cs.Count, with.Count), Ns: cs.TotalNs - with.Ns})
		}
	}
	aggregate.SortStackSamples(out)
	return out
}
