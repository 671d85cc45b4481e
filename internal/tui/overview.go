package tui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// overviewScreen is the strip of p99 over stall time per window and the
// thread (or process) table.
type overviewScreen struct {
	*shared
	sortKey   SortKey
	byProcess bool
	filter    textinput.Model
	filtering bool
	selected  int
	focus     *uint64 // a spike's window: the table shows its threads
}

func newOverview(sh *shared) *overviewScreen {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.CharLimit = 64
	return &overviewScreen{shared: sh, filter: ti}
}

func (o *overviewScreen) SetSize(int, int) {}

func (o *overviewScreen) reset() { o.selected = 0 }

func (o *overviewScreen) Help() []key.Binding {
	return []key.Binding{
		join("s / S", "sort by the next / previous column", table.Sort, table.SortBack),
		join("g", "group threads by process", table.Group),
		join("/", "filter by comm, pid or tid", table.Filter),
	}
}

// focusOn shows the threads of window idx (a spike's).
func (o *overviewScreen) focusOn(idx uint64) {
	o.focus = &idx
	o.selected = 0
}

func (o *overviewScreen) Update(k tea.KeyMsg) tea.Cmd {
	if o.filtering {
		return o.typeFilter(k)
	}
	if d, ok := list.move(k); ok {
		o.selected = min(max(0, o.selected+d), max(0, len(o.rows())-1))
		return nil
	}
	switch {
	case key.Matches(k, list.Enter):
		o.enter()
	case key.Matches(k, list.Esc):
		switch {
		case o.focus != nil:
			o.focus, o.selected = nil, 0
		case o.filter.Value() != "":
			o.filter.SetValue("")
		}
	case key.Matches(k, table.Sort):
		o.sortKey = (o.sortKey + 1) % numSortKeys
		o.selected = 0
	case key.Matches(k, table.SortBack):
		o.sortKey = (o.sortKey + numSortKeys - 1) % numSortKeys
		o.selected = 0
	case key.Matches(k, table.Group):
		o.byProcess = !o.byProcess
		o.selected = 0
	case key.Matches(k, table.Filter):
		o.filtering = true
		return o.filter.Focus()
	}
	return nil
}

// typeFilter edits the filter until enter keeps it or esc drops it.
func (o *overviewScreen) typeFilter(k tea.KeyMsg) tea.Cmd {
	o.selected = 0
	if key.Matches(k, list.Enter) || key.Matches(k, list.Esc) {
		o.filtering = false
		o.filter.Blur()
		if key.Matches(k, list.Esc) {
			o.filter.SetValue("")
		}
		return nil
	}
	var cmd tea.Cmd
	o.filter, cmd = o.filter.Update(k)
	return cmd
}

func (o *overviewScreen) enter() {
	rows := o.rows()
	if o.selected >= len(rows) {
		return
	}
	if !o.byProcess {
		o.showThread(rows[o.selected].TID)
		return
	}
	// A process row: show its threads.
	o.byProcess = false
	o.filter.SetValue(itoa(rows[o.selected].PID))
	o.selected = 0
}

func (o *overviewScreen) Hints() []string {
	h := []string{"sort: " + o.sortKey.String()}
	if o.byProcess {
		h = append(h, "by process")
	}
	if q := o.filter.Value(); q != "" {
		h = append(h, "filter: "+q)
	}
	if o.focus != nil {
		h = append(h, fmt.Sprintf("window %s (esc: all)", o.windowClock(*o.focus)))
	}
	return h
}

// rows is the table as shown: focused, grouped, filtered, sorted.
func (o *overviewScreen) rows() []Row {
	rows := o.frame.Rows
	if o.focus != nil {
		rows = windowRows(o.frame, *o.focus)
	}
	if o.byProcess {
		rows = aggregate.Processes(rows)
	}
	rows = FilterRows(rows, o.filter.Value())
	out := append([]Row(nil), rows...)
	SortRows(out, o.sortKey)
	return out
}

// windowRows are the threads that stalled in window idx.
func windowRows(f *Frame, idx uint64) []Row {
	var out []Row
	for _, w := range f.win {
		if w.Index != idx {
			continue
		}
		nodeOf := map[uint32]int{}
		for _, r := range f.Rows {
			nodeOf[r.TID] = r.Node
		}
		for _, t := range w.Threads {
			out = append(out, t.Row(nodeOf[t.TID]))
		}
	}
	return out
}

// windowHeld reports whether the frame still has window idx.
func windowHeld(f *Frame, idx uint64) bool {
	return len(f.win) > 0 && f.win[0].Index <= idx && idx <= f.win[len(f.win)-1].Index
}

