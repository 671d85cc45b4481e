package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/stall"
)

var (
	styleTitle   = lipgloss.NewStyle().Bold(true)
	styleTab     = lipgloss.NewStyle().Reverse(true).Bold(true)
	styleDim     = lipgloss.NewStyle().Faint(true)
	styleHead    = lipgloss.NewStyle().Bold(true).Underline(true)
	styleSel     = lipgloss.NewStyle().Reverse(true)
	styleSpike   = lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true)
	styleWarn    = lipgloss.NewStyle().Foreground(lipgloss.Color("11"))
	causeColours = [stall.NumCauses]lipgloss.Color{"9", "11", "13", "14", "12", "10", "8", "15"}
)

// colour reports whether styles print colour (not under NO_COLOR or to a
// dumb terminal): without it, the charts mark causes with letters.
func colour() bool { return lipgloss.ColorProfile() != termenv.Ascii }

// View renders the current screen, cut to the terminal.
func (m *Model) View() string {
	if m.width < 20 || m.height < 5 {
		return "numatrace: terminal too small"
	}
	var body []string
	if m.help {
		body = m.helpView()
	} else {
		switch m.screen {
		case screenOverview:
			body = m.overview()
		case screenThread:
			body = m.threadView()
		case screenSpikes:
			body = m.spikesView()
		case screenSystem:
			body = m.systemView()
		}
	}
	lines := append([]string{m.header(), m.tabs()}, body...)
	status := m.status()
	if len(lines) > m.height-1 {
		lines = lines[:m.height-1]
	}
	for len(lines) < m.height-1 {
		lines = append(lines, "")
	}
	lines = append(lines, status)
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, m.width, "…")
	}
	return strings.Join(lines, "\n")
}

func (m *Model) elapsedNs() uint64 {
	f := m.frame
	if m.player != nil {
		return uint64(m.player.Pos()) * f.Info.WindowNs
	}
	if m.ended != "" && f.NowNs > f.Info.StartNs {
		return f.NowNs - f.Info.StartNs
	}
	if m.opt.Now != nil {
		if now := m.opt.Now(); now > f.Info.StartNs {
			return now - f.Info.StartNs
		}
	}
	return 0
}

