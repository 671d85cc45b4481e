package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// screen is one page of the view. The root routes the keys it does not
// take itself to the screen on show.
type screen interface {
	Update(tea.KeyMsg) tea.Cmd
	// View is the screen's body: the lines between the tabs and the
	// status line.
	View() []string
	SetSize(width, height int)
	// Hints are the screen's state and own keys, for the status line.
	Hints() []string
	// Help is the screen's own keys for the help screen (the root's and
	// the list keys are there already).
	Help() []key.Binding
	// reset is called when the screen comes on show from another.
	reset()
}

// screenDef is one entry of the view's screen list.
type screenDef struct {
	// tab names the screen on the tab bar and in the help; "" keeps it
	// off the tabs (the drill-down, which another screen opens).
	tab string
	new func(*Model) screen
}

// screenDefs are the view's screens, the tabs in their order, the
// overview first (the view opens on it). A new screen is one entry here:
// the model sizes, names, cycles through and takes the help of every
// screen from this list, and the fit test visits each one.
var screenDefs = []screenDef{
	{"Overview", func(m *Model) screen { m.over = newOverview(m.shared); return m.over }},
	{"Spikes", func(m *Model) screen { return newSpikes(m.shared) }},
	{"System", func(m *Model) screen { return newSystem(m.shared, &m.procErr) }},
	{"", func(m *Model) screen { m.thread = newThread(m.shared); return m.thread }},
}

// tabNames are the names on the tab bar, in order.
func tabNames() []string {
	var names []string
	for _, d := range screenDefs {
		if d.tab != "" {
			names = append(names, d.tab)
		}
	}
	return names
}

// index is where s is in the screen list.
func (m *Model) index(s screen) int {
	for i, t := range m.screens {
		if t == s {
			return i
		}
	}
	return 0
}

// tabOf is the screen whose tab is lit: the one on show, or for the
// drill-down the screen it was entered from.
func (m *Model) tabOf() screen {
	if screenDefs[m.index(m.screen)].tab == "" {
		return m.prev
	}
	return m.screen
}

// cycle goes to the next (or previous) screen with a tab; from the
// drill-down, the screen it was entered from counts as the current one.
func (m *Model) cycle(next bool) {
	step := 1
	if !next {
		step = len(m.screens) - 1
	}
	i := m.index(m.tabOf())
	for {
		i = (i + step) % len(m.screens)
		if screenDefs[i].tab != "" {
			break
		}
	}
	m.screen = m.screens[i]
	m.screen.reset()
}
