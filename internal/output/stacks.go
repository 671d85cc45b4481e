package output

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// StacksShown is how many stacks the report shows per thread and cause.
const StacksShown = 3

// stackWidth is the width a stack's path is fitted to in the text report
// (a narrower terminal's report wraps it, rather than cut more frames).
const stackWidth = Width

// stacks says where the threads with the most stall time were when they
// stalled: for each thread and cause of the histograms above, the stacks
// that carry most of the time of its stalls that have one.
func (r *Report) stacks(w io.Writer) {
	s := r.Summary
	if r.StacksMinNs == 0 && len(s.Stacks) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSTACKS (%s)\n", r.stacksTaken())
	shown := 0
	for _, ref := range r.histRefs() {
		top, total := aggregate.TopStacks(s.Stacks, ref.t.TID, ref.cause, StacksShown)
		if total == 0 {
			continue
		}
		fmt.Fprintf(w, "%s in tid %d (%s): %s of its %s in stalls with stacks\n", sanitize.Text(ref.cause.Label(ref.cs.Kind)), ref.t.TID,
			sanitize.Text(ref.t.Comm), Dur(total), Dur(ref.cs.TotalNs))
		for _, st := range top {
			fmt.Fprintf(w, "  %s\n", StackShare(st, total))
			writeStack(w, st.Stack, "      ")
		}
		if shown++; shown == HistogramsShown {
			break
		}
	}
	if shown == 0 {
		fmt.Fprintln(w, "  no stall was long enough")
	}
}

// stacksTaken is the stacks' header: how many stalls took their stacks,
// from which length, and how many stacks could not be taken.
func (r *Report) stacksTaken() string {
	sys := r.Summary.System
	var b strings.Builder
	b.WriteString(prose.Count(sys.StacksTaken, "stall"))
	if r.StacksMinNs > 0 {
		fmt.Fprintf(&b, " of %s or more", time.Duration(r.StacksMinNs))
	}
	b.WriteString(" took their stacks")
	if sys.KernelStacksLost > 0 || sys.UserStacksLost > 0 {
		fmt.Fprintf(&b, "; not taken: %d kernel, %d user", sys.KernelStacksLost, sys.UserStacksLost)
	}
	if n := aggregate.StacksLeftOut(r.Summary.Stacks).Count; n > 0 {
		fmt.Fprintf(&b, "; left out: the stacks of %s", prose.Count(n, "stall"))
	}
	return b.String()
}

// writeStack writes a stack as two paths, the user's and the kernel's,
// each outermost first and fitted to the report's width, and its note.
func writeStack(w io.Writer, s *stall.Stack, indent string) {
	for _, line := range StackLines(s, stackWidth-len(indent)) {
		fmt.Fprintf(w, "%s%s\n", indent, line)
	}
}

// StackLines are a stack as the text report and the view show it, in
// width columns: "user   main → read_the_file → read", "kernel ksys_read
// → … → try_to_free_mem_cgroup_pages", and "(its note)".
func StackLines(s *stall.Stack, width int) []string {
	var lines []string
	user, kernel := StackPaths(s)
	for _, part := range []struct {
		label string
		names []string
	}{{"user  ", user}, {"kernel", kernel}} {
		if len(part.names) > 0 {
			lines = append(lines, part.label+" "+FitPath(part.names, width-len(part.label)-1))
		}
	}
	if s.Note != "" {
		lines = append(lines, "("+sanitize.Text(s.Note)+")")
	}
	return lines
}

// StackPaths are a stack's user and kernel frames as the text shows
// them: names outermost first, made safe to print, without the kernel's
// way in from user space.
func StackPaths(s *stall.Stack) (user, kernel []string) {
	return pathOf(s.User, false), pathOf(s.Kernel, true)
}

func pathOf(frames []stall.Frame, kernel bool) []string {
	names := make([]string, 0, len(frames))
	for i := len(frames) - 1; i >= 0; i-- {
		if kernel && i > 0 && len(names) == 0 && isKernelEntry(frames[i].Func) {
			continue
		}
		names = append(names, sanitize.Text(frames[i].Name()))
	}
	return names
}