// clock formats an elapsed time as m:ss, or h:mm:ss from an hour on.
func clock(ns uint64) string {
	d := time.Duration(ns).Truncate(time.Second)
	if d >= time.Hour {
		return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func (m *Model) header() string {
	f := m.frame
	in := f.Info
	mode := "LIVE"
	switch {
	case m.player != nil:
		state := "⏸"
		if m.playing {
			state = fmt.Sprintf("▶ ×%g", m.opt.Speed)
		}
		mode = fmt.Sprintf("REPLAY %s/%s %s", clock(m.elapsedNs()), clock(uint64(m.player.Len())*in.WindowNs), state)
	case m.ended != "":
		mode = "STOPPED: " + m.ended
	case m.paused:
		mode = "LIVE (paused)"
	}
	lost := fmt.Sprintf("lost %d", f.Lost)
	if f.Lost > 0 {
		lost = styleWarn.Render(lost)
	}
	nodes := fmt.Sprintf("%d nodes", in.Nodes)
	if in.Nodes == 1 {
		nodes = "1 node"
	}
	elapsed := clock(m.elapsedNs())
	if m.player != nil {
		elapsed = ""
	}
	// What matters most comes first, so a narrow terminal cuts the rest;
	// the kernel, then the node count, go before anything is cut.
	parts := []string{styleTitle.Render("numatrace") + " " + mode, elapsed, lost,
		fmt.Sprintf("probes %d/%d", in.ProbesAttached, in.ProbesTotal), nodes, in.Target, in.Kernel}
	for _, drop := range []int{6, 4, -1} {
		var keep []string
		for _, p := range parts {
			if p != "" {
				keep = append(keep, p)
			}
		}
		line := strings.Join(keep, " │ ")
		if drop < 0 || ansi.StringWidth(line) <= m.width {
			return line
		}
		parts[drop] = ""
	}
	return ""
}

func (m *Model) tabs() string {
	var b []string
	for i, n := range screenNames {
		cur := screen(i) == m.screen || (m.screen == screenThread && screen(i) == m.prev)
		if cur {
			b = append(b, styleTab.Render(" "+n+" "))
		} else {
			b = append(b, " "+n+" ")
		}
	}
	s := strings.Join(b, "")
	if m.screen == screenThread {
		s += " › thread " + itoa(m.detailTID)
	}
	return s
}

func (m *Model) status() string {
	if m.filtering {
		return m.filter.View()
	}
	var hints []string
	switch m.screen {
	case screenOverview:
		hints = append(hints, "sort: "+m.sortKey.String())
		if m.byProcess {
			hints = append(hints, "by process")
		}
		if q := m.filter.Value(); q != "" {
			hints = append(hints, "filter: "+q)
		}
		if m.focus != nil {
			hints = append(hints, fmt.Sprintf("window %s (esc: all)", m.windowClock(*m.focus)))
		}
	case screenThread:
		hints = append(hints, "esc: back")
	case screenSpikes:
		hints = append(hints, "enter: the window's threads")
	}
	if m.player != nil {
		hints = append(hints, "space play/pause  ←/→ seek")
	} else {
		hints = append(hints, "p pause")
	}
	hints = append(hints, "tab screens  ? help  q quit")
	return styleDim.Render(strings.Join(hints, " · "))
}

// windowClock names a window by its offset from the start.
func (m *Model) windowClock(idx uint64) string {
	return "+" + (time.Duration(idx * m.frame.Info.WindowNs)).String()
}

// timelineWindows are the windows the strip has room for, newest last.
func (m *Model) timelineWindows(cols int) []WindowSummary {
	ws := m.frame.Windows
	if len(ws) > cols {
		ws = ws[len(ws)-cols:]
	}
	return ws
}

func (m *Model) spikeSet() map[uint64]bool {
	set := map[uint64]bool{}
	if m.corr != nil {
		for _, s := range m.corr.Spikes {
			set[s.Index] = true
		}
	}
	return set
}

// timeline is the strip: p99 per window over stacked stall time, spikes
// marked.
func (m *Model) timeline() []string {
	const label, maxLabel = 7, 14
	cols := max(10, m.width-label-maxLabel)
	ws := m.timelineWindows(cols)
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
		out = append(out, fmt.Sprintf("%-*s", label, "p99")+sparkline(p99)+styleDim.Render(" max "+output.Dur(peak)))
	}
	var top uint64
	for _, w := range ws {
		top = max(top, total(w))
	}
	grid := stacked(ws, 3)
	cells := causeCells()
	for r, row := range grid {
		lbl := ""
		if r == 0 {
			lbl = "stall"
		}
		var b strings.Builder
		b.WriteString(fmt.Sprintf("%-*s", label, lbl))
		for _, c := range row {
			if c < 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString(cells[c])
			}
		}
		if r == 0 {
			b.WriteString(styleDim.Render(" max " + output.Dur(top)))
		}
		out = append(out, b.String())
	}
	spikes := m.spikeSet()
	var mk strings.Builder
	mk.WriteString(fmt.Sprintf("%-*s", label, "spikes"))
	spike := styleSpike.Render("▲")
	for _, w := range ws {
		if spikes[w.Index] {
			mk.WriteString(spike)
		} else {
			mk.WriteByte(' ')
		}
	}
	if m.corr != nil {
		out = append(out, mk.String())
	}
	out = append(out, m.legend())
	return out
}

// causeCells are the chart's cell for each cause: a coloured block, or
// the cause's letter without colour.
func causeCells() [stall.NumCauses]string {
	var out [stall.NumCauses]string
	col := colour()
	for c := range out {
		if col {
			out[c] = lipgloss.NewStyle().Foreground(causeColours[c]).Render("█")
		} else {
			out[c] = string(causeLetter[c])
		}
	}
	return out
}

func (m *Model) legend() string {
	var parts []string
	cells := causeCells()
	for c := stall.Cause(0); c < stall.NumCauses; c++ {
		if c.Timed() {
			parts = append(parts, cells[c]+" "+shortName[c])
		}
	}
	return styleDim.Render("       ") + strings.Join(parts, "  ")
}

var shortName = [stall.NumCauses]string{
	stall.DirectReclaim: "direct",
	stall.MemcgReclaim:  "memcg",
	stall.NodeReclaim:   "node",
	stall.Compaction:    "compact",
	stall.NUMAMigration: "numa-mig",
	stall.NUMATaskMove:  "numa-move",
	stall.TaskMigration: "migr",
	stall.MmapLock:      "mmap",
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
// then the causes with the most stall time.
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
	for c := stall.Cause(0); c < stall.NumCauses; c++ {
		if c.Timed() && sum[c] > 0 && (len(cs) == 0 || cs[0] != c) {
			rest = append(rest, c)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return sum[rest[i]] > sum[rest[j]] })
	cs = append(cs, rest...)
	if len(cs) > room {
		cs = cs[:room]
	}
	return cs
}

