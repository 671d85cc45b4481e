package output

import (
	"fmt"
	"io"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/textwrap"
)

// Headline is the answer a report opens with: what froze the target, the
// threads it hit hardest and what to do next. Text and JSON print the
// same one, computed here once.
type Headline struct {
	Verdict string          `json:"verdict"`
	Worst   []WorstThread   `json:"worst_threads"`
	Next    string          `json:"next"`
	Finding *doctor.Finding `json:"doctor_finding,omitempty"` // the recorded machine's, behind Next
}

// WorstThread is one of the threads memory management froze longest.
type WorstThread struct {
	PID     uint32 `json:"pid"`
	TID     uint32 `json:"tid"`
	Comm    string `json:"comm"`
	StallNs uint64 `json:"stall_ns"`
	Cause   string `json:"cause"`            // the cause of most of its stall time
	Kind    string `json:"reason,omitempty"` // its kind of wait, where the cause has kinds (memstall_wait's thrashing)
	CauseNs uint64 `json:"cause_ns"`
	MaxNs   uint64 `json:"max_ns"` // that cause's longest single stall
}

// label names the thread's main cause with its kind of wait:
// "memstall_wait (thrashing)".
func (t WorstThread) label() string {
	c, err := stall.ParseCause(t.Cause)
	if err != nil {
		return t.Cause
	}
	return c.Label(t.Kind)
}

// worstShown is how many threads the headline names, of those frozen at
// least 1/worstShare as long as the worst: not a bystander's 3µs.
const (
	worstShown = 3
	worstShare = 100
)

// elsewhere is where to look when memory management is not behind the
// latency.
const elsewhere = "look outside memory management (CPU, locks, I/O, the network)"

// memoryUnseen is where to look when the spikes no stall covers had
// memory stall that PSI counted and no probe timed.
const memoryUnseen = "memory management is still the likely cause (PSI counted memory stall in their windows that no probe " +
	"timed): check the service's cgroup (memory.stat: refaults, swap-ins; memory.events: high, max) and run numatrace doctor"

// uncoveredNext is where to look for the spikes no stall covers, as the
// latency analysis judged them: where their slow requests' time went,
// when it was split; else outside memory management, unless the target's
// own PSI says memory stalled there unseen.
func (r *Report) uncoveredNext() string {
	switch {
	case r.Correlation == nil:
		return elsewhere
	case r.Correlation.UncoveredLikelyMemory():
		return memoryUnseen
	}
	if l, ok := r.Correlation.UncoveredLargest(); ok {
		return l.Part.Advice()
	}
	return elsewhere
}

// Headline is the report's answer, computed from the same figures its
// tables show.
func (r *Report) Headline() Headline {
	h := Headline{Worst: r.worstThreads()}
	key, spikesUnexplained := r.keyCause()
	h.Verdict = r.verdict()
	switch {
	case key != nil:
		h.Next, h.Finding = r.nextFor(*key)
		if spikesUnexplained {
			h.Next += "; for the spikes no stall covers, " + r.uncoveredNext()
		}
	case spikesUnexplained:
		h.Next = r.uncoveredNext()
	case r.ChildrenHint() != "": // the target's children stalled where it did not
		h.Next = r.ChildrenHint()
	default:
		h.Next = "nothing to fix in memory management; if the service is slow, " + elsewhere
	}
	return h
}

// verdict is the answer in a sentence or two: the latency analysis's
// conclusion when there were spikes to explain, else what froze whom.
func (r *Report) verdict() string {
	if c := r.Correlation; c != nil && len(c.Spikes) > 0 {
		return c.Conclusion
	}
	froze := r.frozeSentence()
	if c := r.Correlation; c != nil && c.Windows > 0 {
		s := fmt.Sprintf("No latency spikes in %s.", prose.Count(uint64(c.Windows), "window"))
		if f := c.FrozenWords(); f != "" { // windows in which p99 held but the service froze
			s += " " + f
		}
		return s + " " + froze
	}
	return froze
}

// frozeSentence says how long memory management froze which threads, or
// that it froze none, with the task migrations either way.
func (r *Report) frozeSentence() string {
	s := r.Summary
	var frozen, procs int
	var total uint64
	for _, p := range s.Processes {
		if p.StallNs > 0 {
			procs++
		}
	}
	for _, t := range s.Threads {
		if t.StallNs > 0 {
			frozen++
			total += t.StallNs
		}
	}
	span := time.Duration(r.DurationNs).Round(time.Millisecond)
	migr := r.migrationsClause()
	if frozen == 0 {
		return fmt.Sprintf("Nothing froze a thread for memory in %s; %s.", span, migr)
	}
	worst, worstNs := r.worstCause()
	return fmt.Sprintf("Memory management froze %s of %s for %s in %s, most of it %s (%s); %s.",
		prose.Count(uint64(frozen), "thread"), processes(procs), Dur(total), span,
		worst.Label(s.Causes[worst].Kind), Dur(worstNs), migr)
}

// migrationsClause counts the task migrations and those across nodes.
func (r *Report) migrationsClause() string {
	var total, cross uint64
	for _, p := range r.Summary.Processes {
		total += p.Migrations.Total
		cross += p.Migrations.CrossNode
	}
	across := "none across nodes"
	if cross > 0 {
		across = fmt.Sprintf("%d across nodes", cross)
	}
	return prose.Count(total, "task migration") + ", " + across
}

