package output

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/textwrap"
)

// Dur formats nanoseconds for people: 812ns, 16.4µs, 3.21ms, 1.50s.
func Dur(ns uint64) string {
	switch {
	case ns < 1_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 999_950: // not "1000.0µs"
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case ns < 999_995_000:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}

// HistogramsShown is how many (thread, cause) histograms the text report draws.
const HistogramsShown = 10

// errWriter remembers the first write error so the report can be written
// without checking every Fprintf.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// Text writes the human-readable report, Width cells wide, and returns
// the first write error. Every text from the kernel or another process
// in it (comm, the target, the note, the verdicts that name a process) is
// escaped by sanitize.Text; the report's JSON keeps the original bytes.
func (r *Report) Text(out io.Writer) error { return r.TextWidth(out, Width) }

// TextWidth is Text with lines of at most width cells (a narrower
// terminal's), Width at most.
func (r *Report) TextWidth(out io.Writer, width int) error {
	width = min(width, Width)
	var b bytes.Buffer
	r.text(&b, width)
	ew := &errWriter{w: out}
	fitWidth(ew, b.String(), width)
	return ew.err
}

// Width is the text report's widest line, in cells, where it is not
// written to a narrower terminal: files and pipes get it everywhere.
const Width = 100

// WidthOf is the width of the report written to w: a terminal's width
// when it is narrower than Width (else an 80-column terminal wraps every
// long line twice), otherwise Width.
func WidthOf(w io.Writer) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return Width
	}
	cols, _, err := term.GetSize(f.Fd())
	if err != nil || cols <= 0 { // not a terminal
		return Width
	}
	return min(cols, Width)
}

// fitWidth writes text with every line wider than width wrapped at its
// spaces, the continuation indented under it: numbers and names stay
// whole. Trailing blanks (a table's padding) are dropped.
func fitWidth(w io.Writer, text string, width int) {
	for _, line := range strings.SplitAfter(text, "\n") {
		body := strings.TrimRight(strings.TrimSuffix(line, "\n"), " ") // a table's padding
		nl := line[len(strings.TrimSuffix(line, "\n")):]
		if ansi.StringWidth(body) <= width {
			io.WriteString(w, body+nl)
			continue
		}
		lead := body[:len(body)-len(strings.TrimLeft(body, " "))]
		io.WriteString(w, textwrap.Indented(lead, lead+"    ", body[len(lead):], width)+nl)
	}
}

// text writes the report, its headline wrapped and its tables fitted to
// width cells where they can be; fitWidth wraps what is left. Stacks are
// fitted to Width and wrapped after: a narrow terminal loses no frame.
func (r *Report) text(w io.Writer, width int) {
	attached := 0
	var failed, skipped []string
	for _, p := range r.Probes {
		switch {
		case p.Skipped:
			skipped = append(skipped, p.Name)
		case p.Attached:
			attached++
		default:
			failed = append(failed, p.Name)
		}
	}
	s := r.Summary
	from := ""
	if !r.Started.IsZero() {
		from = " from " + run.Clock(r.Started)
	}
	fmt.Fprintf(w, "numatrace: %s for %s%s on %s\n", sanitize.Text(r.Target), time.Duration(r.DurationNs).Round(time.Millisecond), from,
		sanitize.Text(r.Kernel))
	fmt.Fprintf(w, "probes %d/%d attached | events %d | lost events %d\n", attached, len(r.Probes)-len(skipped), r.Events, s.Lost)
	r.discarded(w)
	if len(failed) > 0 {
		fmt.Fprintf(w, "not attached: %s (see `numatrace probes`)\n", sanitize.Text(strings.Join(failed, ", ")))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "left out (--causes / --no-causes): %s\n", sanitize.Text(strings.Join(skipped, ", ")))
	}
	if s.HistMapFull {
		r.evicted(w)
	}
	if s.System.TargetsFull > 0 {
		fmt.Fprintf(w, "WARNING: %d new processes of the target could not be followed: the target set is full\n", s.System.TargetsFull)
	}
	if c := s.Children; c != nil && c.NotWatched > 0 {
		fmt.Fprintf(w, "WARNING: %d child processes could not be watched (the kernel's set of them is full): what they stalled is not counted below\n", c.NotWatched)
	}
	if s.Lost > 0 {
		fmt.Fprintf(w, "WARNING: %d events were dropped by a full ring buffer; totals and histograms below are still exact\n", s.Lost)
	}
	if src := r.LatencySource.String(); src != "" { // after the warnings: a source that gave nothing says so second
		fmt.Fprintf(w, "latency: %s\n", sanitize.Text(src))
	}
	fmt.Fprintln(w)
	r.headlineText(w, width)
	fmt.Fprintln(w)
	if hint := r.ChildrenHint(); hint != "" {
		fmt.Fprintf(w, "%s\n\n", sanitize.Text(hint))
	}
	switch threads, _ := r.threadsOfNote(); {
	case len(s.Threads) == 0:
		fmt.Fprintln(w, "No stalls or migrations recorded.")
	case len(threads) == 0:
		fmt.Fprintf(w, "No thread stalled; %s\n", r.onlyMoved())
	default:
		r.processTable(w)
		r.threadTable(w, width)
		r.histograms(w)
		r.stacks(w)
	}
	r.waits(w)
	r.system(w)
	r.pressure(w)
	r.latency(w)
	if r.Note != "" {
		fmt.Fprintf(w, "\nnote: %s\n", sanitize.Text(r.Note))
	}
	fmt.Fprintf(w, "\nVERDICT: %s\n", sanitize.Text(r.verdict())) // first and last: where a reader looks
}