const causeColWidth = 18

func (m *Model) overview() []string {
	out := m.timeline()
	rows := m.rows()
	idCol := "TID"
	if m.byProcess {
		idCol = "THR"
	}
	base := fmt.Sprintf("%7s %7s %-15s %4s %9s %6s %6s", "PID", idCol, "COMM", "NODE", "STALL", "MIGR", "XNODE")
	room := max(0, (m.width-len(base))/causeColWidth)
	causes := tableCauses(rows, m.sortKey, room)
	head := base
	for _, c := range causes {
		head += fmt.Sprintf(" %*s", causeColWidth-1, shortName[c]+" tot/max")
	}
	out = append(out, styleHead.Render(head))
	avail := m.height - 2 - len(out) - 1 // header, tabs, status
	if avail < 1 {
		return out
	}
	if len(rows) == 0 {
		msg := "no stalls yet"
		if m.filter.Value() != "" {
			msg = "no thread matches the filter"
		}
		return append(out, styleDim.Render(msg))
	}
	m.selected = min(m.selected, len(rows)-1)
	start := 0
	if m.selected >= avail {
		start = m.selected - avail + 1
	}
	for i := start; i < len(rows) && i < start+avail; i++ {
		r := rows[i]
		id := itoa(r.TID)
		if m.byProcess {
			id = fmt.Sprint(r.Threads)
		}
		line := fmt.Sprintf("%7d %7s %-15.15s %4s %9s %6d %6d", r.PID, id, r.Comm, nodeStr(r.Node),
			output.Dur(r.StallNs), r.Migr, r.CrossNode)
		for _, c := range causes {
			ct := r.ByCause[c]
			cell := "-"
			if ct.Count > 0 {
				cell = output.Dur(ct.TotalNs) + "/" + output.Dur(ct.MaxNs)
			}
			line += fmt.Sprintf(" %*s", causeColWidth-1, cell)
		}
		if i == m.selected {
			line = styleSel.Render(padTo(line, m.width))
		}
		out = append(out, line)
	}
	return out
}

func (m *Model) threadView() []string {
	d, ok := m.source().Detail(m.detailTID)
	if !ok {
		return []string{"thread " + itoa(m.detailTID) + " is not in this view"}
	}
	var lines []string
	lines = append(lines, styleTitle.Render(fmt.Sprintf("tid %d (%s) of pid %d", d.TID, d.Comm, d.PID))+
		fmt.Sprintf(" │ node %s │ stall %s │ migr %d (%d cross-node)", nodeStr(d.Node), output.Dur(d.StallNs), d.Migr, d.CrossNode))
	src := "rebuilt from the streamed stalls"
	if d.Exact {
		src = "the kernel's exact counts"
	}
	lines = append(lines, "", styleHead.Render("HISTOGRAMS")+styleDim.Render(" ("+src+")"))
	any := false
	for c := stall.Cause(0); c < stall.NumCauses; c++ {
		h := d.Hists[c]
		if h.Count == 0 || !c.Timed() {
			continue
		}
		any = true
		lines = append(lines, fmt.Sprintf("%s: %d stalls, total %s, p50 %s, p99 %s, max %s", c, h.Count,
			output.Dur(h.TotalNs), output.Dur(h.Quantile(0.5)), output.Dur(h.Quantile(0.99)), output.Dur(h.MaxNs)))
		var top uint64
		lo, hi := -1, -1
		for i, n := range h.Slots {
			if n > 0 {
				if lo < 0 {
					lo = i
				}
				hi = i
				top = max(top, n)
			}
		}
		for i := lo; i >= 0 && i <= hi; i++ {
			a, b := stall.SlotRange(i)
			lines = append(lines, fmt.Sprintf("  %9s → %-9s %6d %s", output.Dur(a), output.Dur(b), h.Slots[i], bar(h.Slots[i], top, max(5, m.width-36))))
		}
	}
	if !any {
		lines = append(lines, styleDim.Render("  no timed stalls"))
	}
	lines = append(lines, "", styleHead.Render("TIMELINE")+styleDim.Render(" (stall time per window)"))
	cols := max(10, m.width-7-14)
	ws := m.timelineWindows(cols)
	by := map[uint64]uint64{}
	for _, p := range d.Timeline {
		by[p.Index] = p.Ns
	}
	var v []uint64
	var peak uint64
	for _, w := range ws {
		v = append(v, by[w.Index])
		peak = max(peak, by[w.Index])
	}
	lines = append(lines, "       "+sparkline(v)+styleDim.Render(" max "+output.Dur(peak)))
	lines = append(lines, "", styleHead.Render("RECENT STALLS")+styleDim.Render(" (newest first)"))
	if len(d.Recent) == 0 {
		lines = append(lines, styleDim.Render("  none streamed"))
	}
	for _, ev := range d.Recent {
		at := "+" + time.Duration(ev.TsNs-min(ev.TsNs, m.frame.Info.StartNs)).Round(time.Millisecond).String()
		lines = append(lines, fmt.Sprintf("  %10s %-15s %9s %s", at, ev.Cause, output.Dur(ev.DurNs), eventDetails(&ev)))
	}
	avail := m.height - 3
	m.scroll = min(m.scroll, max(0, len(lines)-avail))
	return lines[m.scroll:]
}