// isKernelEntry says whether a kernel frame is the way in from user
// space (a system call's or an exception's entry), which every stack of
// its kind starts with: the text leaves it out to show what follows.
func isKernelEntry(fn string) bool {
	for _, p := range []string{"entry_SYSCALL", "do_syscall_", "x64_sys_call", "asm_exc_", "asm_sysvec_"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// FitPath joins names with arrows in at most width columns (counting
// runes), leaving out frames after the second and before the last ones
// as "…" when they do not fit: where the path came from and where it
// ended are what a reader looks for.
func FitPath(names []string, width int) string {
	const arrow, gap = " → ", "…"
	full := strings.Join(names, arrow)
	if runeLen(full) <= width || len(names) <= 3 {
		return full
	}
	head := names[:2]
	used := runeLen(strings.Join(head, arrow)) + runeLen(arrow+gap)
	first := len(names)
	for first > 2 {
		n := runeLen(arrow + names[first-1])
		if first < len(names) && used+n > width {
			break
		}
		used += n
		first--
	}
	if first <= 2 {
		return full
	}
	return strings.Join(head, arrow) + arrow + gap + arrow + strings.Join(names[first:], arrow)
}

func runeLen(s string) int { return len([]rune(s)) }

// StackShare is a stack's line above its paths: its share of total, its
// time and its stalls, of their kind of wait where the cause has kinds
// ("82% 18.00ms in 6 stalls", "100% 4.10ms in 3 stalls of thrashing").
func StackShare(st aggregate.StackSample, total uint64) string {
	s := fmt.Sprintf("%3.0f%% %s in %s", 100*float64(st.Ns)/float64(total), Dur(st.Ns), prose.Count(st.Count, "stall"))
	if st.Kind != "" {
		s += " of " + sanitize.Text(st.Kind)
	}
	return s
}

// stackJSON is one stack's stalls in one thread, for one cause.
type stackJSON struct {
	Cause   string      `json:"cause"`
	Reason  string      `json:"reason,omitempty"` // the stalls' kind of wait (memstall_wait's thrashing)
	PID     uint32      `json:"pid"`
	TID     uint32      `json:"tid"`
	Comm    string      `json:"comm"`
	Process string      `json:"process"`
	Count   uint64      `json:"count"`
	TotalNs uint64      `json:"total_ns"`
	Kernel  []frameJSON `json:"kernel"`
	User    []frameJSON `json:"user"`
	Note    string      `json:"note,omitempty"`
}

// frameJSON is one frame, innermost first in its stack.
type frameJSON struct {
	Func    string `json:"func"`
	Module  string `json:"module"`
	Offset  uint64 `json:"offset,omitempty"` // user frames: in the file
	Addr    uint64 `json:"addr"`
	BuildID string `json:"build_id,omitempty"`
}

func stacksJSON(samples []aggregate.StackSample) []stackJSON {
	out := make([]stackJSON, 0, len(samples))
	for _, s := range samples {
		out = append(out, stackJSON{Cause: s.Cause.String(), Reason: s.Kind, PID: s.PID, TID: s.TID, Comm: s.Comm, Process: s.Process,
			Count: s.Count, TotalNs: s.Ns, Kernel: frameList(s.Stack.Kernel), User: frameList(s.Stack.User),
			Note: s.Stack.Note})
	}
	return out
}

// framesJSON is a stack on its own: its frames, innermost first, and its note.
type framesJSON struct {
	Kernel []frameJSON `json:"kernel"`
	User   []frameJSON `json:"user"`
	Note   string      `json:"note,omitempty"`
}

func stackFramesJSON(s *stall.Stack) *framesJSON {
	if s == nil {
		return nil
	}
	return &framesJSON{Kernel: frameList(s.Kernel), User: frameList(s.User), Note: s.Note}
}

func frameList(frames []stall.Frame) []frameJSON {
	out := make([]frameJSON, 0, len(frames))
	for _, f := range frames {
		out = append(out, frameJSON{Func: f.Name(), Module: f.Module, Offset: f.Offset, Addr: f.Addr, BuildID: f.BuildID})
	}
	return out
}