// discarded warns of the input the run left out, first thing: a latency
// source that gave nothing usable, latency readings outside the trace or
// late, what the source skipped, records the kernel sent that could not
// be decoded.
func (r *Report) discarded(w io.Writer) {
	if r.Latency != nil {
		for _, p := range r.Latency.Problems() {
			fmt.Fprintf(w, "WARNING: %s\n", sanitize.Text(p.Text))
		}
	}
	if r.BadRecords > 0 {
		fmt.Fprintf(w, "WARNING: %s\n", prose.BadRecords(r.BadRecords))
	}
}

// evicted warns that the thread and process tables miss evicted threads'
// stalls, and gives the exact totals by cause they fall short of.
func (r *Report) evicted(w io.Writer) {
	s := r.Summary
	if s.HistEvicted == 0 && !anyUnlisted(s.Unlisted) {
		fmt.Fprintln(w, "WARNING: the kernel's histogram map filled up; the least recently stalled threads were evicted (narrow the target)")
		return
	}
	var miss []string
	for _, c := range stall.AllCauses() {
		u := s.Unlisted[c]
		if !u.Any() {
			continue
		}
		miss = append(miss, fmt.Sprintf("%d %s stalls (%s)", u.Count, c, Dur(u.TotalNs)))
	}
	what := "none of their stalls"
	if len(miss) > 0 {
		what = strings.Join(miss, ", ")
	}
	evicted := "thread histograms were"
	if s.HistEvicted > 0 {
		evicted = fmt.Sprintf("%d thread histograms were", s.HistEvicted)
	}
	fmt.Fprintf(w, "WARNING: %s evicted from the kernel's full map (narrow the target); the thread and process tables miss %s. Exact totals by cause:\n",
		evicted, what)
	for _, c := range stall.AllCauses() {
		cs := s.Causes[c]
		if !cs.Has() {
			continue
		}
		fmt.Fprintf(w, "  %-16s %d stalls, total %s, max %s\n", c, cs.Count, Dur(cs.TotalNs), Dur(cs.MaxNs))
	}
}

// anyUnlisted says whether the tables miss any cause's stalls.
func anyUnlisted(u [stall.NumCauses]aggregate.StallCount) bool {
	for _, c := range u {
		if c.Any() {
			return true
		}
	}
	return false
}

// ofNote says whether a thread's or process's row says anything beyond
// moves between CPUs of one node: a stall, a counted cause such as a
// NUMA task move, or a move across nodes. A cause counted as migrations
// says no more than the MIGR column does.
func ofNote(stalls *aggregate.CauseSummaries, m aggregate.Migrations) bool {
	if m.CrossNode > 0 {
		return true
	}
	for _, c := range stall.AllCauses() {
		if !c.CountsMigrations() && stalls[c].Has() {
			return true
		}
	}
	return false
}

// threadsOfNote are the threads the table lists, and how many it leaves
// out since they only moved between CPUs of one node.
func (r *Report) threadsOfNote() (shown []aggregate.ThreadSummary, moved int) {
	for _, t := range r.Summary.Threads {
		if ofNote(&t.Stalls, t.Migrations) {
			shown = append(shown, t)
		} else {
			moved++
		}
	}
	return shown, moved
}

// onlyMoved says how many threads the tables leave out for only moving
// between CPUs of one node.
func (r *Report) onlyMoved() string {
	_, moved := r.threadsOfNote()
	were := "were"
	if moved == 1 {
		were = "was"
	}
	return fmt.Sprintf("%s only moved between CPUs of one node (%s left out: --json lists them).",
		prose.Count(uint64(moved), "thread"), were)
}