// timelineWindows are the windows the strip has room for, newest last.
func (o *overviewScreen) timelineWindows(cols int) []WindowSummary {
	ws := o.frame.Windows
	if len(ws) > cols {
		ws = ws[len(ws)-cols:]
	}
	return ws
}

func (o *overviewScreen) spikeSet() map[uint64]bool {
	set := map[uint64]bool{}
	if a := o.analysis(); a != nil {
		for _, s := range a.Spikes {
			set[s.Index] = true
		}
	}
	return set
}

const timelineLabel, timelineMaxLabel = 7, 14

// timeline is the strip: p99 per window over stacked stall time, spikes
// marked.
func (o *overviewScreen) timeline() []string {
	cols := max(10, o.width-timelineLabel-timelineMaxLabel)
	ws := o.timelineWindows(cols)
	var out []string
	var p99 []uint64
	var peak uint64
	hasLat := false
	for _, w := range ws {
		p99 = append(p99, w.P99Ns)
		peak = max(peak, w.P99Ns)
		hasLat = hasLat || w.Count > 0
	}
	if hasLat {
		out = append(out, fmt.Sprintf("%-*s", timelineLabel, "p99")+sparkline(p99)+styleDim.Render(" max "+output.Dur(peak)))
	}
	var top uint64
	for _, w := range ws {
		top = max(top, total(w))
	}
	cells := causeCells()
	var shown [stall.NumCauses]bool
	for r, row := range stacked(ws, 3) {
		lbl := ""
		if r == 0 {
			lbl = "stall"
		}
		var b strings.Builder
		b.WriteString(fmt.Sprintf("%-*s", timelineLabel, lbl))
		for _, c := range row {
			if c < 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString(cells[c])
				shown[c] = true
			}
		}
		if r == 0 {
			b.WriteString(styleDim.Render(" max " + output.Dur(top)))
		}
		out = append(out, b.String())
	}
	if o.analysis() != nil {
		spikes := o.spikeSet()
		var mk strings.Builder
		mk.WriteString(fmt.Sprintf("%-*s", timelineLabel, "spikes"))
		spike := styleSpike.Render("▲")
		for _, w := range ws {
			if spikes[w.Index] {
				mk.WriteString(spike)
			} else {
				mk.WriteByte(' ')
			}
		}
		out = append(out, mk.String())
	}
	return append(out, legend(shown))
}

// legend names the cells of the causes the chart shows: a dozen causes'
// names do not fit in 80 columns, and those not drawn need none.
func legend(shown [stall.NumCauses]bool) string {
	var parts []string
	cells := causeCells()
	for c := range stall.NumCauses {
		if c.Timed() && shown[c] {
			parts = append(parts, cells[c]+" "+c.Desc().Short)
		}
	}
	return styleDim.Render("       ") + strings.Join(parts, "  ")
}

func nodeStr(n int) string {
	switch n {
	case -1:
		return "-"
	case -2:
		return "*"
	}
	return fmt.Sprint(n)
}