// eventDetails is an event's details in a few words.
func eventDetails(ev *stall.Event) string {
	var p []string
	switch ev.Cause {
	case stall.DirectReclaim, stall.MemcgReclaim, stall.NodeReclaim:
		p = append(p, fmt.Sprintf("order %d", ev.Order))
		if ev.Pages > 0 {
			p = append(p, fmt.Sprintf("reclaimed %d pages", ev.Pages))
		}
		if ev.Cause == stall.NodeReclaim {
			p = append(p, fmt.Sprintf("node %d", ev.Node))
		}
	case stall.Compaction:
		p = append(p, fmt.Sprintf("order %d pass %d", ev.Order, ev.Pass))
		if ev.Status != "" {
			p = append(p, ev.Status)
		}
		if ev.Mode != "" {
			p = append(p, ev.Mode)
		}
	case stall.NUMAMigration:
		p = append(p, fmt.Sprintf("%d pages", ev.Pages))
		if ev.Reason != "" {
			p = append(p, ev.Reason)
		}
		if ev.Node >= 0 && ev.DstNode >= 0 {
			p = append(p, fmt.Sprintf("node %d→%d", ev.Node, ev.DstNode))
		}
	case stall.NUMATaskMove:
		p = append(p, fmt.Sprintf("cpu %d→%d node %d→%d", ev.SrcCPU, ev.DstCPU, ev.Node, ev.DstNode))
		if ev.Swap {
			p = append(p, fmt.Sprintf("swap with %d", ev.OtherTID))
		}
		if ev.Stick {
			p = append(p, "stuck")
		}
	case stall.MmapLock:
		if ev.Write {
			p = append(p, "write")
		} else {
			p = append(p, "read")
		}
		if !ev.Acquired {
			p = append(p, "failed")
		}
	}
	p = append(p, fmt.Sprintf("cpu %d", ev.CPU))
	if ev.Nested {
		p = append(p, "nested")
	}
	return strings.Join(p, ", ")
}

func (m *Model) spikesView() []string {
	if m.corr == nil {
		return []string{"", "No latency source: run attach or record with --latency-file, --latency-prom or --latency-uprobe."}
	}
	c := m.corr
	lines := append(wrap(c.Conclusion, m.width), "")
	if len(c.Spikes) == 0 {
		return lines
	}
	lines = append(lines, styleHead.Render(fmt.Sprintf("%-10s %8s %8s  %s", "WINDOW", "P99", "BASE", "TOP CAUSE")))
	avail := m.height - 3 - len(lines) - 4
	m.selected = min(m.selected, len(c.Spikes)-1)
	start := 0
	if m.selected >= avail {
		start = m.selected - avail + 1
	}
	for i := start; i < len(c.Spikes) && i < start+max(1, avail); i++ {
		sp := c.Spikes[i]
		top := "none"
		if len(sp.Causes) > 0 && sp.Causes[0].StallNs > 0 {
			tc := sp.Causes[0]
			top = fmt.Sprintf("%s %s · %s (tid %d)", tc.Cause, output.Dur(tc.StallNs), tc.Process, tc.WorstTID)
			if tc.Threads > 1 {
				top = fmt.Sprintf("%s %s · %d threads of %s", tc.Cause, output.Dur(tc.StallNs), tc.Threads, tc.Process)
			}
		}
		line := fmt.Sprintf("%-10s %8s %8s  %s", m.windowClock(sp.Index), output.Dur(sp.P99Ns), output.Dur(sp.BaselineNs), top)
		if i == m.selected {
			line = styleSel.Render(padTo(line, m.width))
		}
		lines = append(lines, line)
	}
	lines = append(lines, "")
	lines = append(lines, wrap(c.Spikes[m.selected].Verdict, m.width)...)
	return lines
}