func (r *Report) threadTable(w io.Writer, width int) {
	threads, moved := r.threadsOfNote()
	top := r.top()
	if len(threads) > top {
		fmt.Fprintf(w, "THREADS (top %d of %d by stall time)\n", top, len(threads))
		threads = threads[:top]
	} else {
		fmt.Fprintf(w, "THREADS (%d)\n", len(threads))
	}
	writeTable(w, width, func(tw io.Writer, narrow bool) { r.threadRows(tw, threads, narrow) })
	fmt.Fprintln(w, "(* = thread exited)")
	if moved > 0 {
		fmt.Fprintln(w, r.onlyMoved())
	}
}

// threadRows are the thread table's header and rows, tab-separated;
// narrow puts a cause's kind of wait on a row of its own under it, where
// "reclaim_throttle (writeback)" would widen the table past the width.
func (r *Report) threadRows(tw io.Writer, threads []aggregate.ThreadSummary, narrow bool) {
	fmt.Fprintln(tw, "PID\tTID\tCOMM\tCAUSE\tCOUNT\tTOTAL\tMAX\tP50\tP99\tMIGR\tX-NODE\t")
	for _, t := range threads {
		comm := sanitize.Text(t.Comm)
		if t.Exited {
			comm += "*"
		}
		first := true
		row := func(cause stall.Cause, c *aggregate.CauseSummary) {
			pid, tid, name, mig, cross := "", "", "", "", ""
			if first {
				pid, tid, name = fmt.Sprint(t.PID), fmt.Sprint(t.TID), comm
				mig, cross = fmt.Sprint(t.Migrations.Total), fmt.Sprint(t.Migrations.CrossNode)
				first = false
			}
			if c == nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\t-\t\t\t\t\t\t%s\t%s\t\n", pid, tid, name, mig, cross)
				return
			}
			// With its kind of wait where it has kinds: memstall_wait (thrashing).
			named, kind := sanitize.Text(cause.Label(c.Kind)), ""
			if narrow && named != cause.String() {
				named, kind = cause.String(), sanitize.Text(strings.TrimPrefix(cause.Label(c.Kind), cause.String()+" "))
			}
			if !cause.Timed() { // a count: there is no time to show
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t-\t-\t-\t-\t%s\t%s\t\n", pid, tid, name, named, c.Count, mig, cross)
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", pid, tid, name, named, c.Count,
					Dur(c.TotalNs), Dur(c.MaxNs), Dur(c.P50Ns), Dur(c.P99Ns), mig, cross)
			}
			if kind != "" {
				fmt.Fprintf(tw, "\t\t\t%s\t\t\t\t\t\t\t\t\n", kind)
			}
		}
		for _, c := range stall.AllCauses() {
			if cs := t.Stalls[c]; cs.Has() {
				row(c, &cs)
			}
		}
		if first {
			row(0, nil)
		}
	}
}

// writeTable lays out tab-separated right-aligned cells two blanks
// apart, or one when that is what fits width, or one and fill's narrow
// rows: wider than width, fitWidth would wrap each row as prose, and its
// columns would be lost.
func writeTable(w io.Writer, width int, fill func(tw io.Writer, narrow bool)) {
	var out string
	for _, l := range []struct {
		pad    int
		narrow bool
	}{{2, false}, {1, false}, {1, true}} {
		var b bytes.Buffer
		tw := tabwriter.NewWriter(&b, 0, 0, l.pad, ' ', tabwriter.AlignRight)
		fill(tw, l.narrow)
		tw.Flush()
		out = b.String()
		if widest(out) <= width {
			break
		}
	}
	io.WriteString(w, out)
}

// widest is the width of text's widest line, trailing blanks left out.
func widest(text string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		n = max(n, ansi.StringWidth(strings.TrimRight(l, " ")))
	}
	return n
}

// ProcessesShown is how many processes the text report lists.
const ProcessesShown = 10

