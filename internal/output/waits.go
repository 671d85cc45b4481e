package output

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// WaitStack is one stack's waits of one part, over every thread that
// slept there: a thread pool's workers wait in the same place.
type WaitStack struct {
	aggregate.StackSample
	Threads int
}

// WaitParts are the waits of samples by part, in the budget's order, each
// part's stacks the most time first (nil Stack: the waits taken without
// one), and each part's total time and time with a stack.
func WaitParts(samples []aggregate.StackSample) []WaitPart {
	byPart := map[string]*WaitPart{}
	keys := map[string]map[string]*WaitStack{}
	for _, s := range samples {
		p := byPart[s.Kind]
		if p == nil {
			p = &WaitPart{Part: s.Kind}
			byPart[s.Kind] = p
			keys[s.Kind] = map[string]*WaitStack{}
		}
		p.Count += s.Count
		p.Ns += s.Ns
		if s.Stack == nil {
			continue
		}
		p.StackedNs += s.Ns
		k := s.Stack.Key()
		ws := keys[s.Kind][k]
		if ws == nil {
			ws = &WaitStack{StackSample: s}
			ws.Count, ws.Ns = 0, 0
			keys[s.Kind][k] = ws
			p.Stacks = append(p.Stacks, ws)
		}
		ws.Count += s.Count
		ws.Ns += s.Ns
		ws.Threads++
	}
	out := make([]WaitPart, 0, len(byPart))
	for _, p := range byPart {
		slices.SortFunc(p.Stacks, func(a, b *WaitStack) int {
			return cmp.Or(cmp.Compare(b.Ns, a.Ns), cmp.Compare(a.Stack.Key(), b.Stack.Key()))
		})
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b WaitPart) int { return cmp.Or(cmp.Compare(b.Ns, a.Ns), cmp.Compare(a.Part, b.Part)) })
	return out
}

// WaitPart is the waits of one part of the budget.
type WaitPart struct {
	Part      string // disk_io, other_wait
	Count     uint64
	Ns        uint64
	StackedNs uint64 // of Ns, the waits that carry a stack
	Stacks    []*WaitStack
}

// waits says where the serving threads slept inside their requests: the
// budget's disk I/O and other waits have code paths too, as stalls do.
func (r *Report) waits(w io.Writer) {
	parts := WaitParts(r.Summary.Waits)
	if len(parts) == 0 {
		return
	}
	var n, ns, stacked uint64
	for _, p := range parts {
		n, ns, stacked = n+p.Count, ns+p.Ns, stacked+p.StackedNs
	}
	fmt.Fprintf(w, "\nWAITS (sleeps inside requests")
	if r.StacksMinNs > 0 {
		fmt.Fprintf(w, " of %s or more", time.Duration(r.StacksMinNs))
	}
	fmt.Fprintf(w, ": %s, %s, %s of it with stacks)\n", prose.Count(n, "wait"), Dur(ns), Dur(stacked))
	for _, p := range parts {
		fmt.Fprintf(w, "%s: %s in %s, %s with stacks\n", sanitize.Text(p.Part), Dur(p.Ns), prose.Count(p.Count, "wait"), Dur(p.StackedNs))
		for i, st := range p.Stacks {
			if i == StacksShown {
				break
			}
			fmt.Fprintf(w, "  %3.0f%% %s in %s, %s of %s\n", 100*float64(st.Ns)/float64(max(p.StackedNs, 1)), Dur(st.Ns),
				prose.Count(st.Count, "wait"), prose.Count(uint64(st.Threads), "thread"), sanitize.Text(cmp.Or(st.Process, st.Comm)))
			writeStack(w, st.Stack, "      ")
		}
	}
	if stacked < ns {
		fmt.Fprintln(w, "(a thread's first long sleep of a kind has no stack: stacks are taken as a sleep begins, once one of its kind ran long)")
	}
}

// waitJSON is one stack's waits of one part in one thread; a row without
// frames holds its waits that carry no stack.
type waitJSON struct {
	Part    string      `json:"part"`
	PID     uint32      `json:"pid"`
	TID     uint32      `json:"tid"`
	Comm    string      `json:"comm"`
	Process string      `json:"process"`
	Count   uint64      `json:"count"`
	TotalNs uint64      `json:"total_ns"`
	Stacked bool        `json:"stacked"`
	Kernel  []frameJSON `json:"kernel"`
	User    []frameJSON `json:"user"`
	Note    string      `json:"note,omitempty"`
}

func waitsJSON(samples []aggregate.StackSample) []waitJSON {
	out := make([]waitJSON, 0, len(samples))
	for _, s := range samples {
		j := waitJSON{Part: s.Kind, PID: s.PID, TID: s.TID, Comm: s.Comm, Process: s.Process, Count: s.Count, TotalNs: s.Ns,
			Stacked: s.Stack != nil, Kernel: []frameJSON{}, User: []frameJSON{}}
		if s.Stack != nil {
			j.Kernel, j.User, j.Note = frameList(s.Stack.Kernel), frameList(s.Stack.User), s.Stack.Note
		}
		out = append(out, j)
	}
	return out
}