// worstCause is the freezing cause with the most stall time over the run.
func (r *Report) worstCause() (stall.Cause, uint64) {
	var worst stall.Cause
	var ns uint64
	for _, c := range stall.AllCauses() {
		if cs := r.Summary.Causes[c]; c.Freezes() && cs.TotalNs > ns {
			worst, ns = c, cs.TotalNs
		}
	}
	return worst, ns
}

// keyCause is the cause the next step is about: the one that explains
// the spikes, or in part, or without spikes the one that froze longest;
// nil when nothing did. unexplained says spikes were left uncovered.
func (r *Report) keyCause() (key *stall.Cause, unexplained bool) {
	if c := r.Correlation; c != nil && len(c.Spikes) > 0 {
		unexplained = c.Uncovered > 0
		switch {
		case len(c.Explained) > 0:
			return &c.Explained[0], unexplained
		case len(c.Partly) > 0:
			return &c.Partly[0], unexplained
		}
		return nil, true
	}
	if c, ns := r.worstCause(); ns > 0 {
		return &c, false
	}
	return nil, false
}

// nextFor is the next step for the cause the headline names, of the kind
// of wait it mostly was where it has kinds: where its stalls are the
// target's memory cgroup at its limit and the run read the group, the
// group with its figures; else the recorded doctor's finding that
// explains the cause (returned too); else the cause's advice.
func (r *Report) nextFor(c stall.Cause) (string, *doctor.Finding) {
	d := c.Desc()
	kind := r.kindOf(c)
	if step := d.LimitFor(kind); step != nil && r.MemoryCgroup.Known() {
		if cg := r.MemoryCgroup.Last(); cg.Bound() != memcg.Unlimited {
			return r.MemoryCgroup.Sentence() + ": " + step.Do(cg.Knob()), nil
		}
		return r.MemoryCgroup.Sentence() + ": " + noLimit, nil
	}
	if f := r.findingFor(c); f != nil {
		next := "doctor, on the recorded machine: " + f.Title
		if f.Fix != "" {
			next += "; fix: " + f.Fix
		}
		return next, f
	}
	return d.AdviceFor(kind), nil
}

// noLimit is the next step for a cause that is a memory cgroup at its
// limit when the target's group, and every group above it that numatrace
// sees, has none.
const noLimit = "no limit on it or above it that numatrace can see explains the stalls: look for a limit above its cgroup namespace, " +
	"or for writes to memory.reclaim"

// kindOf is the kind of wait the cause's stalls mostly were, where it
// has kinds: in the spikes it covers, when the latency analysis judged
// it; else over the run.
func (r *Report) kindOf(c stall.Cause) string {
	if r.Correlation != nil {
		if cc := r.Correlation.Correlation[c]; cc != nil && cc.Reason != "" {
			return cc.Reason
		}
	}
	return r.Summary.Causes[c].Kind
}

// findingFor is the recorded doctor's most severe finding that explains
// the cause, nil when doctor found none or was not run.
func (r *Report) findingFor(c stall.Cause) *doctor.Finding {
	var best *doctor.Finding
	for _, check := range c.Desc().Checks {
		for i := range r.Findings {
			f := &r.Findings[i]
			if f.Check == check && f.Severity > doctor.Info && (best == nil || f.Severity > best.Severity) {
				best = f
			}
		}
	}
	return best
}

// worstThreads are the threads frozen longest, each with its main cause.
func (r *Report) worstThreads() []WorstThread {
	out := []WorstThread{}
	for _, t := range r.Summary.Threads { // the most stall time first
		if len(out) == worstShown || t.StallNs == 0 || t.StallNs < r.Summary.Threads[0].StallNs/worstShare {
			break
		}
		w := WorstThread{PID: t.PID, TID: t.TID, Comm: t.Comm, StallNs: t.StallNs}
		for _, c := range stall.AllCauses() {
			if cs := t.Stalls[c]; c.Freezes() && cs.TotalNs > w.CauseNs {
				w.Cause, w.Kind, w.CauseNs, w.MaxNs = c.String(), cs.Kind, cs.TotalNs, cs.MaxNs
			}
		}
		out = append(out, w)
	}
	return out
}

// headlineText writes the headline block, each part wrapped under its
// label.
func (r *Report) headlineText(w io.Writer, width int) {
	h := r.Headline()
	para := func(label, text string) { fmt.Fprintln(w, textwrap.Hanging(label, text, width)) }
	para("VERDICT: ", sanitize.Text(h.Verdict))
	for i, t := range h.Worst {
		label := "WORST:   "
		if i > 0 {
			label = "         "
		}
		para(label, fmt.Sprintf("tid %d %s (pid %d) froze %s, most in %s (%s, longest %s)", t.TID, sanitize.Text(t.Comm), t.PID,
			Dur(t.StallNs), sanitize.Text(t.label()), Dur(t.CauseNs), Dur(t.MaxNs)))
	}
	para("NEXT:    ", sanitize.Text(h.Next))
}

// processes counts processes: prose.Count's plural would say
// "processs".
func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
