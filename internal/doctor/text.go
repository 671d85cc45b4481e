package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/textwrap"
)

// Text writes the findings for people, worst first.
func (r *Report) Text(w io.Writer) {
	target := "this machine"
	if r.PID > 0 {
		target = fmt.Sprintf("pid %d (%s)", r.PID, sanitize.Text(r.Comm))
	}
	fmt.Fprintf(w, "numatrace doctor: %s, %d NUMA node(s): ", target, r.Nodes)
	counts := map[Severity]int{}
	for _, f := range r.Findings {
		counts[f.Severity]++
	}
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "nothing found")
	} else {
		fmt.Fprintf(w, "%d crit, %d warn, %d info\n", counts[Crit], counts[Warn], counts[Info])
	}
	// Findings quote what they read (cgroup paths, interface names), which
	// other users can name: every line is escaped, and stays one line.
	esc := sanitize.Text
	for _, f := range r.Findings {
		fmt.Fprintln(w)
		wrapped(w, "["+strings.ToUpper(f.Severity.String())+"] ", "  ", esc(f.Title)+" ("+esc(f.Check)+")")
		fmt.Fprintln(w, "  evidence:")
		for _, e := range f.Evidence {
			wrapped(w, "    ", "      ", esc(e))
		}
		labelled(w, "why", esc(f.Why))
		labelled(w, "trade-off", esc(f.TradeOff))
		labelled(w, "fix", esc(f.Fix))
		labelled(w, "persist", esc(f.Persist))
	}
	if s := r.memcgSpan(); s.Known() {
		fmt.Fprintln(w)
		wrapped(w, "memory cgroup: ", "  ", esc(s.Sentence()))
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintln(w, "\nnot checked:")
		for _, s := range r.Skipped {
			wrapped(w, "  ", "    ", esc(s))
		}
	}
	if r.Numastat != nil {
		fmt.Fprintln(w)
		r.Numastat.Write(w, r.PID, r.Comm)
	}
}

// TextWidth is the width Text wraps to: a finding's prose is paragraphs
// long, and a terminal or a ticket shows 100 columns without wrapping.
const TextWidth = 100

// wrapped writes s wrapped to TextWidth at spaces, its first line after
// first and the others after rest: a path or a number stays whole.
func wrapped(w io.Writer, first, rest, s string) {
	fmt.Fprintln(w, textwrap.Indented(first, rest, s, TextWidth))
}

// labelled writes "  why: ..." with its text aligned under the first
// line's; an empty text writes nothing.
func labelled(w io.Writer, label, s string) {
	if s != "" {
		fmt.Fprintln(w, textwrap.Hanging("  "+label+": ", s, TextWidth))
	}
}

// Lines are the findings one line each, for the TUI's System screen.
func (r *Report) Lines() []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, fmt.Sprintf("[%s] %s", f.Severity, sanitize.Text(f.Title)))
	}
	return out
}