func (r *Report) processTable(w io.Writer) {
	var procs []aggregate.ProcessSummary
	for _, p := range r.Summary.Processes {
		if ofNote(&p.Stalls, p.Migrations) {
			procs = append(procs, p)
		}
	}
	if len(procs) > ProcessesShown {
		fmt.Fprintf(w, "PROCESSES (top %d of %d by stall time)\n", ProcessesShown, len(procs))
		procs = procs[:ProcessesShown]
	} else {
		fmt.Fprintf(w, "PROCESSES (%d)\n", len(procs))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PID\tCOMM\tTHREADS\tSTALL\tWORST CAUSE\tMIGR\tX-NODE\t")
	for _, p := range procs {
		worst, worstNs := "-", uint64(0)
		for _, c := range stall.AllCauses() {
			if cs := p.Stalls[c]; cs.Has() && c.Freezes() && cs.TotalNs > worstNs { // the STALL beside it
				worst, worstNs = sanitize.Text(c.Label(cs.Kind)), cs.TotalNs
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%d\t%d\t\n", p.PID, sanitize.Text(p.Comm), p.Threads, Dur(p.StallNs), worst,
			p.Migrations.Total, p.Migrations.CrossNode)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

type histRef struct {
	t     aggregate.ThreadSummary
	cause stall.Cause
	cs    aggregate.CauseSummary
}

func (r *Report) histograms(w io.Writer) {
	refs := r.histRefs()
	if len(refs) > HistogramsShown {
		refs = refs[:HistogramsShown]
	}
	for _, ref := range refs {
		fmt.Fprintf(w, "\n%s of tid %d (%s): %s, total %s\n", sanitize.Text(ref.cause.Label(ref.cs.Kind)), ref.t.TID, sanitize.Text(ref.t.Comm),
			prose.Count(ref.cs.Count, "stall"), Dur(ref.cs.TotalNs))
		WriteHist(w, ref.cs.Hist)
	}
}

// histRefs are the threads' causes with stall time, the most first.
func (r *Report) histRefs() []histRef {
	var refs []histRef
	for _, t := range r.Summary.Threads {
		for c, cs := range t.Stalls {
			if cs.Hist == nil || cs.TotalNs == 0 {
				continue
			}
			refs = append(refs, histRef{t, stall.Cause(c), cs})
		}
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].cs.TotalNs != refs[j].cs.TotalNs {
			return refs[i].cs.TotalNs > refs[j].cs.TotalNs
		}
		if refs[i].t.TID != refs[j].t.TID {
			return refs[i].t.TID < refs[j].t.TID
		}
		return refs[i].cause.String() < refs[j].cause.String() // the order the report has always had
	})
	return refs
}

// HistRow is one bucket of a drawn histogram.
type HistRow struct {
	Lo, Hi uint64 // the bucket's range [Lo, Hi) in ns
	Count  uint64
	Bar    int // cells of bar, scaled to the fullest bucket
}

// HistRows lays a log2 histogram out for drawing: one row per bucket from
// the first non-empty one to the last, with bars of up to width cells. The
// text report and the interactive view both draw from it.
func HistRows(h *stall.Hist, width int) []HistRow {
	lo, hi := -1, -1
	var peak uint64
	for i, c := range h.Slots {
		if c == 0 {
			continue
		}
		if lo < 0 {
			lo = i
		}
		hi = i
		peak = max(peak, c)
	}
	if lo < 0 {
		return nil
	}
	rows := make([]HistRow, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		a, b := stall.SlotRange(i)
		rows = append(rows, HistRow{Lo: a, Hi: b, Count: h.Slots[i], Bar: BarCells(h.Slots[i], peak, width)})
	}
	return rows
}

// BarCells is how many of width cells a bar for v out of top fills:
// rounded, and at least one for any v above zero.
func BarCells(v, top uint64, width int) int {
	if top == 0 || width <= 0 {
		return 0
	}
	n := int(float64(v)/float64(top)*float64(width) + 0.5)
	if v > 0 && n == 0 {
		n = 1
	}
	return min(n, width)
}

// WriteHist draws a log2 histogram, one bar per bucket in the non-empty range.
func WriteHist(w io.Writer, h *stall.Hist) {
	const width = 40
	rows := HistRows(h, width)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "  %21s : %-8s %s\n", "duration", "count", "distribution")
	for _, r := range rows {
		fmt.Fprintf(w, "  %9s -> %-8s : %-8d |%-*s|\n", Dur(r.Lo), Dur(r.Hi), r.Count, width, strings.Repeat("*", r.Bar))
	}
}

func (r *Report) system(w io.Writer) {
	s := r.Summary.System
	fmt.Fprintln(w, "\nSYSTEM-WIDE (never charged to a thread)")
	fmt.Fprintf(w, "  kswapd wakeups %d | khugepaged collapses %d (%d succeeded)\n",
		s.KswapdWakeups, s.KhugepagedCollapses, s.KhugepagedCollapsedOK)
	fmt.Fprintf(w, "  kcompactd passes %d (%s) | proactive/sysctl compaction passes %d (%s)\n",
		s.KcompactdPasses, Dur(s.KcompactdNs), s.ProactivePasses, Dur(s.ProactiveNs))
	fmt.Fprintf(w, "  direct compaction attempts %d\n", s.DirectCompactAttempts)
}

// top is how many rows of a list (threads, spikes) the text shows.
func (r *Report) top() int {
	if r.TopThreads <= 0 {
		return 20
	}
	return r.TopThreads
}

// WorstFirst are the spikes (or frozen windows) by how far each went
// over its threshold, the worst first, as the report lists them (and the
// view its frozen windows); the JSON keeps them in time order.
func WorstFirst(spikes []correlate.Spike) []correlate.Spike {
	out := slices.Clone(spikes)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ExcessNs > out[j].ExcessNs })
	return out
}

