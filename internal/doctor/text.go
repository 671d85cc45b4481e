package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/numatrace/numatrace/internal/sanitize"
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
		fmt.Fprintf(w, "\n[%s] %s (%s)\n", strings.ToUpper(f.Severity.String()), esc(f.Title), esc(f.Check))
		fmt.Fprintln(w, "  evidence:")
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "    %s\n", esc(e))
		}
		fmt.Fprintf(w, "  why: %s\n", esc(f.Why))
		fmt.Fprintf(w, "  trade-off: %s\n", esc(f.TradeOff))
		if f.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", esc(f.Fix))
		}
		if f.Persist != "" {
			fmt.Fprintf(w, "  persist: %s\n", esc(f.Persist))
		}
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintln(w, "\nnot checked:")
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  %s\n", esc(s))
		}
	}
	if r.Numastat != nil {
		fmt.Fprintln(w)
		r.Numastat.Write(w, r.PID, r.Comm)
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
