package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// spikesScreen lists the engine's spikes with their verdicts; enter shows
// a spike window's threads on the overview.
type spikesScreen struct {
	*shared
	selected int
	keys     struct{ Show key.Binding }
}

func newSpikes(sh *shared) *spikesScreen {
	s := &spikesScreen{shared: sh}
	s.keys.Show = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "the window's threads"))
	return s
}

func (s *spikesScreen) SetSize(int, int) {}

func (s *spikesScreen) reset() { s.selected = 0 }

// Help is empty: enter is on the help screen already.
func (s *spikesScreen) Help() []key.Binding { return nil }

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
	if key.Matches(k, s.keys.Show) && s.selected < s.spikes() {
		s.focusWindow(s.spikeAnalysis().Spikes[s.selected].Index)
		s.selected = 0
	}
	return nil
}

func (s *spikesScreen) Hints() []string { return []string{hint(s.keys.Show)} }

func (s *spikesScreen) View() []string {
	c := s.spikeAnalysis()
	src := s.frame.Info.Latency.String()
	if c == nil && src == "" {
		return []string{"", "No latency source: run attach or record with --latency-file, --latency-prom or --latency-uprobe."}
	}
	var lines []string
	if src != "" { // one line: the root cuts it to the width
		lines = append(lines, "latency: "+sanitize.Text(src))
	}
	if c == nil {
		return lines
	}
	lines = append(lines, wrap(sanitize.Text(c.Conclusion), s.width)...)
	lines = append(lines, "")
	if len(c.Spikes) == 0 {
		return lines
	}
	lines = append(lines, styleHead.Render(fmt.Sprintf("%-10s %8s %8s  %s", "WINDOW", strings.ToUpper(sp0(c)), "VS", "COVERED BY")))
	avail := s.height - 3 - len(lines) - 4
	s.selected = min(s.selected, len(c.Spikes)-1)
	start := 0
	if s.selected >= avail {
		start = s.selected - avail + 1
	}
	for i := start; i < len(c.Spikes) && i < start+max(1, avail); i++ {
		sp := c.Spikes[i]
		top := "none"
		if len(sp.Causes) > 0 && sp.Causes[0].Coverage > 0 {
			tc := sp.Causes[0]
			proc := sanitize.Text(tc.Process)
			top = fmt.Sprintf("%s %.0f%% · %s", tc.Cause, tc.Coverage*100, proc)
			if tc.Threads > 1 {
				top = fmt.Sprintf("%s %.0f%% · %d threads of %s", tc.Cause, tc.Coverage*100, tc.Threads, proc)
			}
		}
		line := fmt.Sprintf("%-10s %8s %8s  %s", s.windowClock(sp.Index), output.Dur(sp.LatencyNs), output.Dur(sp.BaselineNs), top)
		if i == s.selected {
			line = styleSel.Render(padTo(line, s.width))
		}
		lines = append(lines, line)
	}
	lines = append(lines, "")
	sel := c.Spikes[s.selected]
	lines = append(lines, wrap(sanitize.Text(sel.Verdict), s.width)...)
	if top := sel.Causes; len(top) > 0 && top[0].Coverage > 0 && top[0].Stack != nil {
		lines = append(lines, styleDim.Render(fmt.Sprintf("where %s stalled (tid %d):", top[0].Cause, top[0].WorstTID)))
		for _, l := range output.StackLines(top[0].Stack, max(20, s.width-2)) {
			lines = append(lines, "  "+l)
		}
	}
	return lines
}

// sp0 is the percentile the run's spikes are judged on.
func sp0(c *correlate.Result) string {
	if len(c.Spikes) > 0 && c.Spikes[0].Percentile != "" {
		return c.Spikes[0].Percentile
	}
	return "p99"
}