func (r *Report) latency(w io.Writer) {
	c := r.Correlation
	if c == nil {
		return
	}
	spikes := WorstFirst(c.Spikes)
	order := ""
	if len(spikes) > 1 {
		order = ", the worst first"
	}
	fmt.Fprintf(w, "\nLATENCY (%s with requests, %s%s)\n", prose.Count(uint64(c.Windows), "window"),
		prose.Count(uint64(len(spikes)), "spike"), order)
	measured(w, &c.Measured)
	r.verdicts(w, spikes, "more spike")
	if len(c.Spikes) > 0 {
		fmt.Fprintln(w, "  covers half: the share of spikes of which the cause's stall covers at least half")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  CAUSE\tCOVERS HALF\tIN SPIKE WINDOWS\tIN NORMAL WINDOWS\tLIFT\tRANK CORR.\t")
		for _, cause := range stall.AllCauses() {
			cc := c.Correlation[cause]
			if cc == nil {
				continue
			}
			lift, rho := "-", "-"
			if cc.Lift != nil {
				lift = fmt.Sprintf("%.1f", *cc.Lift)
			} else if cc.SpikeShare > 0 {
				lift = "only spikes"
			}
			if cc.Spearman != nil {
				rho = fmt.Sprintf("%.2f", *cc.Spearman)
			}
			fmt.Fprintf(tw, "  %s\t%.0f%%\t%.0f%%\t%.0f%%\t%s\t%s\t\n", sanitize.Text(cause.Label(cc.Reason)), cc.Covered*100, cc.SpikeShare*100, cc.NormalShare*100, lift, rho)
		}
		tw.Flush()
	}
	if n := len(c.Frozen); n > 0 {
		worst := ""
		if n > 1 {
			worst = ", the worst first"
		}
		fmt.Fprintf(w, "  %s froze while %s held (p99.9 or max over the SLO, or a thread that served requests frozen a tenth of the window)%s:\n",
			prose.Count(uint64(n), "window"), c.On, worst)
		r.verdicts(w, WorstFirst(c.Frozen), "more frozen window")
	}
}

// measured is the latency the run measured, spikes or not: each figure's
// lowest and highest over the windows with requests.
func measured(w io.Writer, m *correlate.Measured) {
	if m.Windows == 0 {
		return
	}
	line := fmt.Sprintf("  measured per window: p99 %s to %s", Dur(m.P99.Lo), Dur(m.P99.Hi))
	if m.HasP999 {
		line += fmt.Sprintf(", p99.9 %s to %s", Dur(m.P999.Lo), Dur(m.P999.Hi))
	}
	fmt.Fprintf(w, "%s, max %s to %s\n", line, Dur(m.Max.Lo), Dur(m.Max.Hi))
}

// verdicts writes the verdicts of spikes (or frozen windows), the worst
// first, each with the stack of the stall that covers it most, up to
// --top of them; more says what the rest are.
func (r *Report) verdicts(w io.Writer, spikes []correlate.Spike, more string) {
	for i, sp := range spikes {
		if i == r.top() {
			fmt.Fprintf(w, "  ... %s, each smaller than those above (--top %d shows them all; --json lists them in time order)\n",
				prose.Count(uint64(len(spikes)-i), more), len(spikes))
			break
		}
		fmt.Fprintf(w, "  %s\n", sanitize.Text(sp.Verdict))
		if top := sp.Causes; len(top) > 0 && top[0].Coverage > 0 && top[0].Stack != nil {
			fmt.Fprintf(w, "    where %s stalled (tid %d):\n", sanitize.Text(top[0].Cause.Label(top[0].Reason)), top[0].WorstTID)
			writeStack(w, top[0].Stack, "      ")
		}
	}
}
