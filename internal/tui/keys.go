package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// globalKeys are the root's: they work on every screen.
type globalKeys struct {
	Quit, Help, Next, Prev key.Binding
	Pause                  key.Binding // live
	Play, Back, On         key.Binding // replay: play or pause, one window back or on
	BackTen, OnTen         key.Binding
	Start, End             key.Binding
}

var global = globalKeys{
	Quit:    key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	Help:    key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	Next:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "screens")),
	Prev:    key.NewBinding(key.WithKeys("shift+tab")),
	Pause:   key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause")),
	Play:    key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "play/pause")),
	Back:    key.NewBinding(key.WithKeys("left"), key.WithHelp("←/→", "seek")),
	On:      key.NewBinding(key.WithKeys("right")),
	BackTen: key.NewBinding(key.WithKeys("shift+left")),
	OnTen:   key.NewBinding(key.WithKeys("shift+right")),
	Start:   key.NewBinding(key.WithKeys("home")),
	End:     key.NewBinding(key.WithKeys("end")),
}

// listKeys move a selection or scroll a page.
type listKeys struct {
	Up, Down, PageUp, PageDown key.Binding
	Enter, Esc                 key.Binding
}

var list = listKeys{
	Up:       key.NewBinding(key.WithKeys("up", "k")),
	Down:     key.NewBinding(key.WithKeys("down", "j")),
	PageUp:   key.NewBinding(key.WithKeys("pgup")),
	PageDown: key.NewBinding(key.WithKeys("pgdown")),
	Enter:    key.NewBinding(key.WithKeys("enter")),
	Esc:      key.NewBinding(key.WithKeys("esc")),
}

// move is how far a list key moves the selection, or the page: a line,
// or ten.
func (l listKeys) move(msg tea.KeyMsg) (int, bool) {
	switch {
	case key.Matches(msg, l.Up):
		return -1, true
	case key.Matches(msg, l.Down):
		return 1, true
	case key.Matches(msg, l.PageUp):
		return -10, true
	case key.Matches(msg, l.PageDown):
		return 10, true
	}
	return 0, false
}

// tableKeys are the overview's own.
type tableKeys struct {
	Sort, SortBack, Group, Filter key.Binding
}

var table = tableKeys{
	Sort:     key.NewBinding(key.WithKeys("s")),
	SortBack: key.NewBinding(key.WithKeys("S")),
	Group:    key.NewBinding(key.WithKeys("g")),
	Filter:   key.NewBinding(key.WithKeys("/")),
}

// join makes one help entry of several bindings: every key of them, one
// line of help.
func join(keys, desc string, bs ...key.Binding) key.Binding {
	var all []string
	for _, b := range bs {
		all = append(all, b.Keys()...)
	}
	return key.NewBinding(key.WithKeys(all...), key.WithHelp(keys, desc))
}

// helpKeys is the help screen's key map: every key, one line each; the
// screens' own keys come after the ones every screen shares.
type helpKeys struct{ screens []screen }

func (helpKeys) ShortHelp() []key.Binding { return nil }

func (h helpKeys) FullHelp() [][]key.Binding {
	keys := []key.Binding{
		join("↑/↓ or k/j", "move (pgup/pgdown: by 10)", list.Up, list.Down, list.PageUp, list.PageDown),
		join("enter / esc", "drill down into a thread or spike / back", list.Enter, list.Esc),
		join("tab", "next screen: "+strings.Join(tabNames(), ", "), global.Next, global.Prev),
	}
	for _, s := range h.screens {
		keys = append(keys, s.Help()...)
	}
	return [][]key.Binding{append(keys,
		join("p", "pause the live view (tracing goes on)", global.Pause),
		join("space", "replay: play / pause", global.Play),
		join("←/→", "replay: one window back / on (shift: ten)", global.Back, global.On, global.BackTen, global.OnTen),
		join("home / end", "replay: start / end", global.Start, global.End),
		join("?", "this help", global.Help),
		join("q", "quit", global.Quit),
	)}
}

// helpModel renders key maps in the view's plain style: two spaces in,
// keys in a column of their own.
func helpModel() help.Model {
	h := help.New()
	plain := lipgloss.NewStyle()
	h.Styles = help.Styles{FullKey: plain.PaddingLeft(2).Width(16), FullDesc: plain, FullSeparator: plain,
		ShortKey: plain, ShortDesc: plain, ShortSeparator: plain, Ellipsis: plain}
	return h
}

// fullHelp is the help lines of a key map, without the padding the
// columns leave at their ends.
func fullHelp(h help.Model, km help.KeyMap) []string {
	lines := strings.Split(h.FullHelpView(km.FullHelp()), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// hints renders bindings for the status line: "key desc", two spaces apart.
func hints(bs ...key.Binding) string {
	var out []string
	for _, b := range bs {
		if h := b.Help(); h.Key != "" {
			out = append(out, h.Key+" "+h.Desc)
		}
	}
	return strings.Join(out, "  ")
}

// hint renders a screen's own binding: "key: desc".
func hint(b key.Binding) string { return b.Help().Key + ": " + b.Help().Desc }