// tableCauses picks the cause columns that fit: the sort cause first,
// then the causes that make up STALL (memory management's), then the
// others (the run queue's), each the most stall time first.
func tableCauses(rows []Row, sortKey SortKey, room int) []stall.Cause {
	var sum [stall.NumCauses]uint64
	for _, r := range rows {
		for c := range r.ByCause {
			sum[c] += r.ByCause[c].TotalNs
		}
	}
	var cs []stall.Cause
	if sortKey >= SortCause0 && sortKey < SortMigrations {
		if c := stall.Cause(sortKey - SortCause0); c.Timed() {
			cs = append(cs, c)
		}
	}
	var rest []stall.Cause
	for c := range stall.NumCauses {
		if c.Timed() && sum[c] > 0 && (len(cs) == 0 || cs[0] != c) {
			rest = append(rest, c)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool {
		if a, b := rest[i].Freezes(), rest[j].Freezes(); a != b {
			return a
		}
		return sum[rest[i]] > sum[rest[j]]
	})
	cs = append(cs, rest...)
	if len(cs) > room {
		cs = cs[:room]
	}
	return cs
}

const causeColWidth = 18

// column is one of the table's fixed columns; a narrow terminal drops
// those with a drop rank, the lowest first, to make room for a cause.
type column struct {
	head  string
	width int
	left  bool
	drop  int // 0: never dropped
	cell  func(o *overviewScreen, r *Row) string
}

var tableColumns = []column{
	{"PID", 7, false, 0, func(_ *overviewScreen, r *Row) string { return itoa(r.PID) }},
	{"TID", 7, false, 0, func(o *overviewScreen, r *Row) string {
		if o.byProcess {
			return fmt.Sprint(r.Threads)
		}
		return itoa(r.TID)
	}},
	{"COMM", 15, true, 0, func(_ *overviewScreen, r *Row) string { return sanitize.Text(r.Comm) }},
	{"NODE", 4, false, 3, func(_ *overviewScreen, r *Row) string { return nodeStr(r.Node) }},
	{"STALL", 9, false, 0, func(_ *overviewScreen, r *Row) string { return output.Dur(r.StallNs) }},
	{"MIGR", 6, false, 2, func(_ *overviewScreen, r *Row) string { return fmt.Sprint(r.Migr) }},
	{"XNODE", 6, false, 1, func(_ *overviewScreen, r *Row) string { return fmt.Sprint(r.CrossNode) }},
}

// layout picks the columns that fit: every fixed one and as many causes
// as there is room for; short of room for one cause, the fixed columns
// with a drop rank go first.
func (o *overviewScreen) layout(rows []Row) ([]column, []stall.Cause) {
	causes := tableCauses(rows, o.sortKey, int(stall.NumCauses))
	cols := tableColumns
	for drop := 1; ; drop++ {
		room := max(0, (o.width-columnsWidth(cols))/causeColWidth)
		if room >= min(1, len(causes)) || drop > len(tableColumns) {
			return cols, causes[:min(room, len(causes))]
		}
		var keep []column
		for _, c := range cols {
			if c.drop == 0 || c.drop > drop {
				keep = append(keep, c)
			}
		}
		cols = keep
	}
}

func columnsWidth(cols []column) int {
	w := 0
	for _, c := range cols {
		w += c.width + 1
	}
	return max(0, w-1)
}

// cells lays out one line of the fixed columns.
func cells(cols []column, text func(c column) string) string {
	var parts []string
	for _, c := range cols {
		if c.left {
			parts = append(parts, fmt.Sprintf("%-*.*s", c.width, c.width, text(c)))
		} else {
			parts = append(parts, fmt.Sprintf("%*s", c.width, text(c)))
		}
	}
	return strings.Join(parts, " ")
}

func (o *overviewScreen) View() []string {
	out := o.timeline()
	out = append(out, o.childrenHint()...)
	rows := o.rows()
	cols, causes := o.layout(rows)
	head := cells(cols, func(c column) string {
		if c.head == "TID" && o.byProcess {
			return "THR"
		}
		return c.head
	})
	for _, c := range causes {
		head += fmt.Sprintf(" %*s", causeColWidth-1, c.Desc().Short+" tot/max")
	}
	out = append(out, styleHead.Render(head))
	avail := o.height - 2 - len(out) - 1 // header, tabs, status
	if avail < 1 {
		return out
	}
	if len(rows) == 0 {
		msg := "no stalls yet"
		switch {
		case o.focus != nil && !windowHeld(o.frame, *o.focus):
			msg = fmt.Sprintf("window %s is older than the %d windows the view keeps", o.windowClock(*o.focus), len(o.frame.win))
		case o.filter.Value() != "":
			msg = "no thread matches the filter"
		}
		return append(out, styleDim.Render(msg))
	}
	o.selected = min(o.selected, len(rows)-1)
	start := 0
	if o.selected >= avail {
		start = o.selected - avail + 1
	}
	for i := start; i < len(rows) && i < start+avail; i++ {
		out = append(out, o.row(rows[i], cols, causes, i == o.selected))
	}
	return out
}

// childrenHint is the report's hint that the target's untraced
// descendants stalled, wrapped to the screen; none if they did not.
func (o *overviewScreen) childrenHint() []string {
	var own uint64
	for _, r := range o.frame.Rows {
		own += r.StallNs
	}
	hint := output.ChildrenHint(o.frame.Info.Run.Target, own, o.frame.Children)
	if hint == "" {
		return nil
	}
	var out []string
	for _, l := range wrap(sanitize.Text(hint), max(20, o.width)) {
		out = append(out, styleWarn.Render(l))
	}
	return out
}

func (o *overviewScreen) row(r Row, cols []column, causes []stall.Cause, selected bool) string {
	line := cells(cols, func(c column) string { return c.cell(o, &r) })
	for _, c := range causes {
		ct := r.ByCause[c]
		cell := "-"
		if ct.Count > 0 {
			cell = output.Dur(ct.TotalNs) + "/" + output.Dur(ct.MaxNs)
		}
		line += fmt.Sprintf(" %*s", causeColWidth-1, cell)
	}
	if selected {
		line = styleSel.Render(padTo(line, o.width))
	}
	return line
}