// wrap breaks s into lines of at most w cells at spaces.
func wrap(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > w {
			out = append(out, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(out, line)
}

// vmstatKeys are the counters the System screen shows as deltas.
var vmstatKeys = []string{"allocstall", "compact_stall", "pgscan_direct", "numa_hit", "numa_miss", "numa_foreign",
	"numa_pages_migrated", "zone_reclaim_failed"}

func vmDelta(first, last map[string]int64, key string) (int64, bool) {
	if key == "allocstall" { // one counter per zone type
		var d int64
		found := false
		for k, v := range last {
			if strings.HasPrefix(k, "allocstall_") {
				d += v - first[k]
				found = true
			}
		}
		return d, found
	}
	v, ok := last[key]
	return v - first[key], ok
}

func (m *Model) systemView() []string {
	f := m.frame
	lines := []string{}
	if m.procErr != nil {
		lines = append(lines, styleWarn.Render("reading /proc: "+m.procErr.Error()))
	}
	if f.Last == nil {
		lines = append(lines, styleDim.Render("no /proc readings yet"))
	} else {
		span := time.Duration(f.Last.MonoNs - f.First.MonoNs).Round(time.Second)
		lines = append(lines, styleHead.Render("VMSTAT")+styleDim.Render(" (change over "+span.String()+")"))
		for _, k := range vmstatKeys {
			d, ok := vmDelta(f.First.Vmstat, f.Last.Vmstat, k)
			val := fmt.Sprint(d)
			if !ok {
				val = "n/a"
			}
			lines = append(lines, fmt.Sprintf("  %-22s %12s", k, val))
		}
		lines = append(lines, "", styleHead.Render("MEMORY PER NODE"))
		lines = append(lines, fmt.Sprintf("  %-6s %10s %10s %10s  %s", "NODE", "TOTAL", "USED", "FREE", "USED"))
		var names []string
		for n := range f.Last.Nodes {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			mi := f.Last.Nodes[n]
			tot, free := mi["MemTotal"], mi["MemFree"]
			used := tot - free
			lines = append(lines, fmt.Sprintf("  %-6s %10s %10s %10s  %s", n, kib(tot), kib(used), kib(free),
				bar(uint64(max(used, 0)), uint64(max(tot, 1)), max(5, m.width-50))))
		}
	}
	lines = append(lines, "", styleHead.Render("DOCTOR"))
	if len(f.Info.Findings) == 0 {
		lines = append(lines, styleDim.Render("  no findings recorded (run `numatrace doctor`)"))
	}
	for _, fd := range f.Info.Findings {
		for _, l := range wrap(fd, m.width-2) {
			lines = append(lines, "  "+l)
		}
	}
	avail := m.height - 3
	m.scroll = min(m.scroll, max(0, len(lines)-avail))
	return lines[m.scroll:]
}

// kib formats a meminfo value (kB) in MiB or GiB.
func kib(v int64) string {
	mib := float64(max(v, 0)) / 1024
	if mib >= 10240 {
		return fmt.Sprintf("%.1fGiB", mib/1024)
	}
	return fmt.Sprintf("%.0fMiB", mib)
}

func (m *Model) helpView() []string {
	return []string{
		"",
		styleHead.Render("KEYS"),
		"  ↑/↓ or k/j     move (pgup/pgdown: by 10)",
		"  enter / esc    drill down into a thread or spike / back",
		"  tab            next screen: Overview, Spikes, System",
		"  s / S          sort by the next / previous column",
		"  g              group threads by process",
		"  /              filter by comm, pid or tid",
		"  p              pause the live view (tracing goes on)",
		"  space          replay: play / pause",
		"  ←/→            replay: one window back / on (shift: ten)",
		"  home / end     replay: start / end",
		"  ?              this help",
		"  q              quit",
		"",
		styleDim.Render("any key closes this help"),
	}
}

// padTo fills line with spaces to width cells, so a selection bar spans
// the screen.
func padTo(line string, width int) string {
	if n := width - ansi.StringWidth(line); n > 0 {
		return line + strings.Repeat(" ", n)
	}
	return line
}
