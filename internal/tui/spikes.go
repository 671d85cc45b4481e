package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// spikesScreen lists the engine's spikes with their verdicts; enter shows
// a spike window's threads on the overview.
type spikesScreen struct {
	*shared
	selected int
	keys     struct{ Show, Clock key.Binding }
}

func newSpikes(sh *shared) *spikesScreen {
	s := &spikesScreen{shared: sh}
	s.keys.Show = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "the window's threads"))
	s.keys.Clock = key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "times since the start / wall clock"))
	return s
}

func (s *spikesScreen) SetSize(int, int) {}

func (s *spikesScreen) reset() { s.selected = 0 }

// Help is the clock key: enter is on the help screen already.
func (s *spikesScreen) Help() []key.Binding { return []key.Binding{s.keys.Clock} }

func (s *spikesScreen) spikes() int {
	if a := s.spikeAnalysis(); a != nil {
		return len(a.Spikes)
	}
	return 0
}

func (s *spikesScreen) Update(k tea.KeyMsg) tea.Cmd {
	if d, ok := list.move(k); ok {
		s.selected = min(max(0, s.selected+d), max(0, s.spikes()-1))
		return nil
	}
	if key.Matches(k, s.keys.Clock) && s.hasWallClock() {
		s.wallClock = !s.wallClock
		return nil
	}
	if key.Matches(k, s.keys.Show) && s.selected < s.spikes() {
		s.focusWindow(s.spikeAnalysis().Spikes[s.selected].Index)
		s.selected = 0
	}
	return nil
}

func (s *spikesScreen) Hints() []string {
	h := []string{hint(s.keys.Show)}
	switch {
	case !s.hasWallClock():
	case s.wallClock:
		h = append(h, "t: since start")
	default:
		h = append(h, "t: wall clock")
	}
	return h
}

func (s *spikesScreen) View() []string {
	c := s.spikeAnalysis()
	src := s.frame.Info.Run.Latency.String()
	if c == nil && src == "" {
		msg := "No latency source: run attach or record with --latency-file, --latency-prom or --latency-uprobe."
		if s.player != nil {
			msg = "No latency source: this recording was made without --latency-file, --latency-prom or --latency-uprobe."
		}
		return append([]string{""}, wrap(msg, s.width)...)
	}
	var lines []string
	if src != "" {
		lines = append(lines, hangWrap("latency: "+sanitize.Text(src), s.width, "  ")...)
	}
	if c == nil {
		return lines
	}
	lines = append(lines, wrap(sanitize.Text(c.Conclusion), s.width)...)
	lines = append(lines, "")
	clockW := 10
	if s.wallClock && s.hasWallClock() {
		clockW = len("15:04:05.000 UTC")
	}
	if len(c.Spikes) == 0 {
		return append(lines, s.frozen(c, clockW, s.height-3-len(lines))...)
	}
	frozen := s.frozen(c, clockW, frozenShown)
	lines = append(lines, styleHead.Render(fmt.Sprintf("%-*s %8s %8s  %s", clockW, "WINDOW", strings.ToUpper(sp0(c)), "VS", "COVERED BY")))
	avail := s.height - 3 - len(lines) - 4 - len(frozen)
	s.selected = min(s.selected, len(c.Spikes)-1)
	start := 0
	if s.selected >= avail {
		start = s.selected - avail + 1
	}
	end := min(len(c.Spikes), start+max(1, avail))
	form := coverForm(c.Spikes[start:end], s.width-clockW-20)
	for i := start; i < end; i++ {
		sp := c.Spikes[i]
		line := fmt.Sprintf("%-*s %8s %8s  ", clockW, s.windowClock(sp.Index), output.Dur(sp.LatencyNs), output.Dur(sp.BaselineNs))
		line += coveredBy(sp, form)
		if i == s.selected {
			line = styleSel.Render(padTo(line, s.width))
		}
		lines = append(lines, line)
	}
	lines = append(lines, frozen...)
	lines = append(lines, "")
	sel := c.Spikes[s.selected]
	lines = append(lines, wrap(sanitize.Text(sel.Verdict), s.width)...)
	if top := sel.Causes; len(top) > 0 && top[0].Coverage > 0 && top[0].Stack != nil {
		lines = append(lines, styleDim.Render(fmt.Sprintf("where %s stalled (tid %d):", sanitize.Text(top[0].Cause.Label(top[0].Reason)), top[0].WorstTID)))
		for _, l := range output.StackLines(top[0].Stack, max(20, s.width-2)) {
			lines = append(lines, "  "+l)
		}
	}
	return lines
}

// frozenShown is how many lines the frozen windows take under spikes:
// their head, three of them and a line for the rest.
const frozenShown = 5

// frozen lists the windows in which the percentile held but the service
// froze, the worst first, in rows lines at most (their head and a line
// for the rest included); none when there were none.
func (s *spikesScreen) frozen(c *correlate.Result, clockW, rows int) []string {
	if len(c.Frozen) == 0 || rows < 2 {
		return nil
	}
	worst := output.WorstFirst(c.Frozen)
	head := fmt.Sprintf("%-*s %8s %8s  %s", clockW, "FROZEN", "MAX", "P99.9", "COVERED BY ("+c.On.String()+" held)")
	out := []string{styleHead.Render(head)}
	shown := min(len(worst), rows-1)
	if shown < len(worst) {
		shown = max(0, rows-2) // a line says how many more
	}
	form := coverForm(worst[:shown], s.width-clockW-20)
	for _, f := range worst[:shown] {
		out = append(out, fmt.Sprintf("%-*s %8s %8s  %s", clockW, s.windowClock(f.Index), output.Dur(f.MaxNs), output.Dur(f.P999Ns), coveredBy(f, form)))
	}
	if more := len(worst) - shown; more > 0 {
		out = append(out, styleDim.Render(fmt.Sprintf("… %d more frozen (the report lists them)", more)))
	}
	return out
}

// sp0 is the percentile the run's spikes are judged on.
func sp0(c *correlate.Result) string {
	if len(c.Spikes) > 0 {
		return c.Spikes[0].Percentile.String()
	}
	return run.P99.String()
}

// coverForms are the ways to name what covers most of a spike, longest
// first: the cause's name and its process, its short name and the
// process, its short name alone.
const coverForms = 3

// coverForm is the longest form in which every spike shown fits w cells,
// so the column reads alike from row to row.
func coverForm(spikes []correlate.Spike, w int) int {
	for form := range coverForms - 1 {
		fits := true
		for _, sp := range spikes {
			fits = fits && ansi.StringWidth(coveredBy(sp, form)) <= w
		}
		if fits {
			return form
		}
	}
	return coverForms - 1
}

func coveredBy(sp correlate.Spike, form int) string {
	if len(sp.Causes) == 0 || sp.Causes[0].Coverage == 0 {
		return "none"
	}
	tc := sp.Causes[0]
	pct := fmt.Sprintf(" %.0f%%", tc.Coverage*100)
	who := sanitize.Text(tc.Process)
	if tc.Threads > 1 {
		who = fmt.Sprintf("%d threads of %s", tc.Threads, who)
	}
	switch form {
	case 0:
		return sanitize.Text(tc.Cause.Label(tc.Reason)) + pct + " · " + who
	case 1:
		return tc.Cause.Desc().Short + pct + " · " + who
	}
	return tc.Cause.Desc().Short + pct
}
