package tui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// threadScreen is one thread's drill-down: its histograms, its own
// timeline and its recent stalls.
type threadScreen struct {
	*shared
	tid   uint32
	page  pager
	keys  struct{ Back key.Binding }
	close func() // back to the screen it was entered from
}

func newThread(sh *shared) *threadScreen {
	t := &threadScreen{shared: sh, page: newPager(sh.height)}
	t.keys.Back = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back"))
	return t
}

func (t *threadScreen) SetSize(_, height int) { t.page.setHeight(height) }

func (t *threadScreen) reset() { t.page.top() }

// Help is empty: esc is on the help screen already.
func (t *threadScreen) Help() []key.Binding { return nil }

func (t *threadScreen) Hints() []string { return []string{hint(t.keys.Back)} }

func (t *threadScreen) Update(k tea.KeyMsg) tea.Cmd {
	if d, ok := list.move(k); ok {
		t.page.scroll(d)
	} else if key.Matches(k, t.keys.Back) && t.close != nil {
		t.close()
	}
	return nil
}

func (t *threadScreen) View() []string {
	d, ok := t.source().Detail(t.tid)
	if !ok {
		return []string{"thread " + itoa(t.tid) + " is not in this view"}
	}
	lines := joinFitting([]string{styleTitle.Render(fmt.Sprintf("tid %d (%s) of pid %d", d.TID, sanitize.Text(d.Comm), d.PID)),
		"node " + nodeStr(d.Node), "stall " + output.Dur(d.StallNs), fmt.Sprintf("migr %d (%d cross-node)", d.Migr, d.CrossNode)},
		" │ ", t.width)
	lines = append(lines, t.histograms(d)...)
	lines = append(lines, t.stacks(d)...)
	lines = append(lines, t.waits(d)...)
	lines = append(lines, t.timeline(d)...)
	lines = append(lines, "", styleHead.Render("RECENT STALLS")+styleDim.Render(" (newest first)"))
	if len(d.Recent) == 0 {
		lines = append(lines, styleDim.Render("  none streamed"))
	}
	for _, ev := range d.Recent {
		at := t.clockAt(ev.TsNs)
		lines = append(lines, hangWrap(fmt.Sprintf("  %10s %-15s %9s %s", at, ev.Cause, output.Dur(ev.DurNs), sanitize.Text(ev.Describe())),
			t.width, "             ")...)
	}
	return t.page.show(lines)
}

// histograms draws the thread's log2 histogram of each timed cause.
func (t *threadScreen) histograms(d *Detail) []string {
	src := "rebuilt from the streamed stalls"
	if d.Exact {
		src = "the kernel's exact counts"
	}
	lines := []string{"", styleHead.Render("HISTOGRAMS") + styleDim.Render(" ("+src+")")}
	any := false
	for c := range stall.NumCauses {
		h := d.Hists[c]
		if h.Count == 0 || !c.Timed() {
			continue
		}
		any = true
		lines = append(lines, hangWrap(fmt.Sprintf("%s: %d stalls, total %s, p50 %s, p99 %s, max %s", sanitize.Text(c.Label(d.Kinds[c])), h.Count,
			output.Dur(h.TotalNs), output.Dur(h.Quantile(0.5)), output.Dur(h.Quantile(0.99)), output.Dur(h.MaxNs)), t.width, "  ")...)
		for _, r := range output.HistRows(&h, max(5, t.width-36)) {
			lines = append(lines, fmt.Sprintf("  %9s → %-9s %6d %s", output.Dur(r.Lo), output.Dur(r.Hi), r.Count, repeatBlock(r.Bar)))
		}
	}
	if !any {
		lines = append(lines, styleDim.Render("  no timed stalls"))
	}
	return lines
}

// stacksShown is how many stacks the drill-down shows per cause.
const stacksShown = 3

// stacks shows, per cause, where the thread was when its stalls that
// carried stacks stalled: the stacks with the most time, as the report
// lists them.
func (t *threadScreen) stacks(d *Detail) []string {
	if len(d.Stacks) == 0 {
		return nil
	}
	lines := []string{"", styleHead.Render("STACKS") + styleDim.Render(" (stalls that carried them, the most time first)")}
	for c := range stall.NumCauses {
		top, total := aggregate.TopStacks(d.Stacks, d.TID, c, stacksShown)
		if total == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s in stalls with stacks", sanitize.Text(c.Label(d.Kinds[c])), output.Dur(total)))
		for _, st := range top {
			lines = append(lines, "  "+output.StackShare(st, total))
			for _, l := range output.StackLines(st.Stack, max(20, t.width-4)) {
				lines = append(lines, "    "+l)
			}
		}
	}
	return lines
}

// waits shows where the thread slept inside its requests, per part of
// the requests' budget, as the report's WAITS do.
func (t *threadScreen) waits(d *Detail) []string {
	parts := output.WaitParts(d.Waits)
	if len(parts) == 0 {
		return nil
	}
	lines := []string{"", styleHead.Render("WAITS") + styleDim.Render(" (its sleeps inside requests, the most time first)")}
	for _, p := range parts {
		lines = append(lines, fmt.Sprintf("%s: %s in %s, %s with stacks", sanitize.Text(p.Part), output.Dur(p.Ns),
			prose.Count(p.Count, "wait"), output.Dur(p.StackedNs)))
		for i, st := range p.Stacks {
			if i == stacksShown {
				break
			}
			lines = append(lines, fmt.Sprintf("  %3.0f%% %s in %s", 100*float64(st.Ns)/float64(max(p.StackedNs, 1)), output.Dur(st.Ns),
				prose.Count(st.Count, "wait")))
			for _, l := range output.StackLines(st.Stack, max(20, t.width-4)) {
				lines = append(lines, "    "+l)
			}
		}
	}
	return lines
}

// timeline is the thread's own stall time per window, over the windows
// the overview's strip shows.
func (t *threadScreen) timeline(d *Detail) []string {
	lines := []string{"", styleHead.Render("TIMELINE") + styleDim.Render(" (stall time per window)")}
	ws := t.frame.Windows
	if cols := max(10, t.width-timelineLabel-timelineMaxLabel); len(ws) > cols {
		ws = ws[len(ws)-cols:]
	}
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
	return append(lines, "       "+sparkline(v)+styleDim.Render(" max "+output.Dur(peak)))
}
