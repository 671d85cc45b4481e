package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/textwrap"
)

var (
	styleTitle = lipgloss.NewStyle().Bold(true)
	styleTab   = lipgloss.NewStyle().Reverse(true).Bold(true)
	styleDim   = lipgloss.NewStyle().Faint(true)
	styleHead  = lipgloss.NewStyle().Bold(true).Underline(true)
	styleSel   = lipgloss.NewStyle().Reverse(true)
	styleSpike = lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true)
	styleWarn  = lipgloss.NewStyle().Foreground(lipgloss.Color("11"))
)

// colour reports whether styles print colour (not under NO_COLOR or to a
// dumb terminal): without it, the charts mark causes with letters.
func colour() bool { return lipgloss.ColorProfile() != termenv.Ascii }

// causeCells are the chart's cell for each cause: a block in the cause's
// colour, or the cause's letter without colour.
func causeCells() [stall.NumCauses]string {
	var out [stall.NumCauses]string
	col := colour()
	for c := range stall.NumCauses {
		d := c.Desc()
		if col {
			out[c] = lipgloss.NewStyle().Foreground(lipgloss.Color(d.Colour)).Render("█")
		} else {
			out[c] = string(d.Letter)
		}
	}
	return out
}

// padTo fills line with spaces to width cells, so a selection bar spans
// the screen.
func padTo(line string, width int) string {
	if n := width - ansi.StringWidth(line); n > 0 {
		return line + strings.Repeat(" ", n)
	}
	return line
}

// wrap breaks s into lines of at most w cells at spaces only, so a flag
// (--children) or a negative number stays whole; a longer word is cut
// when drawn. It is textwrap's, as the report's and the help's are.
func wrap(s string, w int) []string { return textwrap.Lines(s, w) }

// hangWrap wraps s to w cells at spaces, its lines after the first
// indented: a long line of a list goes on under itself, never cut.
func hangWrap(s string, w int, indent string) []string {
	first := wrap(s, w)
	if len(first) == 1 {
		return first
	}
	rest := wrap(strings.Join(first[1:], " "), max(10, w-ansi.StringWidth(indent)))
	for i := range rest {
		rest[i] = indent + rest[i]
	}
	return append(first[:1], rest...)
}

// joinFitting joins parts with sep into lines of at most w cells,
// starting a new line rather than cutting a part.
func joinFitting(parts []string, sep string, w int) []string {
	var out []string
	line := ""
	for _, p := range parts {
		switch {
		case line == "":
			line = p
		case ansi.StringWidth(line+sep+p) <= w:
			line += sep + p
		default:
			out = append(out, line)
			line = p
		}
	}
	return append(out, line)
}
