package output

import (
	"fmt"
	"strings"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

// ChildrenHint says that a --pid target's untraced descendants stalled,
// and how to trace them; "" when none did, or they were not watched.
// target describes the target ("pid 4242 (postgres)"), ownNs is what it
// stalled itself. The text report, the JSON summary and the view all
// show this one sentence.
func ChildrenHint(target string, ownNs uint64, c *aggregate.ChildStalls) string {
	if c == nil || c.Processes == 0 {
		return ""
	}
	procs := fmt.Sprintf("%d child processes", c.Processes)
	if c.Processes == 1 {
		procs = "1 child process"
	}
	var names, each []string
	for _, cause := range stall.AllCauses() {
		if s := c.Stalls[cause]; s.TotalNs > 0 {
			names = append(names, cause.String())
			each = append(each, cause.String()+" "+Dur(s.TotalNs))
		}
	}
	what := Dur(c.StallNs)
	switch {
	case len(names) == 1:
		what += " in " + names[0]
	case len(names) > 1:
		what += " (" + strings.Join(each, ", ") + ")"
	}
	if ownNs == 0 {
		return fmt.Sprintf("%s stalled nothing, but its %s stalled %s: trace them with --children (-f)", target, procs, what)
	}
	return fmt.Sprintf("%s stalled %s itself, and its %s, not traced, stalled %s: trace them with --children (-f)",
		target, Dur(ownNs), procs, what)
}

// ChildrenHint is the report's hint about the target's descendants.
func (r *Report) ChildrenHint() string {
	var own uint64
	for _, p := range r.Summary.Processes {
		own += p.StallNs
	}
	return ChildrenHint(r.Target, own, r.Summary.Children)
}
